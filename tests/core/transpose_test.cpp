// transpose: every element lands at its transposed place, for each element size, at shapes
// that are not multiples of the tile (and thinner than one), with any thread count.
#include "core/transpose.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "core/error.h"
#include "core/parallel.h"

namespace tokenmill {
namespace {

template <class T>
void expect_transposed(int64_t rows, int64_t cols) {
  std::vector<T> src(static_cast<size_t>(rows * cols));
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<T>(i * 2654435761u + 1);
  std::vector<T> dst(src.size(), T{0});
  transpose(src.data(), rows, cols, sizeof(T), dst.data());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      ASSERT_EQ(dst[static_cast<size_t>(c * rows + r)], src[static_cast<size_t>(r * cols + c)])
          << sizeof(T) << "-byte elements, " << rows << " x " << cols << " at (" << r << ", " << c << ")";
}

TEST(Transpose, MovesEveryElementForEachElementSize) {
  for (const int threads : {1, 2, 3}) {
    set_thread_count(threads);
    for (const auto& [rows, cols] :
         {std::pair<int64_t, int64_t>{1, 1}, {1, 130}, {130, 1}, {64, 64}, {65, 63}, {200, 77}, {3, 1000}}) {
      expect_transposed<uint8_t>(rows, cols);
      expect_transposed<uint16_t>(rows, cols);
      expect_transposed<uint32_t>(rows, cols);
      expect_transposed<uint64_t>(rows, cols);
    }
  }
  set_thread_count(0);
}

TEST(Transpose, RefusesOtherElementSizes) {
  std::vector<uint8_t> src(12), dst(12);
  EXPECT_THROW(transpose(src.data(), 2, 2, 3, dst.data()), Error);
}

}  // namespace
}  // namespace tokenmill
