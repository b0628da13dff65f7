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

// "" when `--device auto` should choose GPU `gpu`; otherwise why not. In a build whose CUDA
// backend is the CPU emulation (tests/cuda_emu), the answer is always no: the emulated GPU
// runs kernels far slower than the CPU backend, and is for testing the GPU code by name
// (--device cuda).
inline std::string cuda_auto_obstacle(int gpu = 0) {
#ifdef TOKENMILL_CUDA_EMULATED
  (void)gpu;
  return "this build's CUDA backend is the CPU emulation (choose it with --device cuda)";
#else
  return cuda_unavailable_reason(gpu);
#endif
}

}  // namespace tokenmill
