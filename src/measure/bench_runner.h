// The `tokenmill bench` suite: one model, one device, its ceilings measured in the same run.
//
// Everything runs on one backend (`--device`: the CPU, or a GPU with the model's weights and
// every buffer of the phases and the calibration in its memory).
//
// Phases (each optional, --phases):
//  - prefill: one Transformer::forward_last call over a prompt of seeded random
//    in-vocabulary ids, after a warm-up (one chunk of it, then the cache is reset);
//  - decode: greedy decode steps after that prompt at each batch size of the sweep, through
//    the serving engine's PagedTransformer (measure/decode_sweep.h);
//  - train: full training steps (forward, backward, AdamW) over batches of sequences of the
//    prompt's length (measure/train_step_bench.h), on the f32 master copy of the weights,
//    in train_precision (fp32, or bf16: the matrices multiplied as a bf16 copy, as
//    `tokenmill train --precision bf16` runs).
//    Auto (the default) runs it for a synthetic model (whose master copy exists anyway) and
//    for a loaded model with f32/bf16/f16 weights whose training state (16 bytes per
//    parameter, plus the activations) takes at most half of the memory budget; otherwise it
//    is skipped with a note saying why. On a backend with its own memory (a GPU) the training
//    state is made there, the master weights seeded as for training from scratch
//    (ParameterSet::init_gpt2), not copied from the model: a step's work does not depend on
//    the values. Asked for explicitly, a train phase that cannot run is an Error.
// The roofline's GEMM is calibrated on the weights the compute-bound work multiplies with:
// the train phase's (f32 master, or its bf16 copy) when it runs, else the model's when they
// are bf16 or f16, else f32 (the report names it, and a note says when the phases differ).
// Timed with steady_clock. FLOPs come from measure/flops.h, minimum bytes read from
// measure/traffic.h. Every large buffer is reserved in the run's MemoryBudget first. The
// ceilings (measure/roofline.h) are measured after the phases, so the peak memory (VmHWM,
// read before them) is the phases' and not the calibration buffer's. On a CUDA device, NVML
// is sampled while the phases run (measure/nvml_sampler.h) and each phase gets the summary
// of the readings over its timed span.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "backend/backend.h"
#include "measure/gpu_samples.h"
#include "measure/memory_budget.h"
#include "measure/roofline.h"
#include "train/precision.h"

namespace tokenmill {

struct BenchModel;  // measure/bench_model.h

enum class TrainPhase : uint8_t { Auto, On, Off };

struct BenchOptions {
  int64_t prompt_tokens = 512;
  int64_t decode_tokens = 128;
  std::vector<int64_t> batch_sizes = {1, 2, 4, 8};  // of the decode sweep
  bool prefill = true, decode = true;
  TrainPhase train = TrainPhase::Auto;
  int64_t train_batch = 1;                      // sequences per training step
  Precision train_precision = Precision::FP32;  // FP32 or BF16
  uint64_t seed = 1234;                         // of the random prompt and training tokens
  CalibrationOptions calibration;
};

// "1,2,4,8" -> {1, 2, 4, 8}: positive integers up to 4096, sorted, duplicates dropped. Error
// naming the bad item otherwise.
std::vector<int64_t> parse_batch_sizes(std::string_view list);

// "prefill,decode,train" (any non-empty subset) into options.prefill / decode / train.
// Error on an unknown or repeated name.
void parse_phases(std::string_view list, BenchOptions& options);

struct DeviceSummary {
  std::string backend;  // "cpu", "cuda"
  std::string name;     // the CPU model, from /proc/cpuinfo ("unknown CPU" when absent), or the
                        // backend's name for a device ("cuda:0 (NVIDIA H100 80GB HBM3, sm_90)")
  int threads = 0;      // host threads
  std::string isa;      // the CPU kernels' instruction set: "avx2", "avx512", "amx"; "" on a device
};

struct ModelSummary {
  std::string name;  // file or directory name; a shape's name
  std::string architecture;
  int64_t parameters = 0;
  uint64_t weight_bytes = 0;  // of the weight files, or of a synthetic model's inference weights
  std::string weight_dtype;   // the stored type holding the most bytes, lower case ("q4_1", "bf16")
  bool synthetic = false;     // random weights of a --shape
};

// One timed phase, with what it had to compute and read.
struct PhaseMeasurement {
  std::string phase;  // "prefill", "decode", "train"
  int64_t batch = 1;
  int64_t tokens = 0;  // tokens processed (prompt tokens, decode steps x batch, tokens of one training step)
  double seconds = 0;
  double flops = 0;                         // over the phase (measure/flops.h)
  double bytes = 0;                         // minimum bytes read over the phase (measure/traffic.h)
  BenchClock::time_point began{}, ended{};  // the timed span (train: all of its timed steps)
  std::optional<GpuSampleSummary> gpu{};    // NVML's readings over that span, when sampled

  double tokens_per_s() const { return static_cast<double>(tokens) / seconds; }
};

struct BenchRun {
  DeviceSummary device;
  Ceilings ceilings;
  ModelSummary model;
  std::vector<PhaseMeasurement> phases;
  std::optional<uint64_t> peak_memory_bytes;  // VmHWM; absent without /proc
  std::vector<std::string> notes;             // caps applied to the requested sizes, phases skipped
  // "sampled every 100 ms through NVML (<GPU name>)", or "not sampled: <why>" (the run is on
  // the CPU, NVML is absent or failed).
  std::string gpu_sampling;
};

// Runs the suite on `backend`, which holds the model's weights (place_weights,
// runtime/device_choice.h); `budget` counts the bytes its memory may still allocate. The
// prompt and decode lengths are capped so that prompt + decode fits the model's context
// (each cap is recorded in `notes`). Throws Error if the weights are not in the backend's
// memory, prompt_tokens or decode_tokens < 1, no phase is selected, or a phase's buffers do
// not fit in `budget`.
BenchRun run_bench(BenchModel& model, Backend& backend, const BenchOptions& options, MemoryBudget& budget);

// Peak resident memory of this process (VmHWM of /proc/self/status), or nullopt.
std::optional<uint64_t> peak_resident_bytes();

}  // namespace tokenmill
