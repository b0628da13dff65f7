// The sampling flags shared by generate and chat.
#pragma once

#include <cstdint>
#include <optional>

#include <CLI/CLI.hpp>

#include "model/model_config.h"
#include "runtime/sampler.h"

namespace tokenmill::cli {

struct SamplingFlags {
  std::optional<float> temperature, top_p, min_p, repetition_penalty;
  std::optional<int32_t> top_k;
  std::optional<uint64_t> seed;
};

void add_sampling_flags(CLI::App& command, SamplingFlags& flags);

// The model's defaults (generation_config.json) overridden by the flags given; a random
// seed when none was given (the caller prints it so the run can be repeated).
SamplingParams resolve_sampling(const SamplingFlags& flags, const ModelConfig& config);

}  // namespace tokenmill::cli
