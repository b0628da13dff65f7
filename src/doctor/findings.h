// Findings: the doctor's verdicts. Each says what was found and, when something should
// change, the fix a senior engineer would give. A Fail is a blocking problem: the doctor's
// exit status is non-zero when any finding fails.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/byte_units.h"
#include "doctor/build_expectations.h"
#include "doctor/cpu_facts.h"
#include "doctor/gpu_stack.h"
#include "doctor/host_facts.h"

namespace tokenmill::doctor {

enum class Status : uint8_t { Ok, Info, Warn, Fail };

std::string_view status_name(Status status);  // "ok", "info", "warn", "fail"

struct Finding {
  std::string area;  // "memory", "cpu", "driver", "cudnn", "gpu 0", ...
  Status status = Status::Info;
  std::string found;  // what is true of this machine
  std::string fix;    // what to do; empty when nothing needs doing
};

std::vector<Finding> host_findings(const HostFacts& host);
std::vector<Finding> cpu_findings(const CpuFacts& cpu);
// The driver, the GPUs it shows and the variables that select them. With `require_gpu`,
// "no usable GPU" (no driver, no device, or a build without the CUDA backend) is a Fail.
std::vector<Finding> gpu_findings(const GpuStack& gpu, const HostFacts& host,
                                  const BuildExpectations& expected, bool require_gpu);
// cudart, cuBLASLt, cuDNN and NCCL against what the build expects; NVML's per-GPU state and
// the links between GPUs.
std::vector<Finding> gpu_library_findings(const GpuStack& gpu, const BuildExpectations& expected);

}  // namespace tokenmill::doctor
