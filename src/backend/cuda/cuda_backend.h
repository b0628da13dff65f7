// The CUDA backend: every Backend op on an NVIDIA GPU (sm_80 and newer), with BF16/FP16
// tensor-core GEMMs through cuBLASLt and hand-written kernels for the rest.
//
// Tensors passed to it must be memory the GPU addresses: its memory() (device memory, which
// model/ allocates from), or managed memory (the conformance tests, see managed_allocate). Host-side
// arguments (token ids, positions, targets, block tables) are spans in host memory, as in backend.h. Work is
// queued on the backend's own stream; results are ready for the host after cuda::synchronize_device() (or any
// call that returns a host value, e.g. sum_squares).
//
// This header needs no CUDA header: the CLI, the tests and the doctor include it as is.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "backend/backend.h"

namespace tokenmill {

// The CUDA backend on GPU `device`. Throws Error with the reason and a fix when that GPU
// cannot be used (no driver, no device, driver too old).
std::unique_ptr<Backend> make_cuda_backend(int device = 0);

namespace cuda {

// "" when GPU `device` can run the CUDA backend; otherwise why not, in one sentence.
std::string unavailable_reason(int device = 0);

// Memory both the host and the GPU address (cudaMallocManaged); Error when it fails.
void* managed_allocate(size_t bytes);
void managed_free(void* memory) noexcept;

// Waits until all work queued on the current GPU has finished (Error if any failed).
void synchronize_device();

// A device-to-device copy of `bytes` between buffers of the backend's memory() (the
// copy-bandwidth probe of the GPU roofline).
void copy_on_device(void* device_dst, const void* device_src, size_t bytes);

}  // namespace cuda
}  // namespace tokenmill
