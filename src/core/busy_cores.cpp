#include "core/busy_cores.h"

#include <sched.h>
#include <unistd.h>

#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <ctime>
#include <fstream>
#include <iterator>
#include <string>

namespace tokenmill {

namespace {

// /proc/stat's per-CPU fields in order; busy ones flagged. At least the first seven must be
// there (Linux has had all eight since 2.6.11).
constexpr bool kFieldIsBusy[] = {true, true, true, false, false, true, true, true};  // user .. steal
constexpr size_t kRequiredFields = 7;

// The unsigned integer at the start of `text` after spaces, advancing `text` past it.
std::optional<uint64_t> next_number(std::string_view& text) {
  while (!text.empty() && text.front() == ' ') text.remove_prefix(1);
  uint64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc()) return std::nullopt;
  text.remove_prefix(static_cast<size_t>(end - text.data()));
  return value;
}

// The busy ticks of one "cpuN ..." line's fields (after the name); nullopt when malformed.
std::optional<double> busy_ticks(std::string_view fields) {
  double busy = 0;
  size_t count = 0;
  for (; count < std::size(kFieldIsBusy); ++count) {
    const std::optional<uint64_t> value = next_number(fields);
    if (!value) break;
    if (kFieldIsBusy[count]) busy += static_cast<double>(*value);
  }
  if (count < kRequiredFields) return std::nullopt;
  return busy;
}

double seconds_of(const timespec& t) {
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

}  // namespace

std::optional<double> busy_seconds(std::string_view proc_stat, const std::vector<bool>& cpus,
                                   double ticks_per_second) {
  if (!(ticks_per_second > 0)) return std::nullopt;
  double ticks = 0;
  bool found = false;
  while (!proc_stat.empty()) {
    const size_t eol = proc_stat.find('\n');
    std::string_view line = proc_stat.substr(0, eol);
    proc_stat.remove_prefix(eol == std::string_view::npos ? proc_stat.size() : eol + 1);
    // "cpuN": the aggregate line "cpu " and every other line are skipped.
    if (line.size() < 4 || line.substr(0, 3) != "cpu" || line[3] < '0' || line[3] > '9') continue;
    line.remove_prefix(3);
    size_t index = 0;
    const auto [end, error] = std::from_chars(line.data(), line.data() + line.size(), index);
    if (error != std::errc()) return std::nullopt;
    line.remove_prefix(static_cast<size_t>(end - line.data()));
    if (index >= cpus.size() || !cpus[index]) continue;
    const std::optional<double> busy = busy_ticks(line);
    if (!busy) return std::nullopt;
    ticks += *busy;
    found = true;
  }
  if (!found) return std::nullopt;
  return ticks / ticks_per_second;
}

double other_busy_cores(const CpuTimes& before, const CpuTimes& after) {
  const double wall = after.wall - before.wall;
  if (!(wall > 0)) return 0;
  const double others = ((after.busy - before.busy) - (after.own - before.own)) / wall;
  return others > 0 ? others : 0;
}

int team_for_load(int team, int cpus, double others) {
  const double free = static_cast<double>(cpus) - others;
  const int rounded = free < 1 ? 1 : static_cast<int>(std::lround(free));
  return rounded < team ? rounded : team;
}

int affinity_cpu_count() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
  return CPU_COUNT(&set);
}

std::optional<CpuTimes> read_cpu_times() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return std::nullopt;
  std::vector<bool> cpus(CPU_SETSIZE);
  for (size_t i = 0; i < cpus.size(); ++i) cpus[i] = CPU_ISSET(i, &set);

  std::ifstream file("/proc/stat");
  if (!file) return std::nullopt;
  const std::string text{std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>()};
  const std::optional<double> busy = busy_seconds(text, cpus, static_cast<double>(sysconf(_SC_CLK_TCK)));
  timespec own{};
  if (!busy || clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &own) != 0) return std::nullopt;
  const double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  return CpuTimes{*busy, seconds_of(own), wall};
}

}  // namespace tokenmill
