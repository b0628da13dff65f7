// Sampler: picks the next token from a row of logits.
//
// Order of operations (as transformers' logits processors apply them):
//   1. repetition penalty over every token already in the sequence (prompt included):
//      logit > 0 ? logit / r : logit * r;
//   2. frequency and presence penalties (OpenAI, vLLM) over the generated tokens only:
//      logit -= frequency_penalty * count + presence_penalty, where count > 0 is how often
//      the token was generated so far;
//   3. temperature == 0: greedy argmax (lowest id wins ties), done;
//   4. logits / temperature, then top-k, then top-p (smallest set whose probability
//      reaches p, always at least one token), then min-p (drop tokens whose probability
//      is below min_p * the top probability);
//   5. draw from the renormalised distribution with a seeded 64-bit Mersenne Twister
//      (std::mt19937_64 is fully specified by the standard: same seed, same tokens on
//      every platform; the uniform draw uses its top 53 bits).
#pragma once

#include <cstddef>
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
  float frequency_penalty = 0.0f;  // [-2, 2]; 0: off
  float presence_penalty = 0.0f;   // [-2, 2]; 0: off
  uint64_t seed = 0;
  // > 0: only ids below it are ever chosen (the tokenizer's, when the model has more
  // embedding rows than the tokenizer has tokens, as Qwen2.5's padded vocabularies do).
  int64_t vocab_limit = 0;

  // Throws Error naming the parameter if it is out of range or NaN.
  void validate() const;
};

class Sampler {
 public:
  explicit Sampler(const SamplingParams& params);

  // Chooses a token. The penalties are applied to `logits` in place. `history` is every
  // token of the sequence so far: the prompt's first `prompt_length` tokens, then the
  // generated ones; ids outside the row are ignored. Throws Error if the row is empty or
  // prompt_length exceeds the history.
  int32_t sample(std::span<float> logits, std::span<const int32_t> history, size_t prompt_length = 0);

 private:
  // Calls visit(id, count) once for each distinct in-row id of `tokens`, count being how
  // often it occurs. Touches only those ids of counts_, which is all zero between calls.
  template <class Visit>
  void for_each_distinct(std::span<const int32_t> tokens, size_t vocab, Visit visit);

  // Draws from the softmax of `logits` at the temperature, truncated by top-k, top-p, min-p.
  int32_t draw(std::span<const float> logits);
  // Sorts candidates_ (most likely first, ties: lower id) through index i < kept_. Only the
  // few candidates that the walks over the distribution reach are sorted, in growing
  // chunks: typically a few hundred of a 150k vocabulary.
  void sort_through(size_t i, std::span<const float> logits);
  std::vector<int32_t>::iterator candidate(size_t i) {
    return candidates_.begin() + static_cast<std::ptrdiff_t>(i);
  }

  static constexpr size_t kFirstSortedChunk = 256;

  SamplingParams params_;
  std::mt19937_64 rng_;
  std::vector<int32_t> candidates_;  // token ids; the first kept_ are the top-k, [0, sorted_) in order
  size_t kept_ = 0;
  size_t sorted_ = 0;
  std::vector<float> weights_;   // by token id: exp((logit - top) / temperature) for the top-k
  std::vector<int32_t> counts_;  // one per vocabulary id, zero outside for_each_distinct
};

}  // namespace tokenmill
