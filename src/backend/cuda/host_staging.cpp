#include "backend/cuda/host_staging.h"

#include <cstring>

#include "backend/cuda/cuda_check.h"

namespace tokenmill::cuda {

HostStaging::HostStaging(cudaStream_t stream) : stream_(stream), pinned_(make_pinned(kSlots * kSlotBytes)) {
  done_.reserve(kSlots);
  for (int i = 0; i < kSlots; ++i) done_.push_back(make_event());
}

void HostStaging::copy_to_device(void* device_dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  if (bytes > kSlotBytes) {
    TM_CUDA_CHECK(cudaMemcpyAsync(device_dst, src, bytes, cudaMemcpyHostToDevice, stream_));
    return;
  }
  char* slot = pinned_.get() + static_cast<size_t>(next_) * kSlotBytes;
  cudaEvent_t done = done_[static_cast<size_t>(next_)].get();
  next_ = (next_ + 1) % kSlots;
  TM_CUDA_CHECK(cudaEventSynchronize(done));  // the slot's previous copy has finished
  std::memcpy(slot, src, bytes);
  TM_CUDA_CHECK(cudaMemcpyAsync(device_dst, slot, bytes, cudaMemcpyHostToDevice, stream_));
  TM_CUDA_CHECK(cudaEventRecord(done, stream_));
}

}  // namespace tokenmill::cuda
