// Owners of the CUDA runtime and cuBLASLt objects the backend creates: each is released when
// its owner goes, so a constructor that throws half-way (a later allocation failing, a GPU
// lost) leaks none of what it had made before.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <memory>
#include <type_traits>

namespace tokenmill::cuda {

struct StreamRelease {
  void operator()(cudaStream_t stream) const noexcept;  // waits for its work, then destroys it
};
using StreamOwner = std::unique_ptr<std::remove_pointer_t<cudaStream_t>, StreamRelease>;

struct CublasLtRelease {
  void operator()(cublasLtHandle_t handle) const noexcept;
};
using CublasLtOwner = std::unique_ptr<std::remove_pointer_t<cublasLtHandle_t>, CublasLtRelease>;

struct EventRelease {
  void operator()(cudaEvent_t event) const noexcept;  // waits for it, then destroys it
};
using EventOwner = std::unique_ptr<std::remove_pointer_t<cudaEvent_t>, EventRelease>;

struct PinnedRelease {
  void operator()(char* memory) const noexcept;  // cudaFreeHost
};
using PinnedOwner = std::unique_ptr<char[], PinnedRelease>;

// A stream of the current GPU that does not synchronise with the default stream; Error on failure.
StreamOwner make_stream();
// A cuBLASLt handle; Error on failure.
CublasLtOwner make_cublaslt();
// An event without timing (cheaper to record); Error on failure.
EventOwner make_event();
// `bytes` of page-locked host memory; Error on failure.
PinnedOwner make_pinned(size_t bytes);

}  // namespace tokenmill::cuda
