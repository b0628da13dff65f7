// tokenmill._native.train and export: `tokenmill train` and `tokenmill export` as calls
// (runtime/training_job.h, train/export.h). The options are the CLI's flags, with
// underscores; the table below is the one list of them. Training runs with the GIL released;
// Ctrl-C, a callback returning False or raising ends it after the current step, with a
// checkpoint, and the exception (KeyboardInterrupt, the callback's) is raised afterwards.
#include <pybind11/functional.h>
#include <pybind11/stl.h>

#include <atomic>
#include <functional>
#include <map>
#include <optional>

#include "bindings.h"
#include "core/error.h"
#include "runtime/training_job.h"
#include "train/export.h"

namespace tokenmill::python {

namespace {

using Setter = std::function<void(TrainingJob&, const py::handle&)>;

template <class T>
Setter field(T TrainingJob::*member) {
  return [member](TrainingJob& job, const py::handle& value) { job.*member = value.cast<T>(); };
}
template <class T>
Setter option(T TrainOptions::*member) {
  return [member](TrainingJob& job, const py::handle& value) { job.options.*member = value.cast<T>(); };
}

// Each option by its name (the CLI flag's, with underscores; from_model is --from).
const std::map<std::string, Setter>& setters() {
  static const std::map<std::string, Setter> table = {
      {"from_model", field(&TrainingJob::from)},
      {"device", field(&TrainingJob::device)},
      {"layers", field(&TrainingJob::layers)},
      {"hidden", field(&TrainingJob::hidden)},
      {"heads", field(&TrainingJob::heads)},
      {"kv_heads", field(&TrainingJob::kv_heads)},
      {"ff", field(&TrainingJob::ff)},
      {"context", field(&TrainingJob::context)},
      {"batch", option(&TrainOptions::batch)},
      {"seq_len", option(&TrainOptions::seq_len)},
      {"grad_accum", option(&TrainOptions::grad_accum)},
      {"steps", option(&TrainOptions::steps)},
      {"lr", [](TrainingJob& j, const py::handle& v) { j.options.schedule.max_lr = v.cast<double>(); }},
      {"min_lr", field(&TrainingJob::min_lr)},
      {"warmup_steps",
       [](TrainingJob& j, const py::handle& v) { j.options.schedule.warmup_steps = v.cast<int64_t>(); }},
      {"lr_decay", field(&TrainingJob::lr_decay)},
      {"weight_decay",
       [](TrainingJob& j, const py::handle& v) { j.options.adamw.weight_decay = v.cast<double>(); }},
      {"beta1", [](TrainingJob& j, const py::handle& v) { j.options.adamw.beta1 = v.cast<double>(); }},
      {"beta2", [](TrainingJob& j, const py::handle& v) { j.options.adamw.beta2 = v.cast<double>(); }},
      {"adam_eps", [](TrainingJob& j, const py::handle& v) { j.options.adamw.eps = v.cast<double>(); }},
      {"max_grad_norm",
       [](TrainingJob& j, const py::handle& v) { j.options.adamw.max_grad_norm = v.cast<double>(); }},
      {"seed", option(&TrainOptions::seed)},
      {"eval_every", option(&TrainOptions::eval_every)},
      {"eval_batches", option(&TrainOptions::eval_batches)},
      {"sample_every", option(&TrainOptions::sample_every)},
      {"sample_tokens", field(&TrainingJob::sample_tokens)},
      {"sample_prompt", field(&TrainingJob::sample_prompt)},
      {"checkpoint_every", option(&TrainOptions::checkpoint_every)},
      {"checkpoint_minutes", option(&TrainOptions::checkpoint_minutes)},
      {"keep_checkpoints", option(&TrainOptions::keep_checkpoints)},
      {"resume", option(&TrainOptions::resume)},
      {"recompute_activations", option(&TrainOptions::recompute_activations)},
      {"precision", field(&TrainingJob::precision)},
      {"initial_loss_scale", option(&TrainOptions::initial_loss_scale)},
      {"loss_scale_growth_interval", option(&TrainOptions::loss_scale_growth_interval)},
      {"bucket_mb", field(&TrainingJob::bucket_mb)},
      {"zero", option(&TrainOptions::zero_stage)},
      {"collective_timeout", field(&TrainingJob::collective_timeout)},
      {"router_aux_loss",
       [](TrainingJob& j, const py::handle& v) { j.options.router_aux_loss = v.cast<double>(); }},
      {"lora_rank", field(&TrainingJob::lora_rank)},
      {"lora_alpha",
       [](TrainingJob& j, const py::handle& v) {
         j.lora_alpha = v.cast<double>();
         j.lora_flags_given = true;
       }},
      {"lora_targets",
       [](TrainingJob& j, const py::handle& v) {
         j.lora_targets = v.cast<std::string>();
         j.lora_flags_given = true;
       }},
  };
  return table;
}

std::vector<std::string> option_names() {
  std::vector<std::string> names;
  for (const auto& entry : setters()) names.push_back(entry.first);
  return names;
}

TrainingJob make_job(const std::string& data, const std::string& out, const py::dict& options) {
  TrainingJob job;
  job.data = data;
  job.out = out;
  for (const auto& [key, value] : options) {
    const auto name = key.cast<std::string>();
    const auto it = setters().find(name);
    if (it == setters().end())
      throw py::type_error(fmt::format("train() got an unexpected option '{}' (the options: {})", name,
                                       fmt::join(option_names(), ", ")));
    if (value.is_none()) continue;  // the default
    try {
      it->second(job, value);
    } catch (const py::cast_error&) {
      throw py::type_error(fmt::format("train() option '{}': a {} does not fit", name,
                                       py::str(py::type::of(value).attr("__name__")).cast<std::string>()));
    }
  }
  return job;
}

py::dict step_dict(const StepReport& r) {
  py::dict d;
  d["step"] = r.step;
  d["steps"] = r.steps;
  d["loss"] = r.loss;
  d["lr"] = r.lr;
  d["grad_norm"] = r.grad_norm;
  d["tokens_per_second"] = r.tokens_per_second;
  d["rank_tokens_per_second"] = r.rank_tokens_per_second;
  d["communication_share"] = r.communication_share;
  d["mfu"] = r.mfu;
  d["elapsed_seconds"] = r.elapsed_seconds;
  d["eta_seconds"] = r.eta_seconds;
  d["applied"] = r.applied;
  d["loss_scale"] = r.loss_scale;
  return d;
}

py::object eval_dict(const std::optional<EvalReport>& r) {
  if (!r) return py::none();
  py::dict d;
  d["step"] = r->step;
  d["loss"] = r->loss;
  d["perplexity"] = r->perplexity;
  return d;
}

py::dict summary_dict(const TrainSummary& s) {
  py::dict d;
  d["first_step"] = s.first_step;
  d["last_step"] = s.last_step;
  d["tokens"] = s.tokens;
  d["seconds"] = s.seconds;
  d["tokens_per_second"] = s.tokens_per_second;
  d["first_eval"] = eval_dict(s.first_eval);
  d["last_eval"] = eval_dict(s.last_eval);
  d["final_sample"] = utf8(s.final_sample);
  d["checkpoint"] = s.checkpoint.string();
  d["stopped_early"] = s.stopped_early;
  d["parameters"] = s.parameters;
  d["trainable_parameters"] = s.trainable_parameters;
  return d;
}

// The run's callbacks into Python. The first exception (a callback's, or KeyboardInterrupt)
// raises `stop` and is kept for after the run.
class Callbacks {
 public:
  Callbacks(std::optional<py::function> on_step, std::optional<py::function> on_eval,
            std::optional<py::function> log)
      : on_step_(std::move(on_step)), on_eval_(std::move(on_eval)), log_(std::move(log)) {}

  TrainingJobReport report() {
    TrainingJobReport r;
    r.log = [this](std::string_view line) { call(log_, [&] { return py::make_tuple(utf8(line)); }); };
    r.notes = [this](std::string_view line) {
      call(log_, [&] { return py::make_tuple(utf8(fmt::format("note: {}", line))); });
    };
    r.on_step = [this](const StepReport& s, std::string_view line) {
      call(log_, [&] { return py::make_tuple(utf8(line)); });
      call(on_step_, [&] { return py::make_tuple(step_dict(s)); });
    };
    r.on_eval = [this](const EvalReport& e, std::string_view line) {
      call(log_, [&] { return py::make_tuple(utf8(line)); });
      call(on_eval_, [&] { return py::make_tuple(eval_dict(e)); });
    };
    return r;
  }
  const std::atomic<bool>* stop() const { return &stop_; }
  void raise_kept() {
    if (!error_) return;
    error_->restore();
    throw py::error_already_set();
  }

 private:
  template <class Args>
  void call(const std::optional<py::function>& fn, const Args& args) {
    py::gil_scoped_acquire acquire;
    if (error_) return;
    try {
      check_signals();
      if (fn && (*fn)(*args()).is(py::bool_(false))) stop_ = true;
    } catch (py::error_already_set& e) {
      error_.emplace(std::move(e));
      stop_ = true;
    }
  }

  std::optional<py::function> on_step_, on_eval_, log_;
  std::atomic<bool> stop_{false};
  std::optional<py::error_already_set> error_;
};

py::object train(const std::string& data, const std::string& out, std::optional<py::function> on_step,
                 std::optional<py::function> on_eval, std::optional<py::function> log,
                 const py::kwargs& options) {
  TrainingJob job = make_job(data, out, options);
  Callbacks callbacks(std::move(on_step), std::move(on_eval), std::move(log));
  std::optional<TrainSummary> summary;
  {
    py::gil_scoped_release release;
    summary = run_training_job(job, callbacks.report(), callbacks.stop());
  }
  callbacks.raise_kept();
  if (!summary) return py::none();  // not rank 0
  py::dict d = summary_dict(*summary);
  py::list lines;
  for (const std::string& line : summary_lines(*summary, job)) lines.append(utf8(line));
  d["summary"] = lines;
  return d;
}

// Checkpoints of the run newer than the one exported that do not verify are reported as
// Python warnings, as the CLI prints them.
std::string export_run(const std::string& source, const std::string& out, const std::string& dtype,
                       const std::string& lora) {
  const DType type = parse_export_dtype(dtype, "dtype");
  const LoraExport form = parse_lora_export(lora, "lora");
  std::vector<std::string> skipped;
  std::filesystem::path checkpoint;
  {
    py::gil_scoped_release release;
    checkpoint = std::filesystem::is_directory(source)
                     ? run_checkpoint(
                           source,
                           [&skipped](const std::filesystem::path& path, const std::string& why) {
                             skipped.push_back(fmt::format("skipping checkpoint {}: {}", path.string(), why));
                           })
                     : std::filesystem::path(source);
    export_checkpoint(checkpoint, out, type, form);
  }
  for (const std::string& warning : skipped)
    if (PyErr_WarnEx(PyExc_UserWarning, warning.c_str(), 1) != 0) throw py::error_already_set();
  return checkpoint.string();
}

}  // namespace

void bind_training(py::module_& m) {
  m.def("train", &train, py::arg("data"), py::arg("out"), py::kw_only(), py::arg("on_step") = py::none(),
        py::arg("on_eval") = py::none(), py::arg("log") = py::none());
  m.def("train_options", &option_names, "The names of train()'s options.");
  m.def("export", &export_run, py::arg("source"), py::arg("out"), py::arg("dtype") = "f32",
        py::arg("lora") = "merged");
}

}  // namespace tokenmill::python
