// How many of this process's CPUs other work keeps busy: the kernel's per-CPU time counters
// (/proc/stat) over the CPUs this process may run on, less this process's own CPU time, over
// a window of wall time:
//   others = (busy(after) - busy(before) - (own(after) - own(before))) / (wall(after) - wall(before))
// in cores. A CPU's busy time is every state but idle and iowait: user, nice, system, irq,
// softirq and steal (a hypervisor's other guests take the core too; guest time is already
// inside user).
#pragma once

#include <optional>
#include <string_view>
#include <vector>

namespace tokenmill {

// One reading of the counters, in seconds.
struct CpuTimes {
  double busy = 0;  // the CPUs' busy time, all processes
  double own = 0;   // this process's CPU time
  double wall = 0;  // a steady clock
};

// The busy seconds of the CPUs whose index has `cpus[index]` true, from the text of
// /proc/stat (its "cpuN" lines; `ticks_per_second` the kernel's USER_HZ). nullopt when the
// text has no such line, or a line of those CPUs is malformed.
std::optional<double> busy_seconds(std::string_view proc_stat, const std::vector<bool>& cpus,
                                   double ticks_per_second);

// Cores that others kept busy between two readings (0 when the window is empty; never
// negative: the counters' tick granularity can put this process's time a little above the
// CPUs' own).
double other_busy_cores(const CpuTimes& before, const CpuTimes& after);

// The team for a parallel region when `others` cores of `cpus` are busy with other work:
// the free cores rounded to the nearest, at least 1 and at most `team` (the count without
// load). Threads beyond the free cores would wait at every barrier for a thread that is
// descheduled.
int team_for_load(int team, int cpus, double others);

// Reads the counters now: the CPUs this process may run on (its affinity), its own CPU
// time, the steady clock. nullopt where /proc/stat cannot be read or parsed.
std::optional<CpuTimes> read_cpu_times();

// The CPUs this process may run on.
int affinity_cpu_count();

}  // namespace tokenmill
