#include "core/host_available_memory.h"

#include <algorithm>
#include <string>
#include <vector>

#include "core/host_memory_files.h"

namespace tokenmill {

namespace {

namespace fs = std::filesystem;

std::optional<uint64_t> mem_available(const fs::path& root) {
  const std::optional<std::string> meminfo = read_host_file(root / "proc/meminfo");
  return meminfo ? meminfo_bytes(*meminfo, "MemAvailable") : std::nullopt;
}

// This process's cgroup path ("/a/b") in the v2 hierarchy or in the v1 hierarchy of the
// memory controller.
std::optional<std::string> own_cgroup(const fs::path& root, bool v2) {
  const ProcSelfCgroup cgroup =
      parse_proc_self_cgroup(read_host_file(root / "proc/self/cgroup").value_or(""));
  if (v2) return cgroup.unified;
  const auto memory = cgroup.controllers.find("memory");
  return memory == cgroup.controllers.end() ? std::nullopt : std::optional(memory->second);
}

// The value in `file` parsed by `parse`, nullopt when the file is missing or malformed.
std::optional<uint64_t> read_value(const fs::path& file, std::optional<uint64_t> (*parse)(std::string_view)) {
  const std::optional<std::string> text = read_host_file(file);
  return text ? parse(*text) : std::nullopt;
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
    const auto limit =
        read_value(dir / (v2 ? "memory.max" : "memory.limit_in_bytes"), parse_cgroup_memory_limit);
    const auto usage = read_value(dir / (v2 ? "memory.current" : "memory.usage_in_bytes"), parse_decimal_u64);
    if (!limit || *limit == kNoCgroupMemoryLimit || !usage) continue;
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
