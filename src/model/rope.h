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
//    and beta_slow rotations over the original context (rope.cpp); its attention factor
//    scales the scores (ModelConfig::attention_scores), not these frequencies.
// Computed in float32 like transformers, so angles match it to the last bit or two.
#pragma once

#include <cstdint>
#include <vector>

#include "model/model_config.h"
#include "model/weights.h"

namespace tokenmill {

std::vector<float> rope_inverse_frequencies(const RopeScaling& scaling, double theta, int64_t rotary_dim);

// The frequencies a model's forward uses: the above for config.head_dim, each divided by
// the GGUF llama-3 rope_freqs factor when the weights carry one.
std::vector<float> model_rope_frequencies(const ModelConfig& config, const ModelWeights& weights);

}  // namespace tokenmill
