// The float64 reference of every Backend op: plain loops, obviously correct, slow.
//
// Inputs are read in any dtype through load_as_f32 (so a bf16/f16 weight is the same
// rounded value a backend sees); all arithmetic is in double; results are returned as
// row-major std::vector<double> in the shape of the op's output. The conformance suite
// (tests/backend) compares every backend against these functions. Shapes are checked
// loosely (enough to never read out of bounds) and mismatches throw Error.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "backend/backend.h"
#include "core/tensor.h"

namespace tokenmill::reference {

// Element i of a tensor of any dtype, as double.
double element(const Tensor& t, int64_t i);

std::vector<double> embedding(const Tensor& table, std::span<const int32_t> ids);
// Backend::combine_rows: y[r] = sum_j scales[r k + j] x[rows[r k + j]] for n rows of y.
std::vector<double> combine_rows(const Tensor& x, std::span<const int32_t> rows,
                                 std::span<const float> scales, int64_t n);
std::vector<double> matmul(const Tensor& x, const Tensor& w, const Tensor* bias);
// Backend::add_lora: y_before [n, m] plus, on each segment's rows, (x[r] . a^T) . b^T.
std::vector<double> add_lora(const Tensor& x, std::span<const Backend::LoraSegment> segments,
                             const Tensor& y_before);
std::vector<double> rms_norm(const Tensor& x, const Tensor& weight, float eps);
std::vector<double> layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, float eps);
std::vector<double> gelu(const Tensor& x, GeluForm form);
std::vector<double> silu(const Tensor& x);
std::vector<double> swiglu(const Tensor& gate, const Tensor& up);
std::vector<double> geglu(const Tensor& gate, const Tensor& up);
std::vector<double> clamped_swiglu(const Tensor& gate, const Tensor& up, float alpha, float limit);
std::vector<double> scale(const Tensor& x, float factor);
std::vector<double> softcap(const Tensor& x, float cap);
std::vector<double> add(const Tensor& a, const Tensor& b);
std::vector<double> rope(const Tensor& x, std::span<const int32_t> positions, const Tensor& inv_freq,
                         RopeLayout layout, float magnitude);
std::vector<double> attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                              int64_t first_pos, const AttentionScores& scores);
// One sequence of Backend::paged_attention: its output rows [rows, n_heads, head_dim], by
// attention() over its positions gathered from the pools into a contiguous cache.
std::vector<double> paged_attention(const Tensor& q, const Tensor& k_pool, const Tensor& v_pool,
                                    const Backend::PagedSequence& sequence, const AttentionScores& scores);
// Every element of `pool` after Backend::store_kv(rows, slots, pool).
std::vector<double> store_kv(const Tensor& rows, std::span<const int64_t> slots, const Tensor& pool);
std::vector<double> softmax(const Tensor& x);

}  // namespace tokenmill::reference
