// How many more bytes this process can allocate on the host before the kernel or a container
// limit stops it: the smallest of
//   - /proc/meminfo's MemAvailable (free memory plus the page cache that can be reclaimed), and
//   - for every memory-limited cgroup from this process's own up to its hierarchy's root, the
//     limit minus the usage (cgroup v2: memory.max - memory.current; v1: memory.limit_in_bytes
//     - memory.usage_in_bytes; a usage above the limit counts as 0). A container sees its host's
//     MemAvailable, so without this bound it would size its buffers for the whole machine.
// The cgroup's usage counts the page cache it has touched, so the bound is on the safe side.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>

namespace tokenmill {

// The figure above, read from the files under `root` ("/" normally; tests describe a machine
// in a temporary directory). nullopt when neither MemAvailable nor any cgroup limit is readable.
std::optional<uint64_t> host_available_memory(const std::filesystem::path& root);

}  // namespace tokenmill
