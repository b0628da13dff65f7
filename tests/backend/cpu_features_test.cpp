// Run-time ISA selection: detection, the TOKENMILL_CPU_ISA override and backend names.
#include "backend/cpu/cpu_features.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>
#include <string>

#include "backend/cpu/cpu_backend.h"
#include "core/error.h"

namespace tokenmill {
namespace {

// Sets TOKENMILL_CPU_ISA for one scope and restores the previous value.
class ScopedIsaVariable {
 public:
  explicit ScopedIsaVariable(const char* value) {
    if (const char* old = std::getenv(kName)) saved_ = old;
    if (value != nullptr) {
      setenv(kName, value, 1);
    } else {
      unsetenv(kName);
    }
  }
  ~ScopedIsaVariable() {
    if (saved_) {
      setenv(kName, saved_->c_str(), 1);
    } else {
      unsetenv(kName);
    }
  }
  ScopedIsaVariable(const ScopedIsaVariable&) = delete;
  ScopedIsaVariable& operator=(const ScopedIsaVariable&) = delete;

 private:
  static constexpr const char* kName = "TOKENMILL_CPU_ISA";
  std::optional<std::string> saved_;
};

TEST(CpuFeatures, BaselineIsAlwaysAvailable) {
  EXPECT_TRUE(cpu_supports(CpuIsa::Avx2));
  EXPECT_TRUE(cpu_features().avx2);
  EXPECT_TRUE(cpu_features().fma);
  EXPECT_NE(cpu_features_string().find("avx2"), std::string::npos);
}

TEST(CpuFeatures, Avx512NeedsAllFourExtensions) {
  const CpuFeatures& f = cpu_features();
  EXPECT_EQ(cpu_supports(CpuIsa::Avx512), f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq);
}

TEST(CpuFeatures, AmxNeedsAvx512Bf16AndTheTileStateGranted) {
  const CpuFeatures& f = cpu_features();
  EXPECT_EQ(cpu_supports(CpuIsa::Amx), cpu_supports(CpuIsa::Avx512) && f.avx512bf16 && f.amx_tile &&
                                           f.amx_bf16 && amx_tile_state_granted());
  EXPECT_TRUE(!amx_tile_state_granted() || f.amx_tile);
  EXPECT_EQ(cpu_features_string().find("amx-bf16") != std::string::npos, f.amx_bf16);
}

TEST(CpuFeatures, ReportsVnniWhereDetected) {
  // The quantized matmul picks its AVX-512 kernels only with VNNI (cpu_backend.cpp).
  EXPECT_EQ(cpu_features_string().find("avx512vnni") != std::string::npos, cpu_features().avx512vnni);
}

TEST(CpuFeatures, ParsesIsaNames) {
  EXPECT_EQ(parse_cpu_isa("avx2"), CpuIsa::Avx2);
  EXPECT_EQ(parse_cpu_isa("avx512"), CpuIsa::Avx512);
  EXPECT_EQ(parse_cpu_isa("amx"), CpuIsa::Amx);
  EXPECT_THROW(parse_cpu_isa("sse2"), Error);
  EXPECT_THROW(parse_cpu_isa(""), Error);
  EXPECT_EQ(cpu_isa_name(CpuIsa::Avx2), "avx2");
  EXPECT_EQ(cpu_isa_name(CpuIsa::Avx512), "avx512");
  EXPECT_EQ(cpu_isa_name(CpuIsa::Amx), "amx");
}

TEST(CpuFeatures, BestIsaIsTheWidestSupported) {
  ScopedIsaVariable unset(nullptr);
  const CpuIsa widest = cpu_supports(CpuIsa::Amx)      ? CpuIsa::Amx
                        : cpu_supports(CpuIsa::Avx512) ? CpuIsa::Avx512
                                                       : CpuIsa::Avx2;
  EXPECT_EQ(best_cpu_isa(), widest);
}

TEST(CpuFeatures, EnvironmentVariableCapsTheIsa) {
  {
    ScopedIsaVariable force("avx2");
    EXPECT_EQ(best_cpu_isa(), CpuIsa::Avx2);
    EXPECT_EQ(make_cpu_backend()->name(), "cpu-avx2");
  }
  {
    ScopedIsaVariable force("avx9000");
    EXPECT_THROW(best_cpu_isa(), Error);
  }
  for (const CpuIsa isa : {CpuIsa::Avx512, CpuIsa::Amx}) {
    if (cpu_supports(isa)) continue;
    ScopedIsaVariable force(std::string(cpu_isa_name(isa)).c_str());
    EXPECT_THROW(best_cpu_isa(), Error);
    EXPECT_THROW(make_cpu_backend_for(isa), Error);
  }
  if (cpu_supports(CpuIsa::Amx)) {
    ScopedIsaVariable force("avx512");
    EXPECT_EQ(best_cpu_isa(), CpuIsa::Avx512);
  }
}

TEST(CpuFeatures, BackendNamesTheIsa) {
  EXPECT_EQ(make_cpu_backend_for(CpuIsa::Avx2)->name(), "cpu-avx2");
  if (cpu_supports(CpuIsa::Avx512)) {
    EXPECT_EQ(make_cpu_backend_for(CpuIsa::Avx512)->name(), "cpu-avx512");
  }
  if (cpu_supports(CpuIsa::Amx)) {
    EXPECT_EQ(make_cpu_backend_for(CpuIsa::Amx)->name(), "cpu-amx");
  }
}

}  // namespace
}  // namespace tokenmill
