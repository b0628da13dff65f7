// Host-side plans of the linear-ops kernels (linear_kernels.cu): launch geometry and the
// grouping of tokens for the embedding gradient. Plain C++, tested on the CPU
// (tests/backend/cuda/linear_plan_test.cpp).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace tokenmill::cuda {

// Threads per block of every linear-ops kernel.
inline constexpr int kLinearThreads = 256;
// Grid limits: blocks along x (grid-stride loops cover the rest) and along y.
inline constexpr int64_t kMaxGridX = 65535LL * 32;
inline constexpr int64_t kMaxGridY = 65535;

struct Grid {
  int64_t x = 1, y = 1;  // blocks of kLinearThreads threads
};

// One thread per element of `count` (at least one block; grid-stride past kMaxGridX blocks).
Grid elementwise_grid(int64_t count);

// Rows x columns, a thread per element: x over the columns (ceil(cols / kLinearThreads)
// blocks, grid-stride past kMaxGridX), y over the rows (grid-stride past kMaxGridY).
Grid rows_grid(int64_t rows, int64_t cols);

// The tokens of an embedding gradient grouped by id, each group in token order:
// group g adds the rows dout[tokens[starts[g]] ... tokens[starts[g + 1] - 1]], in that
// order, to dtable[ids[g]]. Groups follow the order of their id's first token.
struct TokenGroups {
  std::vector<int32_t> ids;     // one per group, distinct
  std::vector<int32_t> starts;  // groups + 1 offsets into tokens
  std::vector<int32_t> tokens;  // every token index once
};
TokenGroups group_tokens_by_id(std::span<const int32_t> ids);

}  // namespace tokenmill::cuda
