#include "doctor/self_test.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "backend/backend.h"
#include "backend/cpu/cpu_features.h"
#include "backend/cuda_availability.h"
#include "backend/reference/reference_ops.h"
#include "core/error.h"
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

// Where a self-test runs: its backend, and memory that both it and the host address.
struct TestDevice {
  Backend& backend;
  std::string name;
  std::function<void*(size_t bytes)> allocate;
  std::function<void(void* memory)> release;
  std::function<void()> synchronize;  // before the host reads what the backend wrote
};

// f32 tensors in a TestDevice's memory, released together.
class DeviceTensors {
 public:
  explicit DeviceTensors(const TestDevice& device) : device_(device) {}
  ~DeviceTensors() {
    for (void* p : blocks_) device_.release(p);
  }
  DeviceTensors(const DeviceTensors&) = delete;
  DeviceTensors& operator=(const DeviceTensors&) = delete;

  // A tensor of `dims` holding `values` (its element count; zeros when empty).
  Tensor make(const std::vector<float>& values, std::initializer_list<int64_t> dims) {
    Tensor t(nullptr, DType::F32, dims);
    t.data = device_.allocate(t.nbytes());
    blocks_.push_back(t.data);
    if (values.empty()) {
      std::fill_n(t.as<float>(), t.numel(), 0.0f);
    } else {
      std::copy(values.begin(), values.end(), t.as<float>());
    }
    return t;
  }
  std::vector<float> read(const Tensor& t) const {
    device_.synchronize();
    return std::vector<float>(t.as<const float>(), t.as<const float>() + t.numel());
  }

 private:
  const TestDevice& device_;
  std::vector<void*> blocks_;
};

// `op` followed by the device's synchronize, so a timed run includes the device's work.
std::function<void()> completed(const TestDevice& device, std::function<void()> op) {
  return [&device, op = std::move(op)] {
    op();
    device.synchronize();
  };
}

// y[m, n] = x[m, k] . w[n, k]^T: 2*m*n*k FLOPs over (m*k + n*k + m*n) f32.
SelfTestResult gemm(const TestDevice& device) {
  constexpr int64_t m = 512, n = 512, k = 512;
  DeviceTensors tensors(device);
  const Tensor x = tensors.make(random_values(m * k, 1), {m, k}),
               w = tensors.make(random_values(n * k, 2), {n, k}), y = tensors.make({}, {m, n});
  const double seconds = best_seconds(completed(device, [&] { device.backend.matmul(x, w, nullptr, y); }));
  const double error = max_relative_error(tensors.read(y), reference::matmul(x, w, nullptr));
  return finish(fmt::format("gemm {}x{}x{} f32", m, n, k), device.name, error, seconds, 2.0 * m * n * k,
                4.0 * double(m * k + n * k + m * n));
}

// Causal GQA attention of `queries` new tokens after `first_pos` cached ones: query t sees
// first_pos + t + 1 keys, each costing 2*head_dim FLOPs for the score and 2*head_dim for v.
SelfTestResult attention(const TestDevice& device) {
  constexpr int64_t queries = 128, first_pos = 384, heads = 8, kv_heads = 2, head_dim = 64;
  constexpr int64_t context = first_pos + queries;
  DeviceTensors tensors(device);
  const Tensor q = tensors.make(random_values(queries * heads * head_dim, 3), {queries, heads, head_dim});
  const Tensor kc =
      tensors.make(random_values(context * kv_heads * head_dim, 4), {context, kv_heads, head_dim});
  const Tensor vc =
      tensors.make(random_values(context * kv_heads * head_dim, 5), {context, kv_heads, head_dim});
  const Tensor out = tensors.make({}, {queries, heads, head_dim});
  const float scale = 1.0f / std::sqrt(float(head_dim));
  const double seconds =
      best_seconds(completed(device, [&] { device.backend.attention(q, kc, vc, first_pos, scale, out); }));
  const double error =
      max_relative_error(tensors.read(out), reference::attention(q, kc, vc, first_pos, scale));
  double keys = 0;
  for (int64_t t = 0; t < queries; ++t) keys += double(first_pos + t + 1);
  return finish(fmt::format("attention {} queries x {} keys, {}/{} heads x {}", queries, context, heads,
                            kv_heads, head_dim),
                device.name, error, seconds, 4.0 * head_dim * heads * keys,
                4.0 * double(q.numel() + kc.numel() + vc.numel() + out.numel()));
}

}  // namespace

std::vector<SelfTestResult> run_cpu_self_test() {
  const std::unique_ptr<Backend> backend = make_cpu_backend();
  const TestDevice cpu{
      .backend = *backend,
      .name = fmt::format("cpu ({})", cpu_isa_name(best_cpu_isa())),
      .allocate = [](size_t bytes) { return std::aligned_alloc(64, (bytes + 63) / 64 * 64); },
      .release = [](void* p) { std::free(p); },
      .synchronize = [] {}};
  return {gemm(cpu), attention(cpu)};
}

std::vector<SelfTestResult> run_gpu_self_test(int gpu_count, std::vector<std::string>& skipped) {
  std::vector<SelfTestResult> results;
#ifdef TOKENMILL_HAS_CUDA
  for (int gpu = 0; gpu < gpu_count; ++gpu) {
    const std::string why = cuda::unavailable_reason(gpu);
    if (!why.empty()) {
      skipped.push_back(fmt::format("GPU {}: {}", gpu, why));
      continue;
    }
    try {
      const std::unique_ptr<Backend> backend = make_cuda_backend(gpu);
      const TestDevice device{.backend = *backend,
                              .name = std::string(backend->name()),
                              .allocate = [](size_t bytes) { return cuda::managed_allocate(bytes); },
                              .release = [](void* p) { cuda::managed_free(p); },
                              .synchronize = [] { cuda::synchronize_device(); }};
      results.push_back(gemm(device));
      results.push_back(attention(device));
    } catch (const Error& e) {
      skipped.push_back(fmt::format("GPU {}: the CUDA backend failed: {}", gpu, e.what()));
    }
  }
#else
  if (gpu_count > 0) skipped.push_back(kNoCudaBackend);
#endif
  return results;
}

std::vector<Finding> self_test_findings(const std::vector<SelfTestResult>& results,
                                        const std::vector<std::string>& gpu_skipped) {
  std::vector<Finding> out;
  for (const SelfTestResult& r : results) {
    const std::string what =
        fmt::format("{} on {}: max relative error {:.1e} (tolerance {:.0e}), {:.1f} GFLOP/s", r.name,
                    r.device, r.max_relative_error, r.tolerance, r.gflops_per_s);
    const bool on_gpu = r.device.starts_with("cuda");
    if (r.passed)
      out.push_back({"self-test", Status::Ok, what, ""});
    else if (on_gpu)
      out.push_back(
          {"self-test", Status::Fail, what + ": the GPU computes wrong results",
           "check `nvidia-smi -q -d ECC,TEMPERATURE,CLOCK` for ECC errors, heat or clocks out of spec; "
           "if the GPU is healthy, report it with the output of tokenmill doctor --json"});
    else
      out.push_back(
          {"self-test", Status::Fail, what + ": the CPU kernels compute wrong results on this machine",
           "report it with the output of tokenmill doctor --json; TOKENMILL_CPU_ISA=avx2 selects the "
           "other kernels meanwhile"});
  }
  for (const std::string& why : gpu_skipped)
    out.push_back({"self-test", Status::Info, "GPU self-test skipped: " + why, ""});
  return out;
}

}  // namespace tokenmill::doctor
