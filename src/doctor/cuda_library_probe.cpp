// The CUDA libraries a CUDA backend links (cudart, cuBLASLt, cuDNN, NCCL): which file the
// dynamic linker finds for each and the version that file reports about itself.
#include <algorithm>
#include <array>
#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "doctor/dynamic_library.h"
#include "doctor/gpu_stack.h"

namespace tokenmill::doctor {

namespace {

// One library: its versioned file names, newest first (with the major each belongs to),
// the unversioned development link, and how to ask it for its version.
struct LibrarySpec {
  const char* name;
  std::vector<std::pair<std::string, int>> versioned;  // (file name, major)
  std::string unversioned;
  std::function<std::optional<Version>(const DynamicLibrary&)> version;
  std::optional<Version> expected;
};

using CudaRuntimeGetVersion = int(int* version);  // cudaError_t(int*)
using CublasLtGetVersion = size_t();
using CudnnGetVersion = size_t();
using NcclGetVersion = int(int* version);  // ncclResult_t(int*)

std::optional<Version> cudart_version(const DynamicLibrary& lib) {
  auto* fn = lib.function<CudaRuntimeGetVersion>("cudaRuntimeGetVersion");
  int code = 0;
  if (fn == nullptr || fn(&code) != 0) return std::nullopt;
  return cuda_version_from_code(code);
}

std::optional<Version> cublaslt_version(const DynamicLibrary& lib) {
  auto* fn = lib.function<CublasLtGetVersion>("cublasLtGetVersion");
  if (fn == nullptr) return std::nullopt;
  return cublas_version_from_code(static_cast<long long>(fn()));
}

std::optional<Version> cudnn_version(const DynamicLibrary& lib) {
  auto* fn = lib.function<CudnnGetVersion>("cudnnGetVersion");
  if (fn == nullptr) return std::nullopt;
  return cudnn_version_from_code(static_cast<long long>(fn()));
}

std::optional<Version> nccl_version(const DynamicLibrary& lib) {
  auto* fn = lib.function<NcclGetVersion>("ncclGetVersion");
  int code = 0;
  if (fn == nullptr || fn(&code) != 0) return std::nullopt;
  return nccl_version_from_code(code);
}

std::vector<LibrarySpec> library_specs(const BuildExpectations& expected) {
  return {
      {"cudart",
       {{"libcudart.so.13", 13}, {"libcudart.so.12", 12}, {"libcudart.so.11.0", 11}},
       "libcudart.so",
       cudart_version,
       expected.cuda},
      {"cublasLt",
       {{"libcublasLt.so.13", 13}, {"libcublasLt.so.12", 12}, {"libcublasLt.so.11", 11}},
       "libcublasLt.so",
       cublaslt_version,
       expected.cublas},
      {"cudnn", {{"libcudnn.so.9", 9}, {"libcudnn.so.8", 8}}, "libcudnn.so", cudnn_version, expected.cudnn},
      {"nccl", {{"libnccl.so.2", 2}}, "libnccl.so", nccl_version, expected.nccl},
  };
}

// The names to try: the expected major's files first, then the others newest first, then
// the development link.
std::vector<std::string> search_order(const LibrarySpec& spec) {
  std::vector<std::pair<std::string, int>> versioned = spec.versioned;
  if (spec.expected)
    std::stable_partition(versioned.begin(), versioned.end(),
                          [&](const auto& entry) { return entry.second == spec.expected->major; });
  std::vector<std::string> names;
  for (const auto& entry : versioned) names.push_back(entry.first);
  names.push_back(spec.unversioned);
  return names;
}

}  // namespace

std::vector<CudaLibraryFacts> probe_cuda_libraries(const LibrarySearch& search,
                                                   const BuildExpectations& expected) {
  std::vector<CudaLibraryFacts> all;
  for (const LibrarySpec& spec : library_specs(expected)) {
    CudaLibraryFacts facts;
    facts.name = spec.name;
    const std::vector<std::string> names = search_order(spec);
    const DynamicLibrary lib = DynamicLibrary::open(names, search.dirs, facts.load);
    if (lib.loaded()) {
      facts.version = spec.version(lib);
      facts.load.loaded = facts.version.has_value();
      if (!facts.load.loaded) facts.load.error = lib.path() + ": its version call is missing or failed";
    }
    all.push_back(std::move(facts));
  }
  return all;
}

}  // namespace tokenmill::doctor
