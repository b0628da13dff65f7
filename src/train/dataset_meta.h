// A dataset's meta.json, as `tokenmill prepare` writes it (train/prepare.h), read and checked
// in one place for everything that trains on, or exports from, the dataset.
#pragma once

#include <cstdint>
#include <filesystem>
#include <vector>

namespace tokenmill {

struct DatasetMeta {
  std::filesystem::path tokenizer;  // the tokenizer file `prepare` used (absolute)
  int64_t vocab_size = 0;           // its tokens
  int32_t eod_token = 0;            // the token joining documents
  std::vector<std::filesystem::path> train_shards, val_shards;  // inside the dataset directory
};

// dir/meta.json. Throws Error naming the file and the field when it is not a tokenmill dataset
// ("format": "tokenmill.dataset/1"), a field is missing or of the wrong type, the eod token is
// outside the vocabulary, or a shard is not a plain file name inside the directory.
DatasetMeta read_dataset_meta(const std::filesystem::path& dir);

}  // namespace tokenmill
