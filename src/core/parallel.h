// Threading: OpenMP underneath, one place to set the thread count.
#pragma once

#include <omp.h>

#include <cstdint>

namespace tokenmill {

// Number of threads parallel regions use, in every thread of the process (default: OpenMP's,
// i.e. OMP_NUM_THREADS or cores).
int thread_count();
// Sets the thread count for later parallel regions, process-wide; n <= 0 restores the default.
void set_thread_count(int n);

namespace detail {

// [0, n) (n >= 1) cut into `blocks` chunks of `grain` items (the last may be short), and
// the threads a parallel region over them uses: one per chunk at most.
struct Chunking {
  int64_t grain, blocks;
  int threads;
};

inline Chunking chunking(int64_t n, int64_t grain) {
  if (grain < 1) grain = 1;
  const int64_t blocks = (n + grain - 1) / grain;
  return {grain, blocks, blocks < thread_count() ? static_cast<int>(blocks) : thread_count()};
}

}  // namespace detail

// Calls body(begin, end) on disjoint chunks covering [0, n), in parallel.
// Chunks are contiguous and their boundaries are multiples of `grain` (except the end).
template <class Body>
void parallel_for_chunks(int64_t n, int64_t grain, Body&& body) {
  if (n <= 0) return;
  const detail::Chunking c = detail::chunking(n, grain);
  if (c.threads <= 1) {
    body(int64_t{0}, n);
    return;
  }
#pragma omp parallel num_threads(c.threads)
  {
    const int64_t t = omp_get_thread_num();
    const int64_t first = c.blocks * t / c.threads;
    const int64_t last = c.blocks * (t + 1) / c.threads;
    const int64_t begin = first * c.grain;
    const int64_t end = last * c.grain < n ? last * c.grain : n;
    if (begin < end) body(begin, end);
  }
}

// As parallel_for_chunks, but each chunk of `grain` items goes to whichever thread is free
// next: for items of unequal cost. Which thread runs which chunk varies from run to run.
template <class Body>
void parallel_for_dynamic(int64_t n, int64_t grain, Body&& body) {
  if (n <= 0) return;
  const detail::Chunking c = detail::chunking(n, grain);
  if (c.threads <= 1) {
    body(int64_t{0}, n);
    return;
  }
#pragma omp parallel for num_threads(c.threads) schedule(dynamic, 1)
  for (int64_t b = 0; b < c.blocks; ++b) body(b * c.grain, (b + 1) * c.grain < n ? (b + 1) * c.grain : n);
}

}  // namespace tokenmill
