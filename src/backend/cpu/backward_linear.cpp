// The CPU backend's linear training ops: matmul and embedding backward, the fused softmax
// cross-entropy, the squared norm and the AdamW step. Contracts in backend.h; every result
// is the same bits whatever the thread count.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "backend/checks/linear_checks.h"
#include "backend/checks/training_checks.h"
#include "backend/cpu/cpu_backward.h"
#include "backend/cpu/cpu_gemm.h"
#include "backend/cpu/scratch.h"
#include "core/parallel.h"

namespace tokenmill::cpu {

using namespace checks;  // NOLINT: the shared argument checks read as part of each op

namespace {

// The calling thread's buffers; the workers of a region it starts write disjoint parts.
thread_local Scratch tl_partials;  // sum_squares: one sum per block
// Each worker's own buffer.
thread_local Scratch tl_worker_exps;  // cross_entropy: exp(logit - max) of one row

constexpr int64_t kMinWork = 32 * 1024;  // elements (or element-steps) per parallel chunk
constexpr int64_t kTokenChunk = 1024;    // matmul_backward: tokens per pair of products

// Items per parallel chunk when each item costs `work_per_item`, rounded up to `multiple`.
int64_t items_per_chunk(int64_t work_per_item, int64_t multiple = 1) {
  const int64_t items = kMinWork / std::max<int64_t>(work_per_item, 1) + 1;
  return (items + multiple - 1) / multiple * multiple;
}

// ---------------------------------------------------------------- helpers

// sum_{i < count} term(i) in double, in 8 interleaved lanes combined in a fixed order:
// vectorisable, and the same bits wherever the data sits in memory.
template <class Term>
double lane_sum(int64_t count, Term term) {
  constexpr int64_t kLanes = 8;
  double lane[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= count; i += kLanes)
    for (int64_t l = 0; l < kLanes; ++l) lane[l] += term(i + l);
  for (int64_t l = 0; i < count; ++i, ++l) lane[l] += term(i);
  return ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));
}

}  // namespace

// ---------------------------------------------------------------- matmul

void matmul_backward(const KernelTable& kernels, const Tensor& x, const Tensor& w, const Tensor& dy,
                     const Tensor* dx, const Tensor* dw, const Tensor* db) {
  const MatmulDims dims = check_matmul_backward(x, w, dy, dx, dw, db);
  const int64_t m = dims.m, k = dims.k, n = dims.n;

  // Both products run on the packed GEMM, which reads the operands they need transposed in
  // place, over chunks of kTokenChunk tokens; that bounds the GEMM's packed copy of its x for
  // wide outputs such as an LM head. The chunk size is a constant, so the order of dw's sums
  // does not depend on the thread count.
  const float* dy_rows = dy.as<const float>();
  if (m == 0 && dx != nullptr) std::fill_n(dx->as<float>(), n * k, 0.0f);  // empty sums
  const bool products = m > 0 && k > 0;  // else dx is set or empty, and dw is empty
  for (int64_t t0 = 0; products && t0 < n; t0 += kTokenChunk) {
    const int64_t c = std::min(kTokenChunk, n - t0);
    if (dx != nullptr) {
      // dx[c, k] = dy[c, m] . w[m, k]: the product of dy by W = w^T [k, m], whose transposed
      // storage is w itself.
      MatmulArgs a;
      a.x = dy_rows + t0 * m;
      a.w = w.data;
      a.w_dtype = w.dtype;
      a.w_transposed = true;
      a.y = dx->as<float>() + t0 * k;
      a.n = c;
      a.k = m;
      a.m = k;
      gemm(kernels.gemm, a);
    }
    if (dw != nullptr) {
      // dw[m, k] += dy^T[m, c] . x[c, k]: the product of A = dy^T [m, c] by W = x^T [k, c],
      // whose transposed storages are the chunk's rows of dy and x, added to dw.
      MatmulArgs a;
      a.x = dy_rows + t0 * m;
      a.x_transposed = true;
      a.w = x.as<const float>() + t0 * k;
      a.w_dtype = DType::F32;
      a.w_transposed = true;
      a.y = dw->as<float>();
      a.accumulate = true;
      a.n = m;
      a.k = c;
      a.m = k;
      gemm(kernels.gemm, a);
    }
  }
  if (db != nullptr) {
    // Blocks of columns in parallel; each column summed over the tokens in order, in double.
    constexpr int64_t kColumns = 64;
    const float* g = dy.as<const float>();
    float* acc = db->as<float>();
    parallel_for_chunks(m, items_per_chunk(n, kColumns), [&](int64_t c0, int64_t c1) {
      for (int64_t b = c0; b < c1; b += kColumns) {
        const int64_t width = std::min(kColumns, c1 - b);
        double sum[kColumns] = {};
        for (int64_t t = 0; t < n; ++t)
          for (int64_t j = 0; j < width; ++j) sum[j] += g[t * m + b + j];
        for (int64_t j = 0; j < width; ++j) acc[b + j] = static_cast<float>(acc[b + j] + sum[j]);
      }
    });
  }
}

// ---------------------------------------------------------------- embedding

void embedding_backward(std::span<const int32_t> ids, const Tensor& dout, const Tensor& dtable) {
  const EmbeddingDims dims = check_embedding_backward(ids, dout, dtable);
  const int64_t d = dims.d, n = dims.n;
  // Slices of 16-column multiples in parallel: every thread adds all tokens in
  // order to its own columns, so each sum has the same order whatever the thread count.
  const float* g = dout.as<const float>();
  float* table = dtable.as<float>();
  parallel_for_chunks(d, items_per_chunk(n, 16), [&](int64_t j0, int64_t j1) {
    for (int64_t t = 0; t < n; ++t) {
      float* row = table + static_cast<int64_t>(ids[static_cast<size_t>(t)]) * d;
      for (int64_t j = j0; j < j1; ++j) row[j] += g[t * d + j];
    }
  });
}

// ---------------------------------------------------------------- loss

void cross_entropy(const Tensor& logits, std::span<const int32_t> targets, float grad_scale,
                   const Tensor& losses, const Tensor* dlogits) {
  // dlogits may be logits itself (each row is read before it is overwritten).
  const CrossEntropyDims dims = check_cross_entropy(logits, targets, losses, dlogits);
  const int64_t n = dims.rows, vocab = dims.vocab;
  const float* x = logits.as<const float>();
  float* loss = losses.as<float>();
  float* grad = dlogits != nullptr ? dlogits->as<float>() : nullptr;
  parallel_for_chunks(n, items_per_chunk(vocab), [&](int64_t t0, int64_t t1) {
    float* worker_exps = grad == nullptr ? tl_worker_exps.floats(vocab) : nullptr;
    for (int64_t t = t0; t < t1; ++t) {
      const float* row = x + t * vocab;
      float* e = grad != nullptr ? grad + t * vocab : worker_exps;  // exp(row - max), then the gradient
      const int32_t target = targets[static_cast<size_t>(t)];
      if (target < 0) {
        loss[t] = 0.0f;
        if (grad != nullptr) std::fill(e, e + vocab, 0.0f);
        continue;
      }
      float top = row[0];
      for (int64_t j = 1; j < vocab; ++j) top = row[j] > top ? row[j] : top;
      const float target_logit = row[target];  // read before an in-place gradient overwrites it
      for (int64_t j = 0; j < vocab; ++j) e[j] = std::exp(row[j] - top);
      const double sum = lane_sum(vocab, [e](int64_t j) { return static_cast<double>(e[j]); });
      // loss = logsumexp - logit[target] = (max - logit[target]) + log(sum exp(logit - max)).
      loss[t] =
          static_cast<float>(static_cast<double>(top) - static_cast<double>(target_logit) + std::log(sum));
      if (grad == nullptr) continue;
      const auto scale = static_cast<float>(static_cast<double>(grad_scale) / sum);
      for (int64_t j = 0; j < vocab; ++j) e[j] *= scale;
      e[target] -= grad_scale;
    }
  });
}

// ---------------------------------------------------------------- optimizer

double sum_squares(const Tensor& x) {
  const int64_t count = check_sum_squares(x);
  // Fixed blocks, each summed in double, then the block sums added in order: the same bits
  // whatever the thread count.
  constexpr int64_t kBlock = 8192;
  const int64_t blocks = (count + kBlock - 1) / kBlock;
  const float* p = x.as<const float>();
  auto* partial = static_cast<double*>(tl_partials.bytes(blocks * static_cast<int64_t>(sizeof(double))));
  parallel_for_chunks(blocks, items_per_chunk(kBlock), [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      const float* block = p + b * kBlock;
      partial[b] = lane_sum(std::min(kBlock, count - b * kBlock), [block](int64_t i) {
        const auto v = static_cast<double>(block[i]);
        return v * v;
      });
    }
  });
  double total = 0;
  for (int64_t b = 0; b < blocks; ++b) total += partial[b];
  return total;
}

void adamw_step(const Tensor& param, const Tensor& grad, const Tensor& m, const Tensor& v,
                const Backend::AdamW& hyper) {
  const int64_t count = check_adamw_step(param, grad, m, v, hyper);
  // As PyTorch's AdamW (torch.optim.adamw, single-tensor and foreach paths): the scalars
  // come from Python floats, i.e. double, and are rounded to f32 where they meet the f32
  // tensors; the elementwise math is f32, in PyTorch's order of operations:
  //   param.mul_(1 - lr * wd); m.lerp_(g, 1 - beta1); v.mul_(beta2).addcmul_(g, g, 1 - beta2)
  //   param.addcdiv_(m, sqrt(v) / sqrt(bias_correction2) + eps, -lr / bias_correction1)
  const double steps = static_cast<double>(hyper.step);
  const double beta1 = hyper.beta1, beta2 = hyper.beta2;
  const auto decay = static_cast<float>(1.0 - static_cast<double>(hyper.lr) * hyper.weight_decay);
  const auto one_minus_beta1 = static_cast<float>(1.0 - beta1);
  const auto one_minus_beta2 = static_cast<float>(1.0 - beta2);
  const auto step_size = static_cast<float>(hyper.lr / (1.0 - std::pow(beta1, steps)));
  const auto bias_correction2_sqrt = static_cast<float>(std::sqrt(1.0 - std::pow(beta2, steps)));
  const float grad_scale = hyper.grad_scale, beta2_f = hyper.beta2, eps = hyper.eps;
  float* param_data = param.as<float>();
  const float* grad_data = grad.as<const float>();
  float* m_data = m.as<float>();
  float* v_data = v.as<float>();
  parallel_for_chunks(count, kMinWork, [=](int64_t i0, int64_t i1) {
    // Scalars captured by value and restrict pointers (the four tensors are disjoint,
    // checked): the loop vectorizes only when the compiler knows that its stores change
    // neither the other tensors nor the scalars.
    float* __restrict p = param_data;
    const float* __restrict gp = grad_data;
    float* __restrict mp = m_data;
    float* __restrict vp = v_data;
    for (int64_t i = i0; i < i1; ++i) {
      const float g = grad_scale * gp[i];
      const float mi = mp[i] + one_minus_beta1 * (g - mp[i]);  // lerp with weight < 0.5
      const float vi = vp[i] * beta2_f + one_minus_beta2 * g * g;
      const float denom = std::sqrt(vi) / bias_correction2_sqrt + eps;
      p[i] = p[i] * decay - step_size * mi / denom;
      mp[i] = mi;
      vp[i] = vi;
    }
  });
}

}  // namespace tokenmill::cpu
