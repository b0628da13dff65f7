// Communicator: the collectives data-parallel training needs, over the processes of one job
// (ranks 0 .. world_size - 1), on host buffers.
//
// Every rank calls the same collectives in the same order with the same sizes (the MPI
// contract). Sums are elementwise over the ranks, in an order the implementation picks (so
// not bit-identical to a serial sum, but the same on every rank: every rank ends with the
// same bytes). `what` names the collective's purpose ("gradients, step 12") for the timeout
// message.
//
// Faults: a collective that has not completed within the communicator's timeout (a rank
// died, stalled or took another path) prints one line naming this rank, the collective and
// `what`, and ends every rank of the job with a non-zero status. A job never hangs silently.
//
// open_communicator(): MPI (dist/mpi_communicator.h) when the process was started by a
// launcher with a world of two or more (dist/launch_env.h); otherwise the world of one,
// whose collectives are copies, with no MPI at all.
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "dist/device_collectives.h"
#include "dist/launch_env.h"

namespace tokenmill {

class Communicator {
 public:
  virtual ~Communicator() = default;

  int rank() const { return env_.rank; }
  int world_size() const { return env_.world_size; }
  int local_rank() const { return env_.local_rank; }
  bool is_root() const { return env_.rank == 0; }
  // "a single process", or the transport and the launcher ("MPI (Open MPI v4.1.4), Slurm").
  virtual std::string describe() const = 0;

  // data := the sum of every rank's data.
  virtual void all_reduce_sum(std::span<float> data, std::string_view what) = 0;
  virtual void all_reduce_sum(std::span<double> data, std::string_view what) = 0;
  // all[r * mine.size(), ...) := rank r's `mine`; all.size() == world_size() * mine.size().
  virtual void all_gather(std::span<const float> mine, std::span<float> all, std::string_view what) = 0;
  // mine := block r (mine.size() floats at r * mine.size()) of the sum of every rank's `all`.
  virtual void reduce_scatter_sum(std::span<const float> all, std::span<float> mine,
                                  std::string_view what) = 0;
  // data := root's data.
  virtual void broadcast(std::span<std::byte> data, int root, std::string_view what) = 0;
  virtual void barrier(std::string_view what) = 0;
  // Ends every rank of the job now with `status`, without waiting for the others (this rank
  // has failed; the caller printed why). A world of one exits the process.
  [[noreturn]] virtual void abort(int status) = 0;

  // The same ranks' collectives on a GPU's memory (NCCL), when the training backend has
  // them: attached once the device is chosen; null before, on the CPU, and in a world of one.
  DeviceCollectives* device() const { return device_.get(); }
  void attach(std::unique_ptr<DeviceCollectives> device) { device_ = std::move(device); }

 protected:
  explicit Communicator(const LaunchEnv& env) : env_(env) {}
  // Throws Error unless all.size() == world_size() * mine.size().
  void check_blocks(size_t mine, size_t all, std::string_view collective) const;

 private:
  LaunchEnv env_;
  std::unique_ptr<DeviceCollectives> device_;
};

struct CommunicatorOptions {
  double timeout_seconds = 600.0;  // a collective's limit (PyTorch's default for NCCL's)
};

// The communicator of this process (see above); call once per process.
std::unique_ptr<Communicator> open_communicator(const CommunicatorOptions& options = {});
// The world of one (tests; train() without a communicator).
std::unique_ptr<Communicator> single_process_communicator();

}  // namespace tokenmill
