// Host facts from a faked root: proc/, sys/, etc/ and dev/ written into a temporary
// directory. Well-formed files give the values; missing or malformed ones give "unknown".
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "doctor/doctor.h"
#include "doctor/host_facts.h"
#include "support/temp_dir.h"

namespace tokenmill::doctor {
namespace {

using ::testing::HasSubstr;
using tokenmill::testing::TempDir;

// Writes root/relative (creating its directories).
void put(const TempDir& root, const std::string& relative, const std::string& contents) {
  std::filesystem::create_directories((root.path() / relative).parent_path());
  root.write(relative, contents);
}

void expect_no_limits(const HostFacts& host) {
  EXPECT_TRUE(host.memory_limit_bytes.known);
  EXPECT_FALSE(host.memory_limit_bytes.value);
  EXPECT_TRUE(host.cpu_limit.known);
  EXPECT_FALSE(host.cpu_limit.value);
}

HostFacts probe(const TempDir& root) {
  HostProbeOptions options;
  options.root = root.path();
  return probe_host(options);
}

void write_machine(const TempDir& root) {
  put(root, "etc/os-release", "NAME=\"Ubuntu\"\nVERSION_ID=\"22.04\"\nPRETTY_NAME=\"Ubuntu 22.04.4 LTS\"\n");
  put(root, "proc/sys/kernel/osrelease", "5.15.0-105-generic\n");
  put(root, "proc/cpuinfo",
      "processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R) Platinum 8480+\nflags\t\t: "
      "fpu\n\n"
      "processor\t: 1\nmodel name\t: Intel(R) Xeon(R) Platinum 8480+\n");
  put(root, "proc/meminfo",
      "MemTotal:       65536000 kB\nMemFree:        1000 kB\nMemAvailable:   32768000 kB\n");
  put(root, "sys/devices/system/cpu/online", "0-7,16-23\n");
}

TEST(HostFacts, ReadsADockerContainerWithCgroupV1Limits) {
  const TempDir root;
  write_machine(root);
  put(root, ".dockerenv", "");
  put(root, "proc/self/cgroup",
      "12:memory:/docker/abc\n4:cpu,cpuacct:/docker/abc\n1:name=systemd:/docker/abc\n");
  put(root, "sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes", "4294967296\n");
  put(root, "sys/fs/cgroup/cpu,cpuacct/docker/abc/cpu.cfs_quota_us", "250000\n");
  put(root, "sys/fs/cgroup/cpu,cpuacct/docker/abc/cpu.cfs_period_us", "100000\n");
  put(root, "dev/nvidiactl", "");
  put(root, "dev/nvidia0", "");

  const HostFacts host = probe(root);
  EXPECT_EQ(host.os, "Ubuntu 22.04.4 LTS");
  EXPECT_EQ(host.kernel, "5.15.0-105-generic");
  EXPECT_EQ(host.cpu_model, "Intel(R) Xeon(R) Platinum 8480+");
  EXPECT_EQ(host.online_cpus, 16);
  EXPECT_EQ(host.memory_total_bytes, 65536000ull * 1024);
  EXPECT_EQ(host.memory_available_bytes, 32768000ull * 1024);
  EXPECT_EQ(host.container, "docker");
  EXPECT_EQ(host.container_evidence, "/.dockerenv");
  EXPECT_EQ(host.cgroup_version, 1);
  ASSERT_TRUE(host.memory_limit_bytes.known);
  EXPECT_EQ(host.memory_limit_bytes.value, 4294967296.0);
  ASSERT_TRUE(host.cpu_limit.known);
  EXPECT_EQ(host.cpu_limit.value, 2.5);
  EXPECT_EQ(host.nvidia_device_nodes, (std::vector<std::string>{"nvidia0", "nvidiactl"}));
  EXPECT_FALSE(host.glibc.empty());
}

TEST(HostFacts, CgroupV1WithoutALimitIsUnlimited) {
  const TempDir root;
  put(root, "proc/self/cgroup", "4:memory:/\n3:cpu,cpuacct:/\n");
  put(root, "sys/fs/cgroup/memory/memory.limit_in_bytes", "9223372036854771712\n");
  put(root, "sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us", "-1\n");
  put(root, "sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us", "100000\n");
  const HostFacts host = probe(root);
  EXPECT_EQ(host.cgroup_version, 1);
  expect_no_limits(host);
}

TEST(HostFacts, ReadsKubernetesCgroupV2Limits) {
  const TempDir root;
  put(root, "proc/self/cgroup", "0::/kubepods/burstable/pod1/c1\n");
  put(root, "sys/fs/cgroup/cgroup.controllers", "cpu memory\n");
  put(root, "sys/fs/cgroup/kubepods/burstable/pod1/c1/memory.max", "8589934592\n");
  put(root, "sys/fs/cgroup/kubepods/burstable/pod1/c1/cpu.max", "150000 100000\n");
  const HostFacts host = probe(root);
  EXPECT_EQ(host.container, "kubernetes");
  EXPECT_EQ(host.cgroup_version, 2);
  EXPECT_EQ(host.memory_limit_bytes.value, 8589934592.0);
  EXPECT_EQ(host.cpu_limit.value, 1.5);
}

TEST(HostFacts, CgroupV2NamespaceRootWithoutLimits) {
  const TempDir root;
  put(root, "proc/self/cgroup", "0::/\n");
  put(root, "sys/fs/cgroup/cgroup.controllers", "cpu memory\n");
  put(root, "sys/fs/cgroup/memory.max", "max\n");
  put(root, "sys/fs/cgroup/cpu.max", "max 100000\n");
  put(root, "run/.containerenv", "");
  const HostFacts host = probe(root);
  EXPECT_EQ(host.container, "podman");
  EXPECT_EQ(host.cgroup_version, 2);
  expect_no_limits(host);
}

TEST(HostFacts, MalformedFilesGiveUnknownNotACrash) {
  const TempDir root;
  put(root, "etc/os-release", "garbage without equals\n=\n");
  put(root, "proc/cpuinfo", "model name without colon\n");
  put(root, "proc/meminfo", "MemTotal: lots kB\nMemAvailable: 99999999999999999999999 kB\n");
  put(root, "sys/devices/system/cpu/online", "a-b\n");
  put(root, "proc/self/cgroup", "nonsense\n0::\n");
  put(root, "sys/fs/cgroup/cgroup.controllers", "");
  put(root, "sys/fs/cgroup/memory.max", "garbage\n");
  put(root, "sys/fs/cgroup/cpu.max", "100 0\n");
  const HostFacts host = probe(root);
  EXPECT_EQ(host.os, "");
  EXPECT_EQ(host.cpu_model, "");
  EXPECT_EQ(host.online_cpus, 0);
  EXPECT_FALSE(host.memory_total_bytes);
  EXPECT_FALSE(host.memory_available_bytes);
  EXPECT_FALSE(host.memory_limit_bytes.known);
  EXPECT_FALSE(host.cpu_limit.known);

  DoctorOptions options;
  options.root = root.path();
  options.library_dirs = std::vector<std::string>{};
  options.self_test = false;
  const DoctorReport report = run_doctor(options);
  const std::string text = to_text(report);
  EXPECT_THAT(text, HasSubstr("  os                     unknown\n"));
  EXPECT_THAT(text, HasSubstr("  memory                 unknown\n"));
  EXPECT_THAT(text, HasSubstr("v2: memory unknown, cpu unknown"));
  EXPECT_TRUE(to_json(report)["host"]["memory_total_bytes"].is_null());
}

TEST(HostFacts, EmptyRootIsAllUnknown) {
  const TempDir root;
  const HostFacts host = probe(root);
  EXPECT_EQ(host.kernel, "");
  EXPECT_EQ(host.cgroup_version, 0);
  EXPECT_EQ(host.container, "");
  EXPECT_TRUE(host.nvidia_device_nodes.empty());
}

TEST(HostFacts, ReadsTheTransparentHugePageMode) {
  const TempDir root;
  write_machine(root);
  EXPECT_EQ(probe(root).transparent_hugepages, "");  // no file: unknown
  put(root, "sys/kernel/mm/transparent_hugepage/enabled", "always [madvise] never\n");
  EXPECT_EQ(probe(root).transparent_hugepages, "madvise");
  put(root, "sys/kernel/mm/transparent_hugepage/enabled", "always madvise never\n");  // none selected
  EXPECT_EQ(probe(root).transparent_hugepages, "");
}

TEST(HostFacts, SelectedModeIsTheBracketedWord) {
  EXPECT_EQ(selected_mode("[always] madvise never"), "always");
  EXPECT_EQ(selected_mode("always madvise [never]\n"), "never");
  EXPECT_EQ(selected_mode("always ] madvise [never"), "");
  EXPECT_EQ(selected_mode(""), "");
}

TEST(HostFacts, CountsCpuLists) {
  EXPECT_EQ(count_cpu_list("0-3,8,10-11\n"), 7);
  EXPECT_EQ(count_cpu_list("0"), 1);
  EXPECT_EQ(count_cpu_list(""), std::nullopt);
  EXPECT_EQ(count_cpu_list("3-1"), std::nullopt);
  EXPECT_EQ(count_cpu_list("0-3,"), std::nullopt);
  EXPECT_EQ(count_cpu_list("x"), std::nullopt);
}

}  // namespace
}  // namespace tokenmill::doctor
