// GgufBuilder: a test-only GGUF writer, so that every test file is built in memory and
// every bad-input case says exactly which bytes are wrong.
//
// Typed helpers write well-formed entries; raw helpers (kv_raw, tensor_info_raw, the
// count overrides) write whatever a test needs, including malformed entries.
#pragma once

#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "formats/gguf.h"

namespace tokenmill::testing {

// The little-endian bytes of `v`.
template <class T>
std::string le(T v) {
  std::string out(sizeof(T), '\0');
  std::memcpy(out.data(), &v, sizeof(T));
  return out;
}

inline std::string u32(uint32_t v) { return le(v); }
inline std::string u64(uint64_t v) { return le(v); }
inline std::string type_tag(GgufType t) { return u32(static_cast<uint32_t>(t)); }
// A GGUF string: u64 length, then the bytes.
inline std::string gstr(const std::string& s) { return u64(s.size()) + s; }

inline std::span<const std::byte> as_bytes(const std::string& s) {
  return {reinterpret_cast<const std::byte*>(s.data()), s.size()};
}

class GgufBuilder {
 public:
  GgufBuilder& version(uint32_t v) {
    version_ = v;
    return *this;
  }
  // Header counts to write instead of the real ones.
  GgufBuilder& kv_count(uint64_t n) {
    kv_count_ = n;
    return *this;
  }
  GgufBuilder& tensor_count(uint64_t n) {
    tensor_count_ = n;
    return *this;
  }
  // The alignment used to place tensor data (write general.alignment separately).
  GgufBuilder& alignment(uint64_t a) {
    alignment_ = a;
    return *this;
  }
  // Without padding the file ends right after the tensor table when there is no data.
  GgufBuilder& pad_data_region(bool pad) {
    pad_ = pad;
    return *this;
  }

  // One KV from its already-encoded value (type tag included).
  GgufBuilder& kv_raw(const std::string& key, const std::string& typed_value) {
    kvs_.push_back(gstr(key) + typed_value);
    return *this;
  }
  // Bytes written verbatim where the next KV would go.
  GgufBuilder& raw_kv_bytes(const std::string& bytes) {
    kvs_.push_back(bytes);
    return *this;
  }
  template <class T>
  GgufBuilder& kv(const std::string& key, GgufType type, T v) {
    return kv_raw(key, type_tag(type) + le(v));
  }
  GgufBuilder& kv_string(const std::string& key, const std::string& s) {
    return kv_raw(key, type_tag(GgufType::STRING) + gstr(s));
  }
  template <class T>
  GgufBuilder& kv_array(const std::string& key, GgufType element, const std::vector<T>& values) {
    std::string body = type_tag(GgufType::ARRAY) + type_tag(element) + u64(values.size());
    for (const T& v : values) body += le(v);
    return kv_raw(key, body);
  }
  GgufBuilder& kv_string_array(const std::string& key, const std::vector<std::string>& values) {
    std::string body = type_tag(GgufType::ARRAY) + type_tag(GgufType::STRING) + u64(values.size());
    for (const std::string& v : values) body += gstr(v);
    return kv_raw(key, body);
  }

  // A tensor whose `nbytes` bytes of data (a position-dependent pattern) are appended to
  // the data region at the next aligned offset.
  GgufBuilder& tensor(const std::string& name, const std::vector<int64_t>& shape, uint32_t type,
                      uint64_t nbytes) {
    while (data_.size() % alignment_ != 0) data_ += '\0';
    const uint64_t offset = data_.size();
    for (uint64_t i = 0; i < nbytes; ++i) data_ += static_cast<char>((offset + i) * 7 + 1);
    return tensor_info_raw(name, shape, type, offset);
  }
  // A tensor info only: the data (if any) is the test's business (see data()).
  GgufBuilder& tensor_info_raw(const std::string& name, const std::vector<int64_t>& shape, uint32_t type,
                               uint64_t offset) {
    std::string info = gstr(name) + u32(static_cast<uint32_t>(shape.size()));
    for (int64_t d : shape) info += le(d);
    info += u32(type) + u64(offset);
    infos_.push_back(info);
    return *this;
  }
  // Bytes written verbatim where the next tensor info would go.
  GgufBuilder& raw_tensor_bytes(const std::string& bytes) {
    infos_.push_back(bytes);
    return *this;
  }
  GgufBuilder& data(const std::string& bytes) {
    data_ += bytes;
    return *this;
  }

  std::string build() const {
    std::string out = "GGUF" + u32(version_);
    out += u64(tensor_count_.value_or(infos_.size()));
    out += u64(kv_count_.value_or(kvs_.size()));
    for (const std::string& kv : kvs_) out += kv;
    for (const std::string& info : infos_) out += info;
    if (pad_ || !data_.empty()) {
      while (out.size() % alignment_ != 0) out += '\0';
    }
    return out + data_;
  }

 private:
  uint32_t version_ = 3;
  std::optional<uint64_t> kv_count_;
  std::optional<uint64_t> tensor_count_;
  uint64_t alignment_ = 32;
  bool pad_ = true;
  std::vector<std::string> kvs_;
  std::vector<std::string> infos_;
  std::string data_;
};

}  // namespace tokenmill::testing
