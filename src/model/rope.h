// Rotary position embedding frequencies, with Hugging Face's rope_scaling variants.
//
// inv_freq[j] = theta^(-2j / rotary_dim) for j < rotary_dim / 2, then:
//  - linear: inv_freq / factor (positions are compressed by `factor`);
//  - llama3: wavelengths 2*pi/inv_freq longer than original_ctx / low_freq_factor are
//    divided by `factor`, those shorter than original_ctx / high_freq_factor are kept,
//    and the band in between is interpolated with
//      s = (original_ctx / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor)
//      inv_freq' = (1 - s) * inv_freq / factor + s * inv_freq;
//  - yarn: the same blend with s = 1 - a linear ramp over the dimensions between beta_fast
//    and beta_slow rotations over the original context (rope.cpp);
//  - longrope: inv_freq[j] = 1 / (ext[j] * theta^(2j / rotary_dim)), ext the long factors in
//    a run whose context exceeds the original one, else the short factors.
// YaRN's and LongRoPE's attention factor is RoPE's magnitude (ModelConfig::rope_magnitude),
// not part of these frequencies.
// Computed in float32 like transformers, so angles match it to the last bit or two.
//
// LongRoPE picks its factors once per run, by the context the run may reach (as llama.cpp,
// by its context size), so that every cached key was rotated by the same frequencies.
// transformers picks them per forward call by the longest position in it: its prompts up to
// the original context take the short factors and longer ones the long factors, as here
// when the run's context is the prompt's length; a generation that crosses the original
// context switches factors mid-sequence there, and keeps the keys cached before.
#pragma once

#include <cstdint>
#include <vector>

#include "model/model_config.h"
#include "model/weights.h"

namespace tokenmill {

// inv_freq [rotary_dim / 2] for a run of up to `context` positions (which only LongRoPE reads).
std::vector<float> rope_inverse_frequencies(const RopeScaling& scaling, double theta, int64_t rotary_dim,
                                            int64_t context);

// The frequencies a model's forward uses in a run of up to `context` positions, [rotary_dim / 2]
// each: `global` the above for config.rotary_dim, each divided by the GGUF llama-3 rope_freqs
// factor when the weights carry one; `sliding` Gemma 3's sliding layers' own plain RoPE
// (config.sliding_rope_theta; empty without).
struct RopeFrequencies {
  std::vector<float> global, sliding;
};
RopeFrequencies model_rope_frequencies(const ModelConfig& config, const ModelWeights& weights,
                                       int64_t context);

// RopeLayout::Interleaved models (GGUF llama files) hold q and k with each head's rows
// permuted from Hugging Face's rotate_half order (convert_hf_to_gguf.py `permute`), so that
// adjacent rows rotate together: row `r` of such a matrix is this row of the Hugging Face one
// (head_rows: a head's rows, its head_dim).
inline int64_t interleaved_source_row(int64_t r, int64_t head_rows) {
  const int64_t head = r / head_rows, within = r % head_rows;
  return head * head_rows + (within % 2) * (head_rows / 2) + within / 2;
}

}  // namespace tokenmill
