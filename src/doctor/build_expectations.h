// What this build expects of the GPU stack: the versions of the CUDA toolkit, cuBLAS, cuDNN
// and NCCL it was configured against (recorded by CMake when find_package(CUDAToolkit) found a
// toolkit; see src/doctor/CMakeLists.txt). The CUDA backend links the CUDA runtime statically
// and cuBLASLt dynamically; cuDNN and NCCL are not used yet.
#pragma once

#include <optional>

#include "doctor/version.h"

namespace tokenmill::doctor {

// Whether the CUDA backend's ops are compiled in (cmake/cuda.cmake; the doctor's self-test
// runs them on each GPU).
#ifdef TOKENMILL_HAS_CUDA
inline constexpr bool kBuildHasCudaBackend = true;
#else
inline constexpr bool kBuildHasCudaBackend = false;
#endif
// What the CUDA backend runs (the README's status says the same): the commands that place a
// model on a GPU with --device, and how far that is verified.
inline constexpr const char* kGpuCommands =
    "generate, chat, serve, train and bench run on a GPU (--device auto|cuda); the CUDA backend is "
    "checked in emulation, not yet on a real GPU";

struct BuildExpectations {
  std::optional<Version> cuda;    // CUDAToolkit_VERSION, e.g. 13.0.88
  std::optional<Version> cublas;  // cublas_api.h CUBLAS_VER_*
  std::optional<Version> cudnn;   // cudnn_version.h CUDNN_*
  std::optional<Version> nccl;    // nccl.h NCCL_*
};

// The versions recorded at configure time; each is nullopt ("not recorded") when the toolkit
// or that library's header was absent.
BuildExpectations recorded_build_expectations();

}  // namespace tokenmill::doctor
