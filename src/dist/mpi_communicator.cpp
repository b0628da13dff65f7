#include "dist/mpi_communicator.h"

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <string>
#include <thread>

#include <fmt/format.h>

#include "core/error.h"

namespace tokenmill {

namespace {

using Clock = std::chrono::steady_clock;

constexpr size_t kMaxPiece = size_t{1} << 30;  // elements per MPI call (counts are int)

std::string library_version() {
  char text[MPI_MAX_LIBRARY_VERSION_STRING];
  int length = 0;
  MPI_Get_library_version(text, &length);
  std::string version(text, static_cast<size_t>(std::max(length, 0)));
  return version.substr(0, version.find_first_of(",\n"));  // "Open MPI v4.1.4"
}

int mpi_count(size_t n, std::string_view collective) {
  if (n > kMaxPiece) fail("{}: {} elements per rank; at most {} in one call", collective, n, kMaxPiece);
  return static_cast<int>(n);
}

// Ends the process when a collective outlives the timeout: armed before each blocking MPI
// call, disarmed after it, on a thread of its own (the waiting thread is inside MPI). Exiting
// non-zero makes mpirun (or srun) stop every other rank of the job.
class Watchdog {
 public:
  Watchdog(int rank, double timeout_seconds)
      : rank_(rank), timeout_(timeout_seconds), thread_([this] { watch(); }) {}
  ~Watchdog() {
    {
      const std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    changed_.notify_one();
    thread_.join();
  }
  void arm(std::string_view collective, std::string_view what) {
    bool wake = false;
    {
      const std::lock_guard lock(mutex_);
      armed_ = true;
      deadline_ =
          Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_));
      collective_ = collective;
      what_ = what;
      wake = idle_;  // else the watch thread waits for an earlier deadline and finds this one then
    }
    if (wake) changed_.notify_one();
  }
  void disarm() {
    const std::lock_guard lock(mutex_);
    armed_ = false;
  }

 private:
  void watch() {
    std::unique_lock lock(mutex_);
    while (!stopping_) {
      if (!armed_) {
        idle_ = true;
        changed_.wait(lock);
        idle_ = false;
        continue;
      }
      if (changed_.wait_until(lock, deadline_) == std::cv_status::timeout && armed_ &&
          Clock::now() >= deadline_) {
        fmt::print(
            stderr,
            "error: rank {}: the {} of {} did not complete within {} s (--collective-timeout): another "
            "rank died, stalled or left the job; stopping every rank\n",
            rank_, collective_, what_, timeout_);
        std::fflush(stderr);
        std::_Exit(3);
      }
    }
  }

  int rank_;
  double timeout_;
  std::mutex mutex_;
  std::condition_variable changed_;
  bool armed_ = false, stopping_ = false;
  bool idle_ = false;  // the watch thread waits unarmed: arm() must wake it
  Clock::time_point deadline_;
  std::string collective_, what_;
  std::thread thread_;  // last: starts once the rest is initialised
};

class MpiCommunicator final : public Communicator {
 public:
  MpiCommunicator(const LaunchEnv& env, const CommunicatorOptions& options)
      : Communicator(env), launcher_(env.launcher), timeout_(options.timeout_seconds) {
    if (!(options.timeout_seconds > 0.0))
      fail("--collective-timeout must be a positive number of seconds, got {}", options.timeout_seconds);
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (initialized != 0) fail("MPI is already initialised in this process: one communicator per process");
    int provided = 0;
    MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
    int rank = 0, size = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (rank != env.rank || size != env.world_size) {
      MPI_Finalize();
      fail("MPI says rank {} of {}, but the {} environment says rank {} of {}: one launcher per job", rank,
           size, env.launcher, env.rank, env.world_size);
    }
    version_ = library_version();
    watchdog_ = std::make_unique<Watchdog>(rank, timeout_);
  }

  ~MpiCommunicator() override {
    // A rank unwinding from a failure must not wait in MPI_Finalize for ranks that wait for it.
    if (std::uncaught_exceptions() > 0) {
      fmt::print(stderr, "rank {}: failed; stopping every rank of the job\n", rank());
      abort(1);
    }
    watchdog_.reset();
    MPI_Finalize();
  }

  std::string describe() const override {
    return fmt::format("MPI ({}), launched by {}", version_, launcher_);
  }

  void all_reduce_sum(std::span<float> data, std::string_view what) override {
    all_reduce(data.data(), data.size(), MPI_FLOAT, what);
  }
  void all_reduce_sum(std::span<double> data, std::string_view what) override {
    all_reduce(data.data(), data.size(), MPI_DOUBLE, what);
  }

  void all_gather(std::span<const float> mine, std::span<float> all, std::string_view what) override {
    check_blocks(mine.size(), all.size(), "all-gather");
    const Watched watched(*watchdog_, "all-gather", what);
    MPI_Allgather(mine.data(), mpi_count(mine.size(), "all-gather"), MPI_FLOAT, all.data(),
                  mpi_count(mine.size(), "all-gather"), MPI_FLOAT, MPI_COMM_WORLD);
  }

  void reduce_scatter_sum(std::span<const float> all, std::span<float> mine, std::string_view what) override {
    check_blocks(mine.size(), all.size(), "reduce-scatter");
    const Watched watched(*watchdog_, "reduce-scatter", what);
    MPI_Reduce_scatter_block(all.data(), mine.data(), mpi_count(mine.size(), "reduce-scatter"), MPI_FLOAT,
                             MPI_SUM, MPI_COMM_WORLD);
  }

  void broadcast(std::span<std::byte> data, int root, std::string_view what) override {
    if (root < 0 || root >= world_size()) fail("broadcast from rank {} in a world of {}", root, world_size());
    for (size_t at = 0; at < data.size(); at += kMaxPiece) {
      const size_t n = std::min(kMaxPiece, data.size() - at);
      const Watched watched(*watchdog_, "broadcast", what);
      MPI_Bcast(data.data() + at, static_cast<int>(n), MPI_BYTE, root, MPI_COMM_WORLD);
    }
  }

  void barrier(std::string_view what) override {
    const Watched watched(*watchdog_, "barrier", what);
    MPI_Barrier(MPI_COMM_WORLD);
  }

  [[noreturn]] void abort(int status) override {
    MPI_Abort(MPI_COMM_WORLD, status);
    std::_Exit(status);  // MPI_Abort does not return; this is for the compiler
  }

 private:
  void all_reduce(void* data, size_t n, MPI_Datatype type, std::string_view what) {
    int element = 0;
    MPI_Type_size(type, &element);
    for (size_t at = 0; at < n; at += kMaxPiece) {
      const Watched watched(*watchdog_, "all-reduce", what);
      MPI_Allreduce(MPI_IN_PLACE, static_cast<char*>(data) + at * static_cast<size_t>(element),
                    static_cast<int>(std::min(kMaxPiece, n - at)), type, MPI_SUM, MPI_COMM_WORLD);
    }
  }

  // The watchdog armed for the lifetime of one blocking collective.
  struct Watched {
    Watched(Watchdog& dog, std::string_view collective, std::string_view what) : watchdog(dog) {
      watchdog.arm(collective, what);
    }
    ~Watched() { watchdog.disarm(); }
    Watchdog& watchdog;
  };

  std::string launcher_, version_;
  double timeout_;
  std::unique_ptr<Watchdog> watchdog_;
};

}  // namespace

std::unique_ptr<Communicator> open_mpi_communicator(const LaunchEnv& env,
                                                    const CommunicatorOptions& options) {
  return std::make_unique<MpiCommunicator>(env, options);
}

}  // namespace tokenmill
