// libFuzzer target for PEFT adapter configs (model/peft_adapter.h): each input is written as
// the adapter_config.json of a directory that holds the llama fixture's adapter tensors, and
// read for the llama fixture model. Seeded with the committed fixtures' configs.
//
// read_peft_adapter must accept the adapter or throw tokenmill::Error; any other exception, a
// crash, or a sanitizer report is a bug. What it accepts must be servable: scale 1, every
// adapted target an A [rank, in] and a B [out, rank] of the target's shape with rank in
// [1, max_rank], finite values.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

#include "core/error.h"
#include "model/model.h"
#include "model/peft_adapter.h"
#include "support/temp_dir.h"

namespace {

const std::filesystem::path kFixtures(TOKENMILL_FIXTURES_DIR);

// The adapter directory of this process (the fixture's tensors, the input's config), removed
// when it exits.
const std::filesystem::path& adapter_dir() {
  static const tokenmill::testing::TempDir dir;
  static const std::filesystem::path path = [] {
    std::filesystem::copy_file(kFixtures / "lora" / "llama" / "adapter_model.safetensors",
                               dir.path() / "adapter_model.safetensors");
    return dir.path();
  }();
  return path;
}

void check_finite(const tokenmill::Tensor& t) {
  for (int64_t i = 0; i < t.numel(); ++i)
    if (!std::isfinite(t.as<const float>()[i])) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const auto model = tokenmill::Model::load(kFixtures / "hf" / "llama");
  const tokenmill::ModelConfig& config = model->config;
  {
    std::ofstream out(adapter_dir() / "adapter_config.json", std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  std::unique_ptr<tokenmill::LoraAdapter> adapter;
  try {
    adapter = tokenmill::read_peft_adapter(config, adapter_dir());
  } catch (const tokenmill::Error&) {
    return 0;
  }
  if (adapter->weights.scale != 1.0f || adapter->max_rank < 1) __builtin_trap();
  if (static_cast<int64_t>(adapter->weights.layers.size()) != config.num_hidden_layers) __builtin_trap();
  for (int64_t l = 0; l < config.num_hidden_layers; ++l)
    for (const tokenmill::LoraTarget t : tokenmill::kLoraTargets) {
      const tokenmill::LoraLinear& ad = adapter->weights.at(l, t);
      if (ad.a.data == nullptr) continue;
      const auto [out, in] = tokenmill::lora_target_shape(config, t);
      const int64_t rank = ad.a.dim(0);
      if (rank < 1 || rank > adapter->max_rank || ad.a.dim(1) != in || ad.b.dim(0) != out ||
          ad.b.dim(1) != rank)
        __builtin_trap();
      check_finite(ad.a);
      check_finite(ad.b);
    }
  return 0;
}
