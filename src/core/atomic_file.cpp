#include "core/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <system_error>
#include <utility>

#include "core/checked_math.h"
#include "core/error.h"

namespace tokenmill {

namespace {
std::string errno_text() { return std::generic_category().message(errno); }
}  // namespace

AtomicFile::AtomicFile(std::filesystem::path path) : path_(std::move(path)), tmp_(path_.string() + ".tmp") {
  fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) fail("{}: cannot create the file ({})", tmp_.string(), errno_text());
}

AtomicFile::~AtomicFile() { discard(); }

void AtomicFile::discard() noexcept {
  if (fd_ < 0) return;
  ::close(fd_);
  fd_ = -1;
  ::unlink(tmp_.c_str());
}

void AtomicFile::write(const void* data, size_t n) {
  if (fd_ < 0) fail("{}: write after the file was committed or discarded", tmp_.string());
  written_ = checked_add(written_, n, path_.string());
  const auto* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t w = ::write(fd_, p, std::min<size_t>(n, size_t{1} << 30));
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      const std::string reason = errno_text();
      discard();
      fail("{}: write failed ({})", tmp_.string(), reason);
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
}

void AtomicFile::commit() {
  if (fd_ < 0) fail("{}: commit after the file was committed or discarded", tmp_.string());
  if (::fsync(fd_) != 0) {
    const std::string reason = errno_text();
    discard();
    fail("{}: fsync failed ({})", tmp_.string(), reason);
  }
  const int closed = ::close(fd_);
  fd_ = -1;
  if (closed != 0 || std::rename(tmp_.c_str(), path_.c_str()) != 0) {
    const std::string reason = errno_text();
    ::unlink(tmp_.c_str());
    fail("{}: cannot close and rename it to {} ({})", tmp_.string(), path_.string(), reason);
  }
  const std::filesystem::path dir = path_.has_parent_path() ? path_.parent_path() : ".";
  if (const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

}  // namespace tokenmill
