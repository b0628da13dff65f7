// The human report: short aligned sections, then every finding, then the verdict; the first
// blocking problem, when there is one, is printed last.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "doctor/doctor.h"

namespace tokenmill::doctor {

namespace {

class Section {
 public:
  Section(std::string& out, std::string_view title) : out_(out) { out_ += fmt::format("\n{}\n", title); }
  void row(std::string_view key, std::string_view value) { out_ += fmt::format("  {:<22} {}\n", key, value); }

 private:
  std::string& out_;
};

std::string or_unknown(const std::string& s) { return s.empty() ? "unknown" : s; }

std::string limit_text(const CgroupLimit& limit, bool bytes) {
  if (!limit.known) return "unknown";
  if (!limit.value) return "unlimited";
  return bytes ? gib(*limit.value) : fmt::format("{:.2g} CPUs", *limit.value);
}

std::string version_or(const std::optional<Version>& v, std::string_view none) {
  return v ? v->text() : std::string(none);
}

void host_section(std::string& out, const HostFacts& h) {
  Section s(out, "Host");
  s.row("os", or_unknown(h.os));
  s.row("kernel", or_unknown(h.kernel));
  s.row("glibc", or_unknown(h.glibc));
  s.row("cpu", fmt::format("{}; {} online, {} usable by this process", or_unknown(h.cpu_model),
                           h.online_cpus > 0 ? std::to_string(h.online_cpus) : "unknown",
                           h.affinity_cpus > 0 ? std::to_string(h.affinity_cpus) : "unknown"));
  s.row("memory", h.memory_total_bytes
                      ? fmt::format("{} total, {} available", gib(double(*h.memory_total_bytes)),
                                    h.memory_available_bytes ? gib(double(*h.memory_available_bytes))
                                                             : std::string("unknown"))
                      : "unknown");
  s.row("huge pages",
        h.transparent_hugepages.empty() ? "unknown" : "transparent, " + h.transparent_hugepages);
  s.row("container",
        h.container.empty() ? "none detected" : fmt::format("{} ({})", h.container, h.container_evidence));
  s.row("cgroup", h.cgroup_version == 0
                      ? "unknown"
                      : fmt::format("v{}: memory {}, cpu {}", h.cgroup_version,
                                    limit_text(h.memory_limit_bytes, true), limit_text(h.cpu_limit, false)));
  s.row("/dev/nvidia*",
        h.nvidia_device_nodes.empty() ? "none" : fmt::format("{}", fmt::join(h.nvidia_device_nodes, " ")));
  s.row("CUDA_VISIBLE_DEVICES", h.cuda_visible_devices ? "'" + *h.cuda_visible_devices + "'" : "unset");
  s.row("NVIDIA_VISIBLE_DEVICES", h.nvidia_visible_devices ? "'" + *h.nvidia_visible_devices + "'" : "unset");
}

void cpu_section(std::string& out, const CpuFacts& c) {
  Section s(out, "CPU");
  s.row("features", cpu_features_string());
  const CpuFeatures& f = c.features;
  s.row("amx", f.amx_tile ? fmt::format("tile{}{}{}", f.amx_bf16 ? " bf16" : "", f.amx_int8 ? " int8" : "",
                                        f.amx_bf16 && !c.amx_granted ? " (tile state not granted)" : "")
                          : "no");
  s.row("backend isa", c.isa.empty() ? "refused: " + c.isa_error : c.isa);
}

void gpu_section(std::string& out, const DoctorReport& r) {
  Section s(out, "GPU stack");
  s.row("cuda backend", kBuildHasCudaBackend ? "built (self-tested on each GPU); " + std::string(kGpuCommands)
                                             : "not in this build");
  s.row(
      "build expects",
      fmt::format("CUDA {}, cuBLAS {}, cuDNN {}, NCCL {}", version_or(r.expected.cuda, "not recorded"),
                  version_or(r.expected.cublas, "not recorded"), version_or(r.expected.cudnn, "not recorded"),
                  version_or(r.expected.nccl, "not recorded")));
  const CudaDriverFacts& d = r.gpu.driver;
  if (!d.load.loaded)
    s.row("driver", "not found: " + d.load.error);
  else
    s.row("driver", fmt::format("{}; supports CUDA {}{}", d.load.path,
                                d.cuda_version ? d.cuda_version->short_text() : "unknown",
                                d.init_result == 0 ? "" : "; cuInit: " + d.init_error));
  for (const CudaLibraryFacts& lib : r.gpu.libraries)
    s.row(lib.name, lib.load.loaded ? fmt::format("{} at {}", lib.version->text(), lib.load.path)
                                    : "not found: " + lib.load.error);
  const NvmlFacts& n = r.gpu.nvml;
  s.row("nvml", n.load.loaded ? fmt::format("driver {}", or_unknown(n.driver_version))
                              : "not found: " + n.load.error);
  for (const CudaDevice& g : d.devices)
    s.row(fmt::format("gpu {}", g.index),
          fmt::format("{}, sm_{}{}, {}, {} SMs", g.name, g.cc_major, g.cc_minor, gib(double(g.memory_bytes)),
                      g.multiprocessors));
  for (const NvmlDevice& g : n.devices) {
    const auto on_off = [](std::optional<bool> b) { return b ? (*b ? "on" : "off") : "n/a"; };
    s.row(fmt::format("nvml {}", g.index),
          fmt::format("ECC {}, persistence {}, SM {}/{} MHz, {:.0f}/{:.0f} W, {}% busy, {} of {} used",
                      on_off(g.ecc_enabled), on_off(g.persistence_mode), g.sm_clock_mhz.value_or(0),
                      g.max_sm_clock_mhz.value_or(0), g.power_watts.value_or(0),
                      g.power_limit_watts.value_or(0), g.gpu_utilization_percent.value_or(0),
                      gib(double(g.memory_used_bytes.value_or(0))),
                      gib(double(g.memory_total_bytes.value_or(0)))));
  }
  for (const GpuLink& l : n.links)
    s.row(fmt::format("link {}-{}", l.a, l.b),
          fmt::format("{}{}", l.level, l.nvlink == true ? ", NVLink" : ""));
}

void self_test_section(std::string& out, const DoctorReport& r) {
  Section s(out, "Self-test");
  if (r.self_tests.empty())
    s.row("cpu", r.cpu.isa_error.empty() ? "not run (--no-self-test)" : "not run: no CPU ISA");
  for (const SelfTestResult& t : r.self_tests)
    s.row(t.device, fmt::format("{}: error {:.1e} (tol {:.0e}), {:.1f} GFLOP/s, {:.2f} GB/s, {}", t.name,
                                t.max_relative_error, t.tolerance, t.gflops_per_s, t.gbytes_per_s,
                                t.passed ? "ok" : "FAIL"));
  for (const std::string& why : r.gpu_self_test_skipped) s.row("gpu", "skipped: " + why);
}

void verdict_section(std::string& out, const DoctorReport& r) {
  Section s(out, "Verdict");
  int warnings = 0;
  for (const Finding& f : r.findings) {
    warnings += f.status == Status::Warn;
    out += fmt::format("  {:<4} {:<12} {}\n", status_name(f.status), f.area, f.found);
    if (!f.fix.empty()) out += fmt::format("  {:<4} {:<12} fix: {}\n", "", "", f.fix);
  }
  if (const Finding* blocking = first_blocking(r)) {
    out += fmt::format("\nnot ready ({}): {}\n  fix: {}\n", blocking->area, blocking->found, blocking->fix);
    return;
  }
  out += fmt::format("\nready for CPU work (CPU backend, {}){}{}\n", r.cpu.isa,
                     !cuda_devices_found(r.gpu) ? "; no usable GPU"
                     : kBuildHasCudaBackend     ? "; GPU found: generate and chat use it"
                                                : "; GPU found, but this build has no CUDA backend",
                     warnings > 0 ? fmt::format("; {} warning(s) above", warnings) : "");
}

}  // namespace

std::string to_text(const DoctorReport& report) {
  std::string out = "tokenmill doctor\n";
  host_section(out, report.host);
  cpu_section(out, report.cpu);
  gpu_section(out, report);
  self_test_section(out, report);
  verdict_section(out, report);
  return out;
}

}  // namespace tokenmill::doctor
