#include "cli/sampling_flags.h"

#include <random>

#include "runtime/generator.h"

namespace tokenmill::cli {

void add_sampling_flags(CLI::App& command, SamplingFlags& f) {
  command.add_option("--temperature", f.temperature, "0 = greedy (default: the model's generation config)")
      ->check(CLI::Range(0.0f, 1e6f));
  command.add_option("--top-k", f.top_k, "Keep the k most likely tokens (0 = off)")
      ->check(CLI::NonNegativeNumber);
  command.add_option("--top-p", f.top_p, "Nucleus sampling threshold in (0, 1]")
      ->check(CLI::Range(0.0f, 1.0f));
  command.add_option("--min-p", f.min_p, "Drop tokens below min-p x the top probability")
      ->check(CLI::Range(0.0f, 1.0f));
  command.add_option("--repetition-penalty", f.repetition_penalty, "> 1 discourages repeats")
      ->check(CLI::PositiveNumber);
  command.add_option("--seed", f.seed, "Sampling seed (default: random, printed)");
}

SamplingParams resolve_sampling(const SamplingFlags& f, const ModelConfig& config) {
  SamplingParams s = default_sampling(config);
  if (f.temperature) s.temperature = *f.temperature;
  if (f.top_k) s.top_k = *f.top_k;
  if (f.top_p) s.top_p = *f.top_p;
  if (f.min_p) s.min_p = *f.min_p;
  if (f.repetition_penalty) s.repetition_penalty = *f.repetition_penalty;
  s.seed = f.seed ? *f.seed : std::random_device{}();
  return s;
}

}  // namespace tokenmill::cli
