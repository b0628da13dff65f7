// Matrix transposition for loaders that must change a stored layout (GPT-2's Conv1D weights).
#pragma once

#include <cstddef>
#include <cstdint>

namespace tokenmill {

// dst[c, r] = src[r, c] for a row-major [rows, cols] matrix of elements of `element_bytes`
// (1, 2, 4 or 8; anything else throws Error): dst is [cols, rows]. Copies bits, so any dtype
// of those sizes works. Cache-blocked and parallel; src and dst must not overlap.
void transpose(const void* src, int64_t rows, int64_t cols, size_t element_bytes, void* dst);

}  // namespace tokenmill
