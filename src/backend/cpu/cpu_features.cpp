#include "backend/cpu/cpu_features.h"

#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdlib>

#include "core/error.h"

namespace tokenmill {

namespace {

CpuFeatures detect() {
  __builtin_cpu_init();
  CpuFeatures f;
  f.avx2 = __builtin_cpu_supports("avx2");
  f.fma = __builtin_cpu_supports("fma");
  f.f16c = true;  // implied by the x86-64-v3 baseline the binary is compiled for
  f.avx512f = __builtin_cpu_supports("avx512f");
  f.avx512bw = __builtin_cpu_supports("avx512bw");
  f.avx512vl = __builtin_cpu_supports("avx512vl");
  f.avx512dq = __builtin_cpu_supports("avx512dq");
  f.avx512bf16 = __builtin_cpu_supports("avx512bf16");
  f.avx512vnni = __builtin_cpu_supports("avx512vnni");
  // CPUID.(7,0):EDX bits 24 (AMX-TILE), 22 (AMX-BF16), 25 (AMX-INT8); clang 14 knows no
  // names for them.
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) != 0) {
    f.amx_tile = (edx >> 24) & 1;
    f.amx_bf16 = (edx >> 22) & 1;
    f.amx_int8 = (edx >> 25) & 1;
  }
  return f;
}

}  // namespace

const CpuFeatures& cpu_features() {
  static const CpuFeatures features = detect();
  return features;
}

bool amx_tile_state_granted() {
  static const bool granted = [] {
    if (!cpu_features().amx_tile) return false;
    constexpr long kReqXcompPerm = 0x1023;  // ARCH_REQ_XCOMP_PERM
    constexpr long kXtileData = 18;         // XFEATURE_XTILEDATA
    return syscall(SYS_arch_prctl, kReqXcompPerm, kXtileData) == 0;
  }();
  return granted;
}

bool cpu_supports(CpuIsa isa) {
  const CpuFeatures& f = cpu_features();
  switch (isa) {
    case CpuIsa::Avx2: return f.avx2 && f.fma;
    case CpuIsa::Avx512: return f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq;
    case CpuIsa::Amx:
      return cpu_supports(CpuIsa::Avx512) && f.avx512bf16 && f.amx_bf16 && amx_tile_state_granted();
  }
  return false;
}

std::string_view cpu_isa_name(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::Avx2: return "avx2";
    case CpuIsa::Avx512: return "avx512";
    case CpuIsa::Amx: return "amx";
  }
  return "?";
}

CpuIsa parse_cpu_isa(std::string_view name) {
  for (const CpuIsa isa : {CpuIsa::Avx2, CpuIsa::Avx512, CpuIsa::Amx})
    if (name == cpu_isa_name(isa)) return isa;
  fail("unknown CPU ISA '{}': expected avx2, avx512 or amx", name);
}

CpuIsa best_cpu_isa() {
  if (const char* forced = std::getenv("TOKENMILL_CPU_ISA"); forced != nullptr && *forced != '\0') {
    const CpuIsa isa = parse_cpu_isa(forced);
    if (!cpu_supports(isa))
      fail("TOKENMILL_CPU_ISA={} but this CPU lacks it (it has: {}); unset the variable or choose avx2",
           forced, cpu_features_string());
    return isa;
  }
  if (cpu_supports(CpuIsa::Amx)) return CpuIsa::Amx;
  if (cpu_supports(CpuIsa::Avx512)) return CpuIsa::Avx512;
  if (cpu_supports(CpuIsa::Avx2)) return CpuIsa::Avx2;
  fail("this CPU lacks AVX2/FMA, which tokenmill's x86-64-v3 build requires");
}

std::string cpu_features_string() {
  const CpuFeatures& f = cpu_features();
  std::string s;
  const auto add = [&s](bool has, std::string_view name) {
    if (!has) return;
    if (!s.empty()) s += ' ';
    s += name;
  };
  add(f.avx2, "avx2");
  add(f.fma, "fma");
  add(f.f16c, "f16c");
  add(f.avx512f, "avx512f");
  add(f.avx512bw, "avx512bw");
  add(f.avx512vl, "avx512vl");
  add(f.avx512dq, "avx512dq");
  add(f.avx512bf16, "avx512bf16");
  add(f.avx512vnni, "avx512vnni");
  add(f.amx_tile, "amx-tile");
  add(f.amx_bf16, "amx-bf16");
  return s;
}

}  // namespace tokenmill
