// Launchers of the linear-ops kernels (linear_kernels.cu), queued on `stream`. Pointers are
// device (or managed) memory at any element-aligned address; element types are f32 unless a
// DType says otherwise (f32, bf16 or f16; any other is an Error). Nothing here checks
// shapes: cuda_linear_ops.cpp does, with the CPU backend's checks.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "core/dtype.h"

namespace tokenmill::cuda {

// out[t, :] = table[ids[t], :] widened to f32; table [vocab, d] of `dtype`, ids [n] (in range).
void launch_embedding(const void* table, DType dtype, const int32_t* ids, int64_t n, int64_t d, float* out,
                      cudaStream_t stream);

// y[r, :] = sum_{j < k} scales[r k + j] * x[rows[r k + j], :] in ascending j; y [n, d], x [m, d].
void launch_combine_rows(const float* x, const int32_t* rows, const float* scales, int64_t n, int64_t k,
                         int64_t d, float* y, cudaStream_t stream);

// y[i] = x[i] rounded to `dtype` (round to nearest even), i < count.
void launch_convert(const float* x, int64_t count, void* y, DType dtype, cudaStream_t stream);

// y[r, c] = bias[c] as f32 (bias of `bias_dtype`; 0 when bias is null) for a [rows, cols] y.
void launch_broadcast_rows(const void* bias, DType bias_dtype, int64_t rows, int64_t cols, float* y,
                           cudaStream_t stream);

// db[c] += sum_r dy[r, c] for a [rows, cols] dy: each column summed in row order in double,
// then added (the same bits run to run).
void launch_add_column_sums(const float* dy, int64_t rows, int64_t cols, float* db, cudaStream_t stream);

// For each group g < groups (linear_plan.h's TokenGroups, on the device):
//   dtable[group_ids[g], :] += dout[tokens[j], :]  for j = starts[g] ... starts[g + 1] - 1, in order
// dout [n, d], dtable [vocab, d]; group_ids distinct, so groups write disjoint rows.
void launch_embedding_backward(const int32_t* group_ids, const int32_t* starts, const int32_t* tokens,
                               int64_t groups, const float* dout, int64_t d, float* dtable,
                               cudaStream_t stream);

}  // namespace tokenmill::cuda
