#include "backend/cpu/lora_kernels.h"

#include <algorithm>
#include <vector>

#include "backend/cpu/grain.h"
#include "backend/cpu/scratch.h"
#include "core/parallel.h"

namespace tokenmill::cpu {

namespace {

// A worker's intermediates of up to kGemvMaxTokens rows: t = x . a^T, then u = t . b^T.
thread_local Scratch tl_lora_work;
// The caller's: where each segment starts among the covered rows (one more entry: their count).
thread_local std::vector<int64_t> tl_first_covered;

int64_t round_up_to_line(int64_t floats) {
  return (floats + kElementAlign - 1) / kElementAlign * kElementAlign;
}

}  // namespace

void add_lora(const KernelTable& kernels, const LoraArgs& args) {
  if (args.covered_rows == 0 || args.m == 0) return;
  std::vector<int64_t>& first_covered = tl_first_covered;
  first_covered.assign(1, 0);
  for (const LoraRows& s : args.segments) first_covered.push_back(first_covered.back() + s.rows);
  const int64_t t_floats = round_up_to_line(kGemvMaxTokens * args.max_rank);
  const int64_t work_per_row = args.multiply_adds / args.covered_rows;
  parallel_for_balanced(
      args.covered_rows, grain_for(work_per_row, kMinMatmulWork), 1, [&](int64_t c0, int64_t c1) {
        float* t = tl_lora_work.floats(t_floats + kGemvMaxTokens * args.m);
        float* u = t + t_floats;
        // The segment of covered row c0: the last that starts at or before it.
        auto s = static_cast<size_t>(std::upper_bound(first_covered.begin(), first_covered.end(), c0) -
                                     first_covered.begin() - 1);
        for (int64_t c = c0; c < c1;) {
          while (c >= first_covered[s + 1]) ++s;
          const LoraRows& seg = args.segments[s];
          const int64_t row = seg.first_row + (c - first_covered[s]);
          const int64_t count = std::min({kGemvMaxTokens, c1 - c, first_covered[s + 1] - c});
          const MatmulArgs shrink{
              .x = args.x + row * args.k, .w = seg.a, .y = t, .n = count, .k = args.k, .m = seg.rank};
          kernels.gemv(shrink, 0, seg.rank);
          const MatmulArgs expand{.x = t, .w = seg.b, .y = u, .n = count, .k = seg.rank, .m = args.m};
          kernels.gemv(expand, 0, args.m);
          float* y = args.y + row * args.m;
          kernels.add(y, u, count * args.m, y);
          c += count;
        }
      });
}

}  // namespace tokenmill::cpu
