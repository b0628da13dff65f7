// The CPU kernels' f32 -> bf16 / f16 rounding (KernelTable::convert_from_f32, behind
// Backend::convert and store_kv) against core/dtype.h's scalar reference, bit for bit, on
// every instruction set this CPU runs: ties, overflow, f16 subnormals, infinities, zeros and
// NaNs with payloads, at lengths that leave tails of every size.
#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/cpu_features.h"
#include "backend/cpu/kernels.h"
#include "core/dtype.h"

namespace tokenmill {
namespace {

std::vector<const cpu::KernelTable*> tables() {
  std::vector<const cpu::KernelTable*> list = {&cpu::kernels_avx2()};
  if (cpu_supports(CpuIsa::Avx512)) list.push_back(&cpu::kernels_avx512());
  return list;
}

// Values whose rounding is easy to get wrong, then random ones over many binades.
std::vector<float> hard_values() {
  std::vector<uint32_t> bits = {
      0x00000000u, 0x80000000u,               // +-0
      0x7f800000u, 0xff800000u,               // +-inf
      0x7fc00000u, 0xffc00000u,               // quiet NaNs
      0x7f800001u, 0xff812345u, 0x7fbfffffu,  // signalling NaNs with payloads
      0x7fffffffu, 0xffffffffu,               // NaN, all payload bits
      0x3f808000u, 0x3f818000u,               // bf16 ties: to even down, to even up
      0x3f807fffu, 0x3f808001u,               // just below / above a bf16 tie
      0x7f7fffffu, 0xff7fffffu,               // +-FLT_MAX: bf16 rounds to inf
      0x477fe000u, 0x477ff000u, 0x477fefffu,  // f16 max 65504, 65520 (-> inf), just below
      0x38800000u, 0x387fffffu,               // f16 smallest normal, just below (subnormal)
      0x33800000u, 0x33000000u, 0x33000001u,  // f16 smallest subnormal, half of it (tie -> 0), above
      0x33c00000u, 0x34200000u,               // f16 subnormal ties: 1.5 and 2.5 x 2^-24
      0x00000001u, 0x807fffffu,               // f32 subnormals
      0x3f800000u, 0xc0490fdbu,               // 1, -pi
  };
  std::vector<float> values;
  for (const uint32_t b : bits) values.push_back(std::bit_cast<float>(b));
  std::mt19937 rng(7);
  std::uniform_int_distribution<uint32_t> any;
  for (int i = 0; i < 2000; ++i) values.push_back(std::bit_cast<float>(any(rng)));
  return values;
}

TEST(CpuConvertFromF32, MatchesTheScalarRoundingBitForBit) {
  const std::vector<float> values = hard_values();
  for (const cpu::KernelTable* kernels : tables()) {
    for (const DType dtype : {DType::F32, DType::BF16, DType::F16}) {
      SCOPED_TRACE(std::string(kernels->isa) + " " + std::string(dtype_name(dtype)));
      const size_t size = dtype_size(dtype);
      // Every length from 0 to 40 (all tails of 8 and 16 lanes), then all values at once; also
      // from one element further on into a destination one byte off (vectors off their
      // alignment). The destination has a guard byte on each side.
      for (size_t offset : {size_t{0}, size_t{1}}) {
        std::vector<size_t> lengths(41);
        std::iota(lengths.begin(), lengths.end(), size_t{0});
        lengths.push_back(values.size() - offset);
        for (const size_t n : lengths) {
          const float* src = values.data() + offset;
          std::vector<unsigned char> got(n * size + 2, 0xa5), want(n * size + 2, 0xa5);
          kernels->convert_from_f32(src, static_cast<int64_t>(n), dtype, got.data() + offset);
          for (size_t i = 0; i < n; ++i) store_from_f32(want.data() + offset, dtype, i, src[i]);
          ASSERT_EQ(got, want) << "n=" << n << " offset=" << offset;
        }
      }
    }
  }
}

}  // namespace
}  // namespace tokenmill
