// AtomicFile: writes a file so that readers only ever see the old file or the whole new one.
//
// Bytes go to `path` + ".tmp"; commit() fsyncs it, closes it, renames it over `path` and
// fsyncs the directory (best effort: some file systems refuse a directory fsync). An
// AtomicFile destroyed before commit() (an exception on the way, a failed write) removes
// its temporary and leaves `path` as it was: nothing the user saved is lost.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>

namespace tokenmill {

class AtomicFile {
 public:
  // Creates the temporary; throws Error naming it if it cannot be created.
  explicit AtomicFile(std::filesystem::path path);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  // Appends n bytes; throws Error (naming the file and the OS reason) on failure.
  void write(const void* data, size_t n);
  // Makes the file durable under its final name. Call once; throws Error on failure (the
  // temporary is removed and `path` left as it was).
  void commit();

  uint64_t written() const { return written_; }
  const std::filesystem::path& path() const { return path_; }

 private:
  void discard() noexcept;

  std::filesystem::path path_, tmp_;
  int fd_ = -1;
  uint64_t written_ = 0;
};

}  // namespace tokenmill
