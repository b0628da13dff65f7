#include "cost/gpu_presets.h"

#include <algorithm>
#include <cctype>
#include <string>

#include <fmt/format.h>

#include "core/error.h"

namespace tokenmill {

namespace {

// NVIDIA publishes no list price for its data-centre GPUs; their purchase prices are press
// and market estimates, named as such.
const std::vector<GpuPreset>& presets() {
  static const std::vector<GpuPreset> table = {
      {.key = "rtx4090",
       .name = "RTX 4090",
       .purchase_price = {1599, "NVIDIA launch price of the GeForce RTX 4090 (announced 20 Sep 2022)"},
       .board_power_watts = {450, "NVIDIA GeForce RTX 4090 specifications: total graphics power 450 W"},
       .machine_power_watts = {{850,
                                "NVIDIA GeForce RTX 4090 specifications: required system power 850 W "
                                "(a power-supply rating, an upper bound)"}},
       .cloud_price_per_gpu_hour = {0.60,
                                    "RunPod on-demand RTX 4090, as listed by deploybase.ai "
                                    "'RunPod GPU Pricing: 2026' (10 Mar 2026)"},
       .device_name_parts = {"rtx4090"}},
      {.key = "a100-80gb",
       .name = "A100 80GB SXM",
       .purchase_price = {15000,
                          "no NVIDIA list price: top of the $8,000-15,000 new-unit range in "
                          "aitooldiscovery.com 'NVIDIA A100 GPU: Specs, Price, and Performance in 2026' "
                          "(20 Mar 2026)"},
       .board_power_watts = {400, "NVIDIA A100 Tensor Core GPU datasheet: max TDP 400 W (SXM4)"},
       .machine_power_watts = {{812.5, "NVIDIA DGX A100 datasheet: 6.5 kW max for 8 GPUs, / 8"}},
       .cloud_price_per_gpu_hour = {2.50,
                                    "modal.com A100 80GB at $2.4984/h, as listed by techbytes.app "
                                    "'Serverless GPU Pricing Matrix' (verified 7 May 2026), rounded"},
       .device_name_parts = {"a100", "sxm", "80gb"}},
      {.key = "h100-sxm",
       .name = "H100 SXM",
       .purchase_price = {30000,
                          "no NVIDIA list price: the mid-2026 typical street price in aiinframap.com "
                          "'H100 vs H200 vs B200 TCO' (2026)"},
       .board_power_watts = {700, "NVIDIA H100 Tensor Core GPU datasheet: max TDP 700 W (SXM)"},
       .machine_power_watts = {{1275, "NVIDIA DGX H100 datasheet: 10.2 kW max for 8 GPUs, / 8"}},
       .cloud_price_per_gpu_hour = {3.78,
                                    "lambda.ai on-demand 1x H100 SXM, as listed by techbytes.app "
                                    "'Serverless GPU Pricing Matrix' (verified 7 May 2026)"},
       .device_name_parts = {"h100", "hbm3"}},
      {.key = "h200",
       .name = "H200",
       .purchase_price = {35000,
                          "no NVIDIA list price: the mid-2026 typical street price in aiinframap.com "
                          "'H100 vs H200 vs B200 TCO' (2026)"},
       .board_power_watts = {700, "NVIDIA H200 Tensor Core GPU datasheet: max TDP up to 700 W (SXM)"},
       .machine_power_watts = {{1275, "NVIDIA DGX H200 datasheet: 10.2 kW max for 8 GPUs, / 8"}},
       .cloud_price_per_gpu_hour = {4.00,
                                    "middle of the $3.50-4.50 specialty-cloud on-demand range in "
                                    "mercatus-ai.com 'Cloud GPU pricing' (May 2026)"},
       .device_name_parts = {"h200"}},
  };
  return table;
}

// Lower-case letters and digits only: "H100 SXM" and "h100-sxm" both become "h100sxm".
std::string normalized(std::string_view text) {
  std::string out;
  for (const char c : text)
    if (std::isalnum(static_cast<unsigned char>(c)))
      out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

std::span<const GpuPreset> gpu_presets() { return presets(); }

const GpuPreset& find_gpu_preset(std::string_view name) {
  const std::string wanted = normalized(name);
  std::string known;
  for (const GpuPreset& preset : presets()) {
    if (wanted == normalized(preset.key) || wanted == normalized(preset.name)) return preset;
    known += fmt::format("{}{} ({})", known.empty() ? "" : ", ", preset.key, preset.name);
  }
  fail("--preset {}: unknown GPU preset (known: {})", name, known);
}

const GpuPreset* match_gpu_preset(std::string_view device_name) {
  const std::string device = normalized(device_name);
  for (const GpuPreset& preset : presets()) {
    const bool all =
        std::all_of(preset.device_name_parts.begin(), preset.device_name_parts.end(),
                    [&](std::string_view part) { return device.find(part) != std::string::npos; });
    if (all) return &preset;
  }
  return nullptr;
}

}  // namespace tokenmill
