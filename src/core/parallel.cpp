#include "core/parallel.h"

#include <omp.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <optional>

#include "core/busy_cores.h"

namespace tokenmill {

namespace {
// The count set_thread_count chose, for every thread of the process: OpenMP's own setting
// (omp_set_num_threads) belongs to the calling thread only, and the server's engine runs
// on a thread of its own. 0: OpenMP's default.
std::atomic<int> g_threads{0};
const int g_default_threads = omp_get_max_threads();  // before anyone changes it

// Following the load: the team for the free cores (0: not measured yet), when the next
// measurement is due (steady clock, ns), and the reading it compares with.
constexpr int64_t kLoadWindowNs = 500'000'000;
std::atomic<bool> g_follow_load{false};
std::atomic<int> g_free_team{0};
std::atomic<int64_t> g_next_reading_ns{0};
std::mutex g_reading_mutex;
std::optional<CpuTimes> g_last_reading;  // under g_reading_mutex

int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Takes a reading when one is due (one caller at a time; the others go on with the last team).
void measure_load_if_due(int team) {
  const int64_t now = steady_ns();
  int64_t due = g_next_reading_ns.load(std::memory_order_relaxed);
  if (now < due || !g_next_reading_ns.compare_exchange_strong(due, now + kLoadWindowNs)) return;
  const std::unique_lock lock(g_reading_mutex, std::try_to_lock);
  if (!lock.owns_lock()) return;
  const std::optional<CpuTimes> reading = read_cpu_times();
  if (reading && g_last_reading)
    g_free_team.store(team_for_load(team, affinity_cpu_count(), other_busy_cores(*g_last_reading, *reading)),
                      std::memory_order_relaxed);
  g_last_reading = reading;
}
}  // namespace

int max_thread_count() {
  const int n = g_threads.load(std::memory_order_relaxed);
  return n > 0 ? n : omp_get_max_threads();
}

int thread_count() {
  const int team = max_thread_count();
  if (g_threads.load(std::memory_order_relaxed) > 0 || !g_follow_load.load(std::memory_order_relaxed))
    return team;
  measure_load_if_due(team);
  const int free = g_free_team.load(std::memory_order_relaxed);
  return free > 0 && free < team ? free : team;
}

void set_thread_count(int n) {
  g_threads.store(n > 0 ? n : 0, std::memory_order_relaxed);
  omp_set_num_threads(n > 0 ? n : g_default_threads);
}

void set_thread_count_follows_load(bool on) {
  const std::lock_guard lock(g_reading_mutex);
  g_last_reading = on ? read_cpu_times() : std::nullopt;  // the first window starts now
  g_next_reading_ns.store(steady_ns() + kLoadWindowNs, std::memory_order_relaxed);
  g_free_team.store(0, std::memory_order_relaxed);
  g_follow_load.store(on, std::memory_order_relaxed);
}

}  // namespace tokenmill
