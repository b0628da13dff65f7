#include "model/rope.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <numbers>

#include "core/error.h"

namespace tokenmill {

namespace {

// YaRN (transformers' _compute_yarn_parameters): pair j blends the interpolated frequency
// inv_freq / factor and the original one, the original's share 1 - ramp(j), where ramp rises
// linearly from 0 at dimension `low` to 1 at `high`, the dimensions that turn beta_fast and
// beta_slow times over the original context: d(r) = dim ln(ctx / (2 pi r)) / (2 ln theta),
// truncated to whole dimensions unless `truncate` is false, within [0, dim - 1].
void apply_yarn(const RopeScaling& s, double theta, int64_t rotary_dim, std::vector<float>& inv_freq) {
  const auto dim = static_cast<double>(rotary_dim);
  const auto original = static_cast<double>(s.original_max_position_embeddings);
  const auto correction_dim = [&](double rotations) {
    return dim * std::log(original / (rotations * 2.0 * std::numbers::pi)) / (2.0 * std::log(theta));
  };
  double low = correction_dim(s.beta_fast), high = correction_dim(s.beta_slow);
  if (s.truncate) {
    low = std::floor(low);
    high = std::ceil(high);
  }
  low = std::max(low, 0.0);
  high = std::min(high, dim - 1.0);
  if (low == high) high += 0.001;  // no singular ramp
  const auto factor = static_cast<float>(s.factor);
  for (size_t j = 0; j < inv_freq.size(); ++j) {
    const float exponent = static_cast<float>(2 * j) / static_cast<float>(rotary_dim);
    const float wavelength = std::pow(static_cast<float>(theta), exponent);  // over 2 pi
    const float extrapolated = 1.0f / wavelength;
    const float interpolated = 1.0f / (factor * wavelength);
    const float ramp =
        std::clamp(static_cast<float>((static_cast<double>(j) - low) / (high - low)), 0.0f, 1.0f);
    const float keep = 1.0f - ramp;
    inv_freq[j] = interpolated * (1.0f - keep) + extrapolated * keep;
  }
}

}  // namespace

std::vector<float> rope_inverse_frequencies(const RopeScaling& scaling, double theta, int64_t rotary_dim,
                                            int64_t context) {
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
  } else if (scaling.rope_type == "yarn") {
    apply_yarn(scaling, theta, rotary_dim, inv_freq);
  } else if (scaling.rope_type == "longrope") {
    const std::vector<float>& ext =
        context > scaling.original_max_position_embeddings ? scaling.long_factor : scaling.short_factor;
    if (std::ssize(ext) != pairs)
      fail("LongRoPE has {} factors for {} rotary pairs", ext.size(), pairs);  // validated at load
    for (int64_t j = 0; j < pairs; ++j) {
      const float exponent = static_cast<float>(2 * j) / static_cast<float>(rotary_dim);
      inv_freq[static_cast<size_t>(j)] =
          1.0f / (ext[static_cast<size_t>(j)] * std::pow(static_cast<float>(theta), exponent));
    }
  }
  return inv_freq;
}

RopeFrequencies model_rope_frequencies(const ModelConfig& config, const ModelWeights& weights,
                                       int64_t context) {
  RopeFrequencies f;
  f.global = rope_inverse_frequencies(config.rope_scaling, config.rope_theta, config.rotary_dim, context);
  if (const Tensor& factors = weights.rope_freq_factors; factors.data != nullptr)
    for (size_t j = 0; j < f.global.size(); ++j) f.global[j] /= factors.as<const float>()[j];
  if (config.sliding_rope_theta > 0)
    f.sliding =
        rope_inverse_frequencies(RopeScaling{}, config.sliding_rope_theta, config.rotary_dim, context);
  return f;
}

}  // namespace tokenmill
