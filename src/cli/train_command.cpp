// train: pretrain from scratch or fine-tune a Hugging Face model on prepared data
// (train/trainer.h) on --device (runtime/device_choice.h), with one progress line per step,
// validation, samples and a summary. Started by mpirun or srun with several ranks, it trains
// data-parallel (dist/communicator.h): rank 0 prints and writes; each rank takes the GPU of
// its local rank under --device cuda; a rank that fails stops the whole job.
#include <csignal>
#include <memory>
#include <string>

#include <fmt/format.h>

#include "backend/backend.h"
#include "cli/commands.h"
#include "cli/device_flag.h"
#include "core/error.h"
#include "core/json_file.h"
#include "dist/communicator.h"
#ifdef TOKENMILL_HAS_NCCL
#include "backend/cuda/nccl_collectives.h"
#endif
#include "measure/roofline.h"
#include "model/transformer.h"
#include "runtime/generator.h"
#include "tokenizer/tokenizer.h"
#include "train/trainer.h"

namespace tokenmill::cli {

namespace {

std::atomic<bool> g_stop{false};
extern "C" void request_stop(int) { g_stop.store(true); }

struct TrainFlags {
  TrainOptions options;
  std::string data, out, from, lr_decay = "cosine";
  std::string device = "auto";
  std::string precision = "fp32";
  int64_t layers = 4, hidden = 128, heads = 4, kv_heads = 0, ff = 0, context = 0;
  double min_lr = -1.0;
  int64_t lora_rank = 0;
  double lora_alpha = 0.0;
  std::string lora_targets = "q,k,v,o";
  bool lora_flags_given = false;  // --lora-alpha or --lora-targets
  int64_t sample_tokens = 64;
  std::string sample_prompt;
  double bucket_mb = 25.0;
  double collective_timeout = 600.0;
};

std::string duration(double seconds) {
  const auto s = static_cast<int64_t>(seconds + 0.5);
  return s >= 60 ? fmt::format("{}m{:02}s", s / 60, s % 60) : fmt::format("{}s", s);
}

// A seeded sample (temperature 0.8, top-k 40) of the model being trained.
std::string sample_text(const TrainFlags& f, const Tokenizer& tokenizer, int32_t eod, const Model& model,
                        Backend& backend, int64_t step) {
  Transformer transformer(model, backend, std::min<int64_t>(model.config.context_length(), 1024));
  GenerateRequest request;
  EncodeOptions plain;
  plain.add_special_tokens = false;
  request.prompt =
      f.sample_prompt.empty() ? std::vector<int32_t>{eod} : tokenizer.encode(f.sample_prompt, plain);
  request.max_new_tokens =
      std::min<int64_t>(f.sample_tokens, transformer.context() - static_cast<int64_t>(request.prompt.size()));
  request.sampling.temperature = 0.8f;
  request.sampling.top_k = 40;
  request.sampling.seed = f.options.seed + static_cast<uint64_t>(step);
  request.sampling.vocab_limit = tokenizer.vocab_size();  // never an id the tokenizer cannot decode
  request.ignore_eos = true;
  return f.sample_prompt + tokenizer.decode(generate(transformer, request).ids);
}

// The backend of this rank: under a launcher, `cuda` (and `auto` when it chose a GPU) is the
// GPU of the local rank, so the ranks of one node take one GPU each.
std::unique_ptr<Backend> open_rank_device(const std::string& device, const Communicator& comm) {
  Model no_weights;
  if (comm.world_size() > 1 && device == "cuda")
    return open_device(fmt::format("cuda:{}", comm.local_rank()), no_weights);
  std::unique_ptr<Backend> backend = open_device(device, no_weights);
  if (comm.world_size() > 1 && device == "auto" && !backend->memory().is_host() && comm.local_rank() > 0)
    return open_device(fmt::format("cuda:{}", comm.local_rank()), no_weights);
  return backend;
}

void train_rank(TrainFlags& f, Communicator& comm) {
  TrainOptions& o = f.options;
  if (!(f.bucket_mb > 0.0) || f.bucket_mb > 1e6)
    fail("--bucket-mb must be in (0, 1e6] MiB, got {}", f.bucket_mb);
  o.bucket_bytes = static_cast<int64_t>(f.bucket_mb * (1 << 20));
  o.data_dir = f.data;
  o.run_dir = f.out;
  o.from_model = f.from;
  o.schedule.decay = parse_lr_decay(f.lr_decay);
  o.precision = parse_precision(f.precision);
  o.schedule.min_lr = f.min_lr >= 0.0 ? f.min_lr : o.schedule.max_lr / 10.0;
  if (f.lora_rank != 0 || f.lora_flags_given) {
    if (f.lora_rank < 1) fail("--lora-rank must be >= 1 (LoRA's rank r), got {}", f.lora_rank);
    if (f.from.empty()) fail("--lora-rank needs --from MODEL_DIR: LoRA adapts a pretrained model");
    o.lora.rank = f.lora_rank;
    o.lora.alpha = f.lora_alpha != 0.0 ? f.lora_alpha : static_cast<double>(f.lora_rank);
    o.lora.targets = parse_lora_targets(f.lora_targets);
  }
  const nlohmann::json meta = read_json_file(o.data_dir / "meta.json");
  const auto eod = meta.at("eod_token").get<int32_t>();
  if (f.from.empty()) {
    const int64_t kv_heads = f.kv_heads > 0 ? f.kv_heads : f.heads;
    o.scratch_config =
        scratch_llama_config(meta.at("vocab_size").get<int64_t>(), f.layers, f.hidden, f.heads, kv_heads,
                             f.ff > 0 ? f.ff : 4 * f.hidden, f.context > 0 ? f.context : o.seq_len, eod);
  }
  const Tokenizer tokenizer = Tokenizer::from_file(meta.at("tokenizer").get<std::string>());
  // Training makes its weights in the backend's memory itself (train/parameters.h), so there
  // is no model to place: the device is chosen for an empty one.
  const std::unique_ptr<Backend> backend = open_rank_device(f.device, comm);
#ifdef TOKENMILL_HAS_NCCL
  // Gradients in a GPU's memory are summed by NCCL, not through the host.
  if (comm.world_size() > 1 && !backend->memory().is_host())
    comm.attach(cuda::make_nccl_collectives(*backend, comm, f.collective_timeout));
#endif
  // The device collectives use the backend: detached before it goes.
  struct Detach {
    Communicator& comm;
    ~Detach() { comm.attach(nullptr); }
  } detach{comm};
  // The peak for MFU: a short calibration, on the chosen backend, of the GEMM the run's
  // matrices are multiplied with (measure/roofline.h).
  CalibrationOptions calibration;
  calibration.gemm_weights = compute_dtype(o.precision);
  calibration.gemm_size = 512;
  calibration.read_bytes = uint64_t{16} << 20;
  calibration.min_seconds = 0.1;
  calibration.passes = 2;
  o.peak_flops = measure_ceilings(*backend, calibration).peak_flops;
  if (comm.is_root())
    fmt::print("peak for MFU: {:.1f} GFLOP/s ({}-weight {}^3 GEMM, {} backend)\n", o.peak_flops / 1e9,
               dtype_name(calibration.gemm_weights), calibration.gemm_size, backend->name());
  TrainObserver observer;
  observer.on_info = [](std::string_view line) { fmt::print("{}\n", line); };
  observer.on_step = [&o, ranks = comm.world_size()](const StepReport& r) {
    fmt::print(
        "step {:>5}/{} | loss {:.4f} | lr {:.2e} | grad norm {:.3f}{}{} | {:.0f} tok/s{} | {} elapsed, ETA "
        "{}\n",
        r.step, r.steps, r.loss, r.lr, r.grad_norm, r.applied ? "" : " (step skipped: non-finite)",
        o.precision == Precision::FP16 ? fmt::format(" | loss scale {}", r.loss_scale) : std::string(),
        r.tokens_per_second,
        ranks > 1 ? fmt::format(" ({:.0f} per rank, {:.0f}% in communication)", r.rank_tokens_per_second,
                                100.0 * r.communication_share)
                  : std::string(),
        duration(r.elapsed_seconds), duration(r.eta_seconds));
    std::fflush(stdout);
  };
  observer.on_eval = [](const EvalReport& r) {
    fmt::print("eval step {:>5} | val loss {:.4f} | val perplexity {:.2f}\n", r.step, r.loss, r.perplexity);
  };
  // A sample shows how training goes; one that fails says so and never fails the run.
  observer.sample = [&](const Model& model, int64_t step) {
    try {
      const std::string text = sample_text(f, tokenizer, eod, model, *backend, step);
      fmt::print("sample at step {}:\n{}\n", step, text);
      return text;
    } catch (const Error& e) {
      fmt::print("sample at step {}: not drawn ({})\n", step, e.what());
      return std::string();
    }
  };
  observer.on_checkpoint = [](const std::filesystem::path& p) { fmt::print("checkpoint: {}\n", p.string()); };
  std::signal(SIGINT, request_stop);
  std::signal(SIGTERM, request_stop);
  const TrainSummary s = train(o, *backend, observer, &g_stop, &comm);
  std::signal(SIGINT, SIG_DFL);
  std::signal(SIGTERM, SIG_DFL);
  if (!comm.is_root()) return;
  fmt::print("\n== summary ==\n");
  fmt::print("parameters        {} ({} trained)\n", s.parameters, s.trainable_parameters);
  fmt::print("steps             {}..{}{}\n", s.first_step, s.last_step,
             s.stopped_early ? " (stopped by signal)" : "");
  fmt::print("tokens            {} in {} ({:.0f} tokens/s)\n", s.tokens, duration(s.seconds),
             s.tokens_per_second);
  if (s.first_eval)
    fmt::print("val loss at start {:.4f} (perplexity {:.2f})\n", s.first_eval->loss,
               s.first_eval->perplexity);
  if (s.last_eval)
    fmt::print("val loss at end   {:.4f} (perplexity {:.2f})\n", s.last_eval->loss, s.last_eval->perplexity);
  fmt::print("checkpoint        {}\n", s.checkpoint.string());
  fmt::print("metrics           {}\n", (o.run_dir / "metrics.jsonl").string());
  fmt::print("loss curve        {}\n", (o.run_dir / "loss.svg").string());
}

void run_train(TrainFlags& f) {
  const std::unique_ptr<Communicator> comm = open_communicator({.timeout_seconds = f.collective_timeout});
  try {
    train_rank(f, *comm);
  } catch (const Error& e) {
    if (comm->world_size() == 1) throw;
    fmt::print(stderr, "error: rank {} of {}: {}\n", comm->rank(), comm->world_size(), e.what());
    std::fflush(stderr);
    comm->abort(1);
  }
}

}  // namespace

void add_train_command(CLI::App& app) {
  auto f = std::make_shared<TrainFlags>();
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
