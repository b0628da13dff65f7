// The callback library code reports progress and notes through, one line per call (no
// trailing newline); the caller decides where lines go (the CLI prints them). An empty
// LogFn drops them.
#pragma once

#include <functional>
#include <string_view>

namespace tokenmill {

using LogFn = std::function<void(std::string_view line)>;

}  // namespace tokenmill
