#include "train/resume_check.h"

#include <algorithm>
#include <string>

#include "core/error.h"

namespace tokenmill {

namespace {

// The options TrainOptions::to_json() holds that a resume may change (see the header).
constexpr const char* kFreeToChange[] = {"batch",
                                         "grad_accum",
                                         "world_size",
                                         "zero_stage",
                                         "global_batch",
                                         "data_dir",
                                         "from_model",
                                         "precision",
                                         "initial_loss_scale",
                                         "recompute_activations",
                                         "loss_scale_growth_interval"};

// Sequences per optimizer step; a checkpoint written before data parallelism lacks the key
// (one process: --batch x --grad-accum).
int64_t global_batch(const nlohmann::json& options) {
  if (options.contains("global_batch")) return options["global_batch"].get<int64_t>();
  return options.value("batch", int64_t{0}) * options.value("grad_accum", int64_t{1});
}

std::string flag_of(std::string key) {
  std::replace(key.begin(), key.end(), '_', '-');
  return "--" + key;
}

}  // namespace

void check_resume_options(const std::filesystem::path& checkpoint, int64_t checkpoint_step,
                          const nlohmann::json& saved, const nlohmann::json& current) {
  const std::string extend =
      "to train further, export it (tokenmill export RUN --out DIR) and fine-tune that with train --from DIR "
      "and the new flags";
  if (saved.contains("steps") && checkpoint_step >= saved["steps"].get<int64_t>())
    fail("--resume: {} is the end of its run (step {} of {}): there is nothing to continue; {}",
         checkpoint.string(), checkpoint_step, saved["steps"].get<int64_t>(), extend);
  if (global_batch(saved) != global_batch(current))
    fail(
        "--resume: a step is now {} sequences (--batch {} x --grad-accum {} x {} rank(s)) but the run of {} "
        "took "
        "{} a step: a resumed run keeps its global batch (--batch x --grad-accum x ranks; any split of it is "
        "free); {}",
        global_batch(current), current.value("batch", int64_t{0}), current.value("grad_accum", int64_t{1}),
        current.value("world_size", 1), checkpoint.string(), global_batch(saved), extend);
  for (const auto& [key, value] : current.items()) {
    if (std::find(std::begin(kFreeToChange), std::end(kFreeToChange), key) != std::end(kFreeToChange))
      continue;
    if (!saved.contains(key) || saved[key] == value) continue;
    fail(
        "--resume: {} is {} but the run of {} used {}: a resumed run continues with its own flags (resume "
        "with {} {}); {}",
        flag_of(key), value.dump(), checkpoint.string(), saved[key].dump(), flag_of(key), saved[key].dump(),
        extend);
  }
}

}  // namespace tokenmill
