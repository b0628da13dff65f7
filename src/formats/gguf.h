// GGUF reading: a validating parser for the header, the metadata and the tensor table.
//
// File layout (little-endian, versions 2 and 3; version 1 is refused):
//   "GGUF" | u32 version | u64 tensor_count | u64 kv_count
//   kv_count x { string key | u32 value_type | value }
//   tensor_count x { string name | u32 n_dims | i64 ne[n_dims] | u32 ggml_type | u64 offset }
//   zero padding to general.alignment (default 32) | tensor data region
// A string is u64 length + bytes (no terminator); an array value is u32 element type +
// u64 element count + the elements. Tensor offsets are relative to the data region.
//
// Used by the tokenizer (tokenizer.ggml.* metadata) and by GGUF weight loading.
//
// Validation (each failure is a tokenmill::Error naming the file and, when known, the key
// or tensor; nothing outside the input bytes is ever read):
// - magic "GGUF"; version 2 or 3 (1 and big-endian files get their own messages);
// - tensor_count and kv_count must fit in the bytes left (each KV needs >= 13 bytes, each
//   tensor info >= 24), so a lying count never causes a large allocation or a long loop
//   (and each count must be < 2^32);
// - every string length is checked against the bytes left and capped: keys and tensor
//   names 1..kMaxGgufKeyBytes, string values <= kMaxGgufStringBytes (strings are bytes:
//   UTF-8 is not checked here, users of the text decide);
// - value types 0..12 only; bools must be 0 or 1 (in arrays too); array counts are checked
//   against the bytes left (count x minimum element size) before the elements are walked;
// - arrays may nest one level (an array of arrays of scalars or strings), which the spec
//   allows; such values are validated and can be queried with type_of/array_type, but no
//   typed getter returns them. An array nested inside an inner array is refused;
// - keys must be unique;
// - general.alignment, if present, must be an integer type holding a power of two;
// - tensor names unique; n_dims 0..4 (0 is a scalar); each dimension >= 0 (0 is allowed,
//   as in ggml: the tensor then has no elements and no bytes); element count < 2^63;
//   ggml type known (see ggml_type_traits); ne[0] a multiple of the type's block size;
//   byte size computed with checked arithmetic;
// - tensor offsets are multiples of the alignment, each tensor's bytes
//   [data_offset + offset, + nbytes) lie inside the file, and no two tensors with bytes
//   overlap. Gaps between tensors are allowed (they are padding).
//
// Memory: metadata values stay in the input bytes; the parser records where each value
// starts (string arrays are walked once to validate them, then materialised only by the
// get_*_array calls), so a 150k-token vocabulary costs a few dozen small records.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/mapped_file.h"

namespace tokenmill {

inline constexpr uint64_t kMaxGgufKeyBytes = 65535;            // as the spec says: < 2^16
inline constexpr uint64_t kMaxGgufStringBytes = 256ull << 20;  // 256 MiB per string value
inline constexpr uint32_t kMaxGgufDims = 4;                    // GGML_MAX_DIMS
inline constexpr uint64_t kDefaultGgufAlignment = 32;

// GGUF metadata value types, with their numbers in the file.
enum class GgufType : uint32_t {
  U8 = 0,
  I8 = 1,
  U16 = 2,
  I16 = 3,
  U32 = 4,
  I32 = 5,
  F32 = 6,
  BOOL = 7,
  STRING = 8,
  ARRAY = 9,
  U64 = 10,
  I64 = 11,
  F64 = 12
};

// "u8", "string", "array", ... ; "unknown" for a number outside the enum.
std::string_view gguf_type_name(GgufType type);
// Bytes of a scalar value of `type`; 0 for STRING, ARRAY and numbers outside the enum.
uint64_t gguf_scalar_size(GgufType type);

// What the parser knows about a ggml tensor type: `block_size` weights are stored in
// `type_size` bytes (1 and the element size for plain types).
struct GgmlTypeTraits {
  std::string_view name;  // "F32", "Q4_K", ...
  uint32_t block_size;
  uint32_t type_size;
};

// Traits of ggml type id `type`, or nullopt for ids the parser does not know (removed or
// newer types). Known: F32 F16 Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 Q8_1 Q2_K..Q8_K, the IQ* types,
// I8 I16 I32 I64 F64 BF16 TQ1_0 TQ2_0 MXFP4.
std::optional<GgmlTypeTraits> ggml_type_traits(uint32_t type);

struct GgufTensorInfo {
  std::string name;
  std::vector<int64_t> shape;  // ne[0] first, as stored (ne[0] is the contiguous dimension)
  uint32_t type = 0;           // ggml_type id; ggml_type_traits(type) is never nullopt
  uint64_t offset = 0;         // absolute file offset of the first byte
  uint64_t nbytes = 0;
};

class GgufFile {
 public:
  // Maps `path` read-only and parses it; errors name the path.
  static GgufFile open(const std::filesystem::path& path);
  // Parses `bytes` without copying them: `bytes` must outlive the result and its copies.
  // `label` names the input in error messages.
  static GgufFile parse(std::span<const std::byte> bytes, std::string label);

  uint32_t version() const { return version_; }
  const std::string& label() const { return label_; }
  std::span<const std::byte> bytes() const { return bytes_; }

  bool has(std::string_view key) const;
  GgufType type_of(std::string_view key) const;  // Error if absent
  // For an ARRAY value: the element type and count. Error if absent or not an array.
  GgufType array_type(std::string_view key) const;
  uint64_t array_size(std::string_view key) const;

  // Typed getters: Error naming the key and the file if absent or of an incompatible type.
  std::string get_string(std::string_view key) const;
  int64_t get_int(std::string_view key) const;   // any integer type; U64 > INT64_MAX is an error
  double get_float(std::string_view key) const;  // F32 or F64
  bool get_bool(std::string_view key) const;
  std::vector<std::string> get_string_array(std::string_view key) const;
  std::vector<float> get_float_array(std::string_view key) const;  // F32/F64 array
  std::vector<int64_t> get_int_array(std::string_view key) const;  // any integer array
  // Like get_string_array, but the views point into bytes(): no copies, valid while this
  // object (or a copy of it) lives and, for parse(), while the caller's bytes live.
  std::vector<std::string_view> get_string_view_array(std::string_view key) const;

  // Optional variants: std::nullopt if absent (still an Error if present with a wrong type).
  std::optional<std::string> find_string(std::string_view key) const;
  std::optional<int64_t> find_int(std::string_view key) const;
  std::optional<double> find_float(std::string_view key) const;
  std::optional<bool> find_bool(std::string_view key) const;

  std::vector<std::string> keys() const;  // in file order

  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
  const GgufTensorInfo* find_tensor(std::string_view name) const;  // nullptr if absent
  // The bytes of `tensor` (one of tensors()), inside bytes().
  std::span<const std::byte> tensor_data(const GgufTensorInfo& tensor) const;

  uint64_t alignment() const { return alignment_; }  // general.alignment or 32
  // Start of the tensor data region: the end of the tensor table rounded up to the
  // alignment. May lie past the end of the file when the file holds no tensor bytes
  // (vocab-only files end right after the metadata).
  uint64_t data_offset() const { return data_offset_; }

 private:
  friend class GgufParser;  // gguf.cpp: fills in a GgufFile

  // One metadata value, as the parser recorded it: where it lies in bytes_.
  struct Value {
    std::string_view key;  // points into bytes_
    GgufType type{};
    GgufType element_type{};  // ARRAY only
    uint64_t count = 0;       // ARRAY only: number of elements
    uint64_t payload = 0;     // offset of the value (of the first element, for arrays)
  };

  GgufFile() = default;
  const Value* find_value(std::string_view key) const;
  const Value& value(std::string_view key) const;  // Error if absent
  [[noreturn]] void wrong_type(const Value& v, std::string_view expected) const;
  template <class Fn>
  void for_each_string(const Value& v, Fn&& fn) const;

  std::shared_ptr<const MappedFile> file_;  // set by open(); keeps bytes_ mapped
  std::span<const std::byte> bytes_;
  std::string label_;
  uint32_t version_ = 0;
  std::vector<Value> values_;     // file order
  std::vector<uint32_t> sorted_;  // indices into values_, sorted by key
  std::vector<GgufTensorInfo> tensors_;
  std::vector<uint32_t> tensors_by_name_;  // indices into tensors_, sorted by name
  uint64_t alignment_ = kDefaultGgufAlignment;
  uint64_t data_offset_ = 0;
};

}  // namespace tokenmill
