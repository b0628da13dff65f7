// What a resume may change. A resumed run continues the run that wrote the checkpoint: with
// the flags that shape its trajectory (schedule, global batch, optimizer, seed) changed, it
// would silently become another run, and resuming a finished run has nothing to continue.
// The global batch (sequences per step: --batch x --grad-accum x data-parallel ranks) is
// what must stay; how it is split is free, so a run saved by N ranks resumes on M ranks with
// --batch and --grad-accum that multiply out to the same step, with or without --zero.
// Both are refused with a message naming the flag and how to train further instead (export
// the run and fine-tune --from the export with the new flags). Free to change: --precision,
// --recompute-activations, the fp16 loss-scale flags, evaluation, samples and checkpoints,
// and where --data and --from now live.
#pragma once

#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>

namespace tokenmill {

// saved, current: TrainOptions::to_json() of the checkpoint's run and of this one; a key the
// checkpoint lacks is not compared (its global batch is then --batch x --grad-accum). Throws Error when the
// checkpoint (at checkpoint_step) is the end of its run or a trajectory flag differs.
void check_resume_options(const std::filesystem::path& checkpoint, int64_t checkpoint_step,
                          const nlohmann::json& saved, const nlohmann::json& current);

}  // namespace tokenmill
