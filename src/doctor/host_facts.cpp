#include "doctor/host_facts.h"

#include <gnu/libc-version.h>
#include <sched.h>

#include <algorithm>
#include <map>
#include <sstream>
#include <string_view>

#include "core/host_memory_files.h"

namespace tokenmill::doctor {

namespace fs = std::filesystem;

namespace {

std::string trim(std::string_view s) {
  const auto first = s.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos) return "";
  return std::string(s.substr(first, s.find_last_not_of(" \t\r\n") - first + 1));
}

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

std::string os_release(const fs::path& root) {
  for (const char* file : {"etc/os-release", "usr/lib/os-release"}) {
    const auto text = read_host_file(root / file);
    if (!text) continue;
    std::map<std::string, std::string> keys;
    for (const std::string& line : lines(*text)) {
      const auto eq = line.find('=');
      if (eq == std::string::npos) continue;
      std::string value = trim(std::string_view(line).substr(eq + 1));
      if (value.size() >= 2 && (value.front() == '"' || value.front() == '\'') &&
          value.back() == value.front())
        value = value.substr(1, value.size() - 2);
      keys[trim(std::string_view(line).substr(0, eq))] = value;
    }
    if (!keys["PRETTY_NAME"].empty()) return keys["PRETTY_NAME"];
    if (!keys["NAME"].empty()) return trim(keys["NAME"] + " " + keys["VERSION_ID"]);
  }
  return "";
}

int affinity_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return 0;
  return CPU_COUNT(&set);
}

// The first of `mount_dir/path/file` and `mount_dir/file` that can be read: the process's own
// cgroup, or the mount's root when the container sees its cgroup as the root.
std::optional<std::string> read_cgroup_file(const fs::path& mount_dir, const std::string& path,
                                            const char* file) {
  if (auto text = read_host_file(mount_dir / fs::path(path).relative_path() / file)) return text;
  return read_host_file(mount_dir / file);
}

CgroupLimit limit(std::optional<double> value) { return {.known = true, .value = value}; }

// A memory.max / memory.limit_in_bytes file's limit, unknown when malformed.
CgroupLimit memory_limit(const std::string& text) {
  const std::optional<uint64_t> bytes = parse_cgroup_memory_limit(text);
  if (!bytes) return {};
  return limit(*bytes == kNoCgroupMemoryLimit ? std::nullopt : std::optional(static_cast<double>(*bytes)));
}

// cgroup v2: memory.max is "max" or bytes; cpu.max is "max PERIOD" or "QUOTA PERIOD".
void read_cgroup_v2(const fs::path& mount, const std::string& path, HostFacts& host) {
  if (auto text = read_cgroup_file(mount, path, "memory.max")) host.memory_limit_bytes = memory_limit(*text);
  if (auto text = read_cgroup_file(mount, path, "cpu.max")) {
    std::istringstream in(*text);
    std::string quota, period_text;
    in >> quota >> period_text;
    const auto period = parse_decimal_u64(period_text);
    if (quota == "max" && period)
      host.cpu_limit = limit(std::nullopt);
    else if (auto q = parse_decimal_u64(quota); q && period && *period > 0)
      host.cpu_limit = limit(static_cast<double>(*q) / static_cast<double>(*period));
  }
}

// cgroup v1: memory.limit_in_bytes (a value near 2^63 means none); cpu.cfs_quota_us (-1 = none)
// over cpu.cfs_period_us.
void read_cgroup_v1(const fs::path& cgroup_root, const ProcSelfCgroup& paths, HostFacts& host) {
  if (auto it = paths.controllers.find("memory"); it != paths.controllers.end())
    if (auto text = read_cgroup_file(cgroup_root / "memory", it->second, "memory.limit_in_bytes"))
      host.memory_limit_bytes = memory_limit(*text);
  const auto it = paths.controllers.find("cpu");
  if (it == paths.controllers.end()) return;
  for (const char* mount : {"cpu", "cpu,cpuacct", "cpuacct,cpu"}) {
    const auto quota = read_cgroup_file(cgroup_root / mount, it->second, "cpu.cfs_quota_us");
    const auto period = read_cgroup_file(cgroup_root / mount, it->second, "cpu.cfs_period_us");
    if (!quota || !period) continue;
    const auto p = parse_decimal_u64(*period);
    if (trim(*quota) == "-1" && p)
      host.cpu_limit = limit(std::nullopt);
    else if (auto q = parse_decimal_u64(*quota); q && p && *p > 0)
      host.cpu_limit = limit(static_cast<double>(*q) / static_cast<double>(*p));
    return;
  }
}

void detect_container(const fs::path& root, const ProcSelfCgroup& paths, HostFacts& host) {
  const auto cgroup_says = [&](std::string_view word) -> const std::string* {
    for (const std::string& p : paths.paths)
      if (p.find(word) != std::string::npos) return &p;
    return nullptr;
  };
  const auto found = [&host](const char* kind, std::string evidence) {
    host.container = kind;
    host.container_evidence = std::move(evidence);
  };
  std::error_code ec;
  if (const std::string* p = cgroup_says("kubepods"))
    found("kubernetes", "cgroup " + *p);
  else if (fs::exists(root / ".dockerenv", ec))
    found("docker", "/.dockerenv");
  else if (fs::exists(root / "run/.containerenv", ec))
    found("podman", "/run/.containerenv");
  else if (const std::string* d = cgroup_says("docker"))
    found("docker", "cgroup " + *d);
  else if (const std::string* c = cgroup_says("containerd"))
    found("containerd", "cgroup " + *c);
  else if (const std::string* l = cgroup_says("lxc"))
    found("lxc", "cgroup " + *l);
}

std::vector<std::string> nvidia_device_nodes(const fs::path& root) {
  std::vector<std::string> nodes;
  std::error_code ec;
  for (fs::directory_iterator it(root / "dev", ec), end; !ec && it != end; it.increment(ec)) {
    std::string name = it->path().filename().string();
    if (name.starts_with("nvidia")) nodes.push_back(std::move(name));
  }
  std::sort(nodes.begin(), nodes.end());
  return nodes;
}

}  // namespace

std::optional<int> count_cpu_list(const std::string& list) {
  const std::string text = trim(list);
  if (text.empty() || text.back() == ',') return std::nullopt;
  int count = 0;
  std::istringstream in(text);
  for (std::string range; std::getline(in, range, ',');) {
    const auto dash = range.find('-');
    const auto first = parse_decimal_u64(range.substr(0, dash));
    const auto last = dash == std::string::npos ? first : parse_decimal_u64(range.substr(dash + 1));
    if (!first || !last || *last < *first || *last - *first >= 1u << 20) return std::nullopt;
    count += static_cast<int>(*last - *first + 1);
  }
  return count;
}

std::string selected_mode(const std::string& modes) {
  const auto open = modes.find('['), close = modes.find(']');
  if (open == std::string::npos || close == std::string::npos || close < open) return "";
  return modes.substr(open + 1, close - open - 1);
}

HostFacts probe_host(const HostProbeOptions& options) {
  const fs::path& root = options.root;
  HostFacts host;
  host.os = os_release(root);
  host.kernel = trim(read_host_file(root / "proc/sys/kernel/osrelease").value_or(""));
  host.glibc = gnu_get_libc_version();
  if (auto cpuinfo = read_host_file(root / "proc/cpuinfo"))
    host.cpu_model = proc_field(*cpuinfo, "model name").value_or("");
  if (auto online = read_host_file(root / "sys/devices/system/cpu/online"))
    host.online_cpus = count_cpu_list(*online).value_or(0);
  host.affinity_cpus = affinity_cpus();
  if (auto meminfo = read_host_file(root / "proc/meminfo")) {
    host.memory_total_bytes = meminfo_bytes(*meminfo, "MemTotal");
    host.memory_available_bytes = meminfo_bytes(*meminfo, "MemAvailable");
  }
  if (auto thp = read_host_file(root / "sys/kernel/mm/transparent_hugepage/enabled"))
    host.transparent_hugepages = selected_mode(*thp);
  const ProcSelfCgroup paths = parse_proc_self_cgroup(read_host_file(root / "proc/self/cgroup").value_or(""));
  const fs::path cgroup_root = root / "sys/fs/cgroup";
  std::error_code ec;
  if (fs::exists(cgroup_root / "cgroup.controllers", ec)) {
    host.cgroup_version = 2;
    read_cgroup_v2(cgroup_root, paths.unified.value_or("/"), host);
  } else if (fs::exists(cgroup_root / "memory", ec) || fs::exists(cgroup_root / "cpu", ec)) {
    host.cgroup_version = 1;
    read_cgroup_v1(cgroup_root, paths, host);
  }
  detect_container(root, paths, host);
  host.nvidia_device_nodes = nvidia_device_nodes(root);
  host.cuda_visible_devices = options.cuda_visible_devices;
  host.nvidia_visible_devices = options.nvidia_visible_devices;
  return host;
}

}  // namespace tokenmill::doctor
