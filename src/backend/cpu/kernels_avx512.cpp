// The kernels for AVX-512 (F + BW + VL + DQ), 16 f32 lanes. This file is compiled with
// those extensions enabled; cpu_backend.cpp calls into it only when cpu_features() has them.
#include "backend/cpu/simd_avx512.h"
// The shared kernel templates and their table (after the wrapper they are instantiated with).
#include "backend/cpu/kernel_table_impl.h"

namespace tokenmill::cpu {

const KernelTable& kernels_avx512() {
  static const KernelTable table = make_kernel_table<Avx512>("avx512");
  return table;
}

}  // namespace tokenmill::cpu
