// HostStaging: copies small host arrays (token ids, positions, targets, block tables) to the
// device without waiting for the GPU.
//
// cudaMemcpyAsync from pageable memory synchronises with the stream before it copies, which
// would make every op with a host argument wait for all the work queued before it. Instead
// the bytes go through pinned slots: memcpy into a free slot, an asynchronous copy from the
// slot, an event recorded after it. A slot is reused once its event has completed (the host
// waits only when every slot is still in flight). Arrays larger than a slot take the
// synchronising path.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <vector>

#include "backend/cuda/cuda_owners.h"

namespace tokenmill::cuda {

class HostStaging {
 public:
  static constexpr size_t kSlotBytes = size_t{64} << 10;
  static constexpr int kSlots = 32;

  explicit HostStaging(cudaStream_t stream);

  // Queues a copy of `bytes` from host `src` to `device_dst` on the stream; `src` may be
  // reused as soon as this returns.
  void copy_to_device(void* device_dst, const void* src, size_t bytes);

 private:
  cudaStream_t stream_;
  PinnedOwner pinned_;            // kSlots * kSlotBytes
  std::vector<EventOwner> done_;  // destroyed first: each waits for its slot's last copy
  int next_ = 0;
};

}  // namespace tokenmill::cuda
