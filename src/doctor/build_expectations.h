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
// What the CUDA backend runs so far: generate and chat place the model on a GPU
// (--device); serve, train and bench still run on the CPU (#5).
inline constexpr const char* kGpuCommands =
    "generate and chat run on a GPU (--device auto|cuda); serve, train and "
    "bench still run on the CPU (#5)";

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
