#include "formats/safetensors.h"

#include <algorithm>
#include <array>
#include <nlohmann/json.hpp>
#include <set>
#include <system_error>
#include <utility>

#include "core/checked_math.h"
#include "core/error.h"

namespace tokenmill {
namespace {

using json = nlohmann::json;

// Valid safetensors headers nest three deep (object -> entry -> shape); index files a
// little more. Anything deeper is refused before it can cost stack or time.
constexpr size_t kMaxJsonDepth = 64;

// Names and keys come from untrusted files: show at most this much of one in a message.
constexpr size_t kMaxShownChars = 200;

std::string shown(std::string_view s) {
  if (s.size() <= kMaxShownChars) return std::string(s);
  return fmt::format("{}...({} bytes)", s.substr(0, kMaxShownChars), s.size());
}

// What a JSON value is, for messages: numbers verbatim, everything else by type name.
std::string describe(const json& v) {
  if (v.is_number()) return v.dump();
  return std::string(v.type_name());
}

// SAX handler that builds a json DOM like nlohmann::json::parse, but refuses duplicate
// keys in any object (json::parse silently keeps the last one) and nesting deeper than
// kMaxJsonDepth. On failure it records why and stops the parse by returning false.
class StrictJsonBuilder {
 public:
  json& root() { return root_; }
  const std::string& error() const { return error_; }

  bool null() { return put(json(nullptr)) != nullptr; }
  bool boolean(bool v) { return put(json(v)) != nullptr; }
  bool number_integer(json::number_integer_t v) { return put(json(v)) != nullptr; }
  bool number_unsigned(json::number_unsigned_t v) { return put(json(v)) != nullptr; }
  bool number_float(json::number_float_t v, const json::string_t& /*text*/) {
    return put(json(v)) != nullptr;
  }
  bool string(json::string_t& v) { return put(json(std::move(v))) != nullptr; }
  bool binary(json::binary_t& /*v*/) {
    error_ = "binary values are not JSON";  // only reachable from binary formats
    return false;
  }
  bool start_object(std::size_t /*elements*/) { return open(json::object()); }
  bool end_object() { return close(); }
  bool start_array(std::size_t /*elements*/) { return open(json::array()); }
  bool end_array() { return close(); }
  bool key(json::string_t& k) {
    if (stack_.back()->contains(k)) {
      error_ = fmt::format("duplicate key '{}'", shown(k));
      return false;
    }
    key_ = std::move(k);
    return true;
  }
  bool parse_error(std::size_t /*position*/, const std::string& /*last_token*/,
                   const nlohmann::detail::exception& ex) {
    error_ = shown(ex.what());  // the message quotes the offending token, which may be huge
    return false;
  }

 private:
  // Stores `v` in the innermost open container (or as the root); returns where it went.
  // Pointers into the DOM stay valid while their container is on the stack: only the
  // innermost container grows, and objects are node-based maps.
  json* put(json&& v) {
    if (stack_.empty()) {
      root_ = std::move(v);
      return &root_;
    }
    json& parent = *stack_.back();
    if (parent.is_object()) {
      auto [it, inserted] = parent.get_ref<json::object_t&>().emplace(std::move(key_), std::move(v));
      return &it->second;
    }
    parent.push_back(std::move(v));
    return &parent.back();
  }
  bool open(json&& empty_container) {
    if (stack_.size() >= kMaxJsonDepth) {
      error_ = fmt::format("JSON nested deeper than {} levels", kMaxJsonDepth);
      return false;
    }
    stack_.push_back(put(std::move(empty_container)));
    return true;
  }
  bool close() {
    stack_.pop_back();
    return true;
  }

  json root_;
  std::vector<json*> stack_;
  std::string key_;
  std::string error_;
};

// Parses `text` as strict JSON (no duplicate keys, bounded nesting, nothing after the
// value but whitespace). Throws Error "<label>: invalid JSON <what>: <reason>".
json parse_strict_json(std::string_view text, std::string_view label, std::string_view what) {
  // nlohmann's lexer takes a NUL byte outside a string for the end of the input, so
  // "{}\0garbage" would pass; JSON text never contains a raw NUL, so refuse it first.
  if (const size_t nul = text.find('\0'); nul != std::string_view::npos)
    fail("{}: invalid JSON {}: NUL byte at offset {}", label, what, nul);
  StrictJsonBuilder builder;
  bool ok = false;
  try {
    ok = json::sax_parse(text.data(), text.data() + text.size(), &builder, json::input_format_t::json,
                         /*strict=*/true);
  } catch (const json::exception& e) {
    fail("{}: invalid JSON {}: {}", label, what, e.what());
  }
  if (!ok) {
    fail("{}: invalid JSON {}: {}", label, what, builder.error().empty() ? "parse failed" : builder.error());
  }
  return std::move(builder.root());
}

struct DTypeInfo {
  std::string_view name;
  uint64_t size;
  std::optional<DType> dtype;
};

constexpr std::array<DTypeInfo, 15> kDTypes = {{
    {"BOOL", 1, std::nullopt},
    {"U8", 1, std::nullopt},
    {"I8", 1, std::nullopt},
    {"F8_E4M3", 1, std::nullopt},
    {"F8_E5M2", 1, std::nullopt},
    {"I16", 2, std::nullopt},
    {"U16", 2, std::nullopt},
    {"F16", 2, DType::F16},
    {"BF16", 2, DType::BF16},
    {"I32", 4, std::nullopt},
    {"U32", 4, std::nullopt},
    {"F32", 4, DType::F32},
    {"F64", 8, std::nullopt},
    {"I64", 8, std::nullopt},
    {"U64", 8, std::nullopt},
}};

const DTypeInfo* find_dtype(std::string_view name) {
  for (const DTypeInfo& info : kDTypes) {
    if (info.name == name) return &info;
  }
  return nullptr;
}

// A non-negative JSON integer (floats such as 1.0 or 1e3 are refused), else nullopt.
std::optional<uint64_t> as_unsigned(const json& v) {
  if (v.is_number_unsigned()) return v.get<uint64_t>();
  if (v.is_number_integer() && v.get<int64_t>() >= 0) return static_cast<uint64_t>(v.get<int64_t>());
  return std::nullopt;
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += fmt::format("{}{}", i ? ", " : "", shape[i]);
  return s + "]";
}

// Validates one header entry; `data_start` is the file offset of the data region and
// `data_size` its length. Every size is checked before it is used.
SafetensorsEntry parse_entry(const std::string& name, const json& spec, uint64_t data_start,
                             uint64_t data_size, std::string_view label) {
  const std::string who = fmt::format("{}: tensor '{}'", label, shown(name));
  if (!spec.is_object()) fail("{}: entry must be an object, found {}", who, describe(spec));
  for (const auto& [key, value] : spec.items()) {
    (void)value;
    if (key != "dtype" && key != "shape" && key != "data_offsets")
      fail("{}: unknown key '{}' (expected dtype, shape, data_offsets)", who, shown(key));
  }
  for (const char* required : {"dtype", "shape", "data_offsets"}) {
    if (!spec.contains(required)) fail("{}: missing \"{}\"", who, required);
  }

  SafetensorsEntry entry;
  entry.name = name;

  const json& dtype = spec["dtype"];
  if (!dtype.is_string()) fail("{}: dtype must be a string, found {}", who, describe(dtype));
  const auto& dtype_text = dtype.get_ref<const std::string&>();
  const DTypeInfo* info = find_dtype(dtype_text);
  if (info == nullptr) fail("{}: unknown dtype '{}'", who, shown(dtype_text));
  entry.dtype_name = std::string(info->name);
  entry.dtype = info->dtype;

  const json& shape = spec["shape"];
  if (!shape.is_array()) fail("{}: shape must be an array, found {}", who, describe(shape));
  entry.shape.reserve(shape.size());
  bool has_zero_dim = false;
  for (const json& dim : shape) {
    const std::optional<uint64_t> d = as_unsigned(dim);
    if (!d) fail("{}: shape dimension {} is not a non-negative integer", who, describe(dim));
    if (*d > static_cast<uint64_t>(INT64_MAX)) fail("{}: shape dimension {} is too large", who, *d);
    has_zero_dim = has_zero_dim || *d == 0;
    entry.shape.push_back(static_cast<int64_t>(*d));
  }
  // With a zero dimension the product is 0 whatever the others are; otherwise multiply
  // with overflow checks (a zero after two huge dimensions must not be an overflow).
  uint64_t elements = has_zero_dim ? 0 : 1;
  if (!has_zero_dim) {
    for (int64_t d : entry.shape) elements = checked_mul(elements, static_cast<uint64_t>(d), who + " shape");
  }
  entry.nbytes = checked_mul(elements, info->size, who + " byte size");

  const json& offsets = spec["data_offsets"];
  if (!offsets.is_array() || offsets.size() != 2)
    fail("{}: data_offsets must be an array of two integers [begin, end]", who);
  const std::optional<uint64_t> begin = as_unsigned(offsets[0]);
  const std::optional<uint64_t> end = as_unsigned(offsets[1]);
  if (!begin || !end)
    fail("{}: data_offsets [{}, {}] must be non-negative integers", who, describe(offsets[0]),
         describe(offsets[1]));
  if (*end < *begin) fail("{}: data_offsets [{}, {}] end before begin", who, *begin, *end);
  if (*end > data_size)
    fail("{}: data_offsets [{}, {}] extend past the end of the data region ({} bytes)", who, *begin, *end,
         data_size);
  if (*end - *begin != entry.nbytes)
    fail("{}: data_offsets [{}, {}] span {} bytes, but {} x shape {} needs {}", who, *begin, *end,
         *end - *begin, entry.dtype_name, shape_text(entry.shape), entry.nbytes);
  entry.offset = checked_add(data_start, *begin, who + " offset");
  return entry;
}

void parse_metadata(const json& metadata, std::string_view label) {
  if (!metadata.is_object()) fail("{}: __metadata__ must be an object, found {}", label, describe(metadata));
  for (const auto& [key, value] : metadata.items()) {
    if (!value.is_string())
      fail("{}: __metadata__ value of '{}' must be a string, found {}", label, shown(key), describe(value));
  }
}

// Whether `name` is a plain file name inside the model directory (no path, no escape).
bool is_plain_file_name(std::string_view name) {
  return !name.empty() && name.find('/') == std::string_view::npos &&
         name.find('\\') == std::string_view::npos && name.find('\0') == std::string_view::npos &&
         name.find("..") == std::string_view::npos && name != ".";
}

// Whether `path` exists (as anything). Errors other than "not found" are reported.
bool path_exists(const std::filesystem::path& path) {
  std::error_code ec;
  const std::filesystem::file_status st = std::filesystem::status(path, ec);
  if (ec && ec != std::errc::no_such_file_or_directory && ec != std::errc::not_a_directory)
    fail("cannot access {}: {}", path.string(), ec.message());
  return std::filesystem::exists(st);
}

}  // namespace

std::vector<SafetensorsEntry> parse_safetensors(std::span<const std::byte> file, std::string_view label) {
  if (file.size() < 8)
    fail("{}: not a safetensors file: {} bytes is shorter than the 8-byte header length", label, file.size());
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i)
    header_len = (header_len << 8) | std::to_integer<uint64_t>(file[static_cast<size_t>(i)]);
  if (header_len < 2) fail("{}: header length {} is too small for a JSON object", label, header_len);
  if (header_len > kMaxSafetensorsHeaderBytes)
    fail("{}: header length {} exceeds the {} byte limit (corrupt or not a safetensors file)", label,
         header_len, kMaxSafetensorsHeaderBytes);
  const uint64_t data_start = checked_add(8, header_len, label);
  if (data_start > file.size())
    fail("{}: header length {} runs past the end of the file ({} bytes; truncated download?)", label,
         header_len, file.size());
  const uint64_t data_size = file.size() - data_start;

  const std::string_view text(reinterpret_cast<const char*>(file.data()) + 8,
                              static_cast<size_t>(header_len));
  const json header = parse_strict_json(text, label, "in the safetensors header");
  if (!header.is_object())
    fail("{}: safetensors header must be a JSON object, found {}", label, describe(header));
  // As in the format's spec, the object starts the header: no leading whitespace or BOM
  // (only trailing space padding is allowed).
  if (text.front() != '{') fail("{}: safetensors header must begin with '{{'", label);

  std::vector<SafetensorsEntry> entries;
  entries.reserve(header.size());
  for (const auto& [name, spec] : header.items()) {
    if (name == "__metadata__") {
      parse_metadata(spec, label);
      continue;
    }
    entries.push_back(parse_entry(name, spec, data_start, data_size, label));
  }

  // The tensors must tile the data region: sorted by offset, each starts where the
  // previous one ended, and the last one ends at the end of the file.
  std::sort(entries.begin(), entries.end(), [](const SafetensorsEntry& a, const SafetensorsEntry& b) {
    return std::pair(a.offset, a.nbytes) < std::pair(b.offset, b.nbytes);
  });
  uint64_t cursor = data_start;
  const SafetensorsEntry* previous = nullptr;
  for (const SafetensorsEntry& e : entries) {
    if (e.offset > cursor)
      fail("{}: {} bytes before tensor '{}' belong to no tensor (gap in the data region)", label,
           e.offset - cursor, shown(e.name));
    if (e.offset < cursor)
      fail("{}: tensor '{}' overlaps tensor '{}' in the data region", label, shown(e.name),
           previous ? shown(previous->name) : std::string("?"));
    cursor = e.offset + e.nbytes;  // <= file.size(): checked in parse_entry
    previous = &e;
  }
  if (cursor != file.size())
    fail("{}: {} trailing bytes after the last tensor belong to no tensor", label, file.size() - cursor);
  return entries;
}

SafetensorsArchive SafetensorsArchive::open(const std::filesystem::path& dir) {
  if (!path_exists(dir)) fail("model directory {} does not exist", dir.string());
  {
    std::error_code ec;
    if (!std::filesystem::is_directory(dir, ec))
      fail("{} is not a directory (expected a model directory with model.safetensors)", dir.string());
  }

  SafetensorsArchive archive;
  archive.dir_ = dir;
  const std::filesystem::path index_path = dir / "model.safetensors.index.json";
  const std::filesystem::path single_path = dir / "model.safetensors";

  // Which tensors the index promises, and in which shard (empty without an index).
  std::map<std::string, std::string, std::less<>> promised;
  std::vector<std::string> shard_names;
  if (path_exists(index_path)) {
    const MappedFile index_file(index_path);
    const std::span<const std::byte> bytes = index_file.bytes();
    if (bytes.size() > kMaxSafetensorsHeaderBytes)
      fail("{}: index of {} bytes exceeds the {} byte limit", index_path.string(), bytes.size(),
           kMaxSafetensorsHeaderBytes);
    const json index =
        parse_strict_json(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()),
                          index_path.string(), "in the index");
    if (!index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object())
      fail("{}: expected a JSON object with a \"weight_map\" object", index_path.string());
    const json& weight_map = index["weight_map"];
    if (weight_map.empty()) fail("{}: weight_map lists no tensors", index_path.string());
    std::set<std::string, std::less<>> seen_shards;
    for (const auto& [tensor, shard] : weight_map.items()) {
      if (!shard.is_string())
        fail("{}: weight_map entry for tensor '{}' must be a file name string, found {}", index_path.string(),
             shown(tensor), describe(shard));
      const auto& shard_name = shard.get_ref<const std::string&>();
      if (!is_plain_file_name(shard_name))
        fail("{}: tensor '{}' maps to '{}', which is not a plain file name in {} (no '/' or '..' allowed)",
             index_path.string(), shown(tensor), shown(shard_name), dir.string());
      promised.emplace(tensor, shard_name);
      if (seen_shards.insert(shard_name).second) shard_names.push_back(shard_name);
    }
    for (const std::string& name : shard_names) {
      const std::filesystem::path shard_path = dir / name;
      if (!path_exists(shard_path))
        fail("{}: shard {} listed in the index is missing", index_path.string(), shard_path.string());
    }
  } else if (path_exists(single_path)) {
    shard_names.push_back("model.safetensors");
  } else {
    fail("no model.safetensors or model.safetensors.index.json in {}", dir.string());
  }

  archive.shards_.reserve(shard_names.size());
  for (const std::string& name : shard_names) {
    MappedFile file(dir / name);
    std::vector<SafetensorsEntry> entries = parse_safetensors(file.bytes(), file.path().string());
    archive.shards_.push_back(Shard{std::move(file), std::move(entries)});
  }

  for (size_t s = 0; s < archive.shards_.size(); ++s) {
    const Shard& shard = archive.shards_[s];
    for (size_t e = 0; e < shard.entries.size(); ++e) {
      const std::string& name = shard.entries[e].name;
      auto [it, inserted] = archive.index_.emplace(name, std::pair(s, e));
      if (!inserted)
        fail("tensor '{}' is stored twice: in {} and in {}", shown(name),
             archive.shards_[it->second.first].file.path().string(), shard.file.path().string());
    }
  }
  for (const auto& [tensor, shard_name] : promised) {
    auto it = archive.index_.find(tensor);
    const std::filesystem::path expected = dir / shard_name;
    if (it == archive.index_.end() || archive.shards_[it->second.first].file.path() != expected)
      fail("{}: tensor '{}' is mapped to {}, which has no tensor of that name", index_path.string(),
           shown(tensor), expected.string());
  }
  return archive;
}

std::optional<StoredTensor> SafetensorsArchive::find(std::string_view name) const {
  auto it = index_.find(name);
  if (it == index_.end()) return std::nullopt;
  const Shard& shard = shards_[it->second.first];
  const SafetensorsEntry& entry = shard.entries[it->second.second];
  // entry.offset + entry.nbytes <= file size was validated by parse_safetensors.
  return StoredTensor{&entry, shard.file.bytes().data() + entry.offset, &shard.file.path()};
}

std::vector<std::string> SafetensorsArchive::names() const {
  std::vector<std::string> out;
  out.reserve(index_.size());
  for (const auto& [name, where] : index_) out.push_back(name);
  return out;
}

Tensor SafetensorsArchive::tensor(std::string_view name, std::initializer_list<int64_t> shape) const {
  const std::optional<StoredTensor> stored = find(name);
  if (!stored) fail("tensor '{}' not found in {}", name, dir_.string());
  const SafetensorsEntry& entry = *stored->entry;
  if (!entry.dtype)
    fail("tensor '{}' in {} has dtype {}; expected F32, BF16 or F16", name, stored->file->string(),
         entry.dtype_name);
  const std::vector<int64_t> expected(shape);
  if (entry.shape != expected)
    fail("tensor '{}' in {} has shape {}, expected {}", name, stored->file->string(), shape_text(entry.shape),
         shape_text(expected));
  // The view points straight into the read-only mapping: writing through it faults.
  // safetensors does not align tensor data, so `data` may be at any byte offset; the
  // engine's kernels read weights with unaligned loads (memcpy / loadu), never by
  // dereferencing a typed pointer that assumes alignment.
  return Tensor(const_cast<std::byte*>(stored->data), *entry.dtype, shape);
}

std::span<const std::byte> SafetensorsArchive::bytes(std::string_view name, std::string_view dtype_name,
                                                     std::initializer_list<int64_t> shape) const {
  const std::optional<StoredTensor> stored = find(name);
  if (!stored) fail("tensor '{}' not found in {}", name, dir_.string());
  const SafetensorsEntry& entry = *stored->entry;
  if (entry.dtype_name != dtype_name)
    fail("tensor '{}' in {} has dtype {}; expected {}", name, stored->file->string(), entry.dtype_name,
         dtype_name);
  const std::vector<int64_t> expected(shape);
  if (entry.shape != expected)
    fail("tensor '{}' in {} has shape {}, expected {}", name, stored->file->string(), shape_text(entry.shape),
         shape_text(expected));
  return {stored->data, static_cast<size_t>(entry.nbytes)};
}

std::vector<std::span<const std::byte>> SafetensorsArchive::file_bytes() const {
  std::vector<std::span<const std::byte>> files;
  for (const Shard& shard : shards_) files.push_back(shard.file.bytes());
  return files;
}

std::map<std::string, uint64_t> SafetensorsArchive::bytes_by_dtype() const {
  std::map<std::string, uint64_t> out;
  for (const Shard& shard : shards_) {
    for (const SafetensorsEntry& e : shard.entries) {
      uint64_t& total = out[e.dtype_name];
      total = checked_add(total, e.nbytes, "safetensors bytes by dtype");
    }
  }
  return out;
}

}  // namespace tokenmill
