// DeviceCollectives: the data-parallel collectives on buffers in a GPU's memory, without a
// trip through the host (NCCL: backend/cuda/nccl_collectives.cpp, bootstrapped over the
// job's Communicator). Every rank of that Communicator takes part in each call, in the same
// order. A call returns when its result is in place; one that has not finished within the
// communicator's timeout ends the job as the Communicator's collectives do.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <string_view>

namespace tokenmill {

class DeviceCollectives {
 public:
  virtual ~DeviceCollectives() = default;
  // "NCCL 2.28.3", for the run's description.
  virtual std::string describe() const = 0;
  // device_data := the sum of every rank's device_data.
  virtual void all_reduce_sum(std::span<float> device_data, std::string_view what) = 0;
  // device_data := rank 0's device_data.
  virtual void broadcast_from_root(std::span<float> device_data, std::string_view what) = 0;
};

}  // namespace tokenmill
