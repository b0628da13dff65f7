#include "core/transpose.h"

#include "core/error.h"
#include "core/parallel.h"

namespace tokenmill {

namespace {

// Square tiles of this many elements a side: a tile of 8-byte elements (32 KiB) is read
// and written within L1.
constexpr int64_t kTile = 64;

template <class T>
void transpose_typed(const T* src, int64_t rows, int64_t cols, T* dst) {
  const int64_t column_tiles = (cols + kTile - 1) / kTile;
  // Each task writes whole tiles of dst's rows (src's columns); no two tasks share a row.
  parallel_for_balanced(column_tiles, 1, 1, [&](int64_t t0, int64_t t1) {
    for (int64_t c0 = t0 * kTile; c0 < t1 * kTile && c0 < cols; c0 += kTile) {
      const int64_t c1 = c0 + kTile < cols ? c0 + kTile : cols;
      for (int64_t r0 = 0; r0 < rows; r0 += kTile) {
        const int64_t r1 = r0 + kTile < rows ? r0 + kTile : rows;
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
