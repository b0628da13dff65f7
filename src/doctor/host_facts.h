// Host facts: OS, kernel, glibc, CPU model and cores, memory, container and cgroup limits,
// the NVIDIA device nodes and the GPU-selection environment variables.
//
// Every file is read under `root` (normally "/"), so tests describe a machine with a
// temporary directory holding proc/, sys/, etc/ and dev/. A file that is missing or does
// not parse gives an unknown value (empty string, nullopt), never an error.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace tokenmill::doctor {

// A cgroup limit: unknown (file missing or malformed), unlimited, or a value.
struct CgroupLimit {
  bool known = false;
  std::optional<double> value;  // known and nullopt: unlimited
};

struct HostFacts {
  std::string os;         // PRETTY_NAME of etc/os-release
  std::string kernel;     // proc/sys/kernel/osrelease (what uname -r prints)
  std::string glibc;      // gnu_get_libc_version() of this process
  std::string cpu_model;  // first "model name" of proc/cpuinfo
  int online_cpus = 0;    // sys/devices/system/cpu/online; 0 = unknown
  int affinity_cpus = 0;  // CPUs this process may run on (sched_getaffinity); 0 = unknown
  std::optional<uint64_t> memory_total_bytes;      // proc/meminfo MemTotal
  std::optional<uint64_t> memory_available_bytes;  // proc/meminfo MemAvailable
  // The selected mode of sys/kernel/mm/transparent_hugepage/enabled ("always", "madvise" or
  // "never"); "" when unknown.
  std::string transparent_hugepages;
  std::string container;           // "docker", "podman", "kubernetes", ... or "" when none is detected
  std::string container_evidence;  // the file or cgroup path that says so
  int cgroup_version = 0;          // 1, 2, or 0 when unknown
  CgroupLimit memory_limit_bytes;  // memory.max / memory.limit_in_bytes
  CgroupLimit cpu_limit;           // CPUs: cpu.max / cpu.cfs_quota_us over the period
  std::vector<std::string> nvidia_device_nodes;  // dev/nvidia*, e.g. nvidia0, nvidiactl
  std::optional<std::string> cuda_visible_devices;
  std::optional<std::string> nvidia_visible_devices;
};

struct HostProbeOptions {
  std::filesystem::path root = "/";
  std::optional<std::string> cuda_visible_devices;  // the variables as this process sees them
  std::optional<std::string> nvidia_visible_devices;
};

HostFacts probe_host(const HostProbeOptions& options);

// The selected (bracketed) word of a kernel mode list such as "always [madvise] never"; ""
// when none is.
std::string selected_mode(const std::string& modes);

// The number of CPUs in a Linux CPU list such as "0-3,8,10-11" (sys/devices/system/cpu/online);
// nullopt when malformed.
std::optional<int> count_cpu_list(const std::string& list);

}  // namespace tokenmill::doctor
