// train: pretrain from scratch or fine-tune a Hugging Face model on prepared data
// (runtime/training_job.h) on --device, with one progress line per step, validation, samples
// and a summary. Started by mpirun or srun with several ranks, it trains data-parallel.
#include <atomic>
#include <csignal>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>

#include <fmt/format.h>

#include "cli/commands.h"
#include "cli/device_flag.h"
#include "runtime/training_job.h"

namespace tokenmill::cli {

namespace {

std::atomic<bool> g_stop{false};
extern "C" void request_stop(int) { g_stop.store(true); }

void run_train(TrainingJob& job) {
  TrainingJobReport report;
  report.notes = [](std::string_view line) { fmt::print(stderr, "note: {}\n", line); };
  report.on_start = [] {
    std::signal(SIGINT, request_stop);
    std::signal(SIGTERM, request_stop);
  };
  report.log = [](std::string_view line) { fmt::print("{}\n", line); };
  report.on_step = [](const StepReport&, std::string_view line) {
    fmt::print("{}\n", line);
    std::fflush(stdout);
  };
  report.on_eval = [](const EvalReport&, std::string_view line) { fmt::print("{}\n", line); };
  const std::optional<TrainSummary> summary = run_training_job(job, report, &g_stop);
  std::signal(SIGINT, SIG_DFL);
  std::signal(SIGTERM, SIG_DFL);
  if (!summary) return;  // not rank 0
  fmt::print("\n");
  for (const std::string& line : summary_lines(*summary, job)) fmt::print("{}\n", line);
}

}  // namespace

void add_train_command(CLI::App& app) {
  auto f = std::make_shared<TrainingJob>();
  TrainOptions& o = f->options;
  CLI::App* cmd = app.add_subcommand("train", "Train a model from scratch or fine-tune one on prepared data");
  cmd->add_option("--data", f->data, "Dataset directory written by `tokenmill prepare`")->required();
  cmd->add_option("--out", f->out, "Run directory: checkpoints, metrics.jsonl, loss.svg")->required();
  cmd->add_option("--from", f->from,
                  "Fine-tune this Hugging Face model directory (default: train from scratch)");
  add_device_flag(*cmd, f->device);
  cmd->add_option("--layers", f->layers, "From scratch: transformer layers");
  cmd->add_option("--hidden", f->hidden, "From scratch: hidden size");
  cmd->add_option("--heads", f->heads, "From scratch: attention heads");
  cmd->add_option("--kv-heads", f->kv_heads, "From scratch: key/value heads (default: --heads)");
  cmd->add_option("--ff", f->ff, "From scratch: SwiGLU width (default: 4 x --hidden)");
  cmd->add_option("--context", f->context, "From scratch: context length (default: --seq-len)");
  cmd->add_option("--batch", o.batch, "Sequences per micro-batch");
  cmd->add_option("--seq-len", o.seq_len, "Tokens per sequence");
  cmd->add_option("--grad-accum", o.grad_accum, "Micro-batches per optimizer step");
  cmd->add_option("--steps", o.steps, "Optimizer steps");
  cmd->add_option("--lr", o.schedule.max_lr, "Peak learning rate");
  cmd->add_option("--min-lr", f->min_lr, "Final learning rate (default: --lr / 10)");
  cmd->add_option("--warmup-steps", o.schedule.warmup_steps, "Linear warmup steps");
  cmd->add_option("--lr-decay", f->lr_decay, "cosine | linear | constant");
  cmd->add_option("--weight-decay", o.adamw.weight_decay, "AdamW weight decay (matrices only)");
  cmd->add_option("--beta1", o.adamw.beta1, "AdamW beta1");
  cmd->add_option("--beta2", o.adamw.beta2, "AdamW beta2");
  cmd->add_option("--adam-eps", o.adamw.eps, "AdamW epsilon (added to the second moment's square root)");
  cmd->add_option("--max-grad-norm", o.adamw.max_grad_norm, "Clip the global gradient norm (0: off)");
  cmd->add_option("--seed", o.seed, "Seed of initialisation, data order and samples");
  cmd->add_option("--eval-every", o.eval_every, "Steps between validation passes (0: off)");
  cmd->add_option("--eval-batches", o.eval_batches, "Batches per validation pass");
  cmd->add_option("--sample-every", o.sample_every, "Steps between samples (0: only at the end)");
  cmd->add_option("--sample-tokens", f->sample_tokens, "Tokens per sample");
  cmd->add_option("--sample-prompt", f->sample_prompt, "Prompt of the samples (default: a new document)");
  cmd->add_option("--checkpoint-every", o.checkpoint_every,
                  "Steps between checkpoints (0, the default: by --checkpoint-minutes only)");
  cmd->add_option("--checkpoint-minutes", o.checkpoint_minutes,
                  "Minutes of training between checkpoints (default 10; 0: by --checkpoint-every only); "
                  "a checkpoint is also written at the end and on Ctrl-C");
  cmd->add_option("--keep-checkpoints", o.keep_checkpoints, "Checkpoints kept");
  cmd->add_flag("--resume", o.resume,
                "Continue the run in --out from its newest checkpoint that verifies, with the run's own "
                "schedule, batch, optimizer and seed flags (a finished run is not resumed)");
  cmd->add_flag("--recompute-activations", o.recompute_activations,
                "Keep only each layer's input and recompute its activations in the backward: less "
                "memory, about a third more compute, the same results");
  cmd->add_option("--precision", f->precision,
                  "fp32 | bf16 | fp16: the dtype the matrices are multiplied in (FP32 master weights, "
                  "gradients and optimizer state always; fp16 adds dynamic loss scaling)");
  cmd->add_option("--initial-loss-scale", o.initial_loss_scale, "fp16: the first loss scale");
  cmd->add_option("--loss-scale-growth-interval", o.loss_scale_growth_interval,
                  "fp16: finite steps before the loss scale doubles");
  cmd->add_option("--bucket-mb", f->bucket_mb,
                  "Data parallel (under mpirun or srun): MiB of gradients per all-reduce")
      ->capture_default_str();
  cmd->add_option("--zero", o.zero_stage,
                  "Data parallel: 1 shards the AdamW state over the ranks (ZeRO-1: 1/ranks of it per rank; "
                  "the same results as 0)")
      ->capture_default_str();
  cmd->add_option("--collective-timeout", f->collective_timeout,
                  "Data parallel: seconds a collective may take before every rank stops (a rank died or "
                  "stalled)")
      ->capture_default_str();
  cmd->add_option("--router-aux-loss", o.router_aux_loss,
                  "Mixtures of experts: add this times transformers' load-balancing loss to the training "
                  "loss (default: the model's config.json, its router_aux_loss_coef when "
                  "output_router_logits is true, else none)");
  cmd->add_option("--lora-rank", f->lora_rank, "LoRA: adapter rank r (0: full fine-tuning); needs --from");
  auto* alpha = cmd->add_option("--lora-alpha", f->lora_alpha,
                                "LoRA: alpha; the update is scaled by alpha / r (default: r)");
  auto* targets = cmd->add_option("--lora-targets", f->lora_targets,
                                  "LoRA: adapted layers among q,k,v,o,gate,up,down (default: q,k,v,o)");
  cmd->callback([f, alpha, targets] {
    f->lora_flags_given = alpha->count() > 0 || targets->count() > 0;
    run_train(*f);
  });
}

}  // namespace tokenmill::cli
