// The busy-core measure (busy_cores.h) and the thread count that follows it (parallel.h):
// /proc/stat parsing (exact values, refused garbage, every truncation and random bytes
// without a crash), the window arithmetic, the team policy, and a real spinning process
// seen from this one.
#include "core/busy_cores.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "core/parallel.h"

namespace tokenmill {
namespace {

// A /proc/stat as Linux 6.x writes it, two CPUs.
constexpr const char* kProcStat =
    "cpu  3000 20 1000 90000 500 0 100 40 0 0\n"
    "cpu0 1000 10 500 45000 250 0 60 30 0 0\n"
    "cpu1 2000 10 500 45000 250 0 40 10 0 0\n"
    "intr 1234567 0 9 0 0\n"
    "ctxt 987654\n"
    "btime 1700000000\n"
    "processes 4242\n"
    "procs_running 3\n"
    "procs_blocked 0\n"
    "softirq 555 0 1 2 3 4 5 6 7 8 9\n";

TEST(BusySeconds, SumsTheBusyFieldsOfTheChosenCpusOnly) {
  // cpu0: user + nice + system + irq + softirq + steal = 1000 + 10 + 500 + 0 + 60 + 30.
  EXPECT_DOUBLE_EQ(*busy_seconds(kProcStat, {true, false}, 100.0), 16.0);
  EXPECT_DOUBLE_EQ(*busy_seconds(kProcStat, {false, true}, 100.0), 25.6);
  EXPECT_DOUBLE_EQ(*busy_seconds(kProcStat, {true, true}, 100.0), 41.6);
  // Affinity wider than the machine: the CPUs that exist count.
  EXPECT_DOUBLE_EQ(*busy_seconds(kProcStat, std::vector<bool>(1024, true), 100.0), 41.6);
  // Seven fields (no steal column) are enough.
  EXPECT_DOUBLE_EQ(*busy_seconds("cpu0 100 0 100 5000 0 0 0\n", {true}, 100.0), 2.0);
}

TEST(BusySeconds, RefusesTextWithoutOrWithMalformedCpuLines) {
  EXPECT_FALSE(busy_seconds("", {true}, 100.0));
  EXPECT_FALSE(busy_seconds("intr 1 2 3\nctxt 4\n", {true}, 100.0));
  EXPECT_FALSE(busy_seconds(kProcStat, {false, false}, 100.0));       // no chosen CPU listed
  EXPECT_FALSE(busy_seconds("cpu0 1 2 3\n", {true}, 100.0));          // too few fields
  EXPECT_FALSE(busy_seconds("cpu0 1 2 x 4 5 6 7\n", {true}, 100.0));  // not a number
  EXPECT_FALSE(busy_seconds("cpu0 1 2 3 4 5 6 -7\n", {true}, 100.0));
  EXPECT_FALSE(busy_seconds("cpu0 99999999999999999999999 0 0 0 0 0 0 0\n", {true}, 100.0));  // > 2^64
  EXPECT_FALSE(busy_seconds("cpu99999999999999999999999 1 2 3 4 5 6 7\n", {true}, 100.0));
  EXPECT_FALSE(busy_seconds(kProcStat, {true, true}, 0.0));
  // A malformed line of a CPU that is not chosen does not matter.
  EXPECT_DOUBLE_EQ(*busy_seconds("cpu0 100 0 100 5000 0 0 0 0\ncpu1 garbage\n", {true, false}, 100.0), 2.0);
}

TEST(BusySeconds, SurvivesEveryTruncationAndRandomBytes) {
  const std::string full = kProcStat;
  for (size_t n = 0; n <= full.size(); ++n) {
    const std::optional<double> got = busy_seconds(std::string_view(full).substr(0, n), {true, true}, 100.0);
    if (got) {
      EXPECT_GE(*got, 0.0);
    }
  }
  std::mt19937 rng(7);
  const std::string alphabet = "cpu0123456789 \n\t-+x";
  std::uniform_int_distribution<size_t> pick(0, alphabet.size() - 1), length(0, 200);
  for (int i = 0; i < 5000; ++i) {
    std::string text(length(rng), ' ');
    for (char& c : text) c = alphabet[pick(rng)];
    const std::optional<double> got = busy_seconds(text, std::vector<bool>(16, true), 100.0);
    if (got) {
      EXPECT_GE(*got, 0.0);
    }
  }
}

TEST(OtherBusyCores, IsTheCpusBusyTimeLessOursPerWallSecond) {
  EXPECT_DOUBLE_EQ(other_busy_cores({10, 3, 100}, {12, 4, 101}), 1.0);
  EXPECT_DOUBLE_EQ(other_busy_cores({10, 3, 100}, {11.5, 4, 102}), 0.25);
  EXPECT_DOUBLE_EQ(other_busy_cores({10, 3, 100}, {10.9, 4, 101}), 0.0);  // tick granularity: not < 0
  EXPECT_DOUBLE_EQ(other_busy_cores({10, 3, 100}, {20, 3, 100}), 0.0);    // an empty window
}

TEST(TeamForLoad, GivesTheFreeCoresRoundedWithinOneAndTheTeam) {
  EXPECT_EQ(team_for_load(2, 2, 0.0), 2);
  EXPECT_EQ(team_for_load(2, 2, 0.3), 2);
  EXPECT_EQ(team_for_load(2, 2, 0.67), 1);  // a busy process beside two spinning threads
  EXPECT_EQ(team_for_load(2, 2, 1.0), 1);
  EXPECT_EQ(team_for_load(2, 2, 7.5), 1);
  EXPECT_EQ(team_for_load(8, 8, 3.2), 5);
  EXPECT_EQ(team_for_load(4, 8, 1.0), 4);  // the team asked for is the ceiling
}

// A child process that spins until killed.
class SpinningProcess {
 public:
  SpinningProcess() : pid_(fork()) {
    if (pid_ == 0) {
      volatile uint64_t x = 0;
      for (;;) x = x + 1;
    }
  }
  ~SpinningProcess() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  SpinningProcess(const SpinningProcess&) = delete;
  SpinningProcess& operator=(const SpinningProcess&) = delete;
  bool started() const { return pid_ > 0; }

 private:
  pid_t pid_;
};

TEST(ReadCpuTimes, SeesAnotherProcessSpin) {
  const SpinningProcess spinner;
  ASSERT_TRUE(spinner.started());
  const std::optional<CpuTimes> before = read_cpu_times();
  ASSERT_TRUE(before);
  std::this_thread::sleep_for(std::chrono::milliseconds(800));
  const std::optional<CpuTimes> after = read_cpu_times();
  ASSERT_TRUE(after);
  // The spinner has at least a fair share of a core even on a busy two-core machine.
  EXPECT_GT(other_busy_cores(*before, *after), 0.3);
  EXPECT_GE(affinity_cpu_count(), 1);
}

TEST(ThreadCount, FollowsTheLoadOnlyWhenNotSetExplicitly) {
  const int cpus = affinity_cpu_count();
  if (cpus < 2 || max_thread_count() != cpus) GTEST_SKIP() << "needs a default team of every CPU, 2 or more";
  const SpinningProcess spinner;
  ASSERT_TRUE(spinner.started());
  set_thread_count(2);
  set_thread_count_follows_load(true);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(thread_count(), 2);  // a count set explicitly stays
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
  }
  set_thread_count(0);
  set_thread_count_follows_load(true);  // the first reading
  std::this_thread::sleep_for(std::chrono::milliseconds(700));
  EXPECT_LT(thread_count(), max_thread_count());  // the spinner's core is taken
  EXPECT_GE(thread_count(), 1);
  set_thread_count_follows_load(false);
  EXPECT_EQ(thread_count(), max_thread_count());
}

}  // namespace
}  // namespace tokenmill
