// A fake CUDA library for the doctor tests: exports the version call of the one library
// named by a compile definition (tests/doctor/CMakeLists.txt), answering with its value.
#include <cstddef>

extern "C" {

#ifdef FAKE_CUDART_VERSION
int cudaRuntimeGetVersion(int* version) {
  *version = FAKE_CUDART_VERSION;
  return 0;
}
#endif

#ifdef FAKE_CUBLASLT_VERSION
size_t cublasLtGetVersion() { return FAKE_CUBLASLT_VERSION; }
#endif

#ifdef FAKE_CUDNN_VERSION
size_t cudnnGetVersion() { return FAKE_CUDNN_VERSION; }
#endif

#ifdef FAKE_NCCL_VERSION
int ncclGetVersion(int* version) {
  *version = FAKE_NCCL_VERSION;
  return 0;
}
#endif

}  // extern "C"
