// The two charts of `tokenmill bench --out`, as standalone SVG text (no dependency):
//  - throughput.svg: tokens/s against batch size, one line per phase;
//  - roofline.svg: log-log FLOP/s against arithmetic intensity (FLOPs per byte), with the
//    measured ceilings (read bandwidth slope, f32 GEMM peak) and each phase at its
//    intensity and achieved FLOP/s.
#pragma once

#include <string>

#include "measure/bench_runner.h"

namespace tokenmill {

std::string throughput_svg(const BenchRun& run);
std::string roofline_svg(const BenchRun& run);

}  // namespace tokenmill
