// What this build expects of the GPU stack: the versions of the CUDA toolkit, cuBLAS, cuDNN
// and NCCL it was configured against (recorded by CMake when find_package(CUDAToolkit) found a
// toolkit; see src/doctor/CMakeLists.txt). These are the libraries a CUDA backend (#5) will
// link; this build has none yet, so nothing here is linked or loaded by the engine itself.
#pragma once

#include <optional>

#include "doctor/version.h"

namespace tokenmill::doctor {

// False until the CUDA backend (#5) exists: every GPU finding is then about readiness only.
inline constexpr bool kBuildHasCudaBackend = false;

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
