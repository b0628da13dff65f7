// The read kernel of the bandwidth calibrations (tokenmill bench's roofline, bench_kernels):
// the rate it reaches is the ceiling decode's share of the roofline is measured against, so
// it reads memory the fastest way known here for one core, not the plainest.
#pragma once

#include <cstdint>

namespace tokenmill {

// The sum (mod 2^64) of words[begin, end). The range is read as four sequential streams (its
// quarters, but for a tail of < 64 words read after them) advanced together, each prefetched
// 2 KiB ahead in software: one core then keeps more cache-line misses in flight than the
// hardware prefetchers start for one stream, which stop at every 4 KiB page boundary.
// Measured on a 2-core Xeon VM, 256 MiB by 2 threads, on 4 KiB / 2 MiB pages: one plain
// stream 21 / 26 GB/s, this kernel 33 / 36-40 GB/s.
uint64_t stream_sum(const uint64_t* words, int64_t begin, int64_t end);

}  // namespace tokenmill
