// Roofline arithmetic with hand numbers, and a real (cheap) calibration of this machine.
#include <cmath>

#include <gtest/gtest.h>

#include "core/parallel.h"
#include "measure/roofline.h"
#include "support/expect_error.h"

namespace tokenmill {
namespace {

// 200 GFLOP/s and 40 GB/s: the ridge is at 200 / 40 = 5 FLOP/byte.
constexpr Ceilings kCeilings{2e11, 4e10, 1024, 256u << 20};

TEST(Roofline, RidgeAndBound) {
  EXPECT_DOUBLE_EQ(ridge_point(kCeilings), 5.0);
  EXPECT_EQ(bound(kCeilings, 4.99), "memory");
  EXPECT_EQ(bound(kCeilings, 5.0), "compute");
  EXPECT_EQ(bound(kCeilings, 500.0), "compute");
}

TEST(Roofline, AttainableIsTheLowerCeiling) {
  EXPECT_DOUBLE_EQ(attainable_flops(kCeilings, 2.0), 8e10);    // 40 GB/s x 2 FLOP/byte
  EXPECT_DOUBLE_EQ(attainable_flops(kCeilings, 100.0), 2e11);  // the peak
}

TEST(Roofline, FractionOfTheRoof) {
  // Decode-like: 2 FLOPs per byte read at 1e10 FLOP/s = 5 GB/s of the 40: 12.5 %.
  EXPECT_DOUBLE_EQ(arithmetic_intensity(2e9, 1e9), 2.0);
  EXPECT_DOUBLE_EQ(roofline_fraction(kCeilings, 2.0, 1e10), 0.125);
  // Prefill-like: 300 FLOP/byte at 8e10 FLOP/s: 40 % of the 200 GFLOP/s peak (its MFU).
  EXPECT_DOUBLE_EQ(roofline_fraction(kCeilings, 300.0, 8e10), 0.4);
  testing::expect_error([] { arithmetic_intensity(1.0, 0.0); }, {"positive byte count"});
}

TEST(Roofline, MeasuresThisMachine) {
  const auto backend = make_cpu_backend();
  const Ceilings c = measure_ceilings(
      *backend, {.gemm_size = 128, .read_bytes = 8u << 20, .min_seconds = 0.01, .passes = 2});
  EXPECT_EQ(c.gemm_size, 128);
  EXPECT_EQ(c.read_bytes, 8u << 20);
  // Any CPU this runs on does more than 10 MFLOP/s and reads more than 10 MB/s, and less
  // than 100 TFLOP/s and 10 TB/s: a unit mistake (a missing 2, bits for bytes) would show.
  EXPECT_GT(c.peak_flops, 1e7);
  EXPECT_LT(c.peak_flops, 1e14);
  EXPECT_GT(c.read_bandwidth, 1e7);
  EXPECT_LT(c.read_bandwidth, 1e13);
}

TEST(Roofline, RefusesOptionsThatMeasureNothing) {
  const auto backend = make_cpu_backend();
  testing::expect_error([&] { measure_ceilings(*backend, {.gemm_size = 0}); }, {"gemm_size >= 1"});
  testing::expect_error([&] { measure_ceilings(*backend, {.min_seconds = 0}); }, {"min_seconds > 0"});
}

}  // namespace
}  // namespace tokenmill
