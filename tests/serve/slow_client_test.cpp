// Slow clients (slowloris) against the HTTP front end (HttpServerTest): connections that drip
// a request head a byte at a time, each byte well within the read timeout, so that only the
// server's own bounds (GuardedServer) can stop them. Each test isolates one bound and fails
// without it: with cpp-httplib's plain server the drippers keep their threads for the 20 s
// their heads take, and the other client times out.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "http_test_server.h"

namespace tokenmill {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// `count` connections that each send a 200-byte request head one byte per 100 ms (20 s in
// all), driven by one thread, which notes each connection the server closes.
class SlowClients {
 public:
  SlowClients(int port, size_t count) : closed_(count) {
    for (size_t i = 0; i < count; ++i) {
      const int s = ::socket(AF_INET, SOCK_STREAM, 0);
      sockaddr_in addr{};
      addr.sin_family = AF_INET;
      addr.sin_port = htons(static_cast<uint16_t>(port));
      addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      EXPECT_EQ(::connect(s, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
      sockets_.push_back(s);
    }
    thread_ = std::thread([this] { drip(); });
  }
  ~SlowClients() {
    stop_ = true;
    thread_.join();
    for (int s : sockets_) ::close(s);
  }
  size_t closed() const {
    size_t n = 0;
    for (const auto& c : closed_) n += c.load();
    return n;
  }
  // Waits until at least `n` connections are closed, up to `timeout`; returns how many are.
  size_t wait_closed(size_t n, Clock::duration timeout) const {
    for (const auto until = Clock::now() + timeout; closed() < n && Clock::now() < until;)
      std::this_thread::sleep_for(20ms);
    return closed();
  }

 private:
  void drip() {
    const std::string head =
        "GET /health HTTP/1.1\r\nHost: x\r\nX-Pad: " + std::string(160, 'a') + "\r\n\r\n";
    for (size_t i = 0; i < head.size() && !stop_; ++i) {
      for (size_t k = 0; k < sockets_.size(); ++k) {
        if (closed_[k]) continue;
        // Closed by the server: an end of file (or a reset) to read, or a failed send.
        pollfd p{sockets_[k], POLLIN, 0};
        char byte = 0;
        if ((::poll(&p, 1, 0) > 0 && ::recv(sockets_[k], &byte, 1, MSG_DONTWAIT) <= 0) ||
            ::send(sockets_[k], &head[i], 1, MSG_NOSIGNAL | MSG_DONTWAIT) != 1)
          closed_[k] = true;
      }
      std::this_thread::sleep_for(100ms);
    }
  }

  std::vector<int> sockets_;
  std::vector<std::atomic<bool>> closed_;
  std::atomic<bool> stop_ = false;
  std::thread thread_;
};

class SlowClientTest : public HttpServerTest {
 protected:
  // Starts the server with `threads` HTTP threads and `receive_timeout`, then `count` slow clients.
  std::unique_ptr<SlowClients> start_slow(int threads, std::chrono::milliseconds receive_timeout,
                                          size_t count) {
    HttpServerOptions http;
    http.threads = threads;
    http.receive_timeout = receive_timeout;
    start({}, http);
    return std::make_unique<SlowClients>(port_, count);
  }
};

// The pressure bound: twice as many drippers as HTTP threads, and a receive timeout too long
// to help. While connections wait for a thread, the longest-waiting drippers (after
// GuardedServer::kMinWaitBeforeCut) are cut, so a normal request is answered within about a
// second; drippers beyond the threads were cut.
TEST_F(SlowClientTest, SlowClientsOnEveryThreadDoNotLockOthersOut) {
  const auto slow = start_slow(4, 60s, 8);
  std::this_thread::sleep_for(1s);  // all connected and dripping
  auto c = client(false);
  c.set_read_timeout(8, 0);
  const auto start = Clock::now();
  const auto health = c.Get("/health");
  ASSERT_TRUE(health) << "GET /health was not answered while 8 slow clients held the 4 threads: "
                      << httplib::to_string(health.error());
  EXPECT_EQ(health->status, 200);
  EXPECT_LT(Clock::now() - start, 6s);
  // 4 cut to make room for the last 4 drippers, 1 for GET /health.
  EXPECT_GE(slow->wait_closed(5, 5s), 5u);
}

// The receive deadline: plenty of threads, a 1 s receive timeout: every dripper is cut about
// 1 s after its first byte, long before its head is complete, and others are served.
TEST_F(SlowClientTest, SlowRequestsAreCutAtTheReceiveTimeout) {
  const auto slow = start_slow(16, 1s, 6);
  EXPECT_EQ(slow->wait_closed(6, 12s), 6u);  // the heads would take 20 s
  EXPECT_EQ(client(false).Get("/health")->status, 200);
}

}  // namespace
}  // namespace tokenmill
