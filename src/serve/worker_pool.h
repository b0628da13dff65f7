// WorkerPool: cpp-httplib's task queue (one task per accepted connection) as a fixed set of
// worker threads that reports saturation: while tasks wait with no idle worker, when one is
// queued and whenever the listener is idle (Server::set_idle_interval), `on_saturated(waiting)`
// runs on the listener thread with the number of tasks that have no worker, so that the server
// can free workers for them by cutting connections that hold one without doing useful work.
// A task goes to the worker that went idle last, so that the threads beyond the peak number
// of connections stay asleep with their stacks untouched, however many threads there are.
#pragma once

#include <httplib.h>

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace tokenmill {

class WorkerPool final : public httplib::TaskQueue {
 public:
  WorkerPool(size_t workers, std::function<void(size_t)> on_saturated);
  ~WorkerPool() override;

  void enqueue(std::function<void()> task) override;
  void on_idle() override;
  // Runs the tasks still queued, then joins the workers.
  void shutdown() override;

 private:
  struct Sleeper {  // an idle worker
    std::condition_variable wake;
    bool woken = false;
  };

  void work();
  void report_saturation();

  std::function<void(size_t)> on_saturated_;
  std::mutex mutex_;
  std::deque<std::function<void()>> tasks_;
  std::vector<Sleeper*> sleepers_;  // the last one went idle last
  size_t idle_ = 0;                 // workers not running a task (sleeping or just woken)
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace tokenmill
