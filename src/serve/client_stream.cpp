#include "serve/client_stream.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

namespace tokenmill {

namespace {

using std::chrono::microseconds;

// The numeric address and port of a socket name (getpeername / getsockname).
void address_of(const sockaddr_storage& addr, std::string& ip, int& port) {
  char text[INET6_ADDRSTRLEN] = "";
  if (addr.ss_family == AF_INET) {
    const auto& a = reinterpret_cast<const sockaddr_in&>(addr);
    inet_ntop(AF_INET, &a.sin_addr, text, sizeof text);
    port = ntohs(a.sin_port);
  } else if (addr.ss_family == AF_INET6) {
    const auto& a = reinterpret_cast<const sockaddr_in6&>(addr);
    inet_ntop(AF_INET6, &a.sin6_addr, text, sizeof text);
    port = ntohs(a.sin6_port);
  }
  ip = text;
}

}  // namespace

ClientStream::ClientStream(socket_t sock, microseconds read_timeout, microseconds write_timeout)
    : sock_(sock), read_timeout_(read_timeout), write_timeout_(write_timeout) {
  std::string ip;
  int port = 0;
  get_remote_ip_and_port(ip, port);
  peer_ = fmt::format("{}:{}", ip, port);
}

void ClientStream::start_request(Clock::time_point deadline) {
  deadline_ = deadline;
  missed_deadline_ = false;
  read_failed_ = false;
  responding_ = false;
}

bool ClientStream::poll_for(short events, microseconds timeout) const {
  if (events == POLLIN) {
    const auto left = std::chrono::duration_cast<microseconds>(deadline_ - Clock::now());
    if (left <= timeout) {
      timeout = std::max(left, microseconds(0));
      missed_deadline_ = true;  // unless the data comes in time (below)
    }
  }
  pollfd p{sock_, events, 0};
  const int ready = ::poll(&p, 1, static_cast<int>((timeout.count() + 999) / 1000));
  if (ready > 0) missed_deadline_ = false;
  return ready > 0;
}

bool ClientStream::is_readable() const { return begin_ < end_ || poll_for(POLLIN, read_timeout_); }

bool ClientStream::is_writable() const {
  if (!poll_for(POLLOUT, write_timeout_)) return false;
  // Still connected: nothing to read, or data (not an orderly close) to read.
  pollfd p{sock_, POLLIN, 0};
  if (::poll(&p, 1, 0) == 0) return true;
  char byte = 0;
  return ::recv(sock_, &byte, 1, MSG_PEEK) > 0;
}

void ClientStream::unread(std::string_view bytes) {
  buffer_ = std::string(bytes) + buffer_.substr(begin_, end_ - begin_);
  begin_ = 0;
  end_ = buffer_.size();
}

ssize_t ClientStream::read(char* ptr, size_t size) {
  if (begin_ == end_) {
    constexpr size_t kReadSize = 4096;
    buffer_.resize(kReadSize);
    const ssize_t n = is_readable() ? ::recv(sock_, buffer_.data(), buffer_.size(), 0) : -1;
    if (n <= 0) {
      read_failed_ = true;
      return n;
    }
    begin_ = 0;
    end_ = static_cast<size_t>(n);
  }
  const size_t n = std::min(size, end_ - begin_);
  std::memcpy(ptr, buffer_.data() + begin_, n);
  begin_ += n;
  return static_cast<ssize_t>(n);
}

ssize_t ClientStream::write(const char* ptr, size_t size) {
  responding_ = true;
  if (!poll_for(POLLOUT, write_timeout_)) return -1;
  return ::send(sock_, ptr, size, MSG_NOSIGNAL);
}

void ClientStream::get_remote_ip_and_port(std::string& ip, int& port) const {
  sockaddr_storage addr{};
  socklen_t length = sizeof addr;
  if (::getpeername(sock_, reinterpret_cast<sockaddr*>(&addr), &length) == 0) address_of(addr, ip, port);
}

void ClientStream::get_local_ip_and_port(std::string& ip, int& port) const {
  sockaddr_storage addr{};
  socklen_t length = sizeof addr;
  if (::getsockname(sock_, reinterpret_cast<sockaddr*>(&addr), &length) == 0) address_of(addr, ip, port);
}

}  // namespace tokenmill
