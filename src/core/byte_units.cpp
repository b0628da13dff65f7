#include "core/byte_units.h"

#include <fmt/format.h>

namespace tokenmill {

std::string gib(double bytes) { return fmt::format("{:.2f} GiB", bytes / double(uint64_t{1} << 30)); }

}  // namespace tokenmill
