// allreduce_bench: the communicator's all-reduce (dist/communicator.h: a non-blocking MPI
// call polled against the timeout) beside a plain blocking MPI_Allreduce of the same floats,
// in one run, so the wrapper's cost is visible. Run it under the launcher:
//
//   mpirun --oversubscribe -np 2 build/release/allreduce_bench [--iterations N]
//
// Rank 0 prints, per size: the median time of each and its bandwidths. algbw = bytes / time;
// busbw = algbw x 2 (n - 1) / n, the bytes each rank must move in a ring all-reduce (NCCL's
// convention), comparable across world sizes.
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include <fmt/format.h>

#include "dist/communicator.h"

namespace {

using Clock = std::chrono::steady_clock;

template <class Reduce>
double median_seconds(int iterations, const Reduce& reduce) {
  std::vector<double> seconds;
  for (int i = 0; i < iterations; ++i) {
    MPI_Barrier(MPI_COMM_WORLD);
    const auto start = Clock::now();
    reduce();
    seconds.push_back(std::chrono::duration<double>(Clock::now() - start).count());
  }
  // Every rank's time counts: the slowest rank's median.
  std::nth_element(seconds.begin(), seconds.begin() + iterations / 2, seconds.end());
  double median = seconds[static_cast<size_t>(iterations / 2)];
  MPI_Allreduce(MPI_IN_PLACE, &median, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return median;
}

}  // namespace

int main(int argc, char** argv) {
  int iterations = 20;
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], "--iterations") == 0) iterations = std::max(1, std::atoi(argv[i + 1]));
  const std::unique_ptr<tokenmill::Communicator> comm = tokenmill::open_communicator();
  const int n = comm->world_size();
  if (n < 2) {
    fmt::print(stderr, "allreduce_bench: run it under mpirun with 2 or more ranks\n");
    return 1;
  }
  if (comm->is_root())
    fmt::print(
        "{} ranks, {}; median of {} (the slowest rank's)\n{:>10} {:>12} {:>10} {:>10} {:>12} {:>10} {:>10} "
        "{:>7}\n",
        n, comm->describe(), iterations, "bytes", "tokenmill_us", "algbw_GB/s", "busbw_GB/s", "MPI_us",
        "algbw_GB/s", "busbw_GB/s", "ratio");
  for (size_t bytes = size_t{4} << 10; bytes <= size_t{64} << 20; bytes *= 4) {
    std::vector<float> data(bytes / sizeof(float), 1.0f);
    const double ours =
        median_seconds(iterations, [&] { comm->all_reduce_sum(std::span<float>(data), "bench"); });
    const double mpi = median_seconds(iterations, [&] {
      MPI_Allreduce(MPI_IN_PLACE, data.data(), static_cast<int>(data.size()), MPI_FLOAT, MPI_SUM,
                    MPI_COMM_WORLD);
    });
    const auto algbw = [&](double s) { return static_cast<double>(bytes) / s / 1e9; };
    const double bus = 2.0 * (n - 1) / n;
    if (comm->is_root())
      fmt::print("{:>10} {:>12.1f} {:>10.2f} {:>10.2f} {:>12.1f} {:>10.2f} {:>10.2f} {:>7.2f}\n", bytes,
                 ours * 1e6, algbw(ours), algbw(ours) * bus, mpi * 1e6, algbw(mpi), algbw(mpi) * bus,
                 mpi / ours);
  }
  return 0;
}
