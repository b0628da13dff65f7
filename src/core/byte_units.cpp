#include "core/byte_units.h"

#include <fmt/format.h>

#include <iterator>

namespace tokenmill {

std::string gib(double bytes) { return fmt::format("{:.2f} GiB", bytes / double(uint64_t{1} << 30)); }

std::string human_bytes(uint64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  auto value = static_cast<double>(bytes);
  size_t unit = 0;
  while (value >= 1024.0 && unit + 1 < std::size(units)) {
    value /= 1024.0;
    ++unit;
  }
  return unit == 0 ? fmt::format("{} B", bytes) : fmt::format("{:.2f} {}", value, units[unit]);
}

}  // namespace tokenmill
