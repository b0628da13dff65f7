// libFuzzer target for a dataset's meta.json (train/dataset_meta.h): each input is written as
// the meta.json of a directory and read. Seeded with meta.json files as `prepare` writes them.
//
// read_dataset_meta must accept the file or throw tokenmill::Error; any other exception, a
// crash, or a sanitizer report is a bug. What it accepts must be usable: a tokenizer path, a
// vocabulary of at least one token with the eod token inside it, and shards that are files
// directly inside the dataset directory.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "support/temp_dir.h"
#include "train/dataset_meta.h"

namespace {

// The dataset directory of this process, removed when it exits.
const std::filesystem::path& dataset_dir() {
  static const tokenmill::testing::TempDir dir;
  return dir.path();
}

void check_shards(const std::vector<std::filesystem::path>& shards) {
  for (const std::filesystem::path& shard : shards)
    if (shard.parent_path() != dataset_dir() || shard.filename().empty() || shard.filename() == "." ||
        shard.filename() == "..")
      __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::ofstream(dataset_dir() / "meta.json", std::ios::binary)
      .write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  tokenmill::DatasetMeta meta;
  try {
    meta = tokenmill::read_dataset_meta(dataset_dir());
  } catch (const tokenmill::Error&) {
    return 0;
  }
  if (meta.tokenizer.empty() || meta.vocab_size < 1 || meta.eod_token < 0 ||
      meta.eod_token >= meta.vocab_size)
    __builtin_trap();
  check_shards(meta.train_shards);
  check_shards(meta.val_shards);
  return 0;
}
