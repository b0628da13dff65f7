// GuardedServer: cpp-httplib's server defended against slow clients (slowloris). cpp-httplib
// 0.11 serves each connection on one of a fixed set of worker threads and only times out each
// read, so clients that open connections and then send nothing, or drip their requests a byte
// at a time, could hold every worker and lock everyone else out. Two bounds stop that:
//  - a receive deadline: a request (head and body) must arrive within `receive_timeout` of its
//    first byte, else the connection is closed (see ClientStream);
//  - pressure: while accepted connections wait because every worker is busy, the connections
//    that have waited longest (at least kMinWaitBeforeCut) for or on a request they have not
//    finished sending (idle keep-alive connections, slow heads or bodies) are cut, one per
//    waiting connection, so that those get workers. Connections whose request was received (a
//    generation streaming its answer) are never cut.
// Every cut is logged with the client's address and the reason. Each request passes the
// request gate (admit_request: head and body limits, framing) before cpp-httplib parses it; a
// refused request is answered with its status and an OpenAI-shaped error, and its connection
// closed. Keep-alive and the per-read and write timeouts are cpp-httplib's settings
// (set_keep_alive_*, set_*_timeout).
#pragma once

#include <httplib.h>

#include <chrono>
#include <functional>
#include <map>
#include <mutex>
#include <string_view>

#include "serve/client_stream.h"
#include "serve/request_gate.h"

// GuardedServer re-implements cpp-httplib 0.11's per-connection loop through its protected
// members (guarded_server.cpp): another release may change them silently, so the build
// refuses any other version until the loop is checked against it.
static_assert(std::string_view(CPPHTTPLIB_VERSION).starts_with("0.11."),
              "GuardedServer is written against cpp-httplib 0.11's Server internals: check "
              "guarded_server.cpp against this version's process_and_close_socket before allowing it");

namespace tokenmill {

class GuardedServer final : public httplib::Server {
 public:
  // A client that has just connected has this long to start sending before pressure cuts it.
  static constexpr std::chrono::milliseconds kMinWaitBeforeCut{500};

  // `workers`: connections served at once (> 0). `on_refusal` is called with the status of
  // each request the gate refuses.
  GuardedServer(size_t workers, std::chrono::milliseconds receive_timeout, RequestLimits limits,
                std::function<void(int status)> on_refusal);

 private:
  struct Connection {
    const ClientStream* stream;
    ClientStream::Clock::time_point waiting_since;  // for its next request
    bool cut = false;
  };

  bool process_and_close_socket(socket_t sock) override;
  // Under pressure: cuts up to `count` connections, those that have waited longest (at least
  // kMinWaitBeforeCut) without a received request, minus those already cut whose workers are
  // not yet free.
  void cut_longest_waiting(size_t count);
  // Answers a request the gate refused; the caller closes the connection.
  void refuse(ClientStream& stream, const GateRefusal& refusal);

  size_t workers_;
  std::chrono::milliseconds receive_timeout_;
  RequestLimits limits_;
  std::function<void(int)> on_refusal_;
  std::mutex mutex_;
  std::map<socket_t, Connection> connections_;  // being served; a socket leaves before it closes
};

}  // namespace tokenmill
