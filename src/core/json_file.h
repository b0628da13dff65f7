// Reading a JSON document from disk with errors that name the file.
#pragma once

#include <filesystem>

#include <nlohmann/json.hpp>

namespace tokenmill {

// Parses `path` as JSON. Throws Error "<path>: ..." if the file is missing, unreadable,
// larger than `max_bytes`, or not valid JSON.
nlohmann::json read_json_file(const std::filesystem::path& path, size_t max_bytes = 64u << 20);

}  // namespace tokenmill
