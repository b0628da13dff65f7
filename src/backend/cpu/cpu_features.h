// Which SIMD instruction set the CPU backend's kernels use, chosen at run time.
//
// The project baseline is x86-64-v3 (AVX2 + FMA + F16C), so the AVX2 kernels always run.
// The AVX-512 kernels (F + BW + VL + DQ) run when the CPU has them; within them, the
// quantized matmul uses VNNI when present and the AVX2 kernels otherwise. AMX (the AVX-512
// kernels plus the AMX GEMM for bf16 weights, amx_gemm.h) needs AMX-TILE, AMX-BF16 and
// AVX512-BF16, and Linux's grant of the tile state to the process (amx_tile_state_granted:
// asked for only when AMX is considered). The environment variable
// TOKENMILL_CPU_ISA=avx2|avx512|amx caps the choice (to test the lower paths on a wide
// machine); asking for more than the CPU has is an error, never a crash.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace tokenmill {

enum class CpuIsa : uint8_t { Avx2, Avx512, Amx };

struct CpuFeatures {
  bool avx2 = false;
  bool fma = false;
  bool f16c = false;
  bool avx512f = false;
  bool avx512bw = false;
  bool avx512vl = false;
  bool avx512dq = false;
  bool avx512bf16 = false;  // vcvtneps2bf16: the AMX GEMM rounds activations with it
  bool avx512vnni = false;  // vpdpbusd: the quantized matmul's AVX-512 kernels need it
  bool amx_tile = false;
  bool amx_bf16 = false;
  bool amx_int8 = false;  // reported by doctor; no kernel uses it
};

// What this CPU supports (cached after the first call).
const CpuFeatures& cpu_features();
// Asks Linux, on the first call, to let this process use the AMX tile data state
// (arch_prctl ARCH_REQ_XCOMP_PERM, process-wide, needed before the first tile instruction;
// once granted, signal frames grow by the 8 KiB of tile data); returns whether it did. False
// without AMX-TILE, before Linux 5.16, or where the kernel refuses (e.g. seccomp).
bool amx_tile_state_granted();
// Whether kernels for `isa` can run on this CPU.
bool cpu_supports(CpuIsa isa);
// The widest supported ISA, capped by TOKENMILL_CPU_ISA when set. Throws Error if the
// variable names an unknown ISA or one this CPU lacks.
CpuIsa best_cpu_isa();
std::string_view cpu_isa_name(CpuIsa isa);
// Parses "avx2" / "avx512" / "amx"; throws Error otherwise.
CpuIsa parse_cpu_isa(std::string_view name);
// One line for logs and `doctor`, e.g. "avx2 fma f16c avx512f avx512bw avx512vl avx512dq".
std::string cpu_features_string();

}  // namespace tokenmill
