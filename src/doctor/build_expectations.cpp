#include "doctor/build_expectations.h"

// Each macro is a version string, empty when CMake did not find it (src/doctor/CMakeLists.txt).
#ifndef TOKENMILL_BUILD_CUDA_VERSION
#error "src/doctor/CMakeLists.txt defines the TOKENMILL_BUILD_*_VERSION macros"
#endif

namespace tokenmill::doctor {

BuildExpectations recorded_build_expectations() {
  return {
      .cuda = parse_version(TOKENMILL_BUILD_CUDA_VERSION),
      .cublas = parse_version(TOKENMILL_BUILD_CUBLAS_VERSION),
      .cudnn = parse_version(TOKENMILL_BUILD_CUDNN_VERSION),
      .nccl = parse_version(TOKENMILL_BUILD_NCCL_VERSION),
  };
}

}  // namespace tokenmill::doctor
