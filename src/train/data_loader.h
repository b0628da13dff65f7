// DataLoader: training windows from token shards, reproducible and resumable.
//
// Each shard of n tokens holds floor((n - 1) / seq_len) windows: window w is tokens
// [w * seq_len, w * seq_len + seq_len + 1) of its shard (inputs = the first seq_len,
// targets = the last seq_len, shifted by one). A target whose token the shard's loss mask
// marks as not scored (chat/SFT data: everything but the assistant turns) is -1, which the
// training pass leaves out of the loss; inputs always hold the real tokens, and shards
// without a mask score every target. A window whose targets are all unscored has nothing to
// learn and is left out (so every served row scores at least one target); the others keep
// their places on the grid above. With shuffling, every epoch visits all windows of all
// shards once, in the order of a Fisher-Yates permutation drawn from mt19937_64(seed + epoch)
// with j = draw mod (i + 1) (portable: the same order on every platform and standard
// library). Without shuffling (validation) windows come in shard
// order. The position (epoch, next window) is the whole state: restore() it from a
// checkpoint and the batches continue exactly where they stopped.
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <vector>

#include "formats/token_shard.h"

namespace tokenmill {

struct LoaderPosition {
  int64_t epoch = 0;
  int64_t window = 0;  // index into this epoch's order of the next window to serve
};

class DataLoader {
 public:
  // Throws Error if there are no shards, seq_len < 1, no shard holds a whole window, or no
  // window has a scored target.
  DataLoader(const std::vector<std::filesystem::path>& shards, int64_t seq_len, bool shuffle, uint64_t seed);

  // The next `batch` windows: inputs and targets are [batch, seq_len] row-major, targets -1
  // where not scored. Crossing the end of an epoch starts the next one.
  void next_batch(int64_t batch, std::span<int32_t> inputs, std::span<int32_t> targets);

  int64_t seq_len() const { return seq_len_; }
  int64_t windows_per_epoch() const { return static_cast<int64_t>(windows_.size()); }
  uint32_t vocab_size() const { return vocab_size_; }
  LoaderPosition position() const { return position_; }
  // Throws Error if the position does not belong to this data (window out of range).
  void restore(const LoaderPosition& position);

 private:
  struct Window {
    int32_t shard;
    int64_t start;
  };
  void order_epoch();

  std::vector<TokenShard> shards_;
  int64_t seq_len_;
  bool shuffle_;
  uint64_t seed_;
  uint32_t vocab_size_ = 0;
  std::vector<Window> windows_;  // shard order
  std::vector<int64_t> order_;   // this epoch's visiting order (indices into windows_)
  LoaderPosition position_;
};

}  // namespace tokenmill
