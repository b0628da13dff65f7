#include "runtime/training_job.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <memory>

#include "backend/backend.h"
#include "core/error.h"
#include "dist/communicator.h"
#ifdef TOKENMILL_HAS_NCCL
#include "backend/cuda/nccl_collectives.h"
#endif
#include "measure/roofline.h"
#include "model/transformer.h"
#include "runtime/device_choice.h"
#include "runtime/generator.h"
#include "tokenizer/tokenizer.h"
#include "train/dataset_meta.h"

namespace tokenmill {

namespace {

std::string duration(double seconds) {
  const auto s = static_cast<int64_t>(seconds + 0.5);
  return s >= 60 ? fmt::format("{}m{:02}s", s / 60, s % 60) : fmt::format("{}s", s);
}

std::string step_line(const StepReport& r, Precision precision, int ranks) {
  return fmt::format(
      "step {:>5}/{} | loss {:.4f} | lr {:.2e} | grad norm {:.3f}{}{} | {:.0f} tok/s{} | {} elapsed, ETA {}",
      r.step, r.steps, r.loss, r.lr, r.grad_norm, r.applied ? "" : " (step skipped: non-finite)",
      precision == Precision::FP16 ? fmt::format(" | loss scale {}", r.loss_scale) : std::string(),
      r.tokens_per_second,
      ranks > 1 ? fmt::format(" ({:.0f} per rank, {:.0f}% in communication)", r.rank_tokens_per_second,
                              100.0 * r.communication_share)
                : std::string(),
      duration(r.elapsed_seconds), duration(r.eta_seconds));
}

// A seeded sample (temperature 0.8, top-k 40) of the model being trained.
std::string sample_text(const TrainingJob& job, const Tokenizer& tokenizer, int32_t eod, const Model& model,
                        Backend& backend, int64_t step) {
  Transformer transformer(model, backend, std::min<int64_t>(model.config.context_length(), 1024));
  GenerateRequest request;
  EncodeOptions plain;
  plain.add_special_tokens = false;
  request.prompt =
      job.sample_prompt.empty() ? std::vector<int32_t>{eod} : tokenizer.encode(job.sample_prompt, plain);
  request.max_new_tokens = std::min<int64_t>(
      job.sample_tokens, transformer.context() - static_cast<int64_t>(request.prompt.size()));
  request.sampling.temperature = 0.8f;
  request.sampling.top_k = 40;
  request.sampling.seed = job.options.seed + static_cast<uint64_t>(step);
  request.sampling.vocab_limit = tokenizer.vocab_size();  // never an id the tokenizer cannot decode
  request.ignore_eos = true;
  return job.sample_prompt + tokenizer.decode(generate(transformer, request).ids);
}

std::unique_ptr<Backend> open_training_device(const std::string& device, const LogFn& notes) {
  // Training makes its weights in the backend's memory itself (train/parameters.h), so there
  // is no model to place: the device is chosen for an empty one.
  Model no_weights;
  DeviceChoice choice = choose_device(device, no_weights);
  if (!choice.note.empty() && notes) notes(choice.note);
  return std::move(choice.backend);
}

// The backend of this rank: under a launcher, `cuda` (and `auto` when it chose a GPU) is the
// GPU of the local rank, so the ranks of one node take one GPU each.
std::unique_ptr<Backend> open_rank_device(const std::string& device, const Communicator& comm,
                                          const LogFn& notes) {
  if (comm.world_size() > 1 && device == "cuda")
    return open_training_device(fmt::format("cuda:{}", comm.local_rank()), notes);
  std::unique_ptr<Backend> backend = open_training_device(device, notes);
  if (comm.world_size() > 1 && device == "auto" && !backend->memory().is_host() && comm.local_rank() > 0)
    return open_training_device(fmt::format("cuda:{}", comm.local_rank()), notes);
  return backend;
}

// The options train() takes, from the job's fields.
void resolve_options(TrainingJob& job) {
  TrainOptions& o = job.options;
  if (!(job.bucket_mb > 0.0) || job.bucket_mb > 1e6)
    fail("--bucket-mb must be in (0, 1e6] MiB, got {}", job.bucket_mb);
  o.bucket_bytes = static_cast<int64_t>(job.bucket_mb * (1 << 20));
  o.data_dir = job.data;
  o.run_dir = job.out;
  o.from_model = job.from;
  o.schedule.decay = parse_lr_decay(job.lr_decay);
  o.precision = parse_precision(job.precision);
  o.schedule.min_lr = job.min_lr >= 0.0 ? job.min_lr : o.schedule.max_lr / 10.0;
  if (job.lora_rank != 0 || job.lora_flags_given) {
    if (job.lora_rank < 1) fail("--lora-rank must be >= 1 (LoRA's rank r), got {}", job.lora_rank);
    if (job.from.empty()) fail("--lora-rank needs --from MODEL_DIR: LoRA adapts a pretrained model");
    o.lora.rank = job.lora_rank;
    o.lora.alpha = job.lora_alpha != 0.0 ? job.lora_alpha : static_cast<double>(job.lora_rank);
    o.lora.targets = parse_lora_targets(job.lora_targets);
  }
}

// The peak for MFU: a short calibration, on the chosen backend, of the GEMM the run's
// matrices are multiplied with (measure/roofline.h).
double mfu_peak(Backend& backend, Precision precision, bool report, const LogFn& log) {
  CalibrationOptions calibration;
  calibration.gemm_weights = compute_dtype(precision);
  calibration.gemm_size = 512;
  calibration.read_bytes = uint64_t{16} << 20;
  calibration.min_seconds = 0.1;
  calibration.passes = 2;
  const double peak = measure_ceilings(backend, calibration).peak_flops;
  if (report)
    log(fmt::format("peak for MFU: {:.1f} GFLOP/s ({}-weight {}^3 GEMM, {} backend)", peak / 1e9,
                    dtype_name(calibration.gemm_weights), calibration.gemm_size, backend.name()));
  return peak;
}

TrainSummary train_rank(TrainingJob& job, const TrainingJobReport& report, const std::atomic<bool>* stop,
                        Communicator& comm) {
  resolve_options(job);
  TrainOptions& o = job.options;
  const DatasetMeta meta = read_dataset_meta(o.data_dir);
  const int32_t eod = meta.eod_token;
  if (job.from.empty()) {
    const int64_t kv_heads = job.kv_heads > 0 ? job.kv_heads : job.heads;
    o.scratch_config = scratch_llama_config(meta.vocab_size, job.layers, job.hidden, job.heads, kv_heads,
                                            job.ff > 0 ? job.ff : 4 * job.hidden,
                                            job.context > 0 ? job.context : o.seq_len, eod);
  }
  const Tokenizer tokenizer = Tokenizer::from_file(meta.tokenizer);
  const LogFn log = comm.is_root() && report.log ? report.log : LogFn([](std::string_view) {});
  const std::unique_ptr<Backend> backend = open_rank_device(job.device, comm, report.notes);
#ifdef TOKENMILL_HAS_NCCL
  // Gradients in a GPU's memory are summed by NCCL, not through the host.
  if (comm.world_size() > 1 && !backend->memory().is_host())
    comm.attach(cuda::make_nccl_collectives(*backend, comm, job.collective_timeout));
#endif
  // The device collectives use the backend: detached before it goes.
  struct Detach {
    Communicator& comm;
    ~Detach() { comm.attach(nullptr); }
  } detach{comm};
  o.peak_flops = mfu_peak(*backend, o.precision, comm.is_root(), log);
  TrainObserver observer;
  observer.on_info = log;
  observer.on_step = [&report, precision = o.precision, ranks = comm.world_size()](const StepReport& r) {
    if (report.on_step) report.on_step(r, step_line(r, precision, ranks));
  };
  observer.on_eval = [&report](const EvalReport& r) {
    if (report.on_eval)
      report.on_eval(r, fmt::format("eval step {:>5} | val loss {:.4f} | val perplexity {:.2f}", r.step,
                                    r.loss, r.perplexity));
  };
  // A sample shows how training goes; one that fails says so and never fails the run.
  observer.sample = [&](const Model& model, int64_t step) {
    try {
      const std::string text = sample_text(job, tokenizer, eod, model, *backend, step);
      log(fmt::format("sample at step {}:\n{}", step, text));
      return text;
    } catch (const Error& e) {
      log(fmt::format("sample at step {}: not drawn ({})", step, e.what()));
      return std::string();
    }
  };
  observer.on_checkpoint = [&log](const std::filesystem::path& p) {
    log(fmt::format("checkpoint: {}", p.string()));
  };
  if (report.on_start) report.on_start();
  return train(o, *backend, observer, stop, &comm);
}

}  // namespace

std::optional<TrainSummary> run_training_job(TrainingJob& job, const TrainingJobReport& report,
                                             const std::atomic<bool>* stop) {
  const std::unique_ptr<Communicator> comm = open_communicator({.timeout_seconds = job.collective_timeout});
  std::optional<TrainSummary> summary;
  try {
    summary = train_rank(job, report, stop, *comm);
  } catch (const Error& e) {
    if (comm->world_size() == 1) throw;
    fmt::print(stderr, "error: rank {} of {}: {}\n", comm->rank(), comm->world_size(), e.what());
    std::fflush(stderr);
    comm->abort(1);
  }
  if (!comm->is_root()) return std::nullopt;
  return summary;
}

std::vector<std::string> summary_lines(const TrainSummary& s, const TrainingJob& job) {
  std::vector<std::string> lines = {
      "== summary ==", fmt::format("parameters        {} ({} trained)", s.parameters, s.trainable_parameters),
      fmt::format("steps             {}..{}{}", s.first_step, s.last_step,
                  s.stopped_early ? " (stopped by signal)" : ""),
      fmt::format("tokens            {} in {} ({:.0f} tokens/s)", s.tokens, duration(s.seconds),
                  s.tokens_per_second)};
  if (s.first_eval)
    lines.push_back(fmt::format("val loss at start {:.4f} (perplexity {:.2f})", s.first_eval->loss,
                                s.first_eval->perplexity));
  if (s.last_eval)
    lines.push_back(fmt::format("val loss at end   {:.4f} (perplexity {:.2f})", s.last_eval->loss,
                                s.last_eval->perplexity));
  lines.push_back(fmt::format("checkpoint        {}", s.checkpoint.string()));
  lines.push_back(fmt::format("metrics           {}", (job.options.run_dir / "metrics.jsonl").string()));
  lines.push_back(fmt::format("loss curve        {}", (job.options.run_dir / "loss.svg").string()));
  return lines;
}

}  // namespace tokenmill
