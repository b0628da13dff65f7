#include "core/parallel.h"

#include <omp.h>

namespace tokenmill {

namespace {
int g_default_threads = 0;
}

int thread_count() { return omp_get_max_threads(); }

void set_thread_count(int n) {
  if (g_default_threads == 0) g_default_threads = omp_get_max_threads();
  omp_set_num_threads(n > 0 ? n : g_default_threads);
}

}  // namespace tokenmill
