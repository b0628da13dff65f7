// Byte counts as people read them.
#pragma once

#include <cstdint>
#include <string>

namespace tokenmill {

// `bytes` in gibibytes (2^30 bytes) with two decimals: "1.25 GiB".
std::string gib(double bytes);
inline std::string gib(uint64_t bytes) { return gib(static_cast<double>(bytes)); }

// `bytes` in the largest binary unit it reaches, two decimals past bytes: "512 B",
// "1.50 KiB", "135.00 MiB", "2.00 TiB" (TiB the largest).
std::string human_bytes(uint64_t bytes);

}  // namespace tokenmill
