// CudaBackend's linear ops: embedding, matmul, convert and their backward. Arguments are
// checked with the CPU backend's checks (backend/checks/linear_checks.h); products go to
// cuBLASLt (gemm_engine.h), products and rows of ggml-quantized weights to quant_kernels.cu,
// the rest to linear_kernels.cu. Over bf16/f16 weights the f32
// activations (x; dy for dx) are rounded to the weights' dtype first, as the tensor cores
// read both operands in it (products exact, sums in f32).
#include <climits>
#include <span>

#include "backend/checks/linear_checks.h"
#include "backend/checks/shape_checks.h"
#include "backend/cuda/cuda_backend_impl.h"
#include "backend/cuda/gemm_engine.h"
#include "backend/cuda/gemm_layout.h"
#include "backend/cuda/linear_kernels.h"
#include "backend/cuda/linear_plan.h"
#include "backend/cuda/quant_kernels.h"
#include "core/error.h"
#include "quant/quant_formats.h"

namespace tokenmill::cuda {

namespace {

// y += x . w^T over quantized w, with ggml's arithmetic: x quantized to `activations` (the
// weight type's activation format) in a pool buffer, then the integer block dot products.
void quantized_matmul(const Tensor& x, const Tensor& w, DType activations, const checks::MatmulDims& dims,
                      const Tensor& y, DevicePool& pool, cudaStream_t stream) {
  DeviceBuffer a = pool.allocate(static_cast<size_t>(dims.n) * dtype_row_bytes(activations, dims.k),
                                 "matmul x quantized to the weights' activation format");
  launch_quantize_activations(x.as<const float>(), dims.n, dims.k, activations, a.data(), stream);
  launch_quantized_matmul(w.data, w.dtype, a.data(), dims.n, dims.k, dims.m, y.as<float>(), stream);
}

// `a` [count] f32 rounded to `dtype` in a pool buffer, when dtype is bf16/f16 (else empty).
DeviceBuffer rounded_to(DType dtype, const Tensor& a, DevicePool& pool, cudaStream_t stream,
                        const char* what) {
  if (dtype == DType::F32) return {};
  DeviceBuffer rounded = pool.allocate(static_cast<size_t>(a.numel()) * dtype_size(dtype), what);
  launch_convert(a.as<const float>(), a.numel(), rounded.data(), dtype, stream);
  return rounded;
}

}  // namespace

void CudaBackend::embedding(const Tensor& table, std::span<const int32_t> ids, const Tensor& out) {
  make_current();
  const checks::EmbeddingDims dims = checks::check_embedding(table, ids, out);
  if (dims.n == 0 || dims.d == 0) return;
  const DeviceBuffer device_ids = to_device(ids, "embedding ids");
  if (is_quantized(table.dtype)) {
    launch_dequantize_rows(table.data, table.dtype, device_ids.as<const int32_t>(), dims.n, dims.d,
                           out.as<float>(), stream_);
    return;
  }
  launch_embedding(table.data, table.dtype, device_ids.as<const int32_t>(), dims.n, dims.d, out.as<float>(),
                   stream_);
}

void CudaBackend::matmul(const Tensor& x, const Tensor& w, const Tensor* bias, const Tensor& y) {
  make_current();
  const checks::MatmulDims dims = checks::check_matmul(x, w, bias, y);
  const bool quantized = is_quantized(w.dtype);
  // Error for the activation formats (Q8_1, Q8_K) as weights, before y is written.
  const DType activations = quantized ? quant::activation_type(w.dtype) : DType::F32;
  if (dims.n == 0 || dims.m == 0) return;
  // With a bias, y starts as the bias and the product is added to it; quantized products are
  // always added (to zeros without a bias: f32 addition commutes, so y = dot + bias exactly).
  if (bias != nullptr || quantized)
    launch_broadcast_rows(bias != nullptr ? bias->data : nullptr, bias != nullptr ? bias->dtype : DType::F32,
                          dims.n, dims.m, y.as<float>(), stream_);
  if (quantized) return quantized_matmul(x, w, activations, dims, y, pool(), stream_);
  const DeviceBuffer rounded =
      rounded_to(w.dtype, x, pool(), stream_, "matmul x rounded to the weights' dtype");
  gemm_->multiply(row_major_product(dims.n, dims.m, dims.k, false, true), w.data,
                  rounded.data() != nullptr ? rounded.data() : x.data, w.dtype, y.as<float>(),
                  bias != nullptr);
}

void CudaBackend::convert(const Tensor& x, const Tensor& y) {
  make_current();
  const int64_t count = checks::check_convert(x, y);
  launch_convert(x.as<const float>(), count, y.data, y.dtype, stream_);
}

void CudaBackend::matmul_backward(const Tensor& x, const Tensor& w, const Tensor& dy, const Tensor* dx,
                                  const Tensor* dw, const Tensor* db) {
  make_current();
  const checks::MatmulDims dims = checks::check_matmul_backward(x, w, dy, dx, dw, db);
  if (dx != nullptr) {  // dx[n, k] = dy[n, m] . w[m, k]
    const DeviceBuffer rounded =
        rounded_to(w.dtype, dy, pool(), stream_, "matmul_backward dy rounded to the weights' dtype");
    gemm_->multiply(row_major_product(dims.n, dims.k, dims.m, false, false), w.data,
                    rounded.data() != nullptr ? rounded.data() : dy.data, w.dtype, dx->as<float>(), false);
  }
  if (dw != nullptr)  // dw[m, k] += dy[n, m]^T . x[n, k], full FP32
    gemm_->multiply(row_major_product(dims.m, dims.k, dims.n, true, false), x.data, dy.data, DType::F32,
                    dw->as<float>(), true);
  if (db != nullptr) launch_add_column_sums(dy.as<const float>(), dims.n, dims.m, db->as<float>(), stream_);
}

void CudaBackend::embedding_backward(std::span<const int32_t> ids, const Tensor& dout, const Tensor& dtable) {
  make_current();
  const checks::EmbeddingDims dims = checks::check_embedding_backward(ids, dout, dtable);
  if (dims.n == 0 || dims.d == 0) return;
  if (dims.n > INT32_MAX) fail("embedding_backward: {} tokens in one call; at most {}", dims.n, INT32_MAX);
  const TokenGroups groups = group_tokens_by_id(ids);
  const DeviceBuffer group_ids = to_device(std::span<const int32_t>(groups.ids), "embedding_backward ids");
  const DeviceBuffer starts = to_device(std::span<const int32_t>(groups.starts), "embedding_backward groups");
  const DeviceBuffer tokens = to_device(std::span<const int32_t>(groups.tokens), "embedding_backward tokens");
  launch_embedding_backward(group_ids.as<const int32_t>(), starts.as<const int32_t>(),
                            tokens.as<const int32_t>(), static_cast<int64_t>(groups.ids.size()),
                            dout.as<const float>(), dims.d, dtable.as<float>(), stream_);
}

}  // namespace tokenmill::cuda
