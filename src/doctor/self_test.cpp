#include "doctor/self_test.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <random>

#include <fmt/format.h>

#include "backend/backend.h"
#include "backend/cpu/cpu_features.h"
#include "backend/reference/reference_ops.h"
#include "core/tensor.h"

namespace tokenmill::doctor {

namespace {

constexpr double kF32Tolerance = 1e-5;  // the conformance suite's f32 tolerance
constexpr int kTimedRuns = 3;

// Values with magnitudes in [0.05, 1] and random signs (never zero), fixed seed.
std::vector<float> random_values(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> magnitude(0.05f, 1.0f);
  std::bernoulli_distribution negative(0.5);
  std::vector<float> v(n);
  for (float& x : v) x = negative(rng) ? -magnitude(rng) : magnitude(rng);
  return v;
}

double max_relative_error(const std::vector<float>& got, const std::vector<double>& want) {
  double max_want = 0, max_error = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (!std::isfinite(got[i])) return INFINITY;
    max_want = std::max(max_want, std::abs(want[i]));
    max_error = std::max(max_error, std::abs(double(got[i]) - want[i]));
  }
  return max_error / std::max(max_want, 1e-30);
}

// Runs `op` once to warm up, then kTimedRuns times; the fastest run's seconds.
double best_seconds(const std::function<void()>& op) {
  op();
  double best = INFINITY;
  for (int i = 0; i < kTimedRuns; ++i) {
    const auto start = std::chrono::steady_clock::now();
    op();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return best;
}

SelfTestResult finish(std::string name, const std::string& device, double error, double seconds, double flops,
                      double bytes) {
  return {.name = std::move(name),
          .device = device,
          .max_relative_error = error,
          .tolerance = kF32Tolerance,
          .seconds = seconds,
          .gflops_per_s = flops / seconds / 1e9,
          .gbytes_per_s = bytes / seconds / 1e9,
          .passed = error <= kF32Tolerance};
}

// y[m, n] = x[m, k] . w[n, k]^T: 2*m*n*k FLOPs over (m*k + n*k + m*n) f32.
SelfTestResult gemm(Backend& backend, const std::string& device) {
  constexpr int64_t m = 512, n = 512, k = 512;
  std::vector<float> xs = random_values(m * k, 1), ws = random_values(n * k, 2), ys(m * n);
  const Tensor x(xs.data(), DType::F32, {m, k}), w(ws.data(), DType::F32, {n, k}),
      y(ys.data(), DType::F32, {m, n});
  const double seconds = best_seconds([&] { backend.matmul(x, w, nullptr, y); });
  const double error = max_relative_error(ys, reference::matmul(x, w, nullptr));
  return finish(fmt::format("gemm {}x{}x{} f32", m, n, k), device, error, seconds, 2.0 * m * n * k,
                4.0 * double(m * k + n * k + m * n));
}

// Causal GQA attention of `queries` new tokens after `first_pos` cached ones: query t sees
// first_pos + t + 1 keys, each costing 2*head_dim FLOPs for the score and 2*head_dim for v.
SelfTestResult attention(Backend& backend, const std::string& device) {
  constexpr int64_t queries = 128, first_pos = 384, heads = 8, kv_heads = 2, head_dim = 64;
  constexpr int64_t context = first_pos + queries;
  std::vector<float> qs = random_values(queries * heads * head_dim, 3);
  std::vector<float> ks = random_values(context * kv_heads * head_dim, 4);
  std::vector<float> vs = random_values(context * kv_heads * head_dim, 5);
  std::vector<float> outs(qs.size());
  const Tensor q(qs.data(), DType::F32, {queries, heads, head_dim});
  const Tensor kc(ks.data(), DType::F32, {context, kv_heads, head_dim});
  const Tensor vc(vs.data(), DType::F32, {context, kv_heads, head_dim});
  const Tensor out(outs.data(), DType::F32, {queries, heads, head_dim});
  const float scale = 1.0f / std::sqrt(float(head_dim));
  const double seconds = best_seconds([&] { backend.attention(q, kc, vc, first_pos, scale, out); });
  const double error = max_relative_error(outs, reference::attention(q, kc, vc, first_pos, scale));
  double keys = 0;
  for (int64_t t = 0; t < queries; ++t) keys += double(first_pos + t + 1);
  return finish(fmt::format("attention {} queries x {} keys, {}/{} heads x {}", queries, context, heads,
                            kv_heads, head_dim),
                device, error, seconds, 4.0 * head_dim * heads * keys,
                4.0 * double(qs.size() + ks.size() + vs.size() + outs.size()));
}

}  // namespace

std::vector<SelfTestResult> run_cpu_self_test() {
  const std::unique_ptr<Backend> backend = make_cpu_backend();
  const std::string device = fmt::format("cpu ({})", cpu_isa_name(best_cpu_isa()));
  return {gemm(*backend, device), attention(*backend, device)};
}

std::vector<Finding> self_test_findings(const std::vector<SelfTestResult>& results, bool gpu_found) {
  std::vector<Finding> out;
  for (const SelfTestResult& r : results) {
    const std::string what =
        fmt::format("{} on {}: max relative error {:.1e} (tolerance {:.0e}), {:.1f} GFLOP/s", r.name,
                    r.device, r.max_relative_error, r.tolerance, r.gflops_per_s);
    if (r.passed)
      out.push_back({"self-test", Status::Ok, what, ""});
    else
      out.push_back(
          {"self-test", Status::Fail, what + ": the CPU kernels compute wrong results on this machine",
           "report it with the output of tokenmill doctor --json; TOKENMILL_CPU_ISA=avx2 selects the "
           "other kernels meanwhile"});
  }
  if (gpu_found)
    out.push_back(
        {"self-test", Status::Info, "GPU self-test skipped: this build has no CUDA backend (#5)", ""});
  return out;
}

}  // namespace tokenmill::doctor
