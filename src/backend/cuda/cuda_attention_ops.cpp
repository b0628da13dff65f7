// CudaBackend's KV cache ops: attention over a contiguous cache, paged attention over block
// pools, stores into a pool, and the attention backward. The arguments are checked as the
// CPU backend checks them (backend/checks/attention_checks.h); the kernels are queued on
// stream() (attention_kernels.h). Host spans (block tables, slots) are copied to the device.
#include <cstdint>

#include "backend/checks/attention_checks.h"
#include "backend/cuda/attention_kernels.h"
#include "backend/cuda/cuda_backend_impl.h"
#include "backend/cuda/paged_layout.h"
#include "core/error.h"

namespace tokenmill::cuda {

namespace {

thread_local PagedLayout tl_layout;  // paged_attention's host arrays, reused

// The kernels hold a head row in registers: at most kMaxAttentionHeadDim elements.
void expect_head_dim(const char* op, int64_t head_dim) {
  if (head_dim > kMaxAttentionHeadDim)
    fail("{}: head_dim {} is not supported by the CUDA backend (at most {}); use the CPU backend", op,
         head_dim, kMaxAttentionHeadDim);
}

// The launch over all heads of q and caches k, v, its work rows not set.
AttentionLaunch launch_for(const checks::AttentionDims& d, const Tensor& q, const Tensor& k, const Tensor& v,
                           float scale, const Tensor& out) {
  return AttentionLaunch{.q = q.as<const float>(),
                         .k = k.data,
                         .v = v.data,
                         .cache_dtype = k.dtype,
                         .out = out.as<float>(),
                         .work_rows = 0,
                         .heads = d.heads,
                         .kv_heads = d.kv_heads,
                         .head_dim = d.head_dim,
                         .scale = scale,
                         .work = {}};
}

}  // namespace

void CudaBackend::attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache, int64_t first_pos,
                            float scale, const Tensor& out) {
  const checks::AttentionDims d = checks::check_attention(q, k_cache, v_cache, first_pos, out);
  expect_head_dim("attention", d.head_dim);
  if (d.empty()) return;
  AttentionLaunch a = launch_for(d, q, k_cache, v_cache, scale, out);
  a.work_rows = d.n;
  a.work.first_pos = first_pos;
  launch_attention(a, stream_);
}

void CudaBackend::paged_attention(const Tensor& q, const Tensor& k_pool, const Tensor& v_pool,
                                  std::span<const PagedSequence> sequences, float scale, const Tensor& out) {
  const checks::PagedAttentionDims d = checks::check_paged_attention(q, k_pool, v_pool, sequences, out);
  expect_head_dim("paged_attention", d.head_dim);
  if (d.empty()) return;
  PagedLayout& layout = tl_layout;
  flatten_sequences(sequences, d.block_size, layout);
  if (layout.rows.empty()) return;
  const DeviceBuffer rows = to_device(std::span<const QueryRow>(layout.rows), "paged_attention query rows");
  const DeviceBuffer tables =
      to_device(std::span<const int32_t>(layout.tables), "paged_attention block tables");
  AttentionLaunch a = launch_for(d, q, k_pool, v_pool, scale, out);
  a.work_rows = static_cast<int64_t>(layout.rows.size());
  a.work = AttentionWork{.rows = rows.as<const QueryRow>(),
                         .first_pos = 0,
                         .tables = tables.as<const int32_t>(),
                         .block_shift = layout.block_shift};
  launch_attention(a, stream_);
}

void CudaBackend::store_kv(const Tensor& rows, std::span<const int64_t> slots, const Tensor& pool) {
  const checks::StoreKvDims d = checks::check_store_kv(rows, slots, pool);
  if (d.n == 0 || d.width == 0) return;
  const DeviceBuffer device_slots = to_device(slots, "store_kv slots");
  launch_store_kv(rows.as<const float>(), device_slots.as<const int64_t>(), d.n, d.width, pool.data,
                  pool.dtype, stream_);
}

void CudaBackend::attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                                     const Tensor& dout, float scale, const Tensor& dq, const Tensor& dk,
                                     const Tensor& dv) {
  const checks::AttentionDims d = checks::check_attention_backward(q, k, v, out, dout, dq, dk, dv);
  expect_head_dim("attention_backward", d.head_dim);
  if (d.empty()) return;
  const DeviceBuffer scratch =
      pool().allocate(attention_backward_scratch_bytes(d.n, d.heads), "attention_backward row statistics");
  // In AttentionBackwardLaunch's field order: inputs, gradients, scratch, dimensions, scale.
  const AttentionBackwardLaunch a{q.as<const float>(),
                                  k.as<const float>(),
                                  v.as<const float>(),
                                  out.as<const float>(),
                                  dout.as<const float>(),
                                  dq.as<float>(),
                                  dk.as<float>(),
                                  dv.as<float>(),
                                  scratch.data(),
                                  d.n,
                                  d.heads,
                                  d.kv_heads,
                                  d.head_dim,
                                  scale};
  launch_attention_backward(a, stream_);
}

}  // namespace tokenmill::cuda
