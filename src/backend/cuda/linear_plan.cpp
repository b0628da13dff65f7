#include "backend/cuda/linear_plan.h"

#include <algorithm>
#include <unordered_map>

namespace tokenmill::cuda {

namespace {

int64_t blocks_for(int64_t count) {
  return std::max<int64_t>(1, (count + kLinearThreads - 1) / kLinearThreads);
}

}  // namespace

Grid elementwise_grid(int64_t count) { return Grid{.x = std::min(blocks_for(count), kMaxGridX), .y = 1}; }

Grid rows_grid(int64_t rows, int64_t cols) {
  return Grid{.x = std::min(blocks_for(cols), kMaxGridX), .y = std::clamp<int64_t>(rows, 1, kMaxGridY)};
}

TokenGroups group_tokens_by_id(std::span<const int32_t> ids) {
  TokenGroups groups;
  std::unordered_map<int32_t, int32_t> group_of;  // id -> group
  std::vector<int32_t> sizes;
  std::vector<int32_t> token_group(ids.size());
  for (size_t t = 0; t < ids.size(); ++t) {
    const auto [it, added] = group_of.try_emplace(ids[t], static_cast<int32_t>(groups.ids.size()));
    if (added) {
      groups.ids.push_back(ids[t]);
      sizes.push_back(0);
    }
    token_group[t] = it->second;
    ++sizes[static_cast<size_t>(it->second)];
  }
  groups.starts.assign(groups.ids.size() + 1, 0);
  for (size_t g = 0; g < sizes.size(); ++g) groups.starts[g + 1] = groups.starts[g] + sizes[g];
  // A counting sort by group keeps each group's tokens in token order.
  std::vector<int32_t> next(groups.starts.begin(), groups.starts.end() - 1);
  groups.tokens.resize(ids.size());
  for (size_t t = 0; t < ids.size(); ++t)
    groups.tokens[static_cast<size_t>(next[static_cast<size_t>(token_group[t])]++)] = static_cast<int32_t>(t);
  return groups;
}

}  // namespace tokenmill::cuda
