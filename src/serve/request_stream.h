// RequestStream: the channel between the engine thread and the one client waiting on a
// request. The engine pushes events; the client pops them (blocking with a deadline) and
// may cancel, which the engine notices at its next step and frees the request's KV blocks.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>

#include "serve/engine_request.h"

namespace tokenmill {

class RequestStream {
 public:
  // Engine side.
  void push(StreamEvent event);

  // Client side: waits until an event is there (true, moved into `event`) or `deadline`
  // passes (false).
  bool next(StreamEvent& event, std::chrono::steady_clock::time_point deadline);
  void cancel() { cancelled_.store(true, std::memory_order_relaxed); }
  bool cancelled() const { return cancelled_.load(std::memory_order_relaxed); }

 private:
  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<StreamEvent> events_;
  std::atomic<bool> cancelled_{false};
};

}  // namespace tokenmill
