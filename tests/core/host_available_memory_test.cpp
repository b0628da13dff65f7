// host_available_memory() on machines described in a temporary directory: MemAvailable
// alone, bounded by a cgroup v2 or v1 limit (in this process's own cgroup, an ancestor's, or
// the mount root as a container's namespace shows it), unlimited cgroups, usage above the
// limit, unreadable files. And host_memory().available() on this machine.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "core/device_memory.h"
#include "core/host_available_memory.h"
#include "support/temp_dir.h"

namespace tokenmill {
namespace {

using testing::TempDir;

constexpr uint64_t kGiB = uint64_t{1} << 30;

// Writes root/relative (creating its directories).
void put(const TempDir& root, const std::string& relative, const std::string& contents) {
  std::filesystem::create_directories((root.path() / relative).parent_path());
  root.write(relative, contents);
}

// A machine with 16 GiB available, this process in cgroup `path` of `version`.
void write_machine(const TempDir& root, int version, const std::string& path) {
  put(root, "proc/meminfo",
      "MemTotal:       67108864 kB\nMemFree:         1048576 kB\nMemAvailable:   16777216 kB\n"
      "HugePages_Total:       0\n");
  if (version == 2) {
    put(root, "proc/self/cgroup", "0::" + path + "\n");
    put(root, "sys/fs/cgroup/cgroup.controllers", "cpu memory\n");
  } else {
    put(root, "proc/self/cgroup", "12:memory:" + path + "\n4:cpu,cpuacct:" + path + "\n0::/\n");
  }
}

// The limit ("max" or bytes) and usage of cgroup directory `dir` (relative to root).
void put_cgroup(const TempDir& root, int version, const std::string& dir, const std::string& limit,
                uint64_t usage) {
  put(root, dir + (version == 2 ? "/memory.max" : "/memory.limit_in_bytes"), limit + "\n");
  put(root, dir + (version == 2 ? "/memory.current" : "/memory.usage_in_bytes"),
      std::to_string(usage) + "\n");
}

std::string bytes(uint64_t n) { return std::to_string(n); }

TEST(HostAvailableMemory, IsMemAvailableWithoutCgroupLimits) {
  const TempDir root;
  write_machine(root, 2, "/user.slice");
  EXPECT_EQ(host_available_memory(root.path()), 16 * kGiB);
}

TEST(HostAvailableMemory, IsBoundedByTheOwnCgroupV2Limit) {
  const TempDir root;
  write_machine(root, 2, "/system.slice/serve.service");
  put_cgroup(root, 2, "sys/fs/cgroup/system.slice/serve.service", bytes(4 * kGiB), kGiB);
  EXPECT_EQ(host_available_memory(root.path()), 3 * kGiB);
}

TEST(HostAvailableMemory, TakesTheTightestLimitUpTheHierarchy) {
  const TempDir root;
  write_machine(root, 2, "/kubepods/pod1/box");
  put_cgroup(root, 2, "sys/fs/cgroup/kubepods/pod1/box", "max", kGiB);
  put_cgroup(root, 2, "sys/fs/cgroup/kubepods/pod1", bytes(8 * kGiB), 6 * kGiB);
  put_cgroup(root, 2, "sys/fs/cgroup/kubepods", bytes(32 * kGiB), 20 * kGiB);
  EXPECT_EQ(host_available_memory(root.path()), 2 * kGiB);
}

TEST(HostAvailableMemory, ReadsANamespacedContainerAtTheMountRoot) {
  const TempDir root;
  write_machine(root, 2, "/");
  put_cgroup(root, 2, "sys/fs/cgroup", bytes(2 * kGiB), kGiB / 2);
  EXPECT_EQ(host_available_memory(root.path()), kGiB + kGiB / 2);
}

TEST(HostAvailableMemory, ReadsCgroupV1AndIgnoresItsUnlimitedValue) {
  const TempDir root;
  write_machine(root, 1, "/docker/abc");
  put_cgroup(root, 1, "sys/fs/cgroup/memory/docker/abc", "9223372036854771712", kGiB);
  EXPECT_EQ(host_available_memory(root.path()), 16 * kGiB);
  put_cgroup(root, 1, "sys/fs/cgroup/memory/docker/abc", bytes(5 * kGiB), kGiB);
  EXPECT_EQ(host_available_memory(root.path()), 4 * kGiB);
}

TEST(HostAvailableMemory, V1PathOutsideTheMountFallsBackToTheMountRoot) {
  const TempDir root;
  write_machine(root, 1, "/process_api/0d19");  // a layout seen in a sandbox: no such directory
  put_cgroup(root, 1, "sys/fs/cgroup/memory", bytes(6 * kGiB), kGiB);
  EXPECT_EQ(host_available_memory(root.path()), 5 * kGiB);
}

TEST(HostAvailableMemory, UsageAboveTheLimitLeavesNothing) {
  const TempDir root;
  write_machine(root, 2, "/");
  put_cgroup(root, 2, "sys/fs/cgroup", bytes(kGiB), kGiB + 4096);
  EXPECT_EQ(host_available_memory(root.path()), 0u);
}

TEST(HostAvailableMemory, UsesTheCgroupAloneWithoutMeminfoAndNothingWithoutEither) {
  const TempDir root;
  EXPECT_EQ(host_available_memory(root.path()), std::nullopt);
  put(root, "proc/meminfo", "MemTotal:       67108864 kB\nMemAvailable:   lots kB\n");
  EXPECT_EQ(host_available_memory(root.path()), std::nullopt);
  put(root, "sys/fs/cgroup/cgroup.controllers", "memory\n");
  put(root, "sys/fs/cgroup/memory.max", bytes(3 * kGiB) + "\n");
  put(root, "sys/fs/cgroup/memory.current", "garbage\n");
  EXPECT_EQ(host_available_memory(root.path()), std::nullopt);
  put(root, "sys/fs/cgroup/memory.current", bytes(kGiB) + "\n");
  EXPECT_EQ(host_available_memory(root.path()), 2 * kGiB);
}

TEST(HostMemory, AvailableIsWhatThisMachineReports) {
  const std::optional<uint64_t> machine = host_available_memory("/");
  const uint64_t available = host_memory().available();
  EXPECT_GT(available, 0u);
  // Other processes allocate meanwhile: the two reads agree to within a quarter.
  if (machine) {
    EXPECT_LT(available, *machine + *machine / 4);
    EXPECT_GT(available, *machine - *machine / 4);
  }
}

}  // namespace
}  // namespace tokenmill
