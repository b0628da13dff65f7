#include "core/parallel.h"

#include <omp.h>

#include <atomic>

namespace tokenmill {

namespace {
// The count set_thread_count chose, for every thread of the process: OpenMP's own setting
// (omp_set_num_threads) belongs to the calling thread only, and the server's engine runs
// on a thread of its own. 0: OpenMP's default.
std::atomic<int> g_threads{0};
const int g_default_threads = omp_get_max_threads();  // before anyone changes it
}  // namespace

int thread_count() {
  const int n = g_threads.load(std::memory_order_relaxed);
  return n > 0 ? n : omp_get_max_threads();
}

void set_thread_count(int n) {
  g_threads.store(n > 0 ? n : 0, std::memory_order_relaxed);
  omp_set_num_threads(n > 0 ? n : g_default_threads);
}

}  // namespace tokenmill
