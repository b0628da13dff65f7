#include "train/dataset_meta.h"

#include <nlohmann/json.hpp>
#include <string>

#include "core/error.h"
#include "core/json_file.h"

namespace tokenmill {

namespace {

using nlohmann::json;

const json& field(const json& meta, const char* name, const std::filesystem::path& path) {
  if (!meta.contains(name))
    fail("{}: missing \"{}\" (remake the dataset with `tokenmill prepare`)", path.string(), name);
  return meta[name];
}

int64_t integer_field(const json& meta, const char* name, int64_t min, int64_t max,
                      const std::filesystem::path& path) {
  const json& v = field(meta, name, path);
  if (!v.is_number_integer() || v.get<int64_t>() < min || v.get<int64_t>() > max)
    fail("{}: \"{}\" must be an integer in [{}, {}], got {}", path.string(), name, min, max, v.dump());
  return v.get<int64_t>();
}

std::vector<std::filesystem::path> shards(const json& meta, const char* split,
                                          const std::filesystem::path& dir,
                                          const std::filesystem::path& path) {
  const json& s = field(meta, split, path);
  if (!s.is_object() || !s.contains("shards") || !s["shards"].is_array())
    fail("{}: missing \"{}\".\"shards\"", path.string(), split);
  std::vector<std::filesystem::path> out;
  for (const json& name : s["shards"]) {
    if (!name.is_string()) fail("{}: \"{}\".\"shards\" must list file names", path.string(), split);
    const std::filesystem::path file(name.get<std::string>());
    if (file.has_parent_path() || file == "." || file == ".." || file.empty())
      fail("{}: shard name \"{}\" must be a plain file name inside the dataset directory", path.string(),
           file.string());
    out.push_back(dir / file);
  }
  return out;
}

}  // namespace

DatasetMeta read_dataset_meta(const std::filesystem::path& dir) {
  const std::filesystem::path path = dir / "meta.json";
  const json meta = read_json_file(path);
  if (!meta.is_object() || !meta.contains("format") || meta["format"] != "tokenmill.dataset/1")
    fail(
        "{}: not a tokenmill dataset (expected \"format\": \"tokenmill.dataset/1\"; make one with `tokenmill "
        "prepare`)",
        path.string());
  DatasetMeta m;
  const json& tokenizer = field(meta, "tokenizer", path);
  if (!tokenizer.is_string() || tokenizer.get_ref<const std::string&>().empty())
    fail("{}: \"tokenizer\" must be the tokenizer file's path", path.string());
  m.tokenizer = tokenizer.get<std::string>();
  m.vocab_size = integer_field(meta, "vocab_size", 1, int64_t{1} << 31, path);
  m.eod_token = static_cast<int32_t>(integer_field(meta, "eod_token", 0, m.vocab_size - 1, path));
  m.train_shards = shards(meta, "train", dir, path);
  m.val_shards = shards(meta, "val", dir, path);
  return m;
}

}  // namespace tokenmill
