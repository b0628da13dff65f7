// What the AMX translation units (amx_kernels.cpp, amx_attention.cpp) share: the tile
// configuration they load and a lane mask. Included by those files only (they are compiled
// with AVX-512 and AMX).
#pragma once

#include <immintrin.h>

#include <cstdint>

namespace tokenmill::cpu {
namespace {

// The 64-byte operand of ldtilecfg: palette 1, eight tiles of 16 rows x 64 bytes.
struct TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t bytes_per_row[16] = {64, 64, 64, 64, 64, 64, 64, 64};
  uint8_t rows[16] = {16, 16, 16, 16, 16, 16, 16, 16};
};

// The first `count` of 16 lanes (none when count <= 0).
__mmask16 first16(int64_t count) {
  return count >= 16  ? static_cast<__mmask16>(0xffff)
         : count <= 0 ? 0
                      : static_cast<__mmask16>((1u << count) - 1);
}

}  // namespace
}  // namespace tokenmill::cpu
