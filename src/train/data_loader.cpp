#include "train/data_loader.h"

#include <algorithm>
#include <numeric>
#include <random>

#include "core/error.h"

namespace tokenmill {

namespace {

// Whether the window at `start` has a scored target (tokens start + 1 .. start + seq_len);
// `scored` holds seq_len entries of scratch.
bool has_scored_target(const TokenShard& shard, int64_t start, std::span<uint8_t> scored) {
  if (!shard.info().loss_mask) return true;
  shard.read_scored(start + 1, scored);
  return std::find(scored.begin(), scored.end(), uint8_t{1}) != scored.end();
}

}  // namespace

DataLoader::DataLoader(const std::vector<std::filesystem::path>& shards, int64_t seq_len, bool shuffle,
                       uint64_t seed)
    : seq_len_(seq_len), shuffle_(shuffle), seed_(seed) {
  if (shards.empty()) fail("data: no token shards given");
  if (seq_len < 1) fail("data: the sequence length must be positive, got {}", seq_len);
  int64_t whole_windows = 0;
  std::vector<uint8_t> scored(static_cast<size_t>(seq_len));
  for (const auto& path : shards) {
    shards_.emplace_back(path);
    const TokenShard& shard = shards_.back();
    if (vocab_size_ == 0) vocab_size_ = shard.info().vocab_size;
    if (shard.info().vocab_size != vocab_size_)
      fail("{}: vocabulary size {} differs from {} of {} (shards of different tokenizers)", path.string(),
           shard.info().vocab_size, vocab_size_, shards.front().string());
    const auto index = static_cast<int32_t>(shards_.size() - 1);
    const int64_t grid = (shard.size() - 1) / seq_len;
    whole_windows += grid;
    for (int64_t w = 0; w < grid; ++w)
      if (has_scored_target(shard, w * seq_len, scored)) windows_.push_back({index, w * seq_len});
  }
  if (whole_windows == 0)
    fail(
        "data: no shard holds {} tokens (one window of sequence length {} plus its last target); use a "
        "shorter --seq-len or more data",
        seq_len + 1, seq_len);
  if (windows_.empty())
    fail(
        "data: none of the {} windows of {} tokens has a scored target (the loss mask leaves out every "
        "token: chat records need assistant turns)",
        whole_windows, seq_len);
  order_epoch();
}

void DataLoader::order_epoch() {
  order_.resize(windows_.size());
  std::iota(order_.begin(), order_.end(), int64_t{0});
  if (!shuffle_) return;
  std::mt19937_64 rng(seed_ + static_cast<uint64_t>(position_.epoch));
  for (size_t i = order_.size() - 1; i > 0; --i) std::swap(order_[i], order_[rng() % (i + 1)]);
}

void DataLoader::next_batch(int64_t batch, std::span<int32_t> inputs, std::span<int32_t> targets) {
  const auto need = static_cast<size_t>(batch * seq_len_);
  if (batch < 1 || inputs.size() != need || targets.size() != need)
    fail("data: batch buffers must hold {} x {} tokens", batch, seq_len_);
  std::vector<int32_t> window(static_cast<size_t>(seq_len_ + 1));
  std::vector<uint8_t> scored(window.size());
  for (int64_t b = 0; b < batch; ++b) {
    if (position_.window == windows_per_epoch()) {
      position_ = {position_.epoch + 1, 0};
      order_epoch();
    }
    const Window& w = windows_[static_cast<size_t>(order_[static_cast<size_t>(position_.window++)])];
    const TokenShard& shard = shards_[static_cast<size_t>(w.shard)];
    shard.read(w.start, window);
    shard.read_scored(w.start, scored);
    const auto row = static_cast<size_t>(b * seq_len_);
    std::copy(window.begin(), window.end() - 1, inputs.begin() + static_cast<std::ptrdiff_t>(row));
    for (size_t j = 1; j < window.size(); ++j) targets[row + j - 1] = scored[j] != 0 ? window[j] : -1;
  }
}

void DataLoader::restore(const LoaderPosition& position) {
  if (position.epoch < 0 || position.window < 0 || position.window > windows_per_epoch())
    fail("data: loader position (epoch {}, window {}) does not fit this data ({} windows per epoch)",
         position.epoch, position.window, windows_per_epoch());
  position_ = position;
  order_epoch();
}

}  // namespace tokenmill
