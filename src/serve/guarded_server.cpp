#include "serve/guarded_server.h"

#include <spdlog/spdlog.h>

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <utility>
#include <vector>

#include "serve/api_error.h"
#include "serve/worker_pool.h"

namespace tokenmill {

namespace {

using Clock = ClientStream::Clock;

std::chrono::microseconds timeout(time_t sec, time_t usec) {
  return std::chrono::seconds(sec) + std::chrono::microseconds(usec);
}

// Before closing a connection whose request was not read to its end: stops sending, then
// reads and drops what the client still sends for a short while, so that the kernel does not
// reset the connection (losing the answer) while the client is still writing its body.
void drain_before_close(socket_t sock) {
  constexpr auto kLinger = std::chrono::milliseconds(500);
  constexpr size_t kMaxDrained = 4u << 20;
  ::shutdown(sock, SHUT_WR);
  const auto until = Clock::now() + kLinger;
  char scratch[16384];
  for (size_t drained = 0; drained < kMaxDrained;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now());
    pollfd p{sock, POLLIN, 0};
    if (left.count() <= 0 || ::poll(&p, 1, static_cast<int>(left.count())) <= 0) break;
    const ssize_t n = ::recv(sock, scratch, sizeof scratch, 0);
    if (n <= 0) break;
    drained += static_cast<size_t>(n);
  }
}

}  // namespace

GuardedServer::GuardedServer(size_t workers, std::chrono::milliseconds receive_timeout, RequestLimits limits,
                             std::function<void(int status)> on_refusal)
    : workers_(workers),
      receive_timeout_(receive_timeout),
      limits_(limits),
      on_refusal_(std::move(on_refusal)) {
  new_task_queue = [this] {
    return new WorkerPool(workers_, [this](size_t waiting) { cut_longest_waiting(waiting); });
  };
  set_idle_interval(0, 100000);  // the listener's WorkerPool::on_idle() every 100 ms: pressure is re-checked
}

void GuardedServer::cut_longest_waiting(size_t count) {
  const std::lock_guard lock(mutex_);
  const auto now = Clock::now();
  std::vector<std::pair<socket_t, Connection*>> candidates;
  for (auto& [sock, c] : connections_) {
    if (c.cut) {
      if (count > 0) --count;  // its worker is about to be free
    } else if (!c.stream->responding() && now - c.waiting_since >= kMinWaitBeforeCut) {
      candidates.emplace_back(sock, &c);
    }
  }
  count = std::min(count, candidates.size());
  std::partial_sort(
      candidates.begin(), candidates.begin() + static_cast<std::ptrdiff_t>(count), candidates.end(),
      [](const auto& a, const auto& b) { return a.second->waiting_since < b.second->waiting_since; });
  for (size_t i = 0; i < count; ++i) {
    auto [sock, c] = candidates[i];
    c->cut = true;
    // Its worker's poll or recv returns at once; the socket is closed only after it left the
    // map, so this cannot hit a reused descriptor.
    ::shutdown(sock, SHUT_RDWR);
    const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(now - c->waiting_since);
    spdlog::warn("all {} HTTP workers busy: cut the connection from {}, which sent no whole request in {} ms",
                 workers_, c->stream->peer(), waited.count());
  }
}

void GuardedServer::refuse(ClientStream& stream, const GateRefusal& refusal) {
  const std::string body = error_body(api_error(refusal.status, refusal.message)).dump();
  const std::string response = fmt::format(
      "HTTP/1.1 {} {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{}",
      refusal.status, reason_phrase(refusal.status), body.size(), body);
  stream.write(response.data(), response.size());
  spdlog::warn("refused a request from {}: {} {}", stream.peer(), refusal.status, refusal.message);
  on_refusal_(refusal.status);
  drain_before_close(stream.socket());
}

bool GuardedServer::process_and_close_socket(socket_t sock) {
  ClientStream stream(sock, timeout(read_timeout_sec_, read_timeout_usec_),
                      timeout(write_timeout_sec_, write_timeout_usec_));
  const auto stopping = [this] { return svr_sock_ == INVALID_SOCKET; };
  bool ok = false;
  for (size_t left = keep_alive_max_count_; left > 0; --left) {
    {
      const std::lock_guard lock(mutex_);
      Connection& c = connections_.try_emplace(sock, Connection{&stream, {}}).first->second;
      if (c.cut) break;
      c.waiting_since = Clock::now();
    }
    if (!stream.wait_for_request(std::chrono::seconds(keep_alive_timeout_sec_), stopping)) break;
    stream.start_request(Clock::now() + receive_timeout_);
    const Admission admission = admit_request(stream, limits_);
    bool closed = !admission.request;
    if (admission.refusal) {
      refuse(stream, *admission.refusal);
    } else if (admission.request) {
      stream.unread(*admission.request);
      ok = process_request(stream, left == 1, closed, nullptr);
    }
    if (stream.missed_deadline()) {
      spdlog::warn("cut the connection from {}: its request did not arrive within the {} ms receive timeout",
                   stream.peer(), receive_timeout_.count());
    }
    if (!ok || closed || stream.read_failed() || stopping()) break;
  }
  {
    const std::lock_guard lock(mutex_);
    connections_.erase(sock);
  }
  ::shutdown(sock, SHUT_RDWR);
  ::close(sock);
  return ok;
}

}  // namespace tokenmill
