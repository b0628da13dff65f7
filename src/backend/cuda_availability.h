// Whether this build's CUDA backend can run on a GPU, for code built with or without it.
#pragma once

#include <string>

#ifdef TOKENMILL_HAS_CUDA
#include "backend/cuda/cuda_backend.h"
#endif

namespace tokenmill {

// What every command says when asked for a GPU in a build without the CUDA backend.
inline constexpr const char* kNoCudaBackend =
    "this build has no CUDA backend (it was built without nvcc or with TOKENMILL_CUDA=OFF)";

// "" when the CUDA backend can run on GPU `gpu`; otherwise why not, in one line.
inline std::string cuda_unavailable_reason(int gpu = 0) {
#ifdef TOKENMILL_HAS_CUDA
  return cuda::unavailable_reason(gpu);
#else
  (void)gpu;
  return kNoCudaBackend;
#endif
}

}  // namespace tokenmill
