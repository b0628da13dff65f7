// MappedFile: a read-only memory map of a whole file (weights are used in place).
#pragma once

#include <cstddef>
#include <filesystem>
#include <span>

namespace tokenmill {

class MappedFile {
 public:
  // Maps `path` read-only. Throws Error naming the path if it is missing, not a regular
  // file, or cannot be mapped. An empty file maps to an empty span.
  explicit MappedFile(const std::filesystem::path& path);
  ~MappedFile();
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  std::span<const std::byte> bytes() const { return {data_, size_}; }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
  const std::byte* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace tokenmill
