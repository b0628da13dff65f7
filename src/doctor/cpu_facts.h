// What the CPU backend can use on this CPU: the instruction-set extensions (from CPUID, via
// backend/cpu/cpu_features.h, plus AMX here) and the ISA its kernels run with.
#pragma once

#include <string>

#include "backend/cpu/cpu_features.h"

namespace tokenmill::doctor {

struct CpuFacts {
  CpuFeatures features;
  bool amx_tile = false;  // CPUID.(7,0):EDX bits 24 (AMX-TILE), 22 (AMX-BF16), 25 (AMX-INT8)
  bool amx_bf16 = false;
  bool amx_int8 = false;
  std::string isa;        // best_cpu_isa(): "avx512" or "avx2"; "" when it refused
  std::string isa_error;  // why best_cpu_isa() refused (TOKENMILL_CPU_ISA asks for too much)
};

CpuFacts probe_cpu();

}  // namespace tokenmill::doctor
