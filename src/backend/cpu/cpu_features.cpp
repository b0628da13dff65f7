#include "backend/cpu/cpu_features.h"

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
  return f;
}

}  // namespace

const CpuFeatures& cpu_features() {
  static const CpuFeatures features = detect();
  return features;
}

bool cpu_supports(CpuIsa isa) {
  const CpuFeatures& f = cpu_features();
  switch (isa) {
    case CpuIsa::Avx2: return f.avx2 && f.fma;
    case CpuIsa::Avx512: return f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq;
  }
  return false;
}

std::string_view cpu_isa_name(CpuIsa isa) { return isa == CpuIsa::Avx512 ? "avx512" : "avx2"; }

CpuIsa parse_cpu_isa(std::string_view name) {
  if (name == "avx2") return CpuIsa::Avx2;
  if (name == "avx512") return CpuIsa::Avx512;
  fail("unknown CPU ISA '{}': expected avx2 or avx512", name);
}

CpuIsa best_cpu_isa() {
  if (const char* forced = std::getenv("TOKENMILL_CPU_ISA"); forced != nullptr && *forced != '\0') {
    const CpuIsa isa = parse_cpu_isa(forced);
    if (!cpu_supports(isa))
      fail("TOKENMILL_CPU_ISA={} but this CPU lacks it (it has: {}); unset the variable or choose avx2",
           forced, cpu_features_string());
    return isa;
  }
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
  return s;
}

}  // namespace tokenmill
