// CudaBackend's linear ops: embedding, matmul (and matmul_shared), add_lora, convert and their
// backward. Arguments are checked with the CPU backend's checks (backend/checks/linear_checks.h);
// products go to cuBLASLt (gemm_engine.h), products and rows of ggml-quantized weights to
// quant_kernels.cu, LoRA adapters to lora_kernels.cu, the rest to linear_kernels.cu. Over
// bf16/f16 weights the f32 activations (x; dy for dx) are rounded to the weights' dtype first, as
// the tensor cores read both operands in it (products exact, sums in f32); over quantized weights
// they are quantized to the type's activation format (ggml's arithmetic).
#include <climits>
#include <optional>
#include <span>

#include "backend/checks/linear_checks.h"
#include "backend/checks/shape_checks.h"
#include "backend/cuda/cuda_backend_impl.h"
#include "backend/cuda/gemm_engine.h"
#include "backend/cuda/gemm_layout.h"
#include "backend/cuda/linear_kernels.h"
#include "backend/cuda/linear_plan.h"
#include "backend/cuda/lora_kernels.h"
#include "backend/cuda/lora_plan.h"
#include "backend/cuda/quant_kernels.h"
#include "core/error.h"
#include "quant/quant_formats.h"

namespace tokenmill::cuda {

namespace {

thread_local LoraTable tl_lora_table;  // add_lora's, reused

// The operand format of x (or dy) in products with weights of `w_dtype`: the activation
// format of a quantized type (Error for Q8_1 / Q8_K as weights), else the weights' dtype.
DType operand_format(DType w_dtype) {
  return is_quantized(w_dtype) ? quant::activation_type(w_dtype) : w_dtype;
}

// a [n, k] f32 in `format` in a pool buffer: rounded (bf16, f16) or quantized row by row;
// empty for f32, where a itself is the operand.
DeviceBuffer operand_in(DType format, const Tensor& a, int64_t n, int64_t k, DevicePool& pool,
                        cudaStream_t stream) {
  if (format == DType::F32) return {};
  DeviceBuffer b = pool.allocate(static_cast<size_t>(n) * dtype_row_bytes(format, k),
                                 "matmul operand in the weights' format");
  if (is_quantized(format)) {
    launch_quantize_activations(a.as<const float>(), n, k, format, b.data(), stream);
  } else {
    launch_convert(a.as<const float>(), n * k, b.data(), format, stream);
  }
  return b;
}

// The data of a prepared operand: the buffer, or a itself when none was needed.
const void* operand_data(const DeviceBuffer& prepared, const Tensor& a) {
  return prepared.data() != nullptr ? prepared.data() : a.data;
}

// y = x . w^T (+ bias) from x already in operand_format(w.dtype) (`operand`). An f32 bias is
// added by cuBLASLt's epilogue where the engine can (multiply_with_bias); otherwise y starts
// as the bias and the product is added to it. Quantized products are always added (to zeros
// without a bias: f32 addition commutes, so y = dot + bias exactly).
void product(GemmEngine& gemm, cudaStream_t stream, const void* operand, const Tensor& w, const Tensor* bias,
             const Tensor& y, const checks::MatmulDims& dims) {
  const bool quantized = is_quantized(w.dtype);
  const GemmLayout layout = row_major_product(dims.n, dims.m, dims.k, false, true);
  const bool epilogue_bias = !quantized && bias != nullptr && bias->dtype == DType::F32;
  if (epilogue_bias &&
      gemm.multiply_with_bias(layout, w.data, operand, w.dtype, bias->as<const float>(), y.as<float>()))
    return;
  if (bias != nullptr || quantized)
    launch_broadcast_rows(bias != nullptr ? bias->data : nullptr, bias != nullptr ? bias->dtype : DType::F32,
                          dims.n, dims.m, y.as<float>(), stream);
  if (quantized) {
    launch_quantized_matmul(w.data, w.dtype, operand, dims.n, dims.k, dims.m, y.as<float>(), stream);
    return;
  }
  gemm.multiply(layout, w.data, operand, w.dtype, y.as<float>(), bias != nullptr);
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

void CudaBackend::combine_rows(const Tensor& x, std::span<const int32_t> rows, std::span<const float> scales,
                               const Tensor& y) {
  make_current();
  const checks::CombineDims dims = checks::check_combine_rows(x, rows, scales, y);
  if (dims.d == 0) return;
  const DeviceBuffer device_rows = to_device(rows, "combine_rows rows");
  const DeviceBuffer device_scales = to_device(scales, "combine_rows scales");
  launch_combine_rows(x.as<const float>(), device_rows.as<const int32_t>(), device_scales.as<const float>(),
                      dims.n, dims.k, dims.d, y.as<float>(), stream_);
}

// All segments in two launches: the segment table goes up in one copy, the intermediates
// live in a pool buffer.
void CudaBackend::add_lora(const Tensor& x, std::span<const LoraSegment> segments, const Tensor& y) {
  make_current();
  const checks::LoraDims dims = checks::check_add_lora(x, segments, y);
  if (dims.covered_rows == 0 || dims.m == 0) return;
  LoraTable& table = tl_lora_table;
  lora_table(segments, table);
  const DeviceBuffer device_segments =
      to_device(std::span<const LoraSegmentEntry>(table.segments), "add_lora segments");
  const DeviceBuffer t =
      pool().allocate(static_cast<size_t>(table.t_floats) * sizeof(float), "add_lora intermediates");
  launch_add_lora(device_segments.as<const LoraSegmentEntry>(), static_cast<int64_t>(table.segments.size()),
                  table.covered_rows, dims.max_rank, x.as<const float>(), dims.k, t.as<float>(),
                  y.as<float>(), dims.m, stream_);
}

void CudaBackend::matmul(const Tensor& x, const Tensor& w, const Tensor* bias, const Tensor& y) {
  make_current();
  const checks::MatmulDims dims = checks::check_matmul(x, w, bias, y);
  const DType format = operand_format(w.dtype);  // before anything is written
  if (dims.n == 0 || dims.m == 0) return;
  const DeviceBuffer operand = operand_in(format, x, dims.n, dims.k, pool(), stream_);
  product(*gemm_, stream_, operand_data(operand, x), w, bias, y, dims);
}

// x is prepared once per operand format (q, k and v of a layer share theirs; so do Q4_K and
// Q6_K weights, both multiplied with Q8_K activations).
void CudaBackend::matmul_shared(const Tensor& x, std::span<const MatmulTarget> targets) {
  make_current();
  checks::check_matmul_shared(x, targets);
  for (const MatmulTarget& t : targets) operand_format(t.w->dtype);  // before anything is written
  std::optional<DType> format;
  DeviceBuffer operand;
  for (const MatmulTarget& t : targets) {
    const checks::MatmulDims dims = checks::check_matmul(x, *t.w, t.bias, *t.y);
    if (dims.n == 0 || dims.m == 0) continue;
    if (format != operand_format(t.w->dtype)) {
      format = operand_format(t.w->dtype);
      operand = operand_in(*format, x, dims.n, dims.k, pool(), stream_);
    }
    product(*gemm_, stream_, operand_data(operand, x), *t.w, t.bias, *t.y, dims);
  }
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
    const DeviceBuffer rounded = operand_in(w.dtype, dy, dims.n, dims.m, pool(), stream_);
    gemm_->multiply(row_major_product(dims.n, dims.k, dims.m, false, false), w.data,
                    operand_data(rounded, dy), w.dtype, dx->as<float>(), false);
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
