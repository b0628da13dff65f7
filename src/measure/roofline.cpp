#include "measure/roofline.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <vector>

#include <fmt/format.h>

#include "core/arena.h"
#include "core/error.h"
#include "core/parallel.h"

namespace tokenmill {

namespace {

using Clock = std::chrono::steady_clock;

// The best rate (work per second) over `passes` passes, each calling `kernel` until
// `min_seconds` have passed.
double best_rate(double work_per_call, const CalibrationOptions& options,
                 const std::function<void()>& kernel) {
  double best = 0;
  for (int pass = 0; pass < options.passes; ++pass) {
    const auto start = Clock::now();
    int64_t calls = 0;
    double seconds = 0;
    do {
      kernel();
      ++calls;
      seconds = std::chrono::duration<double>(Clock::now() - start).count();
    } while (seconds < options.min_seconds);
    best = std::max(best, work_per_call * static_cast<double>(calls) / seconds);
  }
  return best;
}

double gemm_flops(Backend& backend, const CalibrationOptions& options) {
  const int64_t n = options.gemm_size;
  const auto matrix_bytes = Arena::footprint(static_cast<size_t>(n * n) * sizeof(float));
  Arena arena(3 * matrix_bytes);
  const Tensor x = arena.allocate(DType::F32, {n, n});
  const Tensor w = arena.allocate(DType::F32, {n, n});
  const Tensor y = arena.allocate(DType::F32, {n, n});
  for (int64_t i = 0; i < n * n; ++i) {
    x.as<float>()[i] = static_cast<float>((i * 7919) % 1000) / 1000.0f - 0.5f;
    w.as<float>()[i] = static_cast<float>((i * 104729) % 1000) / 1000.0f - 0.5f;
  }
  const auto multiply = [&] { backend.matmul(x, w, nullptr, y); };
  multiply();  // warm-up: kernel scratch, caches
  return best_rate(2.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n), options,
                   multiply);
}

constexpr int64_t kReadGrain = 8192;  // words per chunk boundary: 64 KiB

double read_bandwidth(const CalibrationOptions& options) {
  const auto words = static_cast<int64_t>(options.read_bytes / sizeof(uint64_t));
  Arena arena(Arena::footprint(static_cast<size_t>(words) * sizeof(uint64_t)));
  auto* data = arena.allocate(DType::F32, {2 * words}).as<uint64_t>();  // 2 f32 slots per word
  // Word i holds i, so the sum of all of them is known: a check that every word was read,
  // and a use of the loads the compiler cannot drop.
  parallel_for_chunks(words, kReadGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) data[i] = static_cast<uint64_t>(i);
  });
  const auto n = static_cast<uint64_t>(words);
  const uint64_t expected = n % 2 == 0 ? n / 2 * (n - 1) : (n - 1) / 2 * n;  // mod 2^64
  std::vector<uint64_t> partial(static_cast<size_t>(thread_count()));
  const auto read = [&] {
    std::fill(partial.begin(), partial.end(), 0);
    parallel_for_chunks(words, kReadGrain, [&](int64_t begin, int64_t end) {
      uint64_t sum = 0;
      for (int64_t i = begin; i < end; ++i) sum += data[i];
      partial[static_cast<size_t>(omp_get_thread_num())] = sum;
    });
    uint64_t total = 0;
    for (const uint64_t s : partial) total += s;
    if (total != expected)
      fail("read-bandwidth calibration: the buffer summed to {}, not {}", total, expected);
  };
  read();  // warm-up
  return best_rate(static_cast<double>(n * sizeof(uint64_t)), options, read);
}

}  // namespace

Ceilings measure_ceilings(Backend& backend, const CalibrationOptions& options) {
  if (options.gemm_size < 1 || options.read_bytes < sizeof(uint64_t) || !(options.min_seconds > 0) ||
      options.passes < 1)
    fail(
        "roofline calibration needs gemm_size >= 1, read_bytes >= 8, min_seconds > 0 and passes >= 1 "
        "(got {}, {}, {}, {})",
        options.gemm_size, options.read_bytes, options.min_seconds, options.passes);
  Ceilings c;
  c.gemm_size = options.gemm_size;
  c.read_bytes = options.read_bytes / sizeof(uint64_t) * sizeof(uint64_t);
  c.peak_flops = gemm_flops(backend, options);
  c.read_bandwidth = read_bandwidth(options);
  return c;
}

double arithmetic_intensity(double flops, double bytes) {
  if (!(bytes > 0)) fail("arithmetic intensity needs a positive byte count, got {}", bytes);
  return flops / bytes;
}

double ridge_point(const Ceilings& c) { return c.peak_flops / c.read_bandwidth; }

double attainable_flops(const Ceilings& c, double intensity) {
  return std::min(c.peak_flops, c.read_bandwidth * intensity);
}

std::string bound(const Ceilings& c, double intensity) {
  return intensity < ridge_point(c) ? "memory" : "compute";
}

double roofline_fraction(const Ceilings& c, double intensity, double achieved_flops) {
  return achieved_flops / attainable_flops(c, intensity);
}

}  // namespace tokenmill
