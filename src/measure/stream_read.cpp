#include "measure/stream_read.h"

#include <immintrin.h>

namespace tokenmill {

namespace {

constexpr int kStreams = 4;
constexpr int64_t kStepWords = 16;    // 128 bytes: two cache lines per stream and step
constexpr int kPrefetchBytes = 2048;  // how far ahead of each stream

}  // namespace

uint64_t stream_sum(const uint64_t* words, int64_t begin, int64_t end) {
  const int64_t stream_words = (end - begin) / kStreams / kStepWords * kStepWords;
  const uint64_t* stream[kStreams];
  __m256i acc[kStreams];
  for (int s = 0; s < kStreams; ++s) {
    stream[s] = words + begin + s * stream_words;
    acc[s] = _mm256_setzero_si256();
  }
  for (int64_t i = 0; i < stream_words; i += kStepWords)
    for (int s = 0; s < kStreams; ++s) {
      const uint64_t* p = stream[s] + i;
      // Ahead of the range's end the address is outside it: computed as an integer (a
      // pointer there would be undefined behaviour), and a prefetch never faults.
      const uintptr_t ahead = reinterpret_cast<uintptr_t>(p) + kPrefetchBytes;
      _mm_prefetch(reinterpret_cast<const char*>(ahead), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(ahead + 64), _MM_HINT_T0);
      const auto* v = reinterpret_cast<const __m256i*>(p);
      const __m256i pair0 = _mm256_add_epi64(_mm256_loadu_si256(v), _mm256_loadu_si256(v + 1));
      const __m256i pair1 = _mm256_add_epi64(_mm256_loadu_si256(v + 2), _mm256_loadu_si256(v + 3));
      acc[s] = _mm256_add_epi64(acc[s], _mm256_add_epi64(pair0, pair1));
    }
  uint64_t total = 0;
  for (int s = 0; s < kStreams; ++s) {
    alignas(32) uint64_t lanes[4];
    _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), acc[s]);
    total += lanes[0] + lanes[1] + lanes[2] + lanes[3];
  }
  for (int64_t i = begin + kStreams * stream_words; i < end; ++i) total += words[i];
  return total;
}

}  // namespace tokenmill
