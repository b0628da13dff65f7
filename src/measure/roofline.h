// The roofline of a device: its compute and memory ceilings, measured in the same run as
// the workload they judge, and where a workload sits under them.
//
// A kernel of arithmetic intensity I (FLOPs per byte read) can reach at most
//   attainable(I) = min(peak_flops, read_bandwidth x I)
// FLOP/s. The ridge point peak_flops / read_bandwidth separates memory-bound kernels
// (I below it) from compute-bound ones. The roofline fraction is achieved / attainable(I):
// for a memory-bound phase the achieved bandwidth over the read bandwidth, for a
// compute-bound one its MFU.
#pragma once

#include <cstdint>
#include <string>

#include "backend/backend.h"

namespace tokenmill {

struct Ceilings {
  double peak_flops = 0;            // FLOP/s of the calibrated GEMM
  double read_bandwidth = 0;        // bytes/s of the multi-threaded streaming read, or of the device copy
  int64_t gemm_size = 0;            // the GEMM is gemm_size^3 (n = k = m)
  uint64_t read_bytes = 0;          // size of the buffer read (copied)
  bool device_copy = false;         // read_bandwidth is the device copy's (bytes read + written per second)
  DType gemm_weights = DType::F32;  // the GEMM's weights (CalibrationOptions::gemm_weights)
};

struct CalibrationOptions {
  int64_t gemm_size = 1024;
  uint64_t read_bytes = uint64_t{256} << 20;  // beyond the last-level cache of current CPUs
  double min_seconds = 0.3;                   // each pass repeats its kernel at least this long
  int passes = 3;                             // best of: the least disturbed pass on a shared machine
  DType gemm_weights = DType::F32;            // the GEMM's weights: F32, BF16 or F16
};

// Measures the ceilings of `backend`, its buffers in backend.memory():
//  - peak_flops: y[n, m] = x[n, k] . w[m, k]^T through Backend::matmul, x f32 and w in
//    gemm_weights (the rate of the GEMMs a bf16 / fp16 training run multiplies with: tensor
//    cores on a GPU), 2 n k m FLOPs per call, after one warm-up call;
//  - read_bandwidth, host memory (the CPU backend, with the current thread count,
//    core/parallel.h): every thread sums its share of a read_bytes buffer (OpenMP), after a
//    first pass that also writes the buffer (first touch on each thread's pages);
//  - read_bandwidth, device memory (device_copy): Backend::convert copies a read_bytes f32
//    buffer into another, 2 x read_bytes moved per call: on a GPU's memory reads and writes
//    share the bus, so this is the rate a read-only kernel can reach too.
// Each pass repeats its kernel until min_seconds have passed (waiting for the device's queued
// calls before reading the clock); the best pass counts. Throws Error on options that cannot
// measure anything (sizes < 1, min_seconds <= 0, passes < 1).
Ceilings measure_ceilings(Backend& backend, const CalibrationOptions& options);

// FLOPs per byte; Error if bytes <= 0.
double arithmetic_intensity(double flops, double bytes);
// The intensity at which both ceilings meet (FLOPs per byte).
double ridge_point(const Ceilings& c);
// min(peak_flops, read_bandwidth x intensity).
double attainable_flops(const Ceilings& c, double intensity);
// "memory" below the ridge point, "compute" at or above it.
std::string bound(const Ceilings& c, double intensity);
// achieved_flops / attainable_flops(intensity).
double roofline_fraction(const Ceilings& c, double intensity, double achieved_flops);

}  // namespace tokenmill
