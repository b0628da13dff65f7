// CudaBackend's KV cache ops: attention over a contiguous cache, paged attention over block
// pools, stores into a pool, and the attention backward. The arguments are checked as the
// CPU backend checks them (backend/checks/attention_checks.h); the kernels are queued on
// stream() (attention_kernels.h, flash_attention.h, flash_attention_backward.h:
// TOKENMILL_CUDA_ATTENTION and flash_attention_plan.h choose between row-wise and tiled per
// sequence, the backward as its forward). Host spans (block tables,
// slots) are copied to the device.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <vector>

#include "backend/checks/attention_checks.h"
#include "backend/cuda/attention_kernels.h"
#include "backend/cuda/cuda_backend_impl.h"
#include "backend/cuda/flash_attention.h"
#include "backend/cuda/flash_attention_backward.h"
#include "backend/cuda/flash_attention_plan.h"
#include "backend/cuda/paged_layout.h"
#include "core/error.h"

namespace tokenmill::cuda {

namespace {

// paged_attention's host arrays, reused: the row-wise kernel's and the tiled kernel's.
thread_local PagedLayout tl_layout;
thread_local PagedLayout tl_tiled_layout;
thread_local std::vector<FlashTile> tl_tiles;
thread_local std::vector<Backend::PagedSequence> tl_rowwise, tl_tiled;

// TOKENMILL_CUDA_ATTENTION, read at every call (tests switch it between backends).
AttentionKernelMode attention_kernel_mode() {
  const char* value = std::getenv(kAttentionKernelVariable);
  const std::optional<AttentionKernelMode> mode = parse_attention_kernel_mode(value);
  if (!mode)
    fail("{}={}: expected tiled, rowwise or auto (or leave it unset)", kAttentionKernelVariable, value);
  return *mode;
}

// The kernel a sequence of `rows` query rows takes: the tiled one scores with a plain scale
// only, so windows and soft caps go to the row-wise kernel.
AttentionKernel kernel_for(AttentionKernelMode mode, int64_t rows, int64_t head_dim,
                           const AttentionScores& scores) {
  return scores.plain() ? attention_kernel_for(mode, rows, head_dim) : AttentionKernel::Rowwise;
}

// The kernels hold a head row in registers: at most kMaxAttentionHeadDim elements.
void expect_head_dim(const char* op, int64_t head_dim) {
  if (head_dim > kMaxAttentionHeadDim)
    fail("{}: head_dim {} is not supported by the CUDA backend (at most {}); use the CPU backend", op,
         head_dim, kMaxAttentionHeadDim);
}

// The launch over all heads of q and caches k, v, its work rows not set.
AttentionLaunch launch_for(const checks::AttentionDims& d, const Tensor& q, const Tensor& k, const Tensor& v,
                           const AttentionScores& scores, const Tensor& out) {
  return AttentionLaunch{.q = q.as<const float>(),
                         .k = k.data,
                         .v = v.data,
                         .cache_dtype = k.dtype,
                         .out = out.as<float>(),
                         .work_rows = 0,
                         .heads = d.heads,
                         .kv_heads = d.kv_heads,
                         .head_dim = d.head_dim,
                         .scale = scores.scale,
                         .window = scores.window,
                         .softcap = scores.softcap,
                         .sinks = scores.sinks != nullptr ? scores.sinks->as<const float>() : nullptr,
                         .work = {}};
}

// The tiled launch over all kv heads of q and caches k, v, its work and tiles not set.
FlashAttentionLaunch flash_launch_for(const checks::AttentionDims& d, const Tensor& q, const Tensor& k,
                                      const Tensor& v, float scale, const Tensor& out) {
  return FlashAttentionLaunch{.q = q.as<const float>(),
                              .k = k.data,
                              .v = v.data,
                              .cache_dtype = k.dtype,
                              .out = out.as<float>(),
                              .heads = d.heads,
                              .kv_heads = d.kv_heads,
                              .head_dim = d.head_dim,
                              .scale = scale,
                              .tiles = 0,
                              .work = {}};
}

// The row-wise kernel over the work rows of `a`, at positions `min_position` ...
// `max_position`, with the scratch its split rows need.
void launch_rowwise(CudaBackend& backend, const AttentionLaunch& a, int64_t min_position,
                    int64_t max_position) {
  const SplitPlan plan = attention_split_plan(a, min_position, max_position);
  const DeviceBuffer scratch = backend.pool().allocate(plan.scratch_bytes, "attention split-K partial sums");
  launch_attention(a, plan, scratch.data(), backend.stream());
}

// paged_attention()'s checked arguments.
struct PagedOperands {
  const checks::PagedAttentionDims& d;
  const Tensor &q, &k_pool, &v_pool;
  const AttentionScores& scores;
  const Tensor& out;
};

// The tiled kernel over `sequences`: their tiles and block tables to the device, one launch.
void launch_tiled_sequences(CudaBackend& backend, const PagedOperands& p,
                            std::span<const Backend::PagedSequence> sequences) {
  PagedLayout& layout = tl_tiled_layout;
  flash_tiles_of_sequences(sequences, p.d.block_size, p.d.heads / p.d.kv_heads, layout, tl_tiles);
  if (tl_tiles.empty()) return;
  const DeviceBuffer tiles = backend.to_device(std::span<const FlashTile>(tl_tiles), "paged_attention tiles");
  const DeviceBuffer tables =
      backend.to_device(std::span<const int32_t>(layout.tables), "paged_attention block tables");
  FlashAttentionLaunch a = flash_launch_for(p.d, p.q, p.k_pool, p.v_pool, p.scores.scale, p.out);
  a.tiles = static_cast<int64_t>(tl_tiles.size());
  a.work = FlashWork{.tiles = tiles.as<const FlashTile>(),
                     .rows = 0,
                     .first_pos = 0,
                     .tables = tables.as<const int32_t>(),
                     .block_shift = layout.block_shift};
  launch_flash_attention(a, backend.stream());
}

// The row-wise kernel over `sequences`: their query rows and block tables to the device, one launch.
void launch_rowwise_sequences(CudaBackend& backend, const PagedOperands& p,
                              std::span<const Backend::PagedSequence> sequences) {
  PagedLayout& layout = tl_layout;
  flatten_sequences(sequences, p.d.block_size, layout);
  if (layout.rows.empty()) return;
  const DeviceBuffer rows =
      backend.to_device(std::span<const QueryRow>(layout.rows), "paged_attention query rows");
  const DeviceBuffer tables =
      backend.to_device(std::span<const int32_t>(layout.tables), "paged_attention block tables");
  AttentionLaunch a = launch_for(p.d, p.q, p.k_pool, p.v_pool, p.scores, p.out);
  a.work_rows = static_cast<int64_t>(layout.rows.size());
  a.work = AttentionWork{.rows = rows.as<const QueryRow>(),
                         .first_pos = 0,
                         .tables = tables.as<const int32_t>(),
                         .block_shift = layout.block_shift};
  const auto [shortest, longest] =
      std::minmax_element(layout.rows.begin(), layout.rows.end(),
                          [](const QueryRow& x, const QueryRow& y) { return x.position < y.position; });
  launch_rowwise(backend, a, shortest->position, longest->position);
}

}  // namespace

void CudaBackend::attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache, int64_t first_pos,
                            const AttentionScores& scores, const Tensor& out) {
  make_current();
  const checks::AttentionDims d = checks::check_attention(q, k_cache, v_cache, first_pos, scores, out);
  expect_head_dim("attention", d.head_dim);
  if (d.empty()) return;
  if (kernel_for(attention_kernel_mode(), d.n, d.head_dim, scores) == AttentionKernel::Tiled) {
    FlashAttentionLaunch a = flash_launch_for(d, q, k_cache, v_cache, scores.scale, out);
    a.tiles = flash_tile_count(d.n * (d.heads / d.kv_heads), kFlashItemsPerTile);
    a.work.rows = d.n;
    a.work.first_pos = first_pos;
    launch_flash_attention(a, stream_);
    return;
  }
  AttentionLaunch a = launch_for(d, q, k_cache, v_cache, scores, out);
  a.work_rows = d.n;
  a.work.first_pos = first_pos;
  launch_rowwise(*this, a, first_pos, first_pos + d.n - 1);
}

void CudaBackend::paged_attention(const Tensor& q, const Tensor& k_pool, const Tensor& v_pool,
                                  std::span<const PagedSequence> sequences, const AttentionScores& scores,
                                  const Tensor& out) {
  make_current();
  const checks::PagedAttentionDims d =
      checks::check_paged_attention(q, k_pool, v_pool, sequences, scores, out);
  expect_head_dim("paged_attention", d.head_dim);
  if (d.empty()) return;
  // Each sequence goes to the kernel attention() would choose for it; the two launches write
  // disjoint rows of out.
  const AttentionKernelMode mode = attention_kernel_mode();
  tl_rowwise.clear();
  tl_tiled.clear();
  for (const PagedSequence& seq : sequences)
    (kernel_for(mode, seq.rows, d.head_dim, scores) == AttentionKernel::Tiled ? tl_tiled : tl_rowwise)
        .push_back(seq);
  const PagedOperands operands{d, q, k_pool, v_pool, scores, out};
  launch_tiled_sequences(*this, operands, tl_tiled);
  launch_rowwise_sequences(*this, operands, tl_rowwise);
}

void CudaBackend::store_kv(const Tensor& rows, std::span<const int64_t> slots, const Tensor& pool) {
  make_current();
  const checks::StoreKvDims d = checks::check_store_kv(rows, slots, pool);
  if (d.n == 0 || d.width == 0) return;
  const DeviceBuffer device_slots = to_device(slots, "store_kv slots");
  launch_store_kv(rows.as<const float>(), device_slots.as<const int64_t>(), d.n, d.width, pool.data,
                  pool.dtype, stream_);
}

void CudaBackend::attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                                     const Tensor& dout, AttentionScores scores, const Tensor& dq,
                                     const Tensor& dk, const Tensor& dv) {
  make_current();
  const checks::AttentionDims d = checks::check_attention_backward(q, k, v, out, dout, scores, dq, dk, dv);
  expect_head_dim("attention_backward", d.head_dim);
  if (d.empty()) return;
  const DeviceBuffer scratch =
      pool().allocate(attention_backward_scratch_bytes(d.n, d.heads), "attention_backward row statistics");
  if (kernel_for(attention_kernel_mode(), d.n, d.head_dim, scores) == AttentionKernel::Tiled) {
    launch_flash_attention_backward(FlashAttentionBackwardLaunch{.q = q.as<const float>(),
                                                                 .k = k.as<const float>(),
                                                                 .v = v.as<const float>(),
                                                                 .out = out.as<const float>(),
                                                                 .dout = dout.as<const float>(),
                                                                 .dq = dq.as<float>(),
                                                                 .dk = dk.as<float>(),
                                                                 .dv = dv.as<float>(),
                                                                 .stats = scratch.as<AttentionRowStats>(),
                                                                 .n = d.n,
                                                                 .heads = d.heads,
                                                                 .kv_heads = d.kv_heads,
                                                                 .head_dim = d.head_dim,
                                                                 .scale = scores.scale},
                                    stream_);
    return;
  }
  // In AttentionBackwardLaunch's field order: inputs, gradients, scratch, dimensions, scores.
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
                                  scores.scale,
                                  scores.window,
                                  scores.softcap};
  launch_attention_backward(a, stream_);
}

}  // namespace tokenmill::cuda
