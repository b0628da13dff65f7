// Threading: OpenMP underneath, one place to set the thread count.
#pragma once

#include <omp.h>

#include <cstdint>
#include <utility>

namespace tokenmill {

// Number of threads parallel regions use, in every thread of the process (default: OpenMP's,
// i.e. OMP_NUM_THREADS or cores; fewer while the default follows the load, below). Two calls
// may differ: size per-thread storage by max_thread_count().
int thread_count();
// The most threads thread_count() gives until the next set_thread_count.
int max_thread_count();
// Sets the thread count for later parallel regions, process-wide; n <= 0 restores the default.
void set_thread_count(int n);
// While on (off at start; the CLI turns it on when no thread count is given), the default
// count follows the load: every half second thread_count() measures the cores that other
// processes keep busy on this process's CPUs (busy_cores.h) and gives the free ones
// (team_for_load: at least 1). A thread team larger than the free cores spins at every
// barrier for a thread that the scheduler has taken off its core; on a shared machine that
// is many times slower than a smaller team. A count set by set_thread_count never changes.
void set_thread_count_follows_load(bool on);

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

// Thread t's share of `count` items split among `team` threads in order:
// [count t / team, count (t + 1) / team).
inline std::pair<int64_t, int64_t> team_share(int64_t count, int64_t t, int64_t team) {
  return {count * t / team, count * (t + 1) / team};
}

// Calls body(begin, end) on disjoint chunks covering [0, n), in parallel: one contiguous chunk
// per thread, as equal as `align` allows (boundaries fall on multiples of it, except the end).
// `grain` decides how many threads run: no more than there are whole grains in n, so each
// thread gets at least about `grain` items.
template <class Body>
void parallel_for_balanced(int64_t n, int64_t grain, int64_t align, Body&& body) {
  if (n <= 0) return;
  if (align < 1) align = 1;
  const int64_t units = (n + align - 1) / align;
  const detail::Chunking c = detail::chunking(n, grain);
  const int threads = units < c.threads ? static_cast<int>(units) : c.threads;  // no empty chunks
  if (threads <= 1) {
    body(int64_t{0}, n);
    return;
  }
#pragma omp parallel num_threads(threads)
  {
    // The team may be smaller than asked for (a region inside another gets one thread).
    const auto [first, last] = team_share(units, omp_get_thread_num(), omp_get_num_threads());
    const int64_t begin = first * align, end = last * align < n ? last * align : n;
    if (begin < end) body(begin, end);
  }
}

// As parallel_for_balanced with align = grain: chunk boundaries are multiples of `grain`.
// Where grain is a minimum amount of work, not an alignment, prefer parallel_for_balanced:
// whole grains split unevenly (5 grains over 2 threads is 2:3).
template <class Body>
void parallel_for_chunks(int64_t n, int64_t grain, Body&& body) {
  parallel_for_balanced(n, grain, grain, static_cast<Body&&>(body));
}

// As parallel_for_balanced (align 1), for items of equal cost that the threads run at
// unequal, changing speeds (as when they share the memory bandwidth): the last `tail` items
// go in chunks of `tail_grain` to whichever thread is free next, so a thread that ran its
// share of the first n - tail items fast does not wait idle for a slower one. Which thread
// runs which tail chunk varies from run to run.
template <class Body>
void parallel_for_shared_tail(int64_t n, int64_t grain, int64_t tail, int64_t tail_grain, Body&& body) {
  if (n <= 0) return;
  const detail::Chunking c = detail::chunking(n, grain);
  if (c.threads <= 1) {
    body(int64_t{0}, n);
    return;
  }
  if (tail < 0) tail = 0;
  if (tail > n) tail = n;
  if (tail_grain < 1) tail_grain = 1;
  const int64_t head = n - tail, tail_chunks = (tail + tail_grain - 1) / tail_grain;
#pragma omp parallel num_threads(c.threads)
  {
    const auto [begin, end] = team_share(head, omp_get_thread_num(), omp_get_num_threads());
    if (begin < end) body(begin, end);
#pragma omp for schedule(dynamic, 1) nowait
    for (int64_t b = 0; b < tail_chunks; ++b) {
      const int64_t first = head + b * tail_grain;
      body(first, n - first > tail_grain ? first + tail_grain : n);
    }
  }
}

// The threads parallel_for_balanced runs for n items of `grain` (align 1).
inline int parallel_threads(int64_t n, int64_t grain) {
  return n <= 0 ? 1 : detail::chunking(n, grain).threads;
}

// Calls body(t, team) once on each thread t < team of one parallel region of up to
// `threads` threads (team may be fewer: the body divides the work by the team it gets). The
// body may hold `#pragma omp barrier`s, which every thread of the team must reach.
template <class Body>
void parallel_team(int threads, Body&& body) {
#pragma omp parallel num_threads(threads > 1 ? threads : 1)  // a team even of one: its barriers
  body(omp_get_thread_num(), omp_get_num_threads());
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
