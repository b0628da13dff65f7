#include "core/transpose.h"

#include <algorithm>

#include "core/error.h"
#include "core/parallel.h"

namespace tokenmill {

namespace {

// Square tiles of this many elements a side: a tile of 8-byte elements (32 KiB) is read
// and written within L1.
constexpr int64_t kTile = 64;
constexpr int64_t kMinTaskElements = 64 * 1024;

template <class T>
void transpose_typed(const T* src, int64_t rows, int64_t cols, T* dst) {
  const int64_t tiles = (cols + kTile - 1) / kTile;
  // Tasks of whole column tiles (dst's rows: no two tasks write one), each of at least about
  // kMinTaskElements: a small matrix stays on one thread.
  const int64_t grain = std::max<int64_t>(1, kMinTaskElements / (rows * kTile));
  parallel_for_balanced(tiles, grain, 1, [&](int64_t t0, int64_t t1) {
    const int64_t c_end = std::min(cols, t1 * kTile);
    for (int64_t c0 = t0 * kTile; c0 < c_end; c0 += kTile) {
      const int64_t c1 = std::min(c0 + kTile, c_end);
      for (int64_t r0 = 0; r0 < rows; r0 += kTile) {
        const int64_t r1 = std::min(r0 + kTile, rows);
        for (int64_t c = c0; c < c1; ++c)
          for (int64_t r = r0; r < r1; ++r) dst[c * rows + r] = src[r * cols + c];
      }
    }
  });
}

}  // namespace

void transpose(const void* src, int64_t rows, int64_t cols, size_t element_bytes, void* dst) {
  if (rows <= 0 || cols <= 0) return;
  switch (element_bytes) {
    case 1: transpose_typed(static_cast<const uint8_t*>(src), rows, cols, static_cast<uint8_t*>(dst)); break;
    case 2:
      transpose_typed(static_cast<const uint16_t*>(src), rows, cols, static_cast<uint16_t*>(dst));
      break;
    case 4:
      transpose_typed(static_cast<const uint32_t*>(src), rows, cols, static_cast<uint32_t*>(dst));
      break;
    case 8:
      transpose_typed(static_cast<const uint64_t*>(src), rows, cols, static_cast<uint64_t*>(dst));
      break;
    default: fail("transpose: elements of {} bytes are not supported (1, 2, 4 or 8)", element_bytes);
  }
}

}  // namespace tokenmill
