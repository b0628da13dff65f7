#include "train/trainer.h"

#include <array>
#include <chrono>
#include <cmath>
#include <fstream>

#include "core/absolute_path.h"
#include "core/atomic_file.h"
#include "core/error.h"
#include "core/json_file.h"
#include "measure/flops.h"
#include "model/model.h"
#include "model/training_pass.h"
#include "model/weight_placement.h"
#include "train/checkpoint.h"
#include "train/compute_weights.h"
#include "train/data_loader.h"
#include "train/data_parallel.h"
#include "train/dataset_meta.h"
#include "train/lora_parameters.h"
#include "train/loss_curve.h"
#include "train/loss_scaler.h"
#include "train/parameters.h"
#include "train/resume_check.h"
#include "train/step_batch.h"
#include "train/zero.h"

namespace tokenmill {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

void validate(const TrainOptions& o) {
  if (o.batch < 1 || o.seq_len < 1 || o.grad_accum < 1 || o.steps < 1)
    fail("--batch, --seq-len, --grad-accum and --steps must be >= 1");
  if (o.eval_every < 0 || o.eval_batches < 1 || o.sample_every < 0 || o.checkpoint_every < 0)
    fail("--eval-every, --sample-every and --checkpoint-every must be >= 0; --eval-batches >= 1");
  if (!(o.checkpoint_minutes >= 0.0) || !std::isfinite(o.checkpoint_minutes))
    fail("--checkpoint-minutes must be a number >= 0 (0: no checkpoints by time), got {}",
         o.checkpoint_minutes);
  if (o.keep_checkpoints < 1) fail("--keep-checkpoints must be >= 1, got {}", o.keep_checkpoints);
  LrSchedule s = o.schedule;
  s.total_steps = o.steps;
  s.validate();
  o.adamw.validate();
  if (o.precision == Precision::FP16 &&
      (!(o.initial_loss_scale > 0.0) || !std::isfinite(o.initial_loss_scale) ||
       o.loss_scale_growth_interval < 1))
    fail(
        "--initial-loss-scale must be a positive number and --loss-scale-growth-interval >= 1, got {} and {}",
        o.initial_loss_scale, o.loss_scale_growth_interval);
  if (o.bucket_bytes < 1) fail("--bucket-mb must be positive");
  if (o.zero_stage != 0 && o.zero_stage != 1)
    fail("--zero must be 0 (every rank holds the AdamW state) or 1 (each rank a part), got {}", o.zero_stage);
  if (o.lora.enabled() && o.from_model.empty())
    fail(
        "--lora-rank needs --from MODEL_DIR: LoRA adapts a pretrained model, it does not train from scratch");
}

// The checkpoint's "lora" object of a run: null for full training.
nlohmann::json lora_json(const TrainOptions& o) {
  if (!o.lora.enabled()) return nullptr;
  return {{"rank", o.lora.rank},
          {"alpha", o.lora.alpha},
          {"targets", o.lora.targets_string()},
          {"base_model", absolute_path(o.from_model)}};
}

// Keeps the metrics lines of steps <= `step` (a resumed run rewrites what came after).
void truncate_metrics(const std::filesystem::path& path, int64_t step) {
  std::ifstream in(path);
  if (!in) return;
  std::string kept, line;
  while (std::getline(in, line)) {
    const auto j = nlohmann::json::parse(line, nullptr, false);
    if (!j.is_discarded() && j.value("step", int64_t{0}) <= step) kept += line + "\n";
  }
  AtomicFile file(path);
  file.write(kept.data(), kept.size());
  file.commit();
}

// The Error of a step whose loss or gradients are not finite (see "Divergence" in trainer.h).
[[noreturn]] void fail_diverged(const TrainOptions& o, int64_t step, double loss, double lr,
                                double loss_scale, bool applied) {
  const std::string what = std::isfinite(loss)
                               ? fmt::format("the gradients are not finite (loss {:.4f})", loss)
                               : fmt::format("the loss is {}", loss);
  if (o.precision == Precision::FP16)
    fail(
        "step {}: {} at loss scale {}: fp16 overflows (beyond 65504) or training diverged. Train with "
        "--precision bf16 or fp32, or lower --lr (now {:.3g}); --resume continues from the last checkpoint",
        step, what, loss_scale, lr);
  fail(
      "step {}: {}: training diverged ({}). Lower --lr (now {:.3g}), lengthen --warmup-steps (now {}) or "
      "clip with --max-grad-norm (now {}), then --resume from the last checkpoint",
      step, what, applied ? "its finite gradients were applied" : "this step was not applied", lr,
      o.schedule.warmup_steps, o.adamw.max_grad_norm);
}

class Run {
 public:
  Run(const TrainOptions& o, Backend& backend, const TrainObserver& obs, Communicator& comm)
      : o_(o), backend_(backend), obs_(obs), comm_(comm) {}
  TrainSummary go(const std::atomic<bool>* stop);

 private:
  bool root() const { return comm_.is_root(); }
  bool zero() const { return o_.zero_stage == 1; }
  // The AdamW moments this rank holds: its ZeRO-1 part, or all of them.
  MomentShard moment_shard() const { return zero() ? zero_shard(comm_) : MomentShard{}; }
  // Every rank's gradients summed (DDP: all of them; ZeRO-1: this rank's part), then the
  // optimizer step, then (ZeRO-1) every rank's updated part gathered. Adds the time spent in
  // the gradients' and weights' collectives to `communication_seconds`.
  AdamWOptimizer::StepResult synchronized_step(int64_t step, double lr, double loss_scale,
                                               double& communication_seconds);
  void info(const std::string& line) const {
    if (root() && obs_.on_info) obs_.on_info(line);
  }
  // The weights (and on resume the AdamW state) of rank 0 on every rank.
  void broadcast_state(bool with_moments);
  // The micro-batches of this rank's share of the step, and their weighted losses summed.
  double rank_forward_backward(const StepBatch& batch, double loss_scale);
  // go()'s parts, in order: the loaders; the run directory (rank 0) and its stale
  // temporaries; the checkpoint to resume (returns the first step: 1 on a fresh run); the
  // run's description; each step (forward/backward, the synchronized optimizer step, the
  // metrics line and report; Error on divergence) and what follows it (evaluation, samples,
  // the agreed stop and checkpoint decisions; true when a stop ends the run early).
  void open_data();
  void prepare_run_dir();
  int64_t resume();
  void describe(const TrainSummary& summary);
  StepReport step(int64_t step, StepBatch& batch);
  bool finish_step(int64_t step, TrainSummary& summary, const std::atomic<bool>* stop);
  void setup_model();
  // --router-aux-loss: into the model's configuration (and so into its checkpoints).
  void apply_router_aux_loss();
  // The base model with the adapter merged, in the backend's memory (LoRA samples).
  ModelWeights merged_model() const;
  EvalReport evaluate(int64_t step);
  std::string sample(int64_t step);
  void metrics(const nlohmann::json& line) {
    if (!root()) return;
    metrics_ << line.dump() << "\n";
    metrics_.flush();
  }
  std::filesystem::path checkpoint(int64_t step);
  // The weights the forward and backward multiply with: the compute copy under bf16 / fp16.
  const ModelWeights& compute_model() const {
    if (compute_) return compute_->weights();
    return adapter_ ? base_->weights : params_->weights();
  }
  // One micro-batch's forward + backward, or the loss alone, of the model or the adapter.
  double forward_backward(std::span<const int32_t> in, std::span<const int32_t> tgt, float scale) {
    if (adapter_) {
      return pass_->forward_backward(compute_model(), adapter_->weights(), adapter_->grads(), in, tgt, scale)
          .loss;
    }
    return pass_->forward_backward(compute_model(), params_->grads(), in, tgt, scale).loss;
  }
  double evaluate_loss(std::span<const int32_t> in, std::span<const int32_t> tgt) {
    return pass_->evaluate(compute_model(), in, tgt, adapter_ ? &adapter_->weights() : nullptr).loss;
  }
  void setup_precision();

  const TrainOptions& o_;
  Backend& backend_;
  const TrainObserver& obs_;
  Communicator& comm_;
  nlohmann::json model_config_json_;
  std::unique_ptr<Model> model_;             // config and the weights samples are drawn from
  std::unique_ptr<ParameterSet> params_;     // full training
  std::unique_ptr<Model> base_;              // LoRA: the frozen pretrained model, placed
  ModelWeights host_base_;                   // LoRA: views of its weights in host memory
  std::unique_ptr<LoraParameters> adapter_;  // LoRA: the trained adapter
  ParameterBuffers* trainable_ = nullptr;    // params_ or adapter_
  std::unique_ptr<DataLoader> train_, val_;
  std::unique_ptr<TrainingPass> pass_;
  std::unique_ptr<AdamWOptimizer> optimizer_;
  std::unique_ptr<ComputeWeights> compute_;  // bf16 / fp16: the matrices' compute copy
  LossScaler scaler_;                        // fp16: the dynamic loss scale
  std::ofstream metrics_;
  std::vector<LossPoint> train_curve_, val_curve_;
  int64_t tokens_ = 0;
  LrSchedule schedule_;
  double flops_per_sequence_ = 0.0;  // of the model (and adapter) per trained sequence
  int64_t first_step_ = 1;
  Clock::time_point start_ = Clock::now();            // of the steps
  Clock::time_point last_checkpoint_ = Clock::now();  // or the run's start
};

void Run::setup_model() {
  model_ = std::make_unique<Model>();
  if (!o_.from_model.empty()) {
    std::unique_ptr<Model> loaded = Model::load(o_.from_model);
    model_config_json_ = read_json_file(o_.from_model / "config.json");
    model_->config = loaded->config;
    if (o_.lora.enabled()) {
      adapter_ = std::make_unique<LoraParameters>(loaded->config, o_.lora, &backend_, moment_shard());
      adapter_->init(o_.seed);
      base_ = std::move(loaded);
      host_base_ = view_weights(base_->weights);
      place_weights(base_->weights, backend_.memory());
      trainable_ = adapter_.get();
      return;  // samples merge the adapter when they are drawn
    }
    params_ = std::make_unique<ParameterSet>(loaded->config, &backend_, moment_shard());
    params_->load(loaded->weights);
  } else {
    model_config_json_ = o_.scratch_config;
    model_->config = parse_model_config(model_config_json_, "the training model configuration");
    params_ = std::make_unique<ParameterSet>(model_->config, &backend_, moment_shard());
    params_->init_gpt2(o_.seed);
  }
  trainable_ = params_.get();
  model_->weights = view_weights(params_->weights());
}

void Run::apply_router_aux_loss() {
  if (!o_.router_aux_loss) return;
  const double coef = *o_.router_aux_loss;
  if (!model_->config.mixture_of_experts())
    fail("--router-aux-loss: {} is not a mixture of experts (it has no router to balance)",
         model_->config.architecture);
  if (!(coef >= 0.0) || !std::isfinite(coef)) fail("--router-aux-loss must be finite and >= 0, got {}", coef);
  model_config_json_["output_router_logits"] = coef > 0.0;
  model_config_json_["router_aux_loss_coef"] = coef;
  model_->config.router_aux_loss_coef = coef;
}

void Run::setup_precision() {
  if (o_.precision == Precision::FP32) return;
  compute_ = std::make_unique<ComputeWeights>(adapter_ ? base_->weights : params_->weights(),
                                              compute_dtype(o_.precision), backend_);
  info(fmt::format("precision: {} matrices ({:.1f} MB {}), FP32 master weights, gradients and AdamW state{}",
                   precision_name(o_.precision), static_cast<double>(compute_->bytes()) / 1e6,
                   adapter_ ? "rounded once from the frozen model" : "rounded after every step",
                   o_.precision == Precision::FP16
                       ? fmt::format("; dynamic loss scale from {}", scaler_.scale())
                       : std::string()));
}

EvalReport Run::evaluate(int64_t step) {
  val_->restore({0, 0});
  const int64_t batches = std::min(o_.eval_batches, (val_->windows_per_epoch() + o_.batch - 1) / o_.batch);
  std::vector<int32_t> in(static_cast<size_t>(o_.batch * o_.seq_len)), tgt(in.size());
  double total = 0.0;
  for (int64_t b = 0; b < batches; ++b) {  // batch b is rank b mod world_size's
    val_->next_batch(o_.batch, in, tgt);
    if (b % comm_.world_size() == comm_.rank()) total += evaluate_loss(in, tgt);
  }
  comm_.all_reduce_sum(std::span(&total, 1), fmt::format("the validation losses of step {}", step));
  EvalReport r{step, total / static_cast<double>(batches), 0.0};
  r.perplexity = std::exp(r.loss);
  val_curve_.push_back({step, r.loss});
  metrics({{"step", step}, {"val_loss", r.loss}, {"val_perplexity", r.perplexity}});
  if (root() && obs_.on_eval) obs_.on_eval(r);
  return r;
}

ModelWeights Run::merged_model() const {
  if (adapter_->memory().is_host()) return merge_lora(model_->config, host_base_, adapter_->weights());
  // merge_lora reads the adapter on the host: merge a host copy, then place the result.
  LoraParameters host_adapter(model_->config, o_.lora);
  adapter_->download(adapter_->values(), host_adapter.values());
  ModelWeights merged = merge_lora(model_->config, host_base_, host_adapter.weights());
  place_weights(merged, backend_.memory());
  return merged;
}

std::string Run::sample(int64_t step) {
  if (!root() || !obs_.sample) return {};
  if (adapter_) model_->weights = merged_model();
  std::string text = obs_.sample(*model_, step);
  if (adapter_) model_->weights = ModelWeights();  // frees a placed copy until the next sample
  return text;
}

std::filesystem::path Run::checkpoint(int64_t step) {
  check_replicas_agree(*trainable_, comm_, fmt::format("the weights at step {}", step));
  std::filesystem::path path;
  if (root()) {
    CheckpointState state;
    state.step = step;
    state.tokens = tokens_;
    state.optimizer_steps = optimizer_->steps_taken();
    state.loader = train_->position();
    state.model_config = model_config_json_;
    state.options = o_.to_json(comm_.world_size());
    state.lora = lora_json(o_);
    state.loss_scale = scaler_.scale();
    state.scaler_growth_tracker = scaler_.growth_tracker();
    MomentSource moments;
    if (zero())
      moments = [this](int which, const std::function<void(std::span<const float>)>& write) {
        gather_moments(*trainable_, comm_, which, o_.bucket_bytes, &write);
      };
    path = save_checkpoint(o_.run_dir / "checkpoints", state, *trainable_, o_.keep_checkpoints, moments);
    write_loss_curve(o_.run_dir / "loss.svg", train_curve_, val_curve_);
    if (obs_.on_checkpoint) obs_.on_checkpoint(path);
  } else if (zero()) {  // rank 0's save gathers the moments: every rank takes part
    for (const int which : {0, 1}) gather_moments(*trainable_, comm_, which, o_.bucket_bytes, nullptr);
  }
  // No rank runs ahead of a checkpoint that is not complete.
  comm_.barrier(fmt::format("the checkpoint of step {}", step));
  last_checkpoint_ = Clock::now();
  return path;
}

AdamWOptimizer::StepResult Run::synchronized_step(int64_t step, double lr, double loss_scale,
                                                  double& communication_seconds) {
  const std::string what = fmt::format("step {}", step);
  auto start = Clock::now();
  if (zero())
    reduce_scatter_gradients(*trainable_, comm_, o_.bucket_bytes, "the gradients of " + what);
  else
    sum_gradients(*trainable_, comm_, o_.bucket_bytes, "the gradients of " + what);
  communication_seconds += seconds_since(start);
  const AdamWOptimizer::StepResult r = optimizer_->step(*trainable_, backend_, lr, loss_scale, &comm_);
  if (zero() && r.applied) {
    start = Clock::now();
    all_gather_values(*trainable_, comm_, o_.bucket_bytes, "the weights of " + what);
    communication_seconds += seconds_since(start);
  }
  return r;
}

void Run::broadcast_state(bool with_moments) {
  if (comm_.world_size() == 1) return;
  broadcast_from_root(*trainable_, trainable_->values(), comm_, o_.bucket_bytes, "the initial weights");
  if (!with_moments || zero()) return;  // ZeRO-1: each rank read its own part
  broadcast_from_root(*trainable_, trainable_->first_moments(), comm_, o_.bucket_bytes, "the AdamW state");
  broadcast_from_root(*trainable_, trainable_->second_moments(), comm_, o_.bucket_bytes, "the AdamW state");
}

double Run::rank_forward_backward(const StepBatch& batch, double loss_scale) {
  // Each micro-batch's weight is its share of every target the global step scores
  // (train/step_batch.h).
  double loss = 0.0;
  for (int64_t micro = comm_.rank() * o_.grad_accum; micro < (comm_.rank() + 1) * o_.grad_accum; ++micro) {
    const double weight = batch.weight(micro);
    loss += weight * forward_backward(batch.inputs(micro), batch.targets(micro),
                                      static_cast<float>(loss_scale * weight));
  }
  return loss;
}

void Run::open_data() {
  const DatasetMeta meta = read_dataset_meta(o_.data_dir);
  train_ = std::make_unique<DataLoader>(meta.train_shards, o_.seq_len, true, o_.seed);
  if (o_.eval_every > 0) {  // without evaluation, a dataset needs no validation split
    const std::vector<std::filesystem::path>& val_shards = meta.val_shards;
    if (val_shards.empty())
      fail(
          "{}: the dataset has no validation data (prepared with --val-fraction 0): train with "
          "--eval-every 0, or prepare it with --val-fraction above 0",
          o_.data_dir.string());
    val_ = std::make_unique<DataLoader>(val_shards, o_.seq_len, false, o_.seed);
  }
}

void Run::prepare_run_dir() {
  if (root()) {
    std::error_code ec;
    std::filesystem::create_directories(o_.run_dir, ec);
    if (ec) fail("{}: cannot create the run directory ({})", o_.run_dir.string(), ec.message());
    check_checkpoint_dir(o_.run_dir / "checkpoints");  // now, not at the first save
    for (const auto& stale : remove_stale_temporaries(o_.run_dir / "checkpoints"))
      info(fmt::format("removed {}, left by a checkpoint save that did not finish", stale.string()));
  }
  comm_.barrier("the run directory's preparation");
}

int64_t Run::resume() {
  const auto metrics_path = o_.run_dir / "metrics.jsonl";
  if (!o_.resume) {
    std::error_code ec;
    if (root()) std::filesystem::remove(metrics_path, ec);
    return 1;
  }
  const auto latest = newest_valid_checkpoint(
      o_.run_dir / "checkpoints", [this](const std::filesystem::path& path, const std::string& why) {
        info(fmt::format("warning: skipping checkpoint {}: {}", path.string(), why));
      });
  if (latest.empty())
    fail("--resume: no checkpoint that verifies in {}", (o_.run_dir / "checkpoints").string());
  const CheckpointState header = read_checkpoint_state(latest);
  if (header.lora != lora_json(o_))
    fail("{}: the checkpoint is {} but this run is {}: resume with the run's own --from and --lora-* flags",
         latest.string(), header.lora.is_null() ? "a full model" : "the LoRA adapter " + header.lora.dump(),
         o_.lora.enabled() ? "the LoRA adapter " + lora_json(o_).dump() : "a full model");
  const CheckpointState state = load_checkpoint(latest, *trainable_);
  if (state.model_config != model_config_json_)
    fail("{}: the checkpoint is of another model configuration than this run's", latest.string());
  check_resume_options(latest, state.step, state.options, o_.to_json(comm_.world_size()));
  optimizer_->restore(state.optimizer_steps);
  const std::string saved_precision = state.options.value("precision", "fp32");
  if (saved_precision != precision_name(o_.precision))
    info(fmt::format("the checkpoint's run trained in {}; this one continues in {} (--precision)",
                     saved_precision, precision_name(o_.precision)));
  // The scale carries over between fp16 runs; the growth count up to this run's interval.
  if (o_.precision == Precision::FP16 && saved_precision == "fp16")
    scaler_.restore(state.loss_scale,
                    std::min(state.scaler_growth_tracker, o_.loss_scale_growth_interval - 1));
  train_->restore(state.loader);
  tokens_ = state.tokens;
  if (root()) {
    truncate_metrics(metrics_path, state.step);
    LossCurves history = read_loss_curves(metrics_path);  // loss.svg draws the whole run
    train_curve_ = std::move(history.train);
    val_curve_ = std::move(history.val);
  }
  info(fmt::format("resumed from {} (step {}; saved by {} rank(s))", latest.string(), state.step,
                   state.options.value("world_size", 1)));
  return state.step + 1;
}

void Run::describe(const TrainSummary& summary) {
  const ModelConfig& config = model_->config;
  info(fmt::format(
      "model: {} parameters, {} layers, hidden {}, vocab {}; data: {} train windows of {} tokens; "
      "activations {:.1f} MB{}",
      summary.parameters, config.num_hidden_layers, config.hidden_size, config.vocab_size,
      train_->windows_per_epoch(), o_.seq_len, static_cast<double>(pass_->activation_bytes()) / 1e6,
      o_.recompute_activations ? " (recomputed layer by layer in the backward)" : ""));
  info(
      o_.lora.enabled()
          ? fmt::format("trainable: {} parameters ({:.3f}% of the model): LoRA rank {}, alpha {}, targets {}",
                        summary.trainable_parameters,
                        100.0 * static_cast<double>(summary.trainable_parameters) /
                            static_cast<double>(summary.parameters),
                        o_.lora.rank, o_.lora.alpha, o_.lora.targets_string())
          : fmt::format("trainable: {} parameters (all)", summary.trainable_parameters));
  info(fmt::format(
      "global batch: {} sequences of {} tokens per step (--batch {} x --grad-accum {} x {} rank(s)){}",
      o_.batch * o_.grad_accum * comm_.world_size(), o_.seq_len, o_.batch, o_.grad_accum, comm_.world_size(),
      comm_.world_size() > 1
          ? fmt::format("; data parallel over {}, gradients summed in buckets of {:.1f} MiB{}",
                        comm_.describe(), static_cast<double>(o_.bucket_bytes) / (1 << 20),
                        device_collectives_for(*trainable_, comm_) != nullptr
                            ? " by " + comm_.device()->describe()
                            : std::string())
          : std::string()));
  if (zero())
    info(fmt::format(
        "ZeRO-1: this rank holds the AdamW state of parameters [{}, {}): {:.1f} MB of the whole {:.1f} MB; "
        "gradients reduce-scattered and weights all-gathered {}",
        trainable_->moments_begin(), trainable_->moments_end(),
        8e-6 * static_cast<double>(trainable_->moments_end() - trainable_->moments_begin()),
        8e-6 * static_cast<double>(trainable_->count()),
        device_collectives_for(*trainable_, comm_) != nullptr ? "by " + comm_.device()->describe()
                                                              : "over " + comm_.describe()));
  if (!o_.resume)
    metrics({{"step", 0},
             {"parameters", summary.parameters},
             {"trainable_parameters", summary.trainable_parameters}});
}

StepReport Run::step(int64_t step, StepBatch& batch) {
  const auto step_start = Clock::now();
  trainable_->zero_grads();
  const double loss_scale = scaler_.scale();
  batch.fill(*train_);
  double loss = rank_forward_backward(batch, loss_scale);
  const double lr = schedule_.at(step);
  double communication_seconds = 0.0;
  const AdamWOptimizer::StepResult r = synchronized_step(step, lr, loss_scale, communication_seconds);
  // The step's loss: the sum of the ranks' weighted losses.
  const auto loss_start = Clock::now();
  comm_.all_reduce_sum(std::span(&loss, 1), fmt::format("the loss of step {}", step));
  communication_seconds += seconds_since(loss_start);
  scaler_.update(!r.applied);
  if (r.applied && compute_ && !adapter_) compute_->refresh();
  const int64_t step_tokens = o_.grad_accum * o_.batch * o_.seq_len * comm_.world_size();
  tokens_ += step_tokens;
  StepReport report;
  report.step = step;
  report.steps = o_.steps;
  report.loss = loss;
  report.lr = lr;
  report.grad_norm = r.grad_norm;
  report.elapsed_seconds = seconds_since(start_);
  report.applied = r.applied;
  report.loss_scale = loss_scale;
  const double step_seconds = seconds_since(step_start);
  report.tokens_per_second = static_cast<double>(step_tokens) / step_seconds;
  report.rank_tokens_per_second = report.tokens_per_second / comm_.world_size();
  report.communication_share = communication_seconds / step_seconds;
  // This rank's flops against this rank's device.
  if (o_.peak_flops > 0.0)
    report.mfu = mfu(flops_per_sequence_ * static_cast<double>(o_.grad_accum * o_.batch) / step_seconds,
                     o_.peak_flops);
  report.eta_seconds = report.elapsed_seconds / static_cast<double>(step - first_step_ + 1) *
                       static_cast<double>(o_.steps - step);
  train_curve_.push_back({step, loss});
  nlohmann::json line = {{"step", step},
                         {"loss", loss},
                         {"lr", lr},
                         {"grad_norm", r.grad_norm},
                         {"applied", r.applied},
                         {"tokens", tokens_},
                         {"tokens_per_s", report.tokens_per_second}};
  if (o_.precision == Precision::FP16) line["loss_scale"] = loss_scale;
  if (comm_.world_size() > 1) {
    line["rank_tokens_per_s"] = report.rank_tokens_per_second;
    line["communication_share"] = report.communication_share;
  }
  metrics(line);
  if (root() && obs_.on_step) obs_.on_step(report);
  // fp16: overflowing gradients are the loss scaler's to handle, down to a scale of 1; a
  // non-finite loss is not (the scale does not enter the forward pass).
  const bool diverged =
      !std::isfinite(loss) || (!r.applied && (o_.precision != Precision::FP16 || loss_scale <= 1.0));
  if (diverged) fail_diverged(o_, step, loss, lr, loss_scale, r.applied);
  return report;
}

bool Run::finish_step(int64_t step, TrainSummary& summary, const std::atomic<bool>* stop) {
  const bool last = step == o_.steps;
  if (o_.eval_every > 0 && (step % o_.eval_every == 0 || last)) summary.last_eval = evaluate(step);
  if (o_.sample_every > 0 && step % o_.sample_every == 0 && !last) sample(step);
  // Agreed by every rank: a stop raised on any rank, and rank 0's clock for checkpoints by time.
  const bool due_by_time = root() && o_.checkpoint_minutes > 0.0 &&
                           seconds_since(last_checkpoint_) >= 60.0 * o_.checkpoint_minutes;
  std::array<double, 2> agreed = {stop != nullptr && stop->load() ? 1.0 : 0.0, due_by_time ? 1.0 : 0.0};
  comm_.all_reduce_sum(agreed, fmt::format("the stop and checkpoint flags of step {}", step));
  const bool stopping = agreed[0] > 0.0;
  const bool checkpoint_due = (o_.checkpoint_every > 0 && step % o_.checkpoint_every == 0) || agreed[1] > 0.0;
  if (last || stopping || checkpoint_due) summary.checkpoint = checkpoint(step);
  return stopping && !last;
}

TrainSummary Run::go(const std::atomic<bool>* stop) {
  validate(o_);
  open_data();
  setup_model();
  apply_router_aux_loss();
  const ModelConfig& config = model_->config;
  if (train_->vocab_size() > config.vocab_size)
    fail(
        "{}: the data's vocabulary ({}) is larger than the model's ({}): prepare it with the model's "
        "tokenizer",
        o_.data_dir.string(), train_->vocab_size(), config.vocab_size);
  pass_ = std::make_unique<TrainingPass>(
      config, backend_, o_.batch, o_.seq_len, o_.lora,
      o_.recompute_activations ? TrainingPass::Activations::Recomputed : TrainingPass::Activations::Kept);
  optimizer_ = std::make_unique<AdamWOptimizer>(o_.adamw);
  scaler_ = LossScaler({.enabled = o_.precision == Precision::FP16,
                        .init_scale = o_.initial_loss_scale,
                        .growth_interval = o_.loss_scale_growth_interval});
  prepare_run_dir();
  first_step_ = resume();
  broadcast_state(o_.resume);
  setup_precision();
  if (root()) {
    const auto metrics_path = o_.run_dir / "metrics.jsonl";
    metrics_.open(metrics_path, std::ios::app);
    if (!metrics_) fail("{}: cannot open for writing", metrics_path.string());
  }
  TrainSummary summary;
  summary.parameters = parameter_count(config);
  summary.trainable_parameters = trainable_->count();
  describe(summary);

  schedule_ = o_.schedule;
  schedule_.total_steps = o_.steps;
  // LoRA: no gradient of the frozen matrices (2 N of the 6 N per token), plus the adapter's
  // own matmuls (6 per trainable parameter and token).
  flops_per_sequence_ = training_flops(config, o_.seq_len) +
                        (o_.lora.enabled() ? static_cast<double>(o_.seq_len) *
                                                 (6.0 * static_cast<double>(trainable_->count()) -
                                                  2.0 * static_cast<double>(matmul_parameters(config)))
                                           : 0.0);
  summary.first_step = first_step_;
  if (o_.eval_every > 0 && first_step_ == 1) summary.first_eval = evaluate(0);
  StepBatch batch(o_.grad_accum * comm_.world_size(), o_.batch, o_.seq_len);
  start_ = last_checkpoint_ = Clock::now();
  const int64_t tokens_before = tokens_;
  int64_t step = first_step_;
  for (; step <= o_.steps; ++step) {
    this->step(step, batch);
    if (finish_step(step, summary, stop)) {
      summary.stopped_early = true;
      break;
    }
  }
  summary.last_step = std::min(step, o_.steps);
  summary.tokens = tokens_ - tokens_before;
  summary.seconds = seconds_since(start_);
  summary.tokens_per_second =
      summary.seconds > 0 ? static_cast<double>(summary.tokens) / summary.seconds : 0.0;
  if (!summary.stopped_early) summary.final_sample = sample(summary.last_step);
  return summary;
}

}  // namespace

nlohmann::json TrainOptions::to_json(int world_size) const {
  return {{"data_dir", absolute_path(data_dir)},
          {"from_model", absolute_path(from_model)},
          {"batch", batch},
          {"seq_len", seq_len},
          {"grad_accum", grad_accum},
          {"world_size", world_size},
          {"global_batch", batch * grad_accum * world_size},
          {"zero_stage", zero_stage},
          {"steps", steps},
          {"lr", schedule.max_lr},
          {"min_lr", schedule.min_lr},
          {"warmup_steps", schedule.warmup_steps},
          {"lr_decay", lr_decay_name(schedule.decay)},
          {"beta1", adamw.beta1},
          {"beta2", adamw.beta2},
          {"weight_decay", adamw.weight_decay},
          {"adam_eps", adamw.eps},
          {"max_grad_norm", adamw.max_grad_norm},
          {"seed", seed},
          {"lora_rank", lora.rank},
          {"lora_alpha", lora.alpha},
          {"lora_targets", lora.targets_string()},
          {"recompute_activations", recompute_activations},
          {"precision", precision_name(precision)},
          {"initial_loss_scale", initial_loss_scale},
          {"loss_scale_growth_interval", loss_scale_growth_interval}};
}

TrainSummary train(const TrainOptions& options, Backend& backend, const TrainObserver& observer,
                   const std::atomic<bool>* stop, Communicator* comm) {
  std::unique_ptr<Communicator> single;
  if (comm == nullptr) single = single_process_communicator();
  Run run(options, backend, observer, comm != nullptr ? *comm : *single);
  return run.go(stop);
}

nlohmann::json scratch_llama_config(int64_t vocab, int64_t layers, int64_t hidden, int64_t heads,
                                    int64_t kv_heads, int64_t intermediate, int64_t context,
                                    int32_t eod_token) {
  return {{"architectures", {"LlamaForCausalLM"}},
          {"model_type", "llama"},
          {"vocab_size", vocab},
          {"hidden_size", hidden},
          {"intermediate_size", intermediate},
          {"num_hidden_layers", layers},
          {"num_attention_heads", heads},
          {"num_key_value_heads", kv_heads},
          {"max_position_embeddings", context},
          {"rms_norm_eps", 1e-5},
          {"rope_theta", 10000.0},
          {"hidden_act", "silu"},
          {"tie_word_embeddings", true},
          {"bos_token_id", eod_token},
          {"eos_token_id", eod_token},
          {"torch_dtype", "float32"}};
}

}  // namespace tokenmill
