// MemoryStream: a cpp-httplib Stream over bytes in memory, for tests of code that reads a
// connection (the request gate): reads return at most `piece` bytes each, as a socket may,
// and end (0) when the bytes are used up; writes are kept.
#pragma once

#include <httplib.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>

namespace tokenmill {

class MemoryStream final : public httplib::Stream {
 public:
  explicit MemoryStream(std::string input, size_t piece = 4096) : input_(std::move(input)), piece_(piece) {}

  const std::string& written() const { return written_; }
  size_t bytes_read() const { return pos_; }
  std::string unread() const { return input_.substr(pos_); }

  bool is_readable() const override { return true; }
  bool is_writable() const override { return true; }
  ssize_t read(char* ptr, size_t size) override {
    const size_t n = std::min({size, piece_, input_.size() - pos_});
    std::memcpy(ptr, input_.data() + pos_, n);
    pos_ += n;
    return static_cast<ssize_t>(n);
  }
  ssize_t write(const char* ptr, size_t size) override {
    written_.append(ptr, size);
    return static_cast<ssize_t>(size);
  }
  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    ip = "127.0.0.1";
    port = 1;
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    ip = "127.0.0.1";
    port = 2;
  }
  socket_t socket() const override { return INVALID_SOCKET; }

 private:
  std::string input_;
  size_t piece_;
  size_t pos_ = 0;
  std::string written_;
};

}  // namespace tokenmill
