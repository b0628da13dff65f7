// GGUF writing: metadata of every GGUF value type, a tensor table, and tensor data,
// in the layout formats/gguf.h describes (version 3, little-endian).
//
// A GgufWriter collects the metadata (in insertion order; setting a key again replaces
// its value in place) and the tensor table (name, shape, ggml type, and a callback that
// fills the tensor's bytes), then write() streams the file: header, metadata, tensor
// infos, padding to the alignment, then each tensor's bytes padded to the alignment.
// Tensors are produced one at a time, so memory stays at one tensor's bytes.
//
// Data safety: write() writes `path` + ".tmp", fsyncs it, renames it over `path` and
// fsyncs the directory. On any failure (a fill callback throwing included) the temporary
// file is removed and `path` is left as it was.
//
// Everything a reader checks is checked here first, so the writer never produces a file
// our reader (or ggml's) refuses: keys 1..65535 bytes and unique; string values at most
// kMaxGgufStringBytes; tensor names 1..63 bytes (ggml's GGML_MAX_NAME) and unique; 1..4
// dimensions, each >= 0, ne[0] a multiple of the type's block size; sizes computed with
// overflow-checked arithmetic; general.alignment, when set, a power of two.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "formats/gguf.h"

namespace tokenmill {

inline constexpr size_t kMaxGgmlTensorName = 63;  // GGML_MAX_NAME - 1 (the terminator)

class GgufWriter {
 public:
  // Fills a tensor's bytes: `out` has exactly the tensor's size. May be called from any
  // thread but is called once, on the thread running write().
  using FillFn = std::function<void(std::span<std::byte> out)>;

  // Scalars, with the GGUF type named by the setter.
  void set_u8(std::string_view key, uint8_t v);
  void set_i8(std::string_view key, int8_t v);
  void set_u16(std::string_view key, uint16_t v);
  void set_i16(std::string_view key, int16_t v);
  void set_u32(std::string_view key, uint32_t v);
  void set_i32(std::string_view key, int32_t v);
  void set_u64(std::string_view key, uint64_t v);
  void set_i64(std::string_view key, int64_t v);
  void set_f32(std::string_view key, float v);
  void set_f64(std::string_view key, double v);
  void set_bool(std::string_view key, bool v);
  void set_string(std::string_view key, std::string_view v);

  // Arrays: the element type follows the C++ type (uint8_t: U8, ..., float: F32, double: F64).
  void set_array(std::string_view key, std::span<const uint8_t> v);
  void set_array(std::string_view key, std::span<const int8_t> v);
  void set_array(std::string_view key, std::span<const uint16_t> v);
  void set_array(std::string_view key, std::span<const int16_t> v);
  void set_array(std::string_view key, std::span<const uint32_t> v);
  void set_array(std::string_view key, std::span<const int32_t> v);
  void set_array(std::string_view key, std::span<const uint64_t> v);
  void set_array(std::string_view key, std::span<const int64_t> v);
  void set_array(std::string_view key, std::span<const float> v);
  void set_array(std::string_view key, std::span<const double> v);
  void set_bool_array(std::string_view key, const std::vector<bool>& v);
  void set_string_array(std::string_view key, std::span<const std::string> v);
  void set_string_array(std::string_view key, std::span<const std::string_view> v);

  // Copies every key of `from` byte for byte (nested arrays and u64 values included), in
  // file order, replacing values already set under the same keys.
  void copy_metadata(const GgufFile& from);

  bool has(std::string_view key) const;
  bool remove(std::string_view key);  // false if absent
  std::vector<std::string> keys() const;

  // general.alignment if set (validated when set), else 32.
  uint64_t alignment() const;

  // Declares a tensor; `shape` is in ggml order (ne[0], the contiguous dimension, first).
  // Returns its size in bytes.
  uint64_t add_tensor(std::string_view name, std::vector<int64_t> shape, uint32_t ggml_type, FillFn fill);
  size_t tensor_count() const { return tensors_.size(); }

  // Writes the file atomically (see above). Returns its size in bytes.
  uint64_t write(const std::filesystem::path& path) const;
  // The whole file in memory (tests, tokenizer-only files).
  std::string to_bytes() const;

 private:
  struct Entry {
    std::string key;
    GgufType type{};
    std::string value;  // the encoded value, without the type tag
  };
  struct TensorEntry {
    std::string name;
    std::vector<int64_t> shape;
    uint32_t type = 0;
    uint64_t nbytes = 0;
    FillFn fill;
  };
  class Sink;

  void set_encoded(std::string_view key, GgufType type, std::string value);
  template <class T>
  void set_scalar(std::string_view key, GgufType type, T v);
  template <class T>
  void set_numeric_array(std::string_view key, GgufType element, std::span<const T> v);
  // Header, metadata and tensor table, padded to the alignment; fills in `offsets`.
  std::string header(std::vector<uint64_t>& offsets) const;
  void emit(Sink& sink) const;

  std::vector<Entry> entries_;
  std::vector<TensorEntry> tensors_;
};

}  // namespace tokenmill
