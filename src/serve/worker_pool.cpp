#include "serve/worker_pool.h"

#include <utility>

namespace tokenmill {

WorkerPool::WorkerPool(size_t workers, std::function<void(size_t)> on_saturated)
    : on_saturated_(std::move(on_saturated)) {
  threads_.reserve(workers);
  for (size_t i = 0; i < workers; ++i) threads_.emplace_back([this] { work(); });
}

WorkerPool::~WorkerPool() { shutdown(); }

void WorkerPool::enqueue(std::function<void()> task) {
  {
    const std::lock_guard lock(mutex_);
    tasks_.push_back(std::move(task));
    if (!sleepers_.empty()) {
      Sleeper* last = sleepers_.back();
      sleepers_.pop_back();
      last->woken = true;
      last->wake.notify_one();
    }
  }
  report_saturation();
}

void WorkerPool::on_idle() { report_saturation(); }

void WorkerPool::report_saturation() {
  size_t waiting = 0;
  {
    const std::lock_guard lock(mutex_);
    waiting = tasks_.size() > idle_ ? tasks_.size() - idle_ : 0;
  }
  if (waiting > 0) on_saturated_(waiting);
}

void WorkerPool::shutdown() {
  {
    const std::lock_guard lock(mutex_);
    stopping_ = true;
    for (Sleeper* s : sleepers_) s->wake.notify_one();
  }
  for (std::thread& t : threads_)
    if (t.joinable()) t.join();
}

void WorkerPool::work() {
  Sleeper me;
  std::unique_lock lock(mutex_);
  ++idle_;
  for (;;) {
    while (tasks_.empty() && !stopping_) {
      me.woken = false;
      sleepers_.push_back(&me);
      me.wake.wait(lock, [&] { return me.woken || stopping_; });
      if (!me.woken) std::erase(sleepers_, &me);
    }
    if (tasks_.empty()) return;  // stopping, and nothing left to run
    std::function<void()> task = std::move(tasks_.front());
    tasks_.pop_front();
    --idle_;
    lock.unlock();
    task();
    lock.lock();
    ++idle_;
  }
}

}  // namespace tokenmill
