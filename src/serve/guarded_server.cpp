#include "serve/guarded_server.h"

#include <spdlog/spdlog.h>

#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <utility>
#include <vector>

#include "serve/worker_pool.h"

namespace tokenmill {

namespace {

using Clock = ClientStream::Clock;

std::chrono::microseconds timeout(time_t sec, time_t usec) {
  return std::chrono::seconds(sec) + std::chrono::microseconds(usec);
}

}  // namespace

GuardedServer::GuardedServer(size_t workers, std::chrono::milliseconds receive_timeout)
    : workers_(workers), receive_timeout_(receive_timeout) {
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
    bool closed = false;
    ok = process_request(stream, left == 1, closed, nullptr);
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
