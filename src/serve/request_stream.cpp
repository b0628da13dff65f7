#include "serve/request_stream.h"

#include <utility>

namespace tokenmill {

void RequestStream::push(StreamEvent event) {
  {
    const std::lock_guard lock(mutex_);
    events_.push_back(std::move(event));
  }
  ready_.notify_one();
}

bool RequestStream::next(StreamEvent& event, std::chrono::steady_clock::time_point deadline) {
  std::unique_lock lock(mutex_);
  if (!ready_.wait_until(lock, deadline, [&] { return !events_.empty(); })) return false;
  event = std::move(events_.front());
  events_.pop_front();
  return true;
}

}  // namespace tokenmill
