// stream_sum reads every word of its range once, whatever the range's length and start.
#include <cstdint>
#include <vector>

#include <gtest/gtest.h>

#include "measure/stream_read.h"

namespace tokenmill {
namespace {

uint64_t plain_sum(const std::vector<uint64_t>& words, int64_t begin, int64_t end) {
  uint64_t total = 0;
  for (int64_t i = begin; i < end; ++i) total += words[static_cast<size_t>(i)];
  return total;
}

TEST(StreamSum, EqualsThePlainSumForEveryRange) {
  // Lengths around the kernel's step (4 streams x 16 words), unaligned starts, and values
  // whose sum wraps modulo 2^64.
  std::vector<uint64_t> words(4096 + 200);
  for (size_t i = 0; i < words.size(); ++i) words[i] = 0x9e3779b97f4a7c15ull * (i + 1);
  for (const int64_t begin : {0, 1, 3, 8, 63}) {
    for (const int64_t length : {0, 1, 15, 63, 64, 65, 127, 128, 129, 1000, 4096}) {
      SCOPED_TRACE(testing::Message() << "begin " << begin << ", length " << length);
      EXPECT_EQ(stream_sum(words.data(), begin, begin + length), plain_sum(words, begin, begin + length));
    }
  }
}

}  // namespace
}  // namespace tokenmill
