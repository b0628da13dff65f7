#include "doctor/cpu_facts.h"

#include "core/error.h"

namespace tokenmill::doctor {

CpuFacts probe_cpu() {
  CpuFacts cpu;
  cpu.features = cpu_features();
  cpu.amx_granted = cpu.features.amx_tile && cpu.features.amx_bf16 && amx_tile_state_granted();
  try {
    cpu.isa = cpu_isa_name(best_cpu_isa());
  } catch (const Error& e) {
    cpu.isa_error = e.what();
  }
  return cpu;
}

}  // namespace tokenmill::doctor
