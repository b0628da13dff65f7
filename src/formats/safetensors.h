// safetensors reading: a validating header parser and a (possibly sharded) archive.
//
// File layout: u64 little-endian header length N, N bytes of JSON
// {"name": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}, ...,
//  optional "__metadata__": {str: str}}, then the data region; offsets are relative to
// the start of the data region.
//
// Validation (each failure is a tokenmill::Error naming the file and, when known, the
// tensor): header length >= 2 and <= kMaxHeaderBytes and inside the file; JSON is an
// object; every entry has a known dtype, a shape of non-negative ints, and offsets
// begin <= end inside the data region; element count x dtype size (checked arithmetic)
// equals end - begin; tensors tile the data region exactly (sorted by offset: no gaps,
// no overlaps, no trailing bytes); names are unique (duplicate JSON keys rejected).
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"
#include "core/mapped_file.h"
#include "core/tensor.h"

namespace tokenmill {

inline constexpr uint64_t kMaxSafetensorsHeaderBytes = 100ull << 20;  // 100 MiB, as upstream

struct SafetensorsEntry {
  std::string name;
  std::string dtype_name;      // as written: "F32", "BF16", "I64", ...
  std::optional<DType> dtype;  // set for F32, BF16, F16 (the ones the engine computes with)
  std::vector<int64_t> shape;
  uint64_t offset = 0;  // from the start of the file (header included)
  uint64_t nbytes = 0;
};

// Parses and validates the header of a complete safetensors file held in `file`.
// `label` (usually the path) names the file in error messages. Never reads outside `file`.
std::vector<SafetensorsEntry> parse_safetensors(std::span<const std::byte> file, std::string_view label);

// A tensor found in an archive: where its bytes are and what they hold.
struct StoredTensor {
  const SafetensorsEntry* entry = nullptr;
  const std::byte* data = nullptr;
  const std::filesystem::path* file = nullptr;
};

// All tensors of one model: `model.safetensors`, or the shards listed by
// `model.safetensors.index.json` ({"weight_map": {tensor: shard file}}), memory-mapped.
class SafetensorsArchive {
 public:
  // Opens the model directory `dir`. Errors name the missing/defective file; a tensor the
  // index lists but its shard lacks (or a shard outside `dir`) is an error too.
  static SafetensorsArchive open(const std::filesystem::path& dir);

  std::optional<StoredTensor> find(std::string_view name) const;
  bool contains(std::string_view name) const { return find(name).has_value(); }
  std::vector<std::string> names() const;  // sorted

  // A view of tensor `name`, which must exist, hold F32/BF16/F16 and have exactly `shape`;
  // otherwise Error naming the file, the tensor, and expected vs found.
  Tensor tensor(std::string_view name, std::initializer_list<int64_t> shape) const;
  // The bytes of tensor `name`, which must exist, hold `dtype_name` ("U8") and have exactly
  // `shape`: data the engine repacks rather than computes with (MXFP4 codes and scales).
  std::span<const std::byte> bytes(std::string_view name, std::string_view dtype_name,
                                   std::initializer_list<int64_t> shape) const;

  // Total bytes of all tensors, by dtype name.
  std::map<std::string, uint64_t> bytes_by_dtype() const;
  // The mapped bytes of every shard file.
  std::vector<std::span<const std::byte>> file_bytes() const;

 private:
  struct Shard {
    MappedFile file;
    std::vector<SafetensorsEntry> entries;
  };
  std::filesystem::path dir_;  // the model directory, named in "not found" errors
  std::vector<Shard> shards_;
  std::map<std::string, std::pair<size_t, size_t>, std::less<>> index_;  // name -> (shard, entry)
};

}  // namespace tokenmill
