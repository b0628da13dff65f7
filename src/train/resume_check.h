// What a resume may change. A resumed run continues the run that wrote the checkpoint: with
// the flags that shape its trajectory (schedule, batch shape, optimizer, seed) changed, it
// would silently become another run, and resuming a finished run has nothing to continue.
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
// checkpoint lacks is not compared. Throws Error when the checkpoint (at checkpoint_step) is
// the end of its run or a trajectory flag differs.
void check_resume_options(const std::filesystem::path& checkpoint, int64_t checkpoint_step,
                          const nlohmann::json& saved, const nlohmann::json& current);

}  // namespace tokenmill
