#include "model/rope.h"

#include <cmath>
#include <numbers>

namespace tokenmill {

std::vector<float> rope_inverse_frequencies(const RopeScaling& scaling, double theta, int64_t rotary_dim) {
  const int64_t pairs = rotary_dim / 2;
  std::vector<float> inv_freq(static_cast<size_t>(pairs));
  for (int64_t j = 0; j < pairs; ++j) {
    const float exponent = static_cast<float>(2 * j) / static_cast<float>(rotary_dim);
    inv_freq[static_cast<size_t>(j)] = 1.0f / std::pow(static_cast<float>(theta), exponent);
  }
  const auto factor = static_cast<float>(scaling.factor);
  if (scaling.rope_type == "linear") {
    for (float& f : inv_freq) f /= factor;
  } else if (scaling.rope_type == "llama3") {
    const auto original = static_cast<float>(scaling.original_max_position_embeddings);
    const auto low = static_cast<float>(scaling.low_freq_factor);
    const auto high = static_cast<float>(scaling.high_freq_factor);
    const float low_freq_wavelen = original / low;
    const float high_freq_wavelen = original / high;
    for (float& f : inv_freq) {
      const float wavelen = 2.0f * std::numbers::pi_v<float> / f;
      if (wavelen > low_freq_wavelen) {
        f /= factor;
      } else if (wavelen >= high_freq_wavelen) {
        const float s = (original / wavelen - low) / (high - low);
        f = (1.0f - s) * f / factor + s * f;
      }
    }
  }
  return inv_freq;
}

std::vector<float> model_rope_frequencies(const ModelConfig& config, const ModelWeights& weights) {
  std::vector<float> inv_freq =
      rope_inverse_frequencies(config.rope_scaling, config.rope_theta, config.head_dim);
  if (const Tensor& factors = weights.rope_freq_factors; factors.data != nullptr)
    for (size_t j = 0; j < inv_freq.size(); ++j) inv_freq[j] /= factors.as<const float>()[j];
  return inv_freq;
}

}  // namespace tokenmill
