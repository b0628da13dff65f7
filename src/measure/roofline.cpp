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
#include "measure/stream_read.h"

namespace tokenmill {

namespace {

using Clock = std::chrono::steady_clock;

// The best rate (work per second) over `passes` passes. Each pass calls `kernel` in groups,
// `sync` after each group (it returns once the backend has finished the queued calls), until
// `min_seconds` have passed; a group is sized from the calls so far to end the pass about on
// time, at most twice the previous one.
double best_rate(double work_per_call, const CalibrationOptions& options, const std::function<void()>& kernel,
                 const std::function<void()>& sync) {
  double best = 0;
  for (int pass = 0; pass < options.passes; ++pass) {
    const auto start = Clock::now();
    int64_t calls = 0, group = 1;
    double seconds = 0;
    do {
      for (int64_t i = 0; i < group; ++i) kernel();
      sync();
      calls += group;
      seconds = std::chrono::duration<double>(Clock::now() - start).count();
      const double calls_left = (options.min_seconds - seconds) / (seconds / static_cast<double>(calls));
      group = static_cast<int64_t>(std::clamp(calls_left, 1.0, 2.0 * static_cast<double>(group)));
    } while (seconds < options.min_seconds);
    best = std::max(best, work_per_call * static_cast<double>(calls) / seconds);
  }
  return best;
}

// Waits for `memory`'s backend to finish its queued ops: a copy to the host of one float of
// `probe` (DeviceMemory::copy_to_host runs after every op queued before it).
std::function<void()> sync_on(DeviceMemory& memory, const Tensor& probe) {
  return [&memory, probe] {
    float value = 0;
    memory.copy_to_host(&value, probe.data, sizeof value);
  };
}

double gemm_flops(Backend& backend, const CalibrationOptions& options) {
  const int64_t n = options.gemm_size;
  const auto matrix_bytes = Arena::footprint(static_cast<size_t>(n * n) * sizeof(float));
  Arena arena(4 * matrix_bytes, backend.memory());
  const Tensor x = arena.allocate(DType::F32, {n, n});
  const Tensor w32 = arena.allocate(DType::F32, {n, n});
  const Tensor y = arena.allocate(DType::F32, {n, n});
  std::vector<float> host(static_cast<size_t>(n * n));
  for (size_t i = 0; i < host.size(); ++i) host[i] = static_cast<float>((i * 7919) % 1000) / 1000.0f - 0.5f;
  backend.memory().copy_from_host(x.data, host.data(), x.nbytes());
  for (size_t i = 0; i < host.size(); ++i) host[i] = static_cast<float>((i * 104729) % 1000) / 1000.0f - 0.5f;
  backend.memory().copy_from_host(w32.data, host.data(), w32.nbytes());
  Tensor w = w32;
  if (options.gemm_weights != DType::F32) {  // the same values, rounded to the weights' dtype
    w = arena.allocate(options.gemm_weights, {n, n});
    backend.convert(w32, w);
  }
  const auto multiply = [&] { backend.matmul(x, w, nullptr, y); };
  const auto sync = sync_on(backend.memory(), y);
  multiply();  // warm-up: kernel scratch, caches
  sync();
  return best_rate(2.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n), options,
                   multiply, sync);
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
  std::vector<uint64_t> partial(static_cast<size_t>(max_thread_count()));
  const auto read = [&] {
    std::fill(partial.begin(), partial.end(), 0);
    parallel_for_chunks(words, kReadGrain, [&](int64_t begin, int64_t end) {
      partial[static_cast<size_t>(omp_get_thread_num())] = stream_sum(data, begin, end);
    });
    uint64_t total = 0;
    for (const uint64_t s : partial) total += s;
    if (total != expected)
      fail("read-bandwidth calibration: the buffer summed to {}, not {}", total, expected);
  };
  read();  // warm-up
  return best_rate(static_cast<double>(n * sizeof(uint64_t)), options, read, [] {});
}

// Device memory: y = x through Backend::convert (f32 to f32, a copy) of read_bytes, counted
// as 2 x read_bytes moved (each byte read once and written once). The wait for the queued
// copies is a copy of y's last word back to the host, which is also checked (that the copy
// reached the end of the buffer).
double copy_bandwidth(Backend& backend, const CalibrationOptions& options) {
  const auto count = static_cast<int64_t>(options.read_bytes / sizeof(float));
  Arena arena(2 * Arena::footprint(static_cast<size_t>(count) * sizeof(float)), backend.memory());
  const Tensor x = arena.allocate(DType::F32, {count});
  const Tensor y = arena.allocate(DType::F32, {count});
  std::vector<float> host(static_cast<size_t>(count));
  for (size_t i = 0; i < host.size(); ++i) host[i] = static_cast<float>(i % 4096);
  backend.memory().copy_from_host(x.data, host.data(), x.nbytes());
  const float* last = y.as<const float>() + (count - 1);  // addressed, never dereferenced
  const auto copy = [&] { backend.convert(x, y); };
  const auto sync_and_check = [&] {
    float value = -1;
    backend.memory().copy_to_host(&value, last, sizeof value);
    if (value != host.back())
      fail("copy-bandwidth calibration: the last word copied is {}, not {}", value, host.back());
  };
  copy();  // warm-up
  sync_and_check();
  return best_rate(2.0 * static_cast<double>(x.nbytes()), options, copy, sync_and_check);
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
  c.gemm_weights = options.gemm_weights;
  c.read_bytes = options.read_bytes / sizeof(uint64_t) * sizeof(uint64_t);
  c.peak_flops = gemm_flops(backend, options);
  c.device_copy = !backend.memory().is_host();
  c.read_bandwidth = c.device_copy ? copy_bandwidth(backend, options) : read_bandwidth(options);
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
