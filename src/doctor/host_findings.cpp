// Verdicts on the host (memory and CPU limits of a container) and on the CPU backend's ISA.
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "doctor/findings.h"

namespace tokenmill::doctor {

std::string_view status_name(Status status) {
  switch (status) {
    case Status::Ok: return "ok";
    case Status::Info: return "info";
    case Status::Warn: return "warn";
    case Status::Fail: return "fail";
  }
  return "?";
}

std::vector<Finding> host_findings(const HostFacts& host) {
  std::vector<Finding> out;
  if (!host.container.empty())
    out.push_back({"container", Status::Info,
                   fmt::format("running in {} ({})", host.container, host.container_evidence), ""});
  const auto& mem = host.memory_limit_bytes;
  if (mem.known && mem.value && host.memory_total_bytes) {
    const double ram = static_cast<double>(*host.memory_total_bytes);
    if (*mem.value < ram / 2)
      out.push_back({"memory", Status::Warn,
                     fmt::format("cgroup memory limit {} of {} RAM", gib(*mem.value), gib(ram)),
                     fmt::format("weights, KV cache and activations must fit in {} or the kernel OOM-kills "
                                 "tokenmill: raise the limit (docker run --memory, Kubernetes "
                                 "resources.limits.memory) or use a smaller or quantized model",
                                 gib(*mem.value))});
    else
      out.push_back({"memory", Status::Ok,
                     fmt::format("cgroup memory limit {} of {} RAM", gib(*mem.value), gib(ram)), ""});
  } else if (!host.memory_total_bytes) {
    out.push_back({"memory", Status::Warn, "total memory unknown (proc/meminfo missing or malformed)",
                   "check that /proc is mounted"});
  }
  if (host.transparent_hugepages == "never")
    out.push_back({"huge pages", Status::Warn,
                   "transparent huge pages are off: CPU decode streams its weights from 4 KiB pages, "
                   "where the hardware prefetchers stop at every page (2-18% slower decode than on 2 MiB "
                   "pages on a 2-core Xeon VM, bench/RESULTS.md)",
                   "echo madvise | sudo tee /sys/kernel/mm/transparent_hugepage/enabled (tokenmill asks for "
                   "huge pages where it streams memory; 'madvise' keeps them away from other programs)"});
  else if (!host.transparent_hugepages.empty())
    out.push_back(
        {"huge pages", Status::Ok,
         fmt::format("transparent huge pages '{}': tokenmill's buffers, and its weights with --no-mmap, "
                     "are on 2 MiB pages",
                     host.transparent_hugepages),
         ""});
  const int cpus = host.affinity_cpus > 0 ? host.affinity_cpus : host.online_cpus;
  const auto& quota = host.cpu_limit;
  if (quota.known && quota.value && cpus > 0 && std::ceil(*quota.value) < cpus) {
    const int threads = std::max(1, static_cast<int>(std::floor(*quota.value)));
    out.push_back(
        {"cpu quota", Status::Warn,
         fmt::format("cgroup CPU quota {:.2g} CPUs but {} CPUs are visible: the default thread count "
                     "starts {} threads that the quota throttles",
                     *quota.value, cpus, cpus),
         fmt::format("run with -t {} (or OMP_NUM_THREADS={}), or raise the quota (docker run --cpus)",
                     threads, threads)});
  }
  if (host.affinity_cpus > 0 && host.online_cpus > host.affinity_cpus)
    out.push_back(
        {"cpu affinity", Status::Info,
         fmt::format("this process may run on {} of the {} online CPUs (cpuset or taskset); the default "
                     "thread count follows the {}",
                     host.affinity_cpus, host.online_cpus, host.affinity_cpus),
         ""});
  return out;
}

std::vector<Finding> cpu_findings(const CpuFacts& cpu) {
  std::vector<Finding> out;
  const CpuFeatures& f = cpu.features;
  const bool has_avx512 = f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq;
  const bool has_amx = has_avx512 && f.avx512bf16 && f.amx_bf16 && cpu.amx_granted;
  if (!cpu.isa_error.empty()) {
    out.push_back(
        {"cpu isa", Status::Fail, cpu.isa_error, "unset TOKENMILL_CPU_ISA or name an ISA this CPU has"});
    return out;
  }
  if (cpu.isa == "amx")
    out.push_back({"cpu isa", Status::Ok,
                   "the CPU backend runs its AVX-512 kernels (16 f32 lanes per instruction), and its "
                   "prefill matmuls over bf16 weights on AMX tiles",
                   ""});
  else if (cpu.isa == "avx512" && has_amx)
    out.push_back({"cpu isa", Status::Info, "TOKENMILL_CPU_ISA caps the CPU backend at AVX-512 on an AMX CPU",
                   "unset TOKENMILL_CPU_ISA for AMX prefill over bf16 weights"});
  else if (cpu.isa == "avx512")
    out.push_back({"cpu isa", Status::Ok,
                   "the CPU backend runs its AVX-512 kernels (16 f32 lanes per instruction)", ""});
  else if (has_avx512)
    out.push_back({"cpu isa", Status::Info,
                   "TOKENMILL_CPU_ISA caps the CPU backend at AVX2 on an AVX-512 CPU",
                   "unset TOKENMILL_CPU_ISA for the AVX-512 kernels (twice the vector width)"});
  else
    out.push_back({"cpu isa", Status::Info,
                   "the CPU backend runs its AVX2 kernels (8 f32 lanes); this CPU lacks AVX-512 F/BW/VL/DQ",
                   "a CPU with AVX-512 (Intel Xeon Skylake-SP or later, AMD Zen 4 or later) runs the same "
                   "kernels at twice the vector width"});
  if (cpu.isa == "avx512" || cpu.isa == "amx")
    out.push_back(
        f.avx512vnni
            ? Finding{"cpu vnni", Status::Ok,
                      "quantized (Q4/Q5/Q8/K) matmul uses AVX512-VNNI: one vpdpbusd does 4 int8 "
                      "multiply-adds per 32-bit lane",
                      ""}
            : Finding{"cpu vnni", Status::Info,
                      "no AVX512-VNNI: quantized matmul runs its AVX2 kernels (the f32 kernels still "
                      "use AVX-512)",
                      ""});
  const char* fma = cpu.isa == "avx2" ? "AVX2" : "AVX-512";
  if (cpu.isa == "amx")
    out.push_back({"cpu amx", Status::Ok,
                   "prefill matmuls over bf16 weights run on AMX tiles (one TDPBF16PS: 16x16x32 bf16 "
                   "multiply-adds), each f32 activation split into two bf16 parts (16 of its 24 bits)",
                   ""});
  else if (f.amx_tile && f.amx_bf16 && !cpu.amx_granted)
    out.push_back({"cpu amx", Status::Warn,
                   fmt::format("the CPU has AMX-BF16 but Linux did not grant the process its tile state "
                               "(arch_prctl ARCH_REQ_XCOMP_PERM): bf16 prefill runs on {} FMA",
                               fma),
                   "Linux grants it from 5.16 on unless a seccomp filter or a too-small signal stack "
                   "refuses it"});
  else if (f.amx_tile && f.amx_bf16 && !f.avx512bf16)
    out.push_back({"cpu amx", Status::Info,
                   fmt::format("AMX-BF16 without AVX512-BF16 (the AMX GEMM rounds activations with it): "
                               "bf16 prefill runs on {} FMA",
                               fma),
                   ""});
  else if (!has_amx)
    out.push_back({"cpu amx", Status::Info,
                   fmt::format("no AMX-BF16: bf16-weight prefill runs on {} FMA (Intel Xeon Sapphire "
                               "Rapids or later has AMX)",
                               fma),
                   ""});
  return out;
}

}  // namespace tokenmill::doctor
