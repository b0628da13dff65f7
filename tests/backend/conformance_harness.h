// Test harness for the backend conformance suite: which backends to test, guarded
// buffers (canary bytes before and after every tensor), seeded random fills that are
// never zero, and comparison against the float64 reference.
//
// Adding a backend = adding a BackendUnderTest to backends_under_test(). Its memory hooks
// must return memory both the backend and the host can address (host memory for the CPU;
// for CUDA, managed memory plus a synchronize before the host reads results).
//
// The CUDA backend joins when the build has it and a usable GPU is present; without one its
// cases are simply not instantiated (support/gpu_devices.h: TOKENMILL_REQUIRE_CUDA=1 turns a
// missing GPU into a failure).
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/cpu_backend.h"
#ifdef TOKENMILL_HAS_CUDA
#include "backend/cuda/cuda_backend.h"
#endif
#include "core/parallel.h"
#include "core/tensor.h"
#include "support/gpu_devices.h"

namespace tokenmill::testing {

struct BackendUnderTest {
  std::string name;  // a valid gtest parameter name: [A-Za-z0-9_]
  std::function<std::unique_ptr<Backend>()> make;
  std::function<void*(size_t bytes)> allocate;
  std::function<void(void* memory)> release;
  std::function<void()> synchronize;  // completes all work before the host reads memory
  // A matmul over bf16/f16 weights rounds its f32 activations (x; dy for dx in the backward)
  // to the weights' dtype, as tensor cores read them (CUDA); the CPU multiplies them as f32.
  bool rounds_matmul_activations = false;
};

// gtest prints parameters in failure messages; the name says it all.
inline void PrintTo(const BackendUnderTest& backend, std::ostream* os) { *os << backend.name; }

inline BackendUnderTest cpu_backend_under_test(CpuIsa isa) {
  return BackendUnderTest{
      .name = "cpu_" + std::string(cpu_isa_name(isa)),
      .make = [isa] { return make_cpu_backend_for(isa); },
      .allocate = [](size_t bytes) { return std::aligned_alloc(64, (bytes + 63) / 64 * 64); },
      .release = [](void* p) { std::free(p); },
      .synchronize = [] {},
  };
}

#ifdef TOKENMILL_HAS_CUDA
// The CUDA backend with its own choice of attention kernel (TOKENMILL_CUDA_ATTENTION unset:
// flash_attention_plan.h), or with `attention_kernel` ("tiled", "rowwise") forced. Each test
// makes its backend afresh, so each instance sets the variable for its tests.
inline BackendUnderTest cuda_backend_under_test(const char* attention_kernel = nullptr) {
  return BackendUnderTest{
      .name = attention_kernel == nullptr ? std::string("cuda") : "cuda_" + std::string(attention_kernel),
      .make =
          [attention_kernel] {
            if (attention_kernel == nullptr)
              unsetenv("TOKENMILL_CUDA_ATTENTION");
            else
              setenv("TOKENMILL_CUDA_ATTENTION", attention_kernel, 1);
            return make_cuda_backend();
          },
      .allocate = [](size_t bytes) { return cuda::managed_allocate(bytes); },
      .release = [](void* p) { cuda::managed_free(p); },
      .synchronize = [] { cuda::synchronize_device(); },
      .rounds_matmul_activations = true,
  };
}
#endif

// Every backend this machine can run: the CPU once per instruction set it has, and the
// CUDA backend on GPU 0 when there is one.
inline std::vector<BackendUnderTest> backends_under_test() {
  std::vector<BackendUnderTest> list;
  for (const CpuIsa isa : {CpuIsa::Avx2, CpuIsa::Avx512, CpuIsa::Amx})
    if (cpu_supports(isa)) list.push_back(cpu_backend_under_test(isa));
#ifdef TOKENMILL_HAS_CUDA
  if (cuda_usable()) list.push_back(cuda_backend_under_test());
#else
  cuda_usable();  // exits when TOKENMILL_REQUIRE_CUDA asks for a GPU this build cannot use
#endif
  return list;
}

// backends_under_test(), plus the CUDA backend once more with its tiled attention kernel
// forced ("cuda_tiled"), for the suites that run attention forward or backward: the automatic
// choice sends their short sequences to the row-wise kernels, so both kernels meet every case.
inline std::vector<BackendUnderTest> attention_backends_under_test() {
  std::vector<BackendUnderTest> list = backends_under_test();
#ifdef TOKENMILL_HAS_CUDA
  if (cuda_usable()) list.push_back(cuda_backend_under_test("tiled"));
#endif
  return list;
}

// Names a suite's instances after their backend: INSTANTIATE_TEST_SUITE_P(AllBackends, Suite,
// ::testing::ValuesIn(backends_under_test()), backend_test_name) gives AllBackends/Suite.Test/cpu_avx2.
inline std::string backend_test_name(const ::testing::TestParamInfo<BackendUnderTest>& info) {
  return info.param.name;
}

// A tensor with kGuardBytes of sentinel bytes on each side, optionally starting
// `misalign` bytes past a 64-byte boundary (weights in files sit at any offset).
class GuardedBuffer {
 public:
  static constexpr size_t kGuardBytes = 128;
  static constexpr uint8_t kSentinel = 0xa5;

  GuardedBuffer(const BackendUnderTest& backend, DType dtype, std::initializer_list<int64_t> dims,
                size_t misalign = 0)
      : backend_(&backend), tensor_(nullptr, dtype, dims), misalign_(misalign) {
    total_ = kGuardBytes + misalign_ + tensor_.nbytes() + kGuardBytes;
    memory_ = static_cast<uint8_t*>(backend.allocate(total_));
    std::memset(memory_, kSentinel, total_);
    tensor_.data = memory_ + kGuardBytes + misalign_;
  }
  ~GuardedBuffer() { backend_->release(memory_); }
  GuardedBuffer(const GuardedBuffer&) = delete;
  GuardedBuffer& operator=(const GuardedBuffer&) = delete;

  const Tensor& tensor() const { return tensor_; }
  const Tensor* ptr() const { return &tensor_; }
  int64_t numel() const { return tensor_.numel(); }

  // Element i as stored (after rounding to the dtype).
  float get(int64_t i) const { return load_as_f32(tensor_.data, tensor_.dtype, static_cast<size_t>(i)); }
  void set(int64_t i, float v) { store_from_f32(tensor_.data, tensor_.dtype, static_cast<size_t>(i), v); }

  // Uniform magnitudes in [lo, hi] with random signs: never zero when lo > 0.
  void fill_random(std::mt19937_64& rng, float lo = 0.05f, float hi = 1.0f) {
    std::uniform_real_distribution<float> magnitude(lo, hi);
    std::bernoulli_distribution negative(0.5);
    for (int64_t i = 0; i < numel(); ++i) set(i, negative(rng) ? -magnitude(rng) : magnitude(rng));
  }
  void fill(float v) {
    for (int64_t i = 0; i < numel(); ++i) set(i, v);
  }

  std::vector<float> values() const {
    backend_->synchronize();
    std::vector<float> out(static_cast<size_t>(numel()));
    for (int64_t i = 0; i < numel(); ++i) out[static_cast<size_t>(i)] = get(i);
    return out;
  }

  // True when no byte around the tensor changed.
  bool guards_intact() const {
    backend_->synchronize();
    for (size_t i = 0; i < kGuardBytes + misalign_; ++i)
      if (memory_[i] != kSentinel) return false;
    for (size_t i = kGuardBytes + misalign_ + tensor_.nbytes(); i < total_; ++i)
      if (memory_[i] != kSentinel) return false;
    return true;
  }

  // Remembers the contents, to check later that an input was not written.
  void snapshot() {
    backend_->synchronize();
    const auto* p = static_cast<const uint8_t*>(tensor_.data);
    saved_.assign(p, p + tensor_.nbytes());
    snapshotted_ = true;
  }
  // False before any snapshot(). An empty tensor is unchanged once snapshotted (memcmp is
  // never called on an empty vector's null data()).
  bool unchanged_since_snapshot() const {
    backend_->synchronize();
    if (!snapshotted_ || saved_.size() != tensor_.nbytes()) return false;
    return saved_.empty() || std::memcmp(saved_.data(), tensor_.data, saved_.size()) == 0;
  }

 private:
  const BackendUnderTest* backend_;
  Tensor tensor_;
  size_t misalign_;
  size_t total_ = 0;
  uint8_t* memory_ = nullptr;
  std::vector<uint8_t> saved_;
  bool snapshotted_ = false;
};

// The fixture of the parameterized backend suites: the backend under test (made fresh for
// every test), guarded buffers on it, and a seeded rng (each suite passes its own seed, so
// its random inputs do not depend on the other suites).
class BackendOpTest : public ::testing::TestWithParam<BackendUnderTest> {
 protected:
  explicit BackendOpTest(uint64_t seed) : rng_(seed) {}

  void SetUp() override { backend_ = GetParam().make(); }
  void TearDown() override { set_thread_count(0); }  // for the tests that change it

  // Completes the backend's queued work: before the host reads what an op wrote through
  // tensor().data or get(), or writes a buffer an op still reads.
  void synchronize() const { GetParam().synchronize(); }

  // A buffer on this backend.
  std::unique_ptr<GuardedBuffer> buffer(DType dtype, std::initializer_list<int64_t> dims,
                                        size_t misalign = 0) {
    return std::make_unique<GuardedBuffer>(GetParam(), dtype, dims, misalign);
  }
  std::unique_ptr<GuardedBuffer> buffer(std::initializer_list<int64_t> dims) {
    return buffer(DType::F32, dims);
  }

  // A random non-zero input one element past alignment, snapshotted for EXPECT_UNCHANGED.
  std::unique_ptr<GuardedBuffer> input(DType dtype, std::initializer_list<int64_t> dims, float lo = 0.05f,
                                       float hi = 1.0f) {
    auto b = buffer(dtype, dims, dtype_size(dtype));
    b->fill_random(rng_, lo, hi);
    b->snapshot();
    return b;
  }
  std::unique_ptr<GuardedBuffer> input(std::initializer_list<int64_t> dims, float lo = 0.05f,
                                       float hi = 1.0f) {
    return input(DType::F32, dims, lo, hi);
  }

  // An f32 output that starts as NaN, so anything the op forgets to write fails the comparison.
  std::unique_ptr<GuardedBuffer> output(std::initializer_list<int64_t> dims) {
    auto b = buffer(DType::F32, dims);
    b->fill(NAN);
    return b;
  }

  std::unique_ptr<Backend> backend_;
  std::mt19937_64 rng_;
};

#define EXPECT_GUARDS(buf) EXPECT_TRUE((buf)->guards_intact()) << #buf " canaries overwritten"
#define EXPECT_UNCHANGED(buf) EXPECT_TRUE((buf)->unchanged_since_snapshot()) << #buf " input was modified"

// max |got - want| <= tolerance * max |want| (a relative error measured against the
// output's largest magnitude, which is what the next layer sees).
inline ::testing::AssertionResult close_to_reference(const std::vector<float>& got,
                                                     const std::vector<double>& want, double tolerance) {
  if (got.size() != want.size())
    return ::testing::AssertionFailure() << "size " << got.size() << " but the reference has " << want.size();
  double max_want = 0, max_error = 0;
  size_t worst = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (!std::isfinite(got[i])) return ::testing::AssertionFailure() << "element " << i << " is " << got[i];
    max_want = std::max(max_want, std::abs(want[i]));
    const double error = std::abs(static_cast<double>(got[i]) - want[i]);
    if (error > max_error) {
      max_error = error;
      worst = i;
    }
  }
  const double limit = tolerance * std::max(max_want, 1e-30);
  if (max_error <= limit) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "max error " << max_error << " at element " << worst << " (got " << got[worst] << ", want "
         << want[worst] << ") exceeds " << tolerance << " * max|want| = " << limit;
}

}  // namespace tokenmill::testing
