// Presets for common GPUs: a purchase price, power figures and a cloud price per GPU, each an
// editable default with the public source it was taken from (flags override every field).
// Prices are in US dollars and drift month by month: they are starting points, not quotes.
#pragma once

#include <optional>
#include <span>
#include <string_view>
#include <vector>

namespace tokenmill {

struct SourcedValue {
  double value = 0;
  std::string_view source;  // where the figure comes from, with its date
};

struct GpuPreset {
  std::string_view key;                             // the --preset name, e.g. "h100-sxm"
  std::string_view name;                            // e.g. "H100 SXM"
  SourcedValue purchase_price;                      // one GPU, US dollars
  SourcedValue board_power_watts;                   // typical board power (TDP / TGP)
  std::optional<SourcedValue> machine_power_watts;  // a whole machine's share per GPU, where it differs
  SourcedValue cloud_price_per_gpu_hour;            // on-demand, US dollars
  // A device name matches when it contains every one of these, compared lower-case with
  // everything but letters and digits removed ("NVIDIA H100 80GB HBM3" -> "nvidiah10080gbhbm3").
  std::vector<std::string_view> device_name_parts;
};

std::span<const GpuPreset> gpu_presets();

// The preset called `name`: its key or its name, ignoring case, spaces and dashes
// ("h100-sxm", "H100 SXM", "h100sxm"). Throws Error listing the known presets otherwise.
const GpuPreset& find_gpu_preset(std::string_view name);

// The preset whose GPU a device name (bench.json's device.name, as nvidia-smi reports it)
// describes, or nullptr.
const GpuPreset* match_gpu_preset(std::string_view device_name);

}  // namespace tokenmill
