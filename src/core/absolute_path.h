// absolute_path: the path a file records for another file, so that it still names the same
// file when the recording is read from another working directory.
#pragma once

#include <filesystem>
#include <string>

namespace tokenmill {

// `path` made absolute against the current directory and normalised; empty stays empty.
inline std::string absolute_path(const std::filesystem::path& path) {
  if (path.empty()) return {};
  return std::filesystem::absolute(path).lexically_normal().string();
}

}  // namespace tokenmill
