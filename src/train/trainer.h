// The training loop: `tokenmill train` from scratch (a config) or from a pretrained Hugging
// Face model, full fine-tuning, on any backend: the parameters, gradients, AdamW moments and
// activations live in the backend's memory (a GPU's for the CUDA backend), a LoRA run's
// frozen base model is placed there, and the host reaches them only through DeviceMemory's
// copies (initial values in; losses, gradient norms, checkpoints and samples out).
//
// Per optimizer step: grad_accum micro-batches of batch x seq_len tokens, each
// forward+backward with grad_scale = its share of the step's scored targets (the loss is the
// mean over all of them, however the step is split: train/step_batch.h), then clipping and
// AdamW at the schedule's learning rate (train/optimizer.h). Every eval_every steps: the
// validation loss over eval_batches batches (in order, the same batches every time) and
// its perplexity; every sample_every steps (and at the end): TrainObserver::sample. Checkpoints
// every checkpoint_every steps, after every checkpoint_minutes of training since the last
// one, at the end, and when `stop` is raised (SIGINT/SIGTERM):
// run_dir/checkpoints/step_*.tmckpt, the last `keep` kept. resume continues from the newest
// checkpoint that verifies (newer damaged ones are reported and skipped) bit-exactly (same
// data order, same RNG, same optimizer state); it refuses flags that would change the run's
// trajectory, and a finished run (train/resume_check.h). Temporaries of a save that a crash cut short
// are removed at the start.
// run_dir also gets metrics.jsonl (one JSON object per step / eval) and loss.svg.
// Precision (train/precision.h): FP32 master weights, gradients and AdamW state always; with
// bf16 / fp16 the matrices are multiplied as a rounded copy (train/compute_weights.h, refreshed
// after every applied step), and fp16 scales the loss (train/loss_scaler.h: a step whose
// gradients overflow is skipped and the scale backs off). A run may resume with another
// precision; the loss scale carries over between fp16 runs only.
// Divergence: a step whose loss or gradients are not finite stops the run with an Error that
// names the step and what to change (fp16's non-finite gradients only once the loss scale is
// down to 1: above it they are skipped steps), with no checkpoint written for it (non-finite
// gradients are never applied).
// recompute_activations: the TrainingPass keeps only each layer's input and recomputes its
// activations in the backward (model/training_pass.h: less memory, about +33% flops, the
// same numbers bit for bit), so a run may resume with the other setting. The MFU counts the
// model's flops only, not the recomputation.
//
// Data parallel (a Communicator of several ranks, dist/communicator.h; train/data_parallel.h):
// every rank reads the same global step (grad_accum x world_size micro-batches: the loader
// position is global, so a checkpoint resumes on any number of ranks with the same global
// batch) and computes micro-batches [rank x grad_accum, (rank + 1) x grad_accum) of it; the
// gradients are summed over the ranks before the optimizer step, so every rank applies the
// same update. The step's loss, and then a raised `stop` and a checkpoint due by time, are
// agreed in two small all-reduces per step; evaluation batches are shared out and their losses summed.
// With zero_stage 1 each rank holds 1/world_size of the AdamW state (train/zero.h).
// Rank 0 alone writes the run directory (metrics, checkpoints, loss.svg), draws samples
// and reports through the observer; a checkpoint is followed by a barrier. The model and,
// on resume, the AdamW state are broadcast from rank 0 at the start.
//
// LoRA (options.lora enabled, from_model required): the pretrained model stays as loaded
// (frozen, never copied, never checkpointed); only the adapter (train/lora_parameters.h,
// PEFT's initialisation seeded by `seed`) is trained, and AdamW's state exists for it alone.
// Its checkpoints hold the adapter, the optimizer state and the base model's path and
// config, which a resume verifies. Under bf16 / fp16 its f32 matrices are multiplied as a
// copy rounded once (matrices already in that dtype as they are).
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "backend/backend.h"
#include "core/log_fn.h"
#include "dist/communicator.h"
#include "model/lora.h"
#include "model/model.h"
#include "train/lr_schedule.h"
#include "train/optimizer.h"
#include "train/precision.h"

namespace tokenmill {

struct TrainOptions {
  std::filesystem::path data_dir, run_dir;
  std::filesystem::path from_model;  // a Hugging Face model directory, or empty: from scratch
  nlohmann::json scratch_config;     // config.json of the model to create when from_model is empty
  int64_t batch = 8, seq_len = 128, grad_accum = 1, steps = 100;
  LrSchedule schedule;
  AdamWOptions adamw;
  uint64_t seed = 1337;
  int64_t eval_every = 50, eval_batches = 8;
  int64_t sample_every = 0;          // steps between TrainObserver::sample calls (and one at the end)
  int64_t checkpoint_every = 0;      // steps between checkpoints (0: by time only)
  double checkpoint_minutes = 10.0;  // minutes of training between checkpoints (0: by steps only)
  int keep_checkpoints = 2;
  bool resume = false;
  LoraConfig lora;  // rank 0: full fine-tuning (or from scratch)
  bool recompute_activations = false;
  // A mixture of experts: the coefficient of transformers' load-balancing loss added to the
  // training loss (0: none), written into the run's model configuration as transformers'
  // output_router_logits + router_aux_loss_coef; unset: the model's config.json decides.
  std::optional<double> router_aux_loss;
  Precision precision = Precision::FP32;
  double initial_loss_scale = 65536.0;        // fp16 (PyTorch GradScaler's defaults)
  int64_t loss_scale_growth_interval = 2000;  // fp16: finite steps before the scale doubles
  // The device's peak FLOP/s (measure/roofline.h), for the MFU of each step; 0: not reported.
  double peak_flops = 0.0;
  int64_t bucket_bytes = int64_t{25} << 20;  // data parallel: gradients summed in pieces of this size
  int zero_stage = 0;  // data parallel: 1 shards the AdamW state over the ranks (train/zero.h)

  // The options that define the run, as checkpoints record them, with the data-parallel
  // world size and the global batch (sequences per step) of the run.
  nlohmann::json to_json(int world_size = 1) const;
};

struct StepReport {
  int64_t step = 0, steps = 0;
  double loss = 0.0, lr = 0.0, grad_norm = 0.0;
  double tokens_per_second = 0.0;       // of the whole job (every rank's tokens)
  double rank_tokens_per_second = 0.0;  // of this rank's micro-batches
  double communication_share = 0.0;     // of the step's time, in collectives (waiting included)
  double mfu = 0.0;  // model FLOPs (measure/flops.h, training = 3 x forward) / peak; 0 if unknown
  double elapsed_seconds = 0.0, eta_seconds = 0.0;
  bool applied = true;
  double loss_scale = 1.0;  // the scale this step's loss was multiplied by (fp16; else 1)
};
struct EvalReport {
  int64_t step = 0;
  double loss = 0.0, perplexity = 0.0;
};
struct TrainSummary {
  int64_t first_step = 0, last_step = 0, tokens = 0;
  double seconds = 0.0, tokens_per_second = 0.0;
  std::optional<EvalReport> first_eval, last_eval;
  std::string final_sample;
  std::filesystem::path checkpoint;
  bool stopped_early = false;
  int64_t parameters = 0;            // of the model
  int64_t trainable_parameters = 0;  // the model's, or the LoRA adapter's
};

struct TrainObserver {
  LogFn on_info;  // the run's description and notes
  std::function<void(const StepReport&)> on_step;
  std::function<void(const EvalReport&)> on_eval;
  // Generates a sample from the model being trained (the caller owns generation, which
  // lives above train/ in the layers) with the backend train() was given: the model's
  // weights are in its memory. The text is returned for the summary.
  std::function<std::string(const Model& model, int64_t step)> sample;
  std::function<void(const std::filesystem::path&)> on_checkpoint;
};

// Throws Error on bad options, data or model; a raised `stop` (on any rank) ends the run
// after the current step with a checkpoint. `comm` null: a single process.
TrainSummary train(const TrainOptions& options, Backend& backend, const TrainObserver& observer,
                   const std::atomic<bool>* stop = nullptr, Communicator* comm = nullptr);

// config.json of a Llama-style model (RMSNorm, SwiGLU, RoPE) for training from scratch.
nlohmann::json scratch_llama_config(int64_t vocab, int64_t layers, int64_t hidden, int64_t heads,
                                    int64_t kv_heads, int64_t intermediate, int64_t context,
                                    int32_t eod_token);

}  // namespace tokenmill
