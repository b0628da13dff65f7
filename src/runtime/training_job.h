// A training job as `tokenmill train` and the Python package's tokenmill.train() describe it:
// the run's options plus the choices made around train() (train/trainer.h) — the model to
// create from scratch, the device of each rank, LoRA's flags, the samples' prompt and length,
// the data-parallel communicator and its GPU collectives, the peak that MFU divides by — and
// the lines that report it. Started under mpirun or srun with several ranks, it trains
// data-parallel: rank 0 reports and writes; each rank takes the GPU of its local rank under
// device "cuda"; a rank that fails stops the whole job.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/log_fn.h"
#include "train/trainer.h"

namespace tokenmill {

struct TrainingJob {
  // options.data_dir, run_dir, from_model, schedule.decay and min_lr, precision, lora,
  // scratch_config, bucket_bytes and peak_flops are set from the fields below.
  TrainOptions options;
  std::string data, out, from;  // dataset (`prepare`'s), run directory, model to fine-tune ("": scratch)
  std::string device = "auto";
  std::string precision = "fp32";  // fp32 | bf16 | fp16
  std::string lr_decay = "cosine";
  double min_lr = -1.0;  // < 0: the peak rate / 10
  // From scratch: a Llama-style model of this shape (kv_heads 0: heads; ff 0: 4 x hidden;
  // context 0: the sequence length).
  int64_t layers = 4, hidden = 128, heads = 4, kv_heads = 0, ff = 0, context = 0;
  // LoRA: rank 0 is full fine-tuning, unless alpha or targets were given (then it must be >= 1).
  int64_t lora_rank = 0;
  double lora_alpha = 0.0;  // 0: the rank
  std::string lora_targets = "q,k,v,o";
  bool lora_flags_given = false;
  int64_t sample_tokens = 64;
  std::string sample_prompt;  // "": a new document
  double bucket_mb = 25.0;
  double collective_timeout = 600.0;
};

// What the job reports as it runs (rank 0 alone, but for `notes`); each step and validation
// pass comes with the line the CLI prints for it.
struct TrainingJobReport {
  LogFn notes;                     // every rank: a device choice that fell back to the CPU
  std::function<void()> on_start;  // set up, about to train (the CLI's Ctrl-C handlers go in here)
  LogFn log;                       // the run's description, the MFU peak, samples, checkpoints
  std::function<void(const StepReport&, std::string_view line)> on_step;
  std::function<void(const EvalReport&, std::string_view line)> on_eval;
};

// Runs the job (a raised `stop` ends it after the current step with a checkpoint). Returns
// the summary on rank 0, nothing on the other ranks. Throws Error on bad options, data or
// model; with several ranks a failing rank prints its error and aborts the whole job instead.
std::optional<TrainSummary> run_training_job(TrainingJob& job, const TrainingJobReport& report,
                                             const std::atomic<bool>* stop);

// The summary's lines, as the CLI prints them at the end.
std::vector<std::string> summary_lines(const TrainSummary& summary, const TrainingJob& job);

}  // namespace tokenmill
