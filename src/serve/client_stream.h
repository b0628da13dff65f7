// ClientStream: one client connection as cpp-httplib's Stream, with a deadline on receiving
// each request. cpp-httplib 0.11 only times out each read, so a client that drips its request
// a byte at a time would hold its worker thread forever; here every read of a request (head
// and body) must also finish by the deadline set with start_request(), after which reads fail
// and the connection is to be closed. Reads are buffered (the request line and headers are
// parsed a byte at a time); the buffer lives as long as the connection, so pipelined requests
// are kept, and bytes can be put back in front of it (the request gate's canonical request).
#pragma once

#include <httplib.h>
#include <poll.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <string>
#include <string_view>

namespace tokenmill {

class ClientStream final : public httplib::Stream {
 public:
  using Clock = std::chrono::steady_clock;

  // `read_timeout`: the longest a single read may wait; `write_timeout` likewise for a write.
  ClientStream(socket_t sock, std::chrono::microseconds read_timeout,
               std::chrono::microseconds write_timeout);

  // Waits until the next request's first byte is here (or already buffered), up to `idle`,
  // returning early with false once `stop()` is true or the client hung up.
  template <class Stop>
  bool wait_for_request(std::chrono::milliseconds idle, Stop stop);
  // The request whose first byte is here must be received by `deadline`.
  void start_request(Clock::time_point deadline);
  // The next reads return `bytes` first, then what was buffered (see admit_request).
  void unread(std::string_view bytes);
  // Whether a read of the current request failed: its deadline passed (missed_deadline()),
  // the read timeout passed, or the connection broke.
  bool read_failed() const { return read_failed_; }
  bool missed_deadline() const { return missed_deadline_; }
  // Whether anything was written since start_request(), i.e. the request was received (safe
  // to ask from another thread).
  bool responding() const { return responding_; }
  const std::string& peer() const { return peer_; }  // "ip:port"

  bool is_readable() const override;
  bool is_writable() const override;
  ssize_t read(char* ptr, size_t size) override;
  ssize_t write(const char* ptr, size_t size) override;
  void get_remote_ip_and_port(std::string& ip, int& port) const override;
  void get_local_ip_and_port(std::string& ip, int& port) const override;
  socket_t socket() const override { return sock_; }

 private:
  // Polls for `events` up to `timeout` (capped by the request deadline when reading).
  bool poll_for(short events, std::chrono::microseconds timeout) const;

  socket_t sock_;
  std::chrono::microseconds read_timeout_, write_timeout_;
  Clock::time_point deadline_ = Clock::time_point::max();
  mutable bool missed_deadline_ = false;
  bool read_failed_ = false;
  std::atomic<bool> responding_ = false;
  std::string peer_;
  std::string buffer_;
  size_t begin_ = 0, end_ = 0;  // buffered bytes: buffer_[begin_, end_)
};

template <class Stop>
bool ClientStream::wait_for_request(std::chrono::milliseconds idle, Stop stop) {
  deadline_ = Clock::time_point::max();
  if (begin_ < end_) return true;
  constexpr std::chrono::milliseconds kSlice{50};  // how soon stop() is noticed
  for (auto left = idle; left.count() > 0 && !stop(); left -= kSlice) {
    if (poll_for(POLLIN, std::min(left, kSlice))) return true;
  }
  return false;
}

}  // namespace tokenmill
