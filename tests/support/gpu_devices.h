// Which GPUs a test binary runs its GPU cases on: GPU 0 when this build has the CUDA backend
// and the GPU is usable, none otherwise. With TOKENMILL_REQUIRE_CUDA set (to anything but
// "" or "0", as scripts/gpu-check.sh does) a missing GPU ends the binary with the reason, so a
// GPU run can never pass by testing nothing.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <ostream>
#include <string>
#include <vector>

#include "backend/cuda_availability.h"

namespace tokenmill::testing {

inline bool cuda_required() {
  const char* value = std::getenv("TOKENMILL_REQUIRE_CUDA");
  return value != nullptr && *value != '\0' && std::string(value) != "0";
}

// True when the CUDA backend can run on GPU 0; exits the process when it cannot and
// TOKENMILL_REQUIRE_CUDA is set.
inline bool cuda_usable() {
  const std::string why = cuda_unavailable_reason();
  if (why.empty()) return true;
  if (cuda_required()) {
    std::fprintf(stderr, "TOKENMILL_REQUIRE_CUDA is set, but %s\n", why.c_str());
    std::exit(1);
  }
  return false;
}

// A test case: a fixture (a model file or directory) on a device ("cpu" or "cuda").
struct DeviceCase {
  std::string fixture;
  std::string device;
};

inline void PrintTo(const DeviceCase& c, std::ostream* os) { *os << c.fixture << " on " << c.device; }

// Every fixture on the CPU and, when the CUDA backend is usable (cuda_usable), on the GPU.
inline std::vector<DeviceCase> on_every_device(const std::vector<std::string>& fixtures) {
  std::vector<DeviceCase> cases;
  const bool gpu = cuda_usable();
  for (const std::string& fixture : fixtures) {
    cases.push_back({fixture, "cpu"});
    if (gpu) cases.push_back({fixture, "cuda"});
  }
  return cases;
}

}  // namespace tokenmill::testing
