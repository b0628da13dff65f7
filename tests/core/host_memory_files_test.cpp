// The parsers of /proc/meminfo, /proc/self/cgroup and the cgroup memory files on real file
// contents, malformed ones (nullopt, never a throw or crash) and random garbage.
#include <gtest/gtest.h>

#include <random>
#include <string>

#include "core/host_memory_files.h"

namespace tokenmill {
namespace {

TEST(HostMemoryFiles, ParsesMeminfo) {
  const std::string meminfo =
      "MemTotal:       65536000 kB\nMemFree:            1000 kB\nMemAvailable:   32768000 kB\n"
      "HugePages_Total:       0\nHugepagesize:       2048 kB\n";
  EXPECT_EQ(meminfo_bytes(meminfo, "MemTotal"), 65536000ull * 1024);
  EXPECT_EQ(meminfo_bytes(meminfo, "MemAvailable"), 32768000ull * 1024);
  EXPECT_EQ(meminfo_bytes(meminfo, "MemAvail"), std::nullopt);
  EXPECT_EQ(meminfo_bytes(meminfo, "HugePages_Total"), std::nullopt);  // no unit: not a size
  EXPECT_EQ(meminfo_bytes(meminfo, "Cached"), std::nullopt);
  EXPECT_EQ(meminfo_bytes("MemAvailable: lots kB\n", "MemAvailable"), std::nullopt);
  EXPECT_EQ(meminfo_bytes("MemAvailable: 99999999999999999999999 kB\n", "MemAvailable"), std::nullopt);
  EXPECT_EQ(meminfo_bytes("MemAvailable: 18014398509481984 kB\n", "MemAvailable"), std::nullopt);  // 2^54 KiB
  EXPECT_EQ(meminfo_bytes("MemAvailable: 18014398509481983 kB", "MemAvailable"), 18014398509481983ull * 1024);
  EXPECT_EQ(proc_field("processor\t: 0\nmodel name\t: Intel(R) Xeon(R)\n", "model name"), "Intel(R) Xeon(R)");
}

TEST(HostMemoryFiles, ParsesProcSelfCgroup) {
  const ProcSelfCgroup v1 =
      parse_proc_self_cgroup("12:memory:/docker/abc\n4:cpu,cpuacct:/docker/abc\n1:name=systemd:/x\n0::/\n");
  EXPECT_EQ(v1.unified, "/");
  EXPECT_EQ(v1.controllers.at("memory"), "/docker/abc");
  EXPECT_EQ(v1.controllers.at("cpu"), "/docker/abc");
  EXPECT_EQ(v1.controllers.at("cpuacct"), "/docker/abc");
  EXPECT_EQ(v1.controllers.at("name=systemd"), "/x");
  EXPECT_EQ(v1.paths, (std::vector<std::string>{"/docker/abc", "/docker/abc", "/x", "/"}));
  const ProcSelfCgroup v2 = parse_proc_self_cgroup("0::/kubepods/pod1/c1");
  EXPECT_EQ(v2.unified, "/kubepods/pod1/c1");
  EXPECT_TRUE(v2.controllers.empty());
  const ProcSelfCgroup bad = parse_proc_self_cgroup("nonsense\n7:memory\n\n");
  EXPECT_FALSE(bad.unified);
  EXPECT_TRUE(bad.controllers.empty());
  EXPECT_TRUE(bad.paths.empty());
}

TEST(HostMemoryFiles, ParsesCgroupValues) {
  EXPECT_EQ(parse_decimal_u64("1073741824\n"), 1073741824u);
  EXPECT_EQ(parse_decimal_u64(" 7 "), 7u);
  EXPECT_EQ(parse_decimal_u64("18446744073709551616"), std::nullopt);
  for (const char* bad : {"", "\n", "-1", "12 kB", "0x10", "1 2", "+5"})
    EXPECT_EQ(parse_decimal_u64(bad), std::nullopt) << bad;
  EXPECT_EQ(parse_cgroup_memory_limit("8589934592\n"), 8589934592u);
  EXPECT_EQ(parse_cgroup_memory_limit("max\n"), kNoCgroupMemoryLimit);
  EXPECT_EQ(parse_cgroup_memory_limit("9223372036854771712\n"), kNoCgroupMemoryLimit);  // v1 "none"
  EXPECT_EQ(parse_cgroup_memory_limit("4611686018427387903"), 4611686018427387903u);    // 2^62 - 1
  EXPECT_EQ(parse_cgroup_memory_limit("garbage\n"), std::nullopt);
  EXPECT_EQ(parse_cgroup_memory_limit("maximum"), std::nullopt);
}

TEST(HostMemoryFiles, GarbageNeverThrows) {
  std::mt19937_64 rng(11);
  const std::string alphabet = "0123456789:,/ \n\tkBmaxMemAvailable-";
  for (int trial = 0; trial < 2000; ++trial) {
    std::string text(rng() % 64, ' ');
    for (char& c : text) c = alphabet[rng() % alphabet.size()];
    EXPECT_NO_THROW({
      (void)meminfo_bytes(text, "MemAvailable");
      (void)parse_proc_self_cgroup(text);
      (void)parse_decimal_u64(text);
      (void)parse_cgroup_memory_limit(text);
    });
  }
}

}  // namespace
}  // namespace tokenmill
