#include "formats/gguf.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>
#include <numeric>
#include <utility>

#include "core/checked_math.h"
#include "core/error.h"

namespace tokenmill {

static_assert(std::endian::native == std::endian::little, "the GGUF reader assumes a little-endian host");

namespace {

constexpr std::array<char, 4> kMagic = {'G', 'G', 'U', 'F'};
// The smallest possible encodings, used to bound counts by the bytes left before anything
// is allocated or walked: a KV is a key length, a value type and at least one value byte;
// a tensor info is a name length, n_dims, a type and an offset.
constexpr uint64_t kMinKvBytes = 8 + 4 + 1;
constexpr uint64_t kMinTensorInfoBytes = 8 + 4 + 4 + 8;
constexpr uint64_t kStringHeaderBytes = 8;
constexpr uint64_t kArrayHeaderBytes = 4 + 8;

// Names and keys come from untrusted files: show at most this much of one in a message,
// with control and non-ASCII bytes escaped.
constexpr size_t kMaxShownChars = 200;

std::string shown(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size() && i < kMaxShownChars; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out += static_cast<char>(c);
    } else {
      out += fmt::format("\\x{:02x}", c);
    }
  }
  if (s.size() > kMaxShownChars) out += fmt::format("...({} bytes)", s.size());
  return out;
}

// The fewest bytes one element of type `t` can take in an array.
uint64_t min_element_size(GgufType t) {
  if (t == GgufType::STRING) return kStringHeaderBytes;
  if (t == GgufType::ARRAY) return kArrayHeaderBytes;
  return gguf_scalar_size(t);
}

bool is_integer(GgufType t) {
  switch (t) {
    case GgufType::U8:
    case GgufType::I8:
    case GgufType::U16:
    case GgufType::I16:
    case GgufType::U32:
    case GgufType::I32:
    case GgufType::U64:
    case GgufType::I64: return true;
    default: return false;
  }
}

bool is_float(GgufType t) { return t == GgufType::F32 || t == GgufType::F64; }

// Reads a T at `pos`; the caller has checked that sizeof(T) bytes are there.
template <class T>
T load(std::span<const std::byte> bytes, uint64_t pos) {
  T v;
  std::memcpy(&v, bytes.data() + pos, sizeof(T));
  return v;
}

// An integer value of type `t` at `pos`, widened; `fits` is false for a U64 > INT64_MAX.
int64_t load_integer(std::span<const std::byte> bytes, uint64_t pos, GgufType t, bool& fits) {
  fits = true;
  switch (t) {
    case GgufType::U8: return load<uint8_t>(bytes, pos);
    case GgufType::I8: return load<int8_t>(bytes, pos);
    case GgufType::U16: return load<uint16_t>(bytes, pos);
    case GgufType::I16: return load<int16_t>(bytes, pos);
    case GgufType::U32: return load<uint32_t>(bytes, pos);
    case GgufType::I32: return load<int32_t>(bytes, pos);
    case GgufType::I64: return load<int64_t>(bytes, pos);
    case GgufType::U64: {
      const auto v = load<uint64_t>(bytes, pos);
      fits = v <= static_cast<uint64_t>(INT64_MAX);
      return fits ? static_cast<int64_t>(v) : 0;
    }
    default: fits = false; return 0;
  }
}

std::string type_text(GgufType type, GgufType element_type) {
  if (type != GgufType::ARRAY) return std::string(gguf_type_name(type));
  return fmt::format("array of {}", gguf_type_name(element_type));
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += fmt::format("{}{}", i ? ", " : "", shape[i]);
  return s + "]";
}

// Where in the file the parser is, for messages; formatted only when something fails.
struct Where {
  std::string_view kind;          // "header", "metadata entry", "key", "tensor info", "tensor"
  std::string_view name;          // the key or tensor name, once known
  uint64_t number = UINT64_MAX;   // entry number, while the name is not known yet
  uint64_t element = UINT64_MAX;  // array element
  uint64_t inner = UINT64_MAX;    // element of a nested array

  static Where numbered(std::string_view kind, uint64_t number) {
    Where w;
    w.kind = kind;
    w.number = number;
    return w;
  }
  static Where named(std::string_view kind, std::string_view name) {
    Where w;
    w.kind = kind;
    w.name = name;
    return w;
  }

  std::string text() const {
    std::string s(kind);
    if (!name.empty()) s += fmt::format(" '{}'", shown(name));
    if (number != UINT64_MAX) s += fmt::format(" #{}", number);
    if (element != UINT64_MAX) s += fmt::format(", element {}", element);
    if (inner != UINT64_MAX) s += fmt::format("[{}]", inner);
    return s;
  }
};

}  // namespace

uint64_t gguf_scalar_size(GgufType t) {
  switch (t) {
    case GgufType::U8:
    case GgufType::I8:
    case GgufType::BOOL: return 1;
    case GgufType::U16:
    case GgufType::I16: return 2;
    case GgufType::U32:
    case GgufType::I32:
    case GgufType::F32: return 4;
    case GgufType::U64:
    case GgufType::I64:
    case GgufType::F64: return 8;
    case GgufType::STRING:
    case GgufType::ARRAY: return 0;
  }
  return 0;
}

std::string_view gguf_type_name(GgufType type) {
  switch (type) {
    case GgufType::U8: return "u8";
    case GgufType::I8: return "i8";
    case GgufType::U16: return "u16";
    case GgufType::I16: return "i16";
    case GgufType::U32: return "u32";
    case GgufType::I32: return "i32";
    case GgufType::F32: return "f32";
    case GgufType::BOOL: return "bool";
    case GgufType::STRING: return "string";
    case GgufType::ARRAY: return "array";
    case GgufType::U64: return "u64";
    case GgufType::I64: return "i64";
    case GgufType::F64: return "f64";
  }
  return "unknown";
}

std::optional<GgmlTypeTraits> ggml_type_traits(uint32_t type) {
  // Block sizes and bytes per block, from the block structs of ggml-common.h. Ids 4, 5,
  // 31-33 and 36-38 were removed from ggml (and are refused in GGUF files by ggml too).
  switch (type) {
    case 0: return GgmlTypeTraits{"F32", 1, 4};
    case 1: return GgmlTypeTraits{"F16", 1, 2};
    case 2: return GgmlTypeTraits{"Q4_0", 32, 18};
    case 3: return GgmlTypeTraits{"Q4_1", 32, 20};
    case 6: return GgmlTypeTraits{"Q5_0", 32, 22};
    case 7: return GgmlTypeTraits{"Q5_1", 32, 24};
    case 8: return GgmlTypeTraits{"Q8_0", 32, 34};
    case 9: return GgmlTypeTraits{"Q8_1", 32, 36};
    case 10: return GgmlTypeTraits{"Q2_K", 256, 84};
    case 11: return GgmlTypeTraits{"Q3_K", 256, 110};
    case 12: return GgmlTypeTraits{"Q4_K", 256, 144};
    case 13: return GgmlTypeTraits{"Q5_K", 256, 176};
    case 14: return GgmlTypeTraits{"Q6_K", 256, 210};
    case 15: return GgmlTypeTraits{"Q8_K", 256, 292};
    case 16: return GgmlTypeTraits{"IQ2_XXS", 256, 66};
    case 17: return GgmlTypeTraits{"IQ2_XS", 256, 74};
    case 18: return GgmlTypeTraits{"IQ3_XXS", 256, 98};
    case 19: return GgmlTypeTraits{"IQ1_S", 256, 50};
    case 20: return GgmlTypeTraits{"IQ4_NL", 32, 18};
    case 21: return GgmlTypeTraits{"IQ3_S", 256, 110};
    case 22: return GgmlTypeTraits{"IQ2_S", 256, 82};
    case 23: return GgmlTypeTraits{"IQ4_XS", 256, 136};
    case 24: return GgmlTypeTraits{"I8", 1, 1};
    case 25: return GgmlTypeTraits{"I16", 1, 2};
    case 26: return GgmlTypeTraits{"I32", 1, 4};
    case 27: return GgmlTypeTraits{"I64", 1, 8};
    case 28: return GgmlTypeTraits{"F64", 1, 8};
    case 29: return GgmlTypeTraits{"IQ1_M", 256, 56};
    case 30: return GgmlTypeTraits{"BF16", 1, 2};
    case 34: return GgmlTypeTraits{"TQ1_0", 256, 54};
    case 35: return GgmlTypeTraits{"TQ2_0", 256, 66};
    case 39: return GgmlTypeTraits{"MXFP4", 32, 17};
    default: return std::nullopt;
  }
}

// Fills in a GgufFile from its bytes, validating as it goes (see gguf.h for the rules).
class GgufParser {
 public:
  explicit GgufParser(GgufFile& file) : f_(file), bytes_(file.bytes_), label_(file.label_) {}

  void run() {
    read_header();
    for (uint64_t i = 0; i < kv_count_; ++i) read_kv(i);
    index_keys();
    read_alignment();
    for (uint64_t i = 0; i < tensor_count_; ++i) read_tensor_info(i);
    f_.data_offset_ = align_up(pos_, f_.alignment_);
    place_tensors();
  }

 private:
  [[noreturn]] void fail_at(const Where& where, std::string_view message) const {
    fail("{}: {}: {}", label_, where.text(), message);
  }

  uint64_t left() const { return bytes_.size() - pos_; }

  // Checks that the `n` bytes of `what` at the cursor are inside the file.
  void need(uint64_t n, const Where& where, std::string_view what) const {
    if (n > left())
      fail_at(where, fmt::format("{} ({} bytes at offset {}) runs past the end of the file ({} bytes; "
                                 "truncated?)",
                                 what, n, pos_, bytes_.size()));
  }
  template <class T>
  T read(const Where& where, std::string_view what) {
    need(sizeof(T), where, what);
    const T v = load<T>(bytes_, pos_);
    pos_ += sizeof(T);
    return v;
  }

  // A length-prefixed string of at most `cap` bytes, as a view into the file.
  std::string_view read_string(uint64_t cap, const Where& where, std::string_view what) {
    if (left() < kStringHeaderBytes)
      fail_at(where, fmt::format("{} length (8 bytes at offset {}) runs past the end of the file ({} bytes; "
                                 "truncated?)",
                                 what, pos_, bytes_.size()));
    const auto len = load<uint64_t>(bytes_, pos_);
    pos_ += kStringHeaderBytes;
    if (len > cap) fail_at(where, fmt::format("{} length {} exceeds the {} byte limit", what, len, cap));
    need(len, where, what);
    const std::string_view s(reinterpret_cast<const char*>(bytes_.data() + pos_), len);
    pos_ += len;
    return s;
  }

  GgufType read_value_type(const Where& where, std::string_view what) {
    const auto raw = read<uint32_t>(where, what);
    if (raw > static_cast<uint32_t>(GgufType::F64))
      fail_at(where, fmt::format("unknown {} {} (known: 0..12)", what, raw));
    return static_cast<GgufType>(raw);
  }

  void read_header() {
    const Where where = Where::named("header", "");
    if (bytes_.size() < kMagic.size())
      fail("{}: not a GGUF file: {} bytes is too short for the 'GGUF' magic", label_, bytes_.size());
    if (std::memcmp(bytes_.data(), kMagic.data(), kMagic.size()) != 0) {
      fail("{}: not a GGUF file: starts with {:02x} {:02x} {:02x} {:02x}, not the magic 'GGUF'", label_,
           std::to_integer<unsigned>(bytes_[0]), std::to_integer<unsigned>(bytes_[1]),
           std::to_integer<unsigned>(bytes_[2]), std::to_integer<unsigned>(bytes_[3]));
    }
    pos_ = kMagic.size();
    const auto version = read<uint32_t>(where, "version");
    if (version == 1)
      fail(
          "{}: GGUF version 1 is not supported (the 2023 pre-release layout with 32-bit counts); "
          "re-convert the model with a current llama.cpp",
          label_);
    if (version != 2 && version != 3) {
      const uint32_t swapped = __builtin_bswap32(version);
      if (swapped >= 1 && swapped <= 3)
        fail(
            "{}: this is a big-endian GGUF file (version field {:#010x}); only little-endian files are "
            "supported",
            label_, version);
      fail("{}: unsupported GGUF version {} (supported: 2 and 3)", label_, version);
    }
    f_.version_ = version;
    tensor_count_ = read<uint64_t>(where, "tensor count");
    kv_count_ = read<uint64_t>(where, "metadata count");
    // Bound both counts by the bytes that follow before trusting either of them.
    if (kv_count_ > left() / kMinKvBytes)
      fail(
          "{}: header claims {} metadata entries, but the {} bytes that follow hold at most {} (corrupt "
          "file)",
          label_, kv_count_, left(), left() / kMinKvBytes);
    if (tensor_count_ > left() / kMinTensorInfoBytes)
      fail("{}: header claims {} tensors, but the {} bytes that follow hold at most {} (corrupt file)",
           label_, tensor_count_, left(), left() / kMinTensorInfoBytes);
    const uint64_t least = checked_add(checked_mul(kv_count_, kMinKvBytes, label_),
                                       checked_mul(tensor_count_, kMinTensorInfoBytes, label_), label_);
    if (least > left())
      fail(
          "{}: header claims {} metadata entries and {} tensors, which need at least {} bytes, but only {} "
          "follow (corrupt file)",
          label_, kv_count_, tensor_count_, least, left());
    // Only a file of more than 50 GiB of metadata could get here; entries are indexed with
    // 32 bits.
    if (kv_count_ > UINT32_MAX || tensor_count_ > UINT32_MAX)
      fail("{}: header claims {} metadata entries and {} tensors; at most {} of each are supported", label_,
           kv_count_, tensor_count_, UINT32_MAX);
  }

  void read_kv(uint64_t i) {
    Where where = Where::numbered("metadata entry", i);
    const std::string_view key = read_string(kMaxGgufKeyBytes, where, "key");
    if (key.empty()) fail_at(where, "empty key");
    where = Where::named("key", key);
    GgufFile::Value v;
    v.key = key;
    v.type = read_value_type(where, "value type");
    if (v.type == GgufType::ARRAY) {
      v.element_type = read_value_type(where, "array element type");
      v.count = read<uint64_t>(where, "array length");
      v.payload = pos_;
      walk_array(v.element_type, v.count, /*nested=*/false, where);
    } else {
      v.payload = pos_;
      walk_value(v.type, where);
    }
    f_.values_.push_back(v);
  }

  // Moves past one non-array value, validating it.
  void walk_value(GgufType type, const Where& where) {
    if (type == GgufType::STRING) {
      (void)read_string(kMaxGgufStringBytes, where, "string");
      return;
    }
    const uint64_t size = gguf_scalar_size(type);
    need(size, where, gguf_type_name(type));
    if (type == GgufType::BOOL) check_bool(pos_, where);
    pos_ += size;
  }

  void check_bool(uint64_t at, const Where& where) const {
    const auto b = load<uint8_t>(bytes_, at);
    if (b > 1) fail_at(where, fmt::format("bool value {} at offset {} is neither 0 nor 1", b, at));
  }

  // Moves past the `count` elements of an array of `element` values.
  void walk_array(GgufType element, uint64_t count, bool nested, const Where& where) {
    const uint64_t min_size = min_element_size(element);
    if (count > left() / min_size)
      fail_at(where, fmt::format("array of {} {} elements needs at least {} bytes per element, but only "
                                 "{} bytes are left",
                                 count, gguf_type_name(element), min_size, left()));
    switch (element) {
      case GgufType::STRING: {
        Where at = where;
        for (uint64_t j = 0; j < count; ++j) {
          (nested ? at.inner : at.element) = j;
          // Inlined read_string: this loop runs once per vocabulary token.
          need(kStringHeaderBytes, at, "string length");
          const auto len = load<uint64_t>(bytes_, pos_);
          pos_ += kStringHeaderBytes;
          if (len > kMaxGgufStringBytes)
            fail_at(at, fmt::format("string length {} exceeds the {} byte limit", len, kMaxGgufStringBytes));
          need(len, at, "string");
          pos_ += len;
        }
        return;
      }
      case GgufType::ARRAY: {
        if (nested)
          fail_at(where,
                  "arrays nested more than one level deep are not supported (an array of arrays "
                  "may only hold scalars or strings)");
        Where at = where;
        for (uint64_t j = 0; j < count; ++j) {
          at.element = j;
          const GgufType inner = read_value_type(at, "array element type");
          const auto inner_count = read<uint64_t>(at, "array length");
          walk_array(inner, inner_count, /*nested=*/true, at);
        }
        return;
      }
      case GgufType::BOOL: {
        Where at = where;
        for (uint64_t j = 0; j < count; ++j) {
          (nested ? at.inner : at.element) = j;
          check_bool(pos_ + j, at);
        }
        pos_ += count;
        return;
      }
      default:
        // count <= left() / min_size, so the product is inside the file.
        pos_ += checked_mul(count, min_size, label_);
        return;
    }
  }

  void index_keys() {
    auto& sorted = f_.sorted_;
    sorted.resize(f_.values_.size());
    std::iota(sorted.begin(), sorted.end(), 0u);
    const auto& values = f_.values_;
    std::stable_sort(sorted.begin(), sorted.end(),
                     [&](uint32_t a, uint32_t b) { return values[a].key < values[b].key; });
    for (size_t i = 1; i < sorted.size(); ++i) {
      if (values[sorted[i - 1]].key == values[sorted[i]].key)
        fail("{}: duplicate metadata key '{}' (entries #{} and #{})", label_, shown(values[sorted[i]].key),
             sorted[i - 1], sorted[i]);
    }
  }

  void read_alignment() {
    const GgufFile::Value* v = f_.find_value("general.alignment");
    if (v == nullptr) return;
    if (!is_integer(v->type))
      fail("{}: general.alignment has type {}, expected an integer", label_,
           type_text(v->type, v->element_type));
    const int64_t alignment = f_.get_int("general.alignment");
    if (alignment <= 0 || !std::has_single_bit(static_cast<uint64_t>(alignment)))
      fail("{}: general.alignment {} is not a power of two", label_, alignment);
    f_.alignment_ = static_cast<uint64_t>(alignment);
  }

  void read_tensor_info(uint64_t i) {
    Where where = Where::numbered("tensor info", i);
    const std::string_view name = read_string(kMaxGgufKeyBytes, where, "tensor name");
    if (name.empty()) fail_at(where, "empty tensor name");
    where = Where::named("tensor", name);

    GgufTensorInfo t;
    t.name = std::string(name);
    const auto n_dims = read<uint32_t>(where, "dimension count");
    if (n_dims > kMaxGgufDims)
      fail_at(where, fmt::format("{} dimensions; at most {} are supported", n_dims, kMaxGgufDims));
    need(uint64_t{n_dims} * 8, where, "dimensions");
    bool has_zero_dim = false;
    for (uint32_t d = 0; d < n_dims; ++d) {
      const auto ne = read<int64_t>(where, "dimension");
      if (ne < 0) fail_at(where, fmt::format("dimension {} is negative ({})", d, ne));
      has_zero_dim = has_zero_dim || ne == 0;
      t.shape.push_back(ne);
    }
    t.type = read<uint32_t>(where, "ggml type");
    const std::optional<GgmlTypeTraits> traits = ggml_type_traits(t.type);
    if (!traits)
      fail_at(where, fmt::format("unknown or unsupported ggml type {} (removed from ggml, or newer than "
                                 "this reader)",
                                 t.type));
    t.offset = read<uint64_t>(where, "data offset");  // relative for now; see place_tensors

    const std::string what = fmt::format("{}: {}", label_, where.text());
    // With a zero dimension the product is 0 whatever the others are; otherwise multiply
    // with overflow checks (a zero after two huge dimensions must not be an overflow).
    uint64_t elements = has_zero_dim ? 0 : 1;
    if (!has_zero_dim) {
      for (int64_t ne : t.shape) elements = checked_mul(elements, static_cast<uint64_t>(ne), what + " shape");
    }
    if (elements > static_cast<uint64_t>(INT64_MAX))
      fail_at(where,
              fmt::format("shape {} has {} elements, more than 2^63 - 1", shape_text(t.shape), elements));
    const int64_t ne0 = t.shape.empty() ? 1 : t.shape[0];
    if (ne0 % traits->block_size != 0)
      fail_at(where, fmt::format("ne[0] = {} is not a multiple of the {} block size {}", ne0, traits->name,
                                 traits->block_size));
    t.nbytes = checked_mul(elements / traits->block_size, traits->type_size, what + " byte size");
    f_.tensors_.push_back(std::move(t));
  }

  uint64_t align_up(uint64_t n, uint64_t alignment) const {
    return checked_add(n, alignment - 1, label_ + ": data offset") & ~(alignment - 1);
  }

  void place_tensors() {
    auto& tensors = f_.tensors_;
    const uint64_t alignment = f_.alignment_;
    for (GgufTensorInfo& t : tensors) {
      const Where where = Where::named("tensor", t.name);
      if (t.offset % alignment != 0)
        fail_at(where,
                fmt::format("data offset {} is not a multiple of the alignment {}", t.offset, alignment));
      const std::string what = fmt::format("{}: {}", label_, where.text());
      const uint64_t begin = checked_add(f_.data_offset_, t.offset, what + " data offset");
      const uint64_t end = checked_add(begin, t.nbytes, what + " data end");
      if (t.nbytes > 0 && end > bytes_.size())
        fail_at(where, fmt::format("data [{}, {}) runs past the end of the file ({} bytes; truncated?)",
                                   begin, end, bytes_.size()));
      t.offset = begin;
    }

    auto& by_name = f_.tensors_by_name_;
    by_name.resize(tensors.size());
    std::iota(by_name.begin(), by_name.end(), 0u);
    std::stable_sort(by_name.begin(), by_name.end(),
                     [&](uint32_t a, uint32_t b) { return tensors[a].name < tensors[b].name; });
    for (size_t i = 1; i < by_name.size(); ++i) {
      if (tensors[by_name[i - 1]].name == tensors[by_name[i]].name)
        fail("{}: duplicate tensor name '{}' (tensor infos #{} and #{})", label_,
             shown(tensors[by_name[i]].name), by_name[i - 1], by_name[i]);
    }

    // Tensors that hold bytes must not share any: sorted by offset, each starts at or
    // after the end of the one before. Zero-byte tensors occupy nothing.
    std::vector<uint32_t> by_offset;
    for (uint32_t i = 0; i < tensors.size(); ++i) {
      if (tensors[i].nbytes > 0) by_offset.push_back(i);
    }
    std::sort(by_offset.begin(), by_offset.end(), [&](uint32_t a, uint32_t b) {
      return std::pair(tensors[a].offset, a) < std::pair(tensors[b].offset, b);
    });
    for (size_t i = 1; i < by_offset.size(); ++i) {
      const GgufTensorInfo& prev = tensors[by_offset[i - 1]];
      const GgufTensorInfo& cur = tensors[by_offset[i]];
      if (cur.offset < prev.offset + prev.nbytes)  // both inside the file: no overflow
        fail("{}: tensor '{}' (bytes [{}, {})) overlaps tensor '{}' (bytes [{}, {}))", label_,
             shown(cur.name), cur.offset, cur.offset + cur.nbytes, shown(prev.name), prev.offset,
             prev.offset + prev.nbytes);
    }
  }

  GgufFile& f_;
  std::span<const std::byte> bytes_;
  const std::string& label_;
  uint64_t pos_ = 0;
  uint64_t kv_count_ = 0;
  uint64_t tensor_count_ = 0;
};

GgufFile GgufFile::open(const std::filesystem::path& path) {
  auto mapped = std::make_shared<const MappedFile>(path);
  GgufFile file = parse(mapped->bytes(), path.string());
  file.file_ = std::move(mapped);
  return file;
}

GgufFile GgufFile::parse(std::span<const std::byte> bytes, std::string label) {
  GgufFile file;
  file.bytes_ = bytes;
  file.label_ = std::move(label);
  GgufParser(file).run();
  return file;
}

const GgufFile::Value* GgufFile::find_value(std::string_view key) const {
  auto it = std::lower_bound(sorted_.begin(), sorted_.end(), key,
                             [&](uint32_t i, std::string_view k) { return values_[i].key < k; });
  if (it == sorted_.end() || values_[*it].key != key) return nullptr;
  return &values_[*it];
}

const GgufFile::Value& GgufFile::value(std::string_view key) const {
  const Value* v = find_value(key);
  if (v == nullptr) fail("{}: metadata key '{}' not found", label_, shown(key));
  return *v;
}

void GgufFile::wrong_type(const Value& v, std::string_view expected) const {
  fail("{}: metadata key '{}' has type {}, expected {}", label_, shown(v.key),
       type_text(v.type, v.element_type), expected);
}

template <class Fn>
void GgufFile::for_each_string(const Value& v, Fn&& fn) const {
  // Validated by the parser: every length and string lies inside bytes_.
  uint64_t pos = v.payload;
  for (uint64_t i = 0; i < v.count; ++i) {
    const auto len = load<uint64_t>(bytes_, pos);
    pos += kStringHeaderBytes;
    fn(std::string_view(reinterpret_cast<const char*>(bytes_.data() + pos), len));
    pos += len;
  }
}

bool GgufFile::has(std::string_view key) const { return find_value(key) != nullptr; }

GgufType GgufFile::type_of(std::string_view key) const { return value(key).type; }

GgufType GgufFile::array_type(std::string_view key) const {
  const Value& v = value(key);
  if (v.type != GgufType::ARRAY) wrong_type(v, "array");
  return v.element_type;
}

uint64_t GgufFile::array_size(std::string_view key) const {
  const Value& v = value(key);
  if (v.type != GgufType::ARRAY) wrong_type(v, "array");
  return v.count;
}

std::string GgufFile::get_string(std::string_view key) const {
  const Value& v = value(key);
  if (v.type != GgufType::STRING) wrong_type(v, "string");
  const auto len = load<uint64_t>(bytes_, v.payload);
  return std::string(reinterpret_cast<const char*>(bytes_.data() + v.payload + kStringHeaderBytes), len);
}

int64_t GgufFile::get_int(std::string_view key) const {
  const Value& v = value(key);
  if (!is_integer(v.type)) wrong_type(v, "an integer");
  bool fits = true;
  const int64_t n = load_integer(bytes_, v.payload, v.type, fits);
  if (!fits)
    fail("{}: metadata key '{}' value {} does not fit in int64", label_, shown(key),
         load<uint64_t>(bytes_, v.payload));
  return n;
}

double GgufFile::get_float(std::string_view key) const {
  const Value& v = value(key);
  if (v.type == GgufType::F32) return load<float>(bytes_, v.payload);
  if (v.type == GgufType::F64) return load<double>(bytes_, v.payload);
  wrong_type(v, "f32 or f64");
}

bool GgufFile::get_bool(std::string_view key) const {
  const Value& v = value(key);
  if (v.type != GgufType::BOOL) wrong_type(v, "bool");
  return load<uint8_t>(bytes_, v.payload) != 0;
}

std::vector<std::string> GgufFile::get_string_array(std::string_view key) const {
  const Value& v = value(key);
  if (v.type != GgufType::ARRAY || v.element_type != GgufType::STRING) wrong_type(v, "array of string");
  std::vector<std::string> out;
  out.reserve(v.count);  // validated: count strings of >= 8 bytes each lie inside the file
  for_each_string(v, [&](std::string_view s) { out.emplace_back(s); });
  return out;
}

std::vector<std::string_view> GgufFile::get_string_view_array(std::string_view key) const {
  const Value& v = value(key);
  if (v.type != GgufType::ARRAY || v.element_type != GgufType::STRING) wrong_type(v, "array of string");
  std::vector<std::string_view> out;
  out.reserve(v.count);
  for_each_string(v, [&](std::string_view s) { out.push_back(s); });
  return out;
}

std::vector<float> GgufFile::get_float_array(std::string_view key) const {
  const Value& v = value(key);
  if (v.type != GgufType::ARRAY || !is_float(v.element_type)) wrong_type(v, "array of f32 or f64");
  std::vector<float> out(v.count);
  if (v.element_type == GgufType::F32) {
    if (v.count > 0) std::memcpy(out.data(), bytes_.data() + v.payload, v.count * sizeof(float));
  } else {
    for (uint64_t i = 0; i < v.count; ++i)
      out[i] = static_cast<float>(load<double>(bytes_, v.payload + i * sizeof(double)));
  }
  return out;
}

std::vector<int64_t> GgufFile::get_int_array(std::string_view key) const {
  const Value& v = value(key);
  if (v.type != GgufType::ARRAY || !is_integer(v.element_type)) wrong_type(v, "array of integers");
  const uint64_t size = gguf_scalar_size(v.element_type);
  std::vector<int64_t> out(v.count);
  for (uint64_t i = 0; i < v.count; ++i) {
    bool fits = true;
    out[i] = load_integer(bytes_, v.payload + i * size, v.element_type, fits);
    if (!fits)
      fail("{}: metadata key '{}' element {} value {} does not fit in int64", label_, shown(key), i,
           load<uint64_t>(bytes_, v.payload + i * size));
  }
  return out;
}

std::optional<std::string> GgufFile::find_string(std::string_view key) const {
  if (!has(key)) return std::nullopt;
  return get_string(key);
}

std::optional<int64_t> GgufFile::find_int(std::string_view key) const {
  if (!has(key)) return std::nullopt;
  return get_int(key);
}

std::optional<double> GgufFile::find_float(std::string_view key) const {
  if (!has(key)) return std::nullopt;
  return get_float(key);
}

std::optional<bool> GgufFile::find_bool(std::string_view key) const {
  if (!has(key)) return std::nullopt;
  return get_bool(key);
}

std::vector<std::string> GgufFile::keys() const {
  std::vector<std::string> out;
  out.reserve(values_.size());
  for (const Value& v : values_) out.emplace_back(v.key);
  return out;
}

const GgufTensorInfo* GgufFile::find_tensor(std::string_view name) const {
  auto it = std::lower_bound(tensors_by_name_.begin(), tensors_by_name_.end(), name,
                             [&](uint32_t i, std::string_view n) { return tensors_[i].name < n; });
  if (it == tensors_by_name_.end() || tensors_[*it].name != name) return nullptr;
  return &tensors_[*it];
}

std::span<const std::byte> GgufFile::tensor_data(const GgufTensorInfo& tensor) const {
  // Validated by the parser: a tensor with bytes lies inside the file; one without may
  // have an offset past the end (no pointer is formed for it).
  if (tensor.nbytes == 0) return {};
  if (tensor.offset > bytes_.size() || tensor.nbytes > bytes_.size() - tensor.offset)
    fail("{}: tensor '{}' is not a tensor of this file", label_, shown(tensor.name));
  return bytes_.subspan(tensor.offset, tensor.nbytes);
}

}  // namespace tokenmill
