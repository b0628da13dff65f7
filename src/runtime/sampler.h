// Sampler: picks the next token from a row of logits.
//
// Order of operations (as transformers' logits processors apply them):
//   1. repetition penalty over every token already in the sequence (prompt included):
//      logit > 0 ? logit / r : logit * r;
//   2. temperature == 0: greedy argmax (lowest id wins ties), done;
//   3. logits / temperature, then top-k, then top-p (smallest set whose probability
//      reaches p, always at least one token), then min-p (drop tokens whose probability
//      is below min_p * the top probability);
//   4. draw from the renormalised distribution with a seeded 64-bit Mersenne Twister
//      (std::mt19937_64 is fully specified by the standard: same seed, same tokens on
//      every platform; the uniform draw uses its top 53 bits).
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <vector>

namespace tokenmill {

struct SamplingParams {
  float temperature = 0.0f;  // 0: greedy
  int32_t top_k = 0;         // 0: off
  float top_p = 1.0f;        // 1: off
  float min_p = 0.0f;        // 0: off
  float repetition_penalty = 1.0f;
  uint64_t seed = 0;

  // Throws Error naming the parameter if it is out of range.
  void validate() const;
};

class Sampler {
 public:
  explicit Sampler(const SamplingParams& params);

  // Chooses a token. `logits` is modified (penalties, temperature). `history` is every
  // token of the sequence so far.
  int32_t sample(std::span<float> logits, std::span<const int32_t> history);

 private:
  SamplingParams params_;
  std::mt19937_64 rng_;
  std::vector<int32_t> candidates_;  // reused between calls
  std::vector<float> probabilities_;
  std::vector<bool> penalized_;
};

}  // namespace tokenmill
