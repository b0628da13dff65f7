// The self-test: a small GEMM and an attention op on the CPU backend and on each GPU (through
// the CUDA backend), each checked against the float64 reference ops (backend/reference) and
// timed.
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

// The same ops on GPUs 0 .. gpu_count - 1, in managed memory. A GPU that cannot be tested
// (no CUDA backend in this build, a GPU the backend cannot use, a CUDA failure) gets a line
// in `skipped` saying why instead of results.
std::vector<SelfTestResult> run_gpu_self_test(int gpu_count, std::vector<std::string>& skipped);

// One finding per result (a wrong result is blocking), and an Info finding per skipped GPU.
std::vector<Finding> self_test_findings(const std::vector<SelfTestResult>& results,
                                        const std::vector<std::string>& gpu_skipped);

}  // namespace tokenmill::doctor
