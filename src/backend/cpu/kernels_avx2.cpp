// The kernels for the x86-64-v3 baseline: AVX2 + FMA + F16C, 8 f32 lanes.
#include "backend/cpu/simd_avx2.h"
// The shared kernel templates and their table (after the wrapper they are instantiated with).
#include "backend/cpu/kernel_table_impl.h"

namespace tokenmill::cpu {

const KernelTable& kernels_avx2() {
  static const KernelTable table = make_kernel_table<Avx2>("avx2");
  return table;
}

}  // namespace tokenmill::cpu
