// Backend: the op interface every device implements (cpu/, cuda/).
//
// model/ calls only these ops, so a new backend is "implement this class and pass the
// conformance suite" (tests/backend). Conventions for every op:
//  - Tensors are contiguous row-major views of memory the backend can address.
//  - Activations are f32 unless stated; weights may be f32, bf16 or f16, and the
//    weights of matmul and the table of embedding may also be a quantized DType
//    (Q4_0 ... Q6_K and MXFP4, see quant/quant_formats.h).
//  - Outputs never alias inputs, except for the elementwise ops (gelu, silu, swiglu,
//    geglu, scale, softcap, add), the norms and softmax, whose output may be exactly one of their inputs
//    (in-place use), and the sum of add_rms_norm / add_layer_norm (see there); a partial
//    overlap is an error.
//  - Shapes are checked; a mismatch throws tokenmill::Error (a programming error in the
//    caller, never silent memory corruption).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string_view>

#include "core/device_memory.h"
#include "core/tensor.h"

namespace tokenmill {

enum class GeluForm : uint8_t {
  Tanh,  // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))  (GPT-2 "gelu_new")
  Erf,   // 0.5 x (1 + erf(x / sqrt(2)))
};

// How a backward op writes an activation gradient dx: over whatever dx held, or added to it
// (dx += ...: the gradient of a residual stream, which also reaches x around the op).
enum class GradWrite : uint8_t { Overwrite, Accumulate };

// Which element pairs RoPE rotates inside each head of width `head_dim` (first
// `rotary_dim = 2 * inv_freq.size()` elements rotated, the rest passed through):
enum class RopeLayout : uint8_t {
  Neox,         // pair (i, i + rotary_dim/2): Hugging Face Llama/Mistral/Qwen2 "rotate_half"
  Interleaved,  // pair (2i, 2i + 1): GPT-J, and GGUF's llama layout
};

// How attention scores a query row against the cached positions, beyond causality:
//   score_p = scale * (q . k_p), then with softcap c > 0: c * tanh(score_p / c) (Gemma 2);
//   with window w > 0 the query at position t attends only to its w latest positions
//   (t - w, t] (Mistral's and Gemma's sliding window), else to all of [0, t];
//   with sinks, head h's softmax takes one more logit, sinks[h], in its denominator only
//   (gpt-oss's attention sinks): P_p = exp(score_p - m) / (sum_p' exp(score_p' - m) +
//   exp(sinks[h] - m)), m the maximum of the scores and the sink, so a row's probabilities
//   sum to less than 1. sinks: f32 [heads] in the backend's memory (a forward-only feature:
//   attention_backward refuses it).
// A plain scale converts to full causal attention without a cap.
struct AttentionScores {
  float scale = 1.0f;
  int64_t window = 0;
  float softcap = 0.0f;
  const Tensor* sinks = nullptr;

  AttentionScores(float scale_) : scale(scale_) {}  // NOLINT(google-explicit-constructor)
  AttentionScores(float scale_, int64_t window_, float softcap_)
      : scale(scale_), window(window_), softcap(softcap_) {}
  bool plain() const { return window == 0 && softcap == 0.0f && sinks == nullptr; }
  // The first position a query at `position` attends to.
  int64_t first_position(int64_t position) const {
    return window > 0 && position >= window ? position - window + 1 : 0;
  }
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string_view name() const = 0;

  // The memory its ops address: tensors passed to them live there (host memory for the CPU;
  // device memory for a GPU, see core/device_memory.h). Host-side arguments (ids, positions,
  // targets, block tables, slots) are spans in host memory whatever the backend.
  virtual DeviceMemory& memory() = 0;

  // out[t, :] = table[ids[t], :].  table [vocab, d] any weight dtype (quantized rows are
  // dequantized exactly); out [n, d] f32.
  // Throws Error if an id is outside [0, vocab).
  virtual void embedding(const Tensor& table, std::span<const int32_t> ids, const Tensor& out) = 0;

  // Weighted sums of gathered rows (a mixture of experts' combine step): with k =
  // rows.size() / y.rows(),
  //   y[r, :] = sum_{j < k} scales[r k + j] * x[rows[r k + j], :]
  // summed in f32 in ascending j. x [m, d] f32, y [n, d] f32 disjoint from x; rows and scales
  // hold n k entries (n > 0), every row in [0, m). Throws Error otherwise.
  virtual void combine_rows(const Tensor& x, std::span<const int32_t> rows, std::span<const float> scales,
                            const Tensor& y) = 0;

  // y[n, m] = x[n, k] . w[m, k]^T (+ bias[m]).  x, y f32; w f32/bf16/f16; bias f32/bf16/f16
  // (a quantized bias is refused) or null. Accumulation in f32 (or wider).
  // A quantized w is multiplied as ggml does it: each row of x is quantized to
  // quant::activation_type(w.dtype) and every output is quant::vec_dot_row's integer
  // block arithmetic (summation order may differ), the same for every n (a token's
  // result does not depend on the batch it ran in).
  virtual void matmul(const Tensor& x, const Tensor& w, const Tensor* bias, const Tensor& y) = 0;

  // Several products of one x (a layer's q, k and v, or gate and up): for each target,
  // y = x . w^T (+ bias) exactly as matmul() gives it, bit for bit. A backend may run them
  // as one job (the CPU backend makes one parallel pass over all their rows), so no
  // target's y may overlap another target's y, w or bias. Every target is checked before
  // any is written. This default calls matmul() for each in turn.
  struct MatmulTarget {
    const Tensor* w = nullptr;
    const Tensor* bias = nullptr;  // may be null
    const Tensor* y = nullptr;
  };
  virtual void matmul_shared(const Tensor& x, std::span<const MatmulTarget> targets);

  // Several products, each of its own x (a mixture of experts' experts, each over the rows
  // routed to it): y = x . w^T (+ bias) for each, exactly as matmul() gives it, bit for bit. A
  // backend may run them as one job (the CPU backend makes one parallel pass over all their
  // rows when every product is a decode step), so no product's y may overlap another
  // product's x, w, bias or y. Every product is checked before any is written. This default
  // calls matmul() for each in turn.
  struct MatmulProduct {
    const Tensor* x = nullptr;
    const Tensor* w = nullptr;
    const Tensor* bias = nullptr;  // may be null
    const Tensor* y = nullptr;
  };
  virtual void matmul_many(std::span<const MatmulProduct> products);

  // The low-rank adapter terms of several adapters over one batch (multi-LoRA serving: each
  // request's rows carry their own adapter; Punica's segmented "shrink, then expand"): for each
  // segment s and each row r in [s.first_row, s.first_row + s.rows),
  //   y[r, :] += (x[r, :] . s.a^T) . s.b^T
  // x [n, k] f32; y [n, m] f32, overlapping no x, a or b; s.a [rank, k] f32 and s.b [m, rank] f32
  // (an adapter's alpha / rank scale is folded into b by its owner), 1 <= rank <= kMaxLoraRank,
  // each segment its own rank. Segments are in ascending row order, do not overlap, lie within
  // [0, n) and have rows >= 1; rows no segment covers keep their y. The rank-long intermediate
  // x . a^T is an f32 sum. Every segment is checked before any row is written (Error otherwise);
  // no segments at all is a valid call that writes nothing.
  static constexpr int64_t kMaxLoraRank = 1024;
  struct LoraSegment {
    int64_t first_row = 0, rows = 0;
    const Tensor* a = nullptr;
    const Tensor* b = nullptr;
  };
  virtual void add_lora(const Tensor& x, std::span<const LoraSegment> segments, const Tensor& y) = 0;

  // Per row of x [n, d]: y = x / sqrt(mean(x^2) + eps) * weight[d].
  virtual void rms_norm(const Tensor& x, const Tensor& weight, float eps, const Tensor& y) = 0;

  // Per row of x [n, d]: y = (x - mean) / sqrt(var + eps) * weight + bias (biased variance).
  virtual void layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, float eps,
                          const Tensor& y) = 0;

  // A residual step and the norm after it, in one pass over the rows: sum = a + b, then
  // y = rms_norm(sum) (add_rms_norm) or layer_norm(sum) (add_layer_norm), each bit for bit as
  // add() and the norm give it. a, b, sum [n, d] f32; sum may be a or b; y [n, d] overlaps
  // none of a, b and sum.
  virtual void add_rms_norm(const Tensor& a, const Tensor& b, const Tensor& sum, const Tensor& weight,
                            float eps, const Tensor& y) = 0;
  virtual void add_layer_norm(const Tensor& a, const Tensor& b, const Tensor& sum, const Tensor& weight,
                              const Tensor& bias, float eps, const Tensor& y) = 0;

  // Elementwise, same shape; y may be x (in place).
  virtual void gelu(const Tensor& x, GeluForm form, const Tensor& y) = 0;
  virtual void silu(const Tensor& x, const Tensor& y) = 0;  // x * sigmoid(x)
  // y = silu(gate) * up, elementwise; y may be gate or up.
  virtual void swiglu(const Tensor& gate, const Tensor& up, const Tensor& y) = 0;
  // gpt-oss's clamped SwiGLU, elementwise: with g = min(gate, limit),
  //   y = g * sigmoid(alpha * g) * (clamp(up, -limit, limit) + 1);
  // alpha finite, limit finite and > 0 (Error otherwise); y may be gate or up.
  virtual void clamped_swiglu(const Tensor& gate, const Tensor& up, float alpha, float limit,
                              const Tensor& y) = 0;
  // y = gelu_tanh(gate) * up, elementwise (Gemma's GeGLU); y may be gate or up.
  virtual void geglu(const Tensor& gate, const Tensor& up, const Tensor& y) = 0;
  // y = factor * x, elementwise; y may be x.
  virtual void scale(const Tensor& x, float factor, const Tensor& y) = 0;
  // y = cap * tanh(x / cap), elementwise, cap > 0 (Gemma 2's soft-capped logits); y may be x.
  virtual void softcap(const Tensor& x, float cap, const Tensor& y) = 0;
  virtual void add(const Tensor& a, const Tensor& b, const Tensor& y) = 0;  // may alias a or b

  // In place: rotates x [n, heads, head_dim]; row t is at position positions[t]. The angle
  // of pair j is positions[t] * inv_freq[j]; inv_freq [rotary_dim / 2] f32 already holds
  // any rope_scaling (see model/rope.h). The rotated elements are also multiplied by
  // `magnitude` > 0 (YaRN's and LongRoPE's attention factor, which transformers folds into
  // cos and sin: cos * magnitude and sin * magnitude rounded to f32; 1 for plain RoPE); the
  // elements past rotary_dim pass through unchanged.
  virtual void rope(const Tensor& x, std::span<const int32_t> positions, const Tensor& inv_freq,
                    RopeLayout layout, float magnitude) = 0;

  // Causal attention with grouped-query heads over a KV cache.
  //  q [n, n_heads, head_dim]: query t sits at position first_pos + t.
  //  k_cache, v_cache [capacity, n_kv_heads, head_dim], rows [0, first_pos + n) filled.
  //  n_heads % n_kv_heads == 0; query head h reads kv head h / (n_heads / n_kv_heads).
  //  out[t, h, :] = sum_p softmax_p(score_p(q[t,h,:], k[p,kvh,:])) v[p,kvh,:] over the
  //  positions p <= first_pos + t that `scores` lets the query see (AttentionScores).
  //  With an f16 cache both operands of every product are f16, as in llama.cpp's CPU
  //  attention over its default f16 cache: q is rounded to f16 for the scores and the
  //  softmax probabilities are rounded to f16 for the sum over v (accumulation in f32).
  virtual void attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache, int64_t first_pos,
                         const AttentionScores& scores, const Tensor& out) = 0;

  // ---------------------------------------------------------------- paged KV cache (serving)
  // A pool holds the keys (or values) of many sequences in fixed-size blocks:
  // [num_blocks, block_size, n_kv_heads, head_dim]; block_size a power of two. A sequence's
  // block table lists the blocks of its positions in order: position p lives in block
  // blocks[p / block_size] at row p % block_size.

  // Causal GQA attention for several sequences in one call (a continuous batch). Sequence s
  // owns query rows [first_row, first_row + rows) of q [n, n_heads, head_dim] and out (same
  // shape); query row first_row + t sits at position first_pos + t and attends to positions
  // [0, first_pos + t] (as `scores` allows) read through `blocks`. Same math, dtype rules and f16 arithmetic
  // as attention(); on one backend the result for a sequence equals attention() over a contiguous cache
  // holding the same rows, bit for bit, whatever else is in the batch. Rows of q no sequence owns are left
  // untouched in out. Throws Error on a block id outside the pool, a table too short for first_pos + rows, or
  // overlapping row ranges.
  struct PagedSequence {
    int64_t first_row = 0;
    int64_t rows = 0;
    int64_t first_pos = 0;
    std::span<const int32_t> blocks;
  };
  virtual void paged_attention(const Tensor& q, const Tensor& k_pool, const Tensor& v_pool,
                               std::span<const PagedSequence> sequences, const AttentionScores& scores,
                               const Tensor& out) = 0;

  // Writes row i of `rows` [n, n_kv_heads, head_dim] f32 into slot slots[i] of `pool`
  // (slot = block * block_size + row in block), converted to the pool's dtype as convert()
  // does. Slots must be distinct and inside the pool (Error otherwise).
  virtual void store_kv(const Tensor& rows, std::span<const int64_t> slots, const Tensor& pool) = 0;

  // y = x converted to y's dtype (f32, bf16 or f16; round to nearest even); x f32, same
  // number of elements, no overlap.
  virtual void convert(const Tensor& x, const Tensor& y) = 0;

  // Per row: y = softmax(x) with the max subtracted first.
  virtual void softmax(const Tensor& x, const Tensor& y) = 0;

  // ---------------------------------------------------------------- training
  // The backward of each forward op above, plus the loss and the optimizer step. All
  // gradients are f32. Activation gradients (dx, dq, ...) are overwritten (the norms' may be
  // accumulated, see GradWrite); parameter gradients (dw, db, dweight, dbias, dtable) are
  // accumulated (+=), so micro-batches of gradient accumulation simply add up. Outputs never
  // overlap inputs unless stated.

  // Of matmul: y[n, m] = x[n, k] . w[m, k]^T + bias[m].  dy [n, m].
  //   dx[n, k]  = dy . w            (skipped when dx is null)
  //   dw[m, k] += dy^T . x          (skipped when null; f32 whatever w's dtype)
  //   db[m]    += sum_t dy[t, :]    (skipped when null)
  virtual void matmul_backward(const Tensor& x, const Tensor& w, const Tensor& dy, const Tensor* dx,
                               const Tensor* dw, const Tensor* db) = 0;

  // Of embedding: dtable[ids[t], :] += dout[t, :], summed in token order (deterministic:
  // the same bits for the same inputs, whatever the thread count). dtable [vocab, d] f32.
  virtual void embedding_backward(std::span<const int32_t> ids, const Tensor& dout, const Tensor& dtable) = 0;

  // Of rms_norm (x [n, d], weight [d]): dx written as `dx_write` says (Accumulate: the
  // residual add's backward fused in, bit for bit as add() of the overwritten dx),
  // dweight[d] += sum over rows.
  virtual void rms_norm_backward(const Tensor& x, const Tensor& weight, float eps, const Tensor& dy,
                                 const Tensor& dx, const Tensor& dweight, GradWrite dx_write) = 0;

  // Of layer_norm: dx as for rms_norm; dweight[d] += sum_t dy * xhat, dbias[d] += sum_t dy.
  virtual void layer_norm_backward(const Tensor& x, const Tensor& weight, float eps, const Tensor& dy,
                                   const Tensor& dx, const Tensor& dweight, const Tensor& dbias,
                                   GradWrite dx_write) = 0;

  // Of gelu: dx = dy * gelu'(x); dx may be dy (in place).
  virtual void gelu_backward(const Tensor& x, GeluForm form, const Tensor& dy, const Tensor& dx) = 0;

  // Of swiglu (y = silu(gate) * up): dgate = dy * up * silu'(gate), dup = dy * silu(gate).
  // dgate and dup are distinct; each may be exactly one of dy, gate, up (in place: every
  // element's inputs are read before its outputs are written).
  virtual void swiglu_backward(const Tensor& gate, const Tensor& up, const Tensor& dy, const Tensor& dgate,
                               const Tensor& dup) = 0;

  // Of geglu (y = gelu_tanh(gate) * up): dgate = dy * up * gelu_tanh'(gate), dup = dy *
  // gelu_tanh(gate); in place as swiglu_backward.
  virtual void geglu_backward(const Tensor& gate, const Tensor& up, const Tensor& dy, const Tensor& dgate,
                              const Tensor& dup) = 0;

  // Of softcap, from its output y = cap tanh(x / cap): dx = dy * (1 - (y / cap)^2); dx may be
  // dy or y (in place).
  virtual void softcap_backward(const Tensor& y, float cap, const Tensor& dy, const Tensor& dx) = 0;

  // Of rope, in place: dx [n, heads, head_dim] rotated back (angle -positions[t] * inv_freq[j])
  // and multiplied by `magnitude` (the forward's).
  virtual void rope_backward(const Tensor& dx, std::span<const int32_t> positions, const Tensor& inv_freq,
                             RopeLayout layout, float magnitude) = 0;

  // Of causal attention over one sequence (training: no cache offset). q [n, heads, hd],
  // k, v [n, kv_heads, hd] (query t attends to keys first_position(t)..t), out = the forward
  // output attention(q, k, v, 0, scores); dout like out. Writes dq (like q), dk, dv (like k,
  // v), summing the gradients of the query heads that share a kv head. With a soft cap, the
  // score's derivative is scale * (1 - (s / cap)^2), s the capped score.
  virtual void attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                                  const Tensor& dout, AttentionScores scores, const Tensor& dq,
                                  const Tensor& dk, const Tensor& dv) = 0;

  // Softmax cross-entropy of logits [n, vocab] against targets[t] (a target < 0 is ignored:
  // loss 0 and a zero gradient row):
  //   losses[t]     = logsumexp(logits[t, :]) - logits[t, targets[t]]          (f32 [n])
  //   dlogits[t, :] = grad_scale * (softmax(logits[t, :]) - onehot(targets[t])) (when not null)
  // dlogits may be logits itself (the probabilities are never stored separately).
  // Throws Error if a target is >= vocab.
  virtual void cross_entropy(const Tensor& logits, std::span<const int32_t> targets, float grad_scale,
                             const Tensor& losses, const Tensor* dlogits) = 0;

  // sum_i x[i]^2 of an f32 tensor, accumulated in double (for the global gradient norm).
  virtual double sum_squares(const Tensor& x) = 0;

  // One AdamW step (PyTorch's torch.optim.AdamW, decoupled weight decay) on f32 param,
  // with g = grad_scale * grad and t = step (1 for the first step):
  //   param -= lr * weight_decay * param
  //   m = beta1 m + (1 - beta1) g;   v = beta2 v + (1 - beta2) g^2
  //   param -= lr * (m / (1 - beta1^t)) / (sqrt(v / (1 - beta2^t)) + eps)
  // param, grad, m, v: f32, same element count.
  struct AdamW {
    float lr = 1e-3f, beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f, weight_decay = 0.0f;
    int64_t step = 1;
    float grad_scale = 1.0f;  // 1 / loss scale, times a clipping factor
  };
  virtual void adamw_step(const Tensor& param, const Tensor& grad, const Tensor& m, const Tensor& v,
                          const AdamW& hyper) = 0;
};

// The fastest CPU implementation for this machine's instruction set.
std::unique_ptr<Backend> make_cpu_backend();

}  // namespace tokenmill
