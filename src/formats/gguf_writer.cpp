#include "formats/gguf_writer.h"

#include <algorithm>
#include <cstring>

#include "core/atomic_file.h"
#include "core/checked_math.h"
#include "core/error.h"

namespace tokenmill {

namespace {

constexpr uint32_t kGgufVersion = 3;

template <class T>
void append_le(std::string& out, T v) {
  char bytes[sizeof(T)];
  std::memcpy(bytes, &v, sizeof(T));
  out.append(bytes, sizeof(T));
}

void append_string(std::string& out, std::string_view s) {
  append_le<uint64_t>(out, s.size());
  out.append(s);
}

void check_key(std::string_view key) {
  if (key.empty() || key.size() > kMaxGgufKeyBytes)
    fail("GGUF metadata key \"{}\" must be 1..{} bytes long", key.substr(0, 64), kMaxGgufKeyBytes);
}

void check_string_value(std::string_view key, std::string_view s) {
  if (s.size() > kMaxGgufStringBytes)
    fail("GGUF metadata \"{}\": a string of {} bytes is longer than the {} bytes a reader accepts", key,
         s.size(), kMaxGgufStringBytes);
}

// Walks the metadata of a file GgufFile has already validated, to find each value's
// encoded bytes. Bounds are checked again all the same: never read past the input.
class RawMetadata {
 public:
  RawMetadata(std::span<const std::byte> bytes, const std::string& label) : bytes_(bytes), label_(label) {}

  template <class T>
  T read() {
    T v;
    std::memcpy(&v, take(sizeof(T)), sizeof(T));
    return v;
  }
  const std::byte* take(uint64_t n) {
    if (n > bytes_.size() - pos_) fail("{}: metadata ends early while copying it", label_);
    const std::byte* p = bytes_.data() + pos_;
    pos_ += n;
    return p;
  }
  std::string_view string() {
    const auto n = read<uint64_t>();
    return {reinterpret_cast<const char*>(take(n)), static_cast<size_t>(n)};
  }
  void skip_value(GgufType type, int depth) {
    if (const uint64_t n = gguf_scalar_size(type)) {
      take(n);
    } else if (type == GgufType::STRING) {
      string();
    } else if (type == GgufType::ARRAY && depth < 2) {
      const auto element = static_cast<GgufType>(read<uint32_t>());
      const auto count = read<uint64_t>();
      if (const uint64_t size = gguf_scalar_size(element)) {
        take(checked_mul(size, count, label_));
      } else {
        for (uint64_t i = 0; i < count; ++i) skip_value(element, depth + 1);
      }
    } else {
      fail("{}: unexpected metadata value type {} while copying it", label_, static_cast<uint32_t>(type));
    }
  }
  uint64_t pos() const { return pos_; }
  std::span<const std::byte> bytes() const { return bytes_; }

 private:
  std::span<const std::byte> bytes_;
  const std::string& label_;
  uint64_t pos_ = 0;
};

uint64_t align_up(uint64_t n, uint64_t alignment, std::string_view what) {
  return checked_add(n, (alignment - n % alignment) % alignment, what);
}

}  // namespace

// Where the bytes go: a file descriptor or a string.
class GgufWriter::Sink {
 public:
  explicit Sink(std::string* memory) : memory_(memory) {}
  explicit Sink(AtomicFile* file) : file_(file) {}

  void put(const void* data, size_t n) {
    written_ = checked_add(written_, n, "GGUF file size");
    if (memory_ != nullptr) {
      memory_->append(static_cast<const char*>(data), n);
    } else {
      file_->write(data, n);
    }
  }
  void zeros(uint64_t n) {
    static const char kZeros[64] = {};
    while (n > 0) {
      const size_t k = std::min<uint64_t>(n, sizeof(kZeros));
      put(kZeros, k);
      n -= k;
    }
  }
  uint64_t written() const { return written_; }

 private:
  std::string* memory_ = nullptr;
  AtomicFile* file_ = nullptr;
  uint64_t written_ = 0;
};

void GgufWriter::set_encoded(std::string_view key, GgufType type, std::string value) {
  check_key(key);
  if (key == "general.alignment") {
    uint32_t a = 0;
    if (type != GgufType::U32 || value.size() != 4)
      fail("general.alignment must be a u32 (ggml reads it as one), not a {}", gguf_type_name(type));
    std::memcpy(&a, value.data(), 4);
    if (a == 0 || (a & (a - 1)) != 0) fail("general.alignment {} is not a power of two", a);
  }
  for (Entry& e : entries_) {
    if (e.key == key) {
      e.type = type;
      e.value = std::move(value);
      return;
    }
  }
  entries_.push_back({std::string(key), type, std::move(value)});
}

template <class T>
void GgufWriter::set_scalar(std::string_view key, GgufType type, T v) {
  std::string value;
  append_le(value, v);
  set_encoded(key, type, std::move(value));
}

template <class T>
void GgufWriter::set_numeric_array(std::string_view key, GgufType element, std::span<const T> v) {
  std::string value;
  value.reserve(12 + v.size() * sizeof(T));
  append_le(value, static_cast<uint32_t>(element));
  append_le<uint64_t>(value, v.size());
  for (const T& x : v) append_le(value, x);
  set_encoded(key, GgufType::ARRAY, std::move(value));
}

void GgufWriter::set_u8(std::string_view k, uint8_t v) { set_scalar(k, GgufType::U8, v); }
void GgufWriter::set_i8(std::string_view k, int8_t v) { set_scalar(k, GgufType::I8, v); }
void GgufWriter::set_u16(std::string_view k, uint16_t v) { set_scalar(k, GgufType::U16, v); }
void GgufWriter::set_i16(std::string_view k, int16_t v) { set_scalar(k, GgufType::I16, v); }
void GgufWriter::set_u32(std::string_view k, uint32_t v) { set_scalar(k, GgufType::U32, v); }
void GgufWriter::set_i32(std::string_view k, int32_t v) { set_scalar(k, GgufType::I32, v); }
void GgufWriter::set_u64(std::string_view k, uint64_t v) { set_scalar(k, GgufType::U64, v); }
void GgufWriter::set_i64(std::string_view k, int64_t v) { set_scalar(k, GgufType::I64, v); }
void GgufWriter::set_f32(std::string_view k, float v) { set_scalar(k, GgufType::F32, v); }
void GgufWriter::set_f64(std::string_view k, double v) { set_scalar(k, GgufType::F64, v); }
void GgufWriter::set_bool(std::string_view k, bool v) { set_scalar(k, GgufType::BOOL, uint8_t{v}); }

void GgufWriter::set_string(std::string_view key, std::string_view v) {
  check_string_value(key, v);
  std::string value;
  append_string(value, v);
  set_encoded(key, GgufType::STRING, std::move(value));
}

// clang-format off
void GgufWriter::set_array(std::string_view k, std::span<const uint8_t> v) { set_numeric_array(k, GgufType::U8, v); }
void GgufWriter::set_array(std::string_view k, std::span<const int8_t> v) { set_numeric_array(k, GgufType::I8, v); }
void GgufWriter::set_array(std::string_view k, std::span<const uint16_t> v) { set_numeric_array(k, GgufType::U16, v); }
void GgufWriter::set_array(std::string_view k, std::span<const int16_t> v) { set_numeric_array(k, GgufType::I16, v); }
void GgufWriter::set_array(std::string_view k, std::span<const uint32_t> v) { set_numeric_array(k, GgufType::U32, v); }
void GgufWriter::set_array(std::string_view k, std::span<const int32_t> v) { set_numeric_array(k, GgufType::I32, v); }
void GgufWriter::set_array(std::string_view k, std::span<const uint64_t> v) { set_numeric_array(k, GgufType::U64, v); }
void GgufWriter::set_array(std::string_view k, std::span<const int64_t> v) { set_numeric_array(k, GgufType::I64, v); }
void GgufWriter::set_array(std::string_view k, std::span<const float> v) { set_numeric_array(k, GgufType::F32, v); }
void GgufWriter::set_array(std::string_view k, std::span<const double> v) { set_numeric_array(k, GgufType::F64, v); }
// clang-format on

void GgufWriter::set_bool_array(std::string_view key, const std::vector<bool>& v) {
  std::vector<uint8_t> bytes(v.begin(), v.end());
  std::string value;
  append_le(value, static_cast<uint32_t>(GgufType::BOOL));
  append_le<uint64_t>(value, bytes.size());
  value.append(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  set_encoded(key, GgufType::ARRAY, std::move(value));
}

void GgufWriter::set_string_array(std::string_view key, std::span<const std::string> v) {
  std::vector<std::string_view> views(v.begin(), v.end());
  set_string_array(key, std::span<const std::string_view>(views));
}

void GgufWriter::set_string_array(std::string_view key, std::span<const std::string_view> v) {
  std::string value;
  append_le(value, static_cast<uint32_t>(GgufType::STRING));
  append_le<uint64_t>(value, v.size());
  for (std::string_view s : v) {
    check_string_value(key, s);
    append_string(value, s);
  }
  set_encoded(key, GgufType::ARRAY, std::move(value));
}

void GgufWriter::copy_metadata(const GgufFile& from) {
  const std::vector<std::string> keys = from.keys();
  RawMetadata raw(from.bytes(), from.label());
  raw.take(4 + 4 + 8 + 8);  // magic, version, tensor count, kv count
  for (const std::string& expected : keys) {
    const std::string_view key = raw.string();
    if (key != expected) fail("{}: metadata key \"{}\" is not where it was parsed", from.label(), expected);
    const auto type = static_cast<GgufType>(raw.read<uint32_t>());
    const uint64_t begin = raw.pos();
    raw.skip_value(type, 0);
    const auto* first = reinterpret_cast<const char*>(raw.bytes().data() + begin);
    set_encoded(key, type, std::string(first, static_cast<size_t>(raw.pos() - begin)));
  }
}

bool GgufWriter::has(std::string_view key) const {
  return std::any_of(entries_.begin(), entries_.end(), [&](const Entry& e) { return e.key == key; });
}

bool GgufWriter::remove(std::string_view key) {
  const auto it =
      std::find_if(entries_.begin(), entries_.end(), [&](const Entry& e) { return e.key == key; });
  if (it == entries_.end()) return false;
  entries_.erase(it);
  return true;
}

std::vector<std::string> GgufWriter::keys() const {
  std::vector<std::string> out;
  for (const Entry& e : entries_) out.push_back(e.key);
  return out;
}

uint64_t GgufWriter::alignment() const {
  for (const Entry& e : entries_) {
    if (e.key == "general.alignment") {
      uint32_t a = 0;
      std::memcpy(&a, e.value.data(), 4);  // validated by set_encoded
      return a;
    }
  }
  return kDefaultGgufAlignment;
}

uint64_t GgufWriter::add_tensor(std::string_view name, std::vector<int64_t> shape, uint32_t ggml_type,
                                FillFn fill) {
  const std::string what = fmt::format("GGUF tensor \"{}\"", name);
  if (name.empty() || name.size() > kMaxGgmlTensorName)
    fail("{}: names must be 1..{} bytes long (ggml's limit)", what, kMaxGgmlTensorName);
  for (const TensorEntry& t : tensors_)
    if (t.name == name) fail("{} is declared twice", what);
  if (shape.empty() || shape.size() > kMaxGgufDims)
    fail("{}: {} dimensions (1..{} allowed)", what, shape.size(), kMaxGgufDims);
  const auto traits = ggml_type_traits(ggml_type);
  if (!traits) fail("{}: unknown ggml type {}", what, ggml_type);
  uint64_t elements = 1;
  for (int64_t d : shape) {
    if (d < 0) fail("{}: negative dimension {}", what, d);
    elements = checked_mul(elements, static_cast<uint64_t>(d), what);
  }
  checked_to_int64(elements, what);
  if (shape[0] % traits->block_size != 0)
    fail("{}: ne[0] = {} is not a multiple of {}'s block size {}", what, shape[0], traits->name,
         traits->block_size);
  const uint64_t nbytes = checked_mul(elements / traits->block_size, traits->type_size, what);
  tensors_.push_back({std::string(name), std::move(shape), ggml_type, nbytes, std::move(fill)});
  return nbytes;
}

std::string GgufWriter::header(std::vector<uint64_t>& offsets) const {
  std::string out = "GGUF";
  append_le(out, kGgufVersion);
  append_le<uint64_t>(out, tensors_.size());
  append_le<uint64_t>(out, entries_.size());
  for (const Entry& e : entries_) {
    append_string(out, e.key);
    append_le(out, static_cast<uint32_t>(e.type));
    out += e.value;
  }
  const uint64_t alignment = this->alignment();
  uint64_t offset = 0;
  offsets.clear();
  for (const TensorEntry& t : tensors_) {
    append_string(out, t.name);
    append_le(out, static_cast<uint32_t>(t.shape.size()));
    for (int64_t d : t.shape) append_le(out, d);
    append_le(out, t.type);
    append_le(out, offset);
    offsets.push_back(offset);
    offset = align_up(checked_add(offset, t.nbytes, "GGUF data size"), alignment, "GGUF data size");
  }
  out.resize(align_up(out.size(), alignment, "GGUF header size"), '\0');
  return out;
}

void GgufWriter::emit(Sink& sink) const {
  std::vector<uint64_t> offsets;
  const std::string head = header(offsets);
  sink.put(head.data(), head.size());
  const uint64_t alignment = this->alignment();
  std::vector<std::byte> buffer;
  for (const TensorEntry& t : tensors_) {
    buffer.assign(static_cast<size_t>(t.nbytes), std::byte{0});
    if (t.fill) t.fill(std::span<std::byte>(buffer));
    sink.put(buffer.data(), buffer.size());
    sink.zeros(align_up(t.nbytes, alignment, "GGUF data size") - t.nbytes);
  }
}

std::string GgufWriter::to_bytes() const {
  std::string out;
  Sink sink(&out);
  emit(sink);
  return out;
}

uint64_t GgufWriter::write(const std::filesystem::path& path) const {
  AtomicFile file(path);
  Sink sink(&file);
  emit(sink);
  file.commit();
  return sink.written();
}

}  // namespace tokenmill
