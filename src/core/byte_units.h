// Byte counts as people read them.
#pragma once

#include <cstdint>
#include <string>

namespace tokenmill {

// `bytes` in gibibytes (2^30 bytes) with two decimals: "1.25 GiB".
std::string gib(double bytes);
inline std::string gib(uint64_t bytes) { return gib(static_cast<double>(bytes)); }

}  // namespace tokenmill
