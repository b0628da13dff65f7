#include "backend/cuda/host_staging.h"

#include <cstring>

#include "backend/cuda/cuda_check.h"

namespace tokenmill::cuda {

HostStaging::HostStaging(cudaStream_t stream) : stream_(stream), done_(kSlots, nullptr) {
  void* pinned = nullptr;
  TM_CUDA_CHECK(cudaMallocHost(&pinned, kSlots * kSlotBytes));
  pinned_ = static_cast<char*>(pinned);
  for (cudaEvent_t& event : done_) TM_CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
}

HostStaging::~HostStaging() {
  for (cudaEvent_t event : done_)
    if (event != nullptr) {
      cudaEventSynchronize(event);
      cudaEventDestroy(event);
    }
  cudaFreeHost(pinned_);
}

void HostStaging::copy_to_device(void* device_dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  if (bytes > kSlotBytes) {
    TM_CUDA_CHECK(cudaMemcpyAsync(device_dst, src, bytes, cudaMemcpyHostToDevice, stream_));
    return;
  }
  char* slot = pinned_ + static_cast<size_t>(next_) * kSlotBytes;
  cudaEvent_t done = done_[static_cast<size_t>(next_)];
  next_ = (next_ + 1) % kSlots;
  TM_CUDA_CHECK(cudaEventSynchronize(done));  // the slot's previous copy has finished
  std::memcpy(slot, src, bytes);
  TM_CUDA_CHECK(cudaMemcpyAsync(device_dst, slot, bytes, cudaMemcpyHostToDevice, stream_));
  TM_CUDA_CHECK(cudaEventRecord(done, stream_));
}

}  // namespace tokenmill::cuda
