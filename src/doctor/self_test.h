// The self-test: a small GEMM and an attention op on the CPU backend, each checked against
// the float64 reference ops (backend/reference) and timed.
//
// Error is measured as the conformance suite does (tests/backend): max |got - reference| /
// max |reference| over the output, against the f32 tolerance 1e-5.
#pragma once

#include <string>
#include <vector>

#include "doctor/findings.h"

namespace tokenmill::doctor {

struct SelfTestResult {
  std::string name;    // "gemm 512x512x512 f32"
  std::string device;  // "cpu (avx512)"
  double max_relative_error = 0;
  double tolerance = 0;
  double seconds = 0;       // best of a few timed runs
  double gflops_per_s = 0;  // useful FLOPs / seconds
  double gbytes_per_s = 0;  // minimum bytes moved (inputs read once, output written once) / seconds
  bool passed = false;
};

std::vector<SelfTestResult> run_cpu_self_test();

// One finding per result, and "skipped" for the GPU when one was found (no CUDA backend yet).
std::vector<Finding> self_test_findings(const std::vector<SelfTestResult>& results, bool gpu_found);

}  // namespace tokenmill::doctor
