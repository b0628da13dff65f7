#include "doctor/cpu_facts.h"

#include <cpuid.h>

#include "core/error.h"

namespace tokenmill::doctor {

CpuFacts probe_cpu() {
  CpuFacts cpu;
  cpu.features = cpu_features();
  cpu.amx_granted = cpu.features.amx_tile && cpu.features.amx_bf16 && amx_tile_state_granted();
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) != 0) cpu.amx_int8 = (edx >> 25) & 1;
  try {
    cpu.isa = cpu_isa_name(best_cpu_isa());
  } catch (const Error& e) {
    cpu.isa_error = e.what();
  }
  return cpu;
}

}  // namespace tokenmill::doctor
