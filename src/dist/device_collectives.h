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
  // device_all holds world-size pieces of device_mine.size() floats, in rank order:
  // device_mine := the sum over the ranks of their piece number rank().
  virtual void reduce_scatter_sum(std::span<const float> device_all, std::span<float> device_mine,
                                  std::string_view what) = 0;
  // device_all := every rank's device_mine, in rank order (world-size pieces).
  virtual void all_gather(std::span<const float> device_mine, std::span<float> device_all,
                          std::string_view what) = 0;
};

}  // namespace tokenmill
