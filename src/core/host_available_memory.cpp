#include "core/host_available_memory.h"

#include <algorithm>
#include <charconv>
#include <fstream>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

namespace tokenmill {

namespace {

namespace fs = std::filesystem;

// The first line of `file` as a whole non-negative integer ("max" and garbage give nullopt).
std::optional<uint64_t> read_count(const fs::path& file) {
  std::ifstream in(file);
  std::string line;
  if (!std::getline(in, line)) return std::nullopt;
  uint64_t value = 0;
  const char* end = line.data() + line.size();
  const auto [ptr, ec] = std::from_chars(line.data(), end, value);
  if (line.empty() || ec != std::errc() || ptr != end) return std::nullopt;
  return value;
}

// "MemAvailable:   32768000 kB" of proc/meminfo, in bytes.
std::optional<uint64_t> mem_available(const fs::path& root) {
  std::ifstream in(root / "proc/meminfo");
  std::string key;
  uint64_t kib = 0;
  while (in >> key >> kib) {
    if (key == "MemAvailable:") return kib <= UINT64_MAX / 1024 ? std::optional(kib * 1024) : std::nullopt;
    in.ignore(std::numeric_limits<std::streamsize>::max(), '\n');  // the unit
  }
  return std::nullopt;
}

// True when the comma-separated `list` has `item` as one of its items.
bool lists(std::string_view list, std::string_view item) {
  for (;;) {
    const size_t comma = list.find(',');
    if (list.substr(0, comma) == item) return true;
    if (comma == std::string_view::npos) return false;
    list.remove_prefix(comma + 1);
  }
}

// This process's cgroup path ("/a/b") in the v2 hierarchy (the line "0::/a/b" of
// proc/self/cgroup) or in the v1 hierarchy of the memory controller ("7:memory:/a/b").
std::optional<std::string> own_cgroup(const fs::path& root, bool v2) {
  std::ifstream in(root / "proc/self/cgroup");
  for (std::string line; std::getline(in, line);) {
    const size_t first = line.find(':');
    const size_t second = first == std::string::npos ? first : line.find(':', first + 1);
    if (second == std::string::npos) continue;
    const std::string_view controllers = std::string_view(line).substr(first + 1, second - first - 1);
    if (v2 ? controllers.empty() : lists(controllers, "memory")) return line.substr(second + 1);
  }
  return std::nullopt;
}

// The least limit - usage over the cgroup directories from this process's up to the mount.
std::optional<uint64_t> cgroup_headroom(const fs::path& root) {
  const fs::path base = root / "sys/fs/cgroup";
  std::error_code ec;
  const bool v2 = fs::exists(base / "cgroup.controllers", ec);
  std::vector<fs::path> levels{v2 ? base : base / "memory"};
  // Inside a cgroup namespace the path may climb above the mount ("/../x"): stop there.
  for (const fs::path& part : fs::path(own_cgroup(root, v2).value_or("/")).relative_path()) {
    if (part.empty() || part == "." || part == "..") break;
    levels.push_back(levels.back() / part);
  }
  std::optional<uint64_t> headroom;
  for (const fs::path& dir : levels) {
    const auto limit = read_count(dir / (v2 ? "memory.max" : "memory.limit_in_bytes"));
    const auto usage = read_count(dir / (v2 ? "memory.current" : "memory.usage_in_bytes"));
    if (!limit || !usage) continue;
    const uint64_t left = *limit > *usage ? *limit - *usage : 0;
    headroom = std::min(headroom.value_or(left), left);
  }
  return headroom;
}

}  // namespace

std::optional<uint64_t> host_available_memory(const fs::path& root) {
  const std::optional<uint64_t> available = mem_available(root);
  const std::optional<uint64_t> headroom = cgroup_headroom(root);
  if (available && headroom) return std::min(*available, *headroom);
  return available ? available : headroom;
}

}  // namespace tokenmill
