#include "core/json_file.h"

#include <fstream>
#include <sstream>
#include <system_error>

#include "core/error.h"

namespace tokenmill {

nlohmann::json read_json_file(const std::filesystem::path& path, size_t max_bytes) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  if (ec) fail("{}: cannot read ({})", path.string(), ec.message());
  if (size > max_bytes)
    fail("{}: {} bytes is larger than the {} byte limit for this file", path.string(), size, max_bytes);
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("{}: cannot open for reading", path.string());
  std::ostringstream text;
  text << in.rdbuf();
  try {
    return nlohmann::json::parse(text.str());
  } catch (const nlohmann::json::exception& e) {  // a syntax error, or a number out of range (1e999)
    fail("{}: invalid JSON ({})", path.string(), e.what());
  }
}

}  // namespace tokenmill
