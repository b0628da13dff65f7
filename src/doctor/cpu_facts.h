// What the CPU backend can use on this CPU: the instruction-set extensions (from CPUID, via
// backend/cpu/cpu_features.h), whether Linux granted the AMX tile state, and the ISA its
// kernels run with.
#pragma once

#include <string>

#include "backend/cpu/cpu_features.h"

namespace tokenmill::doctor {

struct CpuFacts {
  CpuFeatures features;
  bool amx_granted = false;  // amx_tile_state_granted(), asked where the CPU has AMX-TILE and -BF16
  std::string isa;           // best_cpu_isa(): "amx", "avx512" or "avx2"; "" when it refused
  std::string isa_error;     // why best_cpu_isa() refused (TOKENMILL_CPU_ISA asks for too much)
};

CpuFacts probe_cpu();

}  // namespace tokenmill::doctor
