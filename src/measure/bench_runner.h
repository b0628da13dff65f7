// The `tokenmill bench` suite: one model, one device, its ceilings measured in the same run.
//
// Phases (batch 1: the Transformer runs one sequence; batches arrive with the serving
// engine, issue #6; a training step is not timed yet, `tokenmill train` reports it):
//  - prefill: one forward_last call over a prompt of seeded random in-vocabulary ids;
//  - decode: greedy single-token steps after that prompt, each a forward_last call.
// Both follow a warm-up (a short prompt and two steps, then the cache is reset) and are
// timed with steady_clock. FLOPs come from measure/flops.h, minimum bytes read from
// measure/traffic.h. The ceilings (measure/roofline.h) are measured after the phases, so the
// peak memory (VmHWM, read before them) is the model's and not the calibration buffer's.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "measure/roofline.h"
#include "model/model.h"

namespace tokenmill {

struct BenchOptions {
  int64_t prompt_tokens = 512;
  int64_t decode_tokens = 128;
  uint64_t seed = 1234;  // of the random prompt
  CalibrationOptions calibration;
};

struct DeviceSummary {
  std::string backend;  // "cpu"
  std::string name;     // the CPU model, from /proc/cpuinfo ("unknown CPU" when absent)
  int threads = 0;
  std::string isa;  // the kernels' instruction set: "avx2", "avx512"
};

struct ModelSummary {
  std::string name;  // file or directory name
  std::string architecture;
  int64_t parameters = 0;
  uint64_t weight_bytes = 0;  // of the weight files
  std::string weight_dtype;   // the stored type holding the most bytes, lower case ("q4_1", "bf16")
};

// One timed phase, with what it had to compute and read.
struct PhaseMeasurement {
  std::string phase;  // "prefill", "decode"
  int64_t batch = 1;
  int64_t tokens = 0;  // tokens processed (prompt tokens, or decode steps)
  double seconds = 0;
  double flops = 0;  // over the phase (measure/flops.h)
  double bytes = 0;  // minimum bytes read over the phase (measure/traffic.h)

  double tokens_per_s() const { return static_cast<double>(tokens) / seconds; }
};

struct BenchRun {
  DeviceSummary device;
  Ceilings ceilings;
  ModelSummary model;
  std::vector<PhaseMeasurement> phases;
  std::optional<uint64_t> peak_memory_bytes;  // VmHWM; absent without /proc
  std::vector<std::string> notes;             // caps applied to the requested sizes
};

// Runs the suite on the CPU backend. The prompt and decode lengths are capped so that
// prompt + decode fits the model's context (each cap is recorded in `notes`). Throws Error
// if prompt_tokens or decode_tokens < 1.
BenchRun run_bench(const Model& model, const BenchOptions& options);

// Peak resident memory of this process (VmHWM of /proc/self/status), or nullopt.
std::optional<uint64_t> peak_resident_bytes();

}  // namespace tokenmill
