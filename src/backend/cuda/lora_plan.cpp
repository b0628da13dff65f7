#include "backend/cuda/lora_plan.h"

namespace tokenmill::cuda {

static_assert(kLoraMaxRank == Backend::kMaxLoraRank);

void lora_table(std::span<const Backend::LoraSegment> segments, LoraTable& table) {
  table.segments.clear();
  table.covered_rows = 0;
  table.t_floats = 0;
  for (const Backend::LoraSegment& s : segments) {
    const int64_t rank = s.a->dim(0);
    table.segments.push_back(LoraSegmentEntry{.first_row = s.first_row,
                                              .rows = s.rows,
                                              .rank = rank,
                                              .first_covered = table.covered_rows,
                                              .first_t = table.t_floats,
                                              .a = s.a->as<const float>(),
                                              .b = s.b->as<const float>()});
    table.covered_rows += s.rows;
    table.t_floats += s.rows * rank;  // at most the checked multiply-adds: no overflow
  }
}

}  // namespace tokenmill::cuda
