// Parsers for the Linux files that say how much memory a process may use: /proc/meminfo,
// /proc/self/cgroup and the cgroup v1/v2 memory controller's files. Each takes the file's
// text and gives nullopt (or an empty result) when it is malformed; none throws. The callers
// read the files under a root path ("/" normally, a temporary directory describing a machine
// in tests): core/host_available_memory.h and doctor/host_facts.h.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tokenmill {

// The whole file, or nullopt when it cannot be read.
std::optional<std::string> read_host_file(const std::filesystem::path& path);

// A decimal non-negative integer that is all of `text` but for white space around it (a
// cgroup file such as memory.current holds one and a newline).
std::optional<uint64_t> parse_decimal_u64(std::string_view text);

// The value after "key:" on the first line whose text before the colon is `key` (white
// space around both trimmed): the /proc/meminfo and /proc/cpuinfo format.
std::optional<std::string> proc_field(std::string_view text, std::string_view key);

// A /proc/meminfo value ("MemAvailable:   32768000 kB" for key "MemAvailable") in bytes.
std::optional<uint64_t> meminfo_bytes(std::string_view meminfo, std::string_view key);

// /proc/self/cgroup: one "hierarchy-id:controller-list:path" line per hierarchy.
struct ProcSelfCgroup {
  std::optional<std::string> unified;              // cgroup v2: the path of the "0::PATH" line
  std::map<std::string, std::string> controllers;  // cgroup v1: controller ("memory") -> path
  std::vector<std::string> paths;                  // every line's path, in file order
};
ProcSelfCgroup parse_proc_self_cgroup(std::string_view text);

// A memory limit file: cgroup v2 memory.max ("max" or bytes) or v1 memory.limit_in_bytes
// (bytes; 2^62 or more is v1's "no limit", LONG_MAX rounded down to a page). No limit reads
// as kNoCgroupMemoryLimit.
inline constexpr uint64_t kNoCgroupMemoryLimit = UINT64_MAX;
std::optional<uint64_t> parse_cgroup_memory_limit(std::string_view text);

}  // namespace tokenmill
