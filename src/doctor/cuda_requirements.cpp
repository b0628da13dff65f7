#include "doctor/cuda_requirements.h"

#include <array>

#include <fmt/format.h>

namespace tokenmill::doctor {

namespace {

struct Release {
  int major, minor;
  const char* driver;
};

// Source: NVIDIA CUDA Toolkit Release Notes, "CUDA Toolkit and Corresponding Driver Versions"
// (Linux x86_64 column, GA release of each minor version),
// https://docs.nvidia.com/cuda/cuda-toolkit-release-notes/index.html#cuda-driver
constexpr std::array kReleases = {
    Release{13, 0, "580.65.06"}, Release{12, 9, "575.51.03"}, Release{12, 8, "570.26"},
    Release{12, 6, "560.28.03"}, Release{12, 5, "555.42.02"}, Release{12, 4, "550.54.14"},
    Release{12, 3, "545.23.06"}, Release{12, 2, "535.54.03"}, Release{12, 1, "530.30.02"},
    Release{12, 0, "525.60.13"}, Release{11, 8, "520.61.05"}, Release{11, 7, "515.43.04"},
    Release{11, 6, "510.39.01"}, Release{11, 5, "495.29.05"}, Release{11, 4, "470.42.01"},
    Release{11, 3, "465.19.01"}, Release{11, 2, "460.27.03"}, Release{11, 1, "455.23"},
    Release{11, 0, "450.51.05"},
};

// Source: NVIDIA CUDA Compatibility guide, "Minor Version Compatibility", table "CUDA Toolkit
// 11.x, 12.x and 13.x Driver Version Ranges" (13.x >= 580, 12.x >= 525, 11.x >= 450; for 11.x
// the guide names 450.80.02), https://docs.nvidia.com/deploy/cuda-compatibility/
constexpr std::array kMinorCompatibility = {
    Release{13, 0, "580.65.06"},
    Release{12, 0, "525.60.13"},
    Release{11, 0, "450.80.02"},
};

DriverRequirement requirement(const Release& r, std::string basis) {
  return {.driver = *parse_version(r.driver), .text = r.driver, .basis = std::move(basis)};
}

}  // namespace

std::optional<DriverRequirement> minor_compatibility_driver(int cuda_major) {
  for (const Release& r : kMinorCompatibility)
    if (r.major == cuda_major)
      return requirement(r, fmt::format("minor-version compatibility for CUDA {}.x", cuda_major));
  return std::nullopt;
}

std::optional<DriverRequirement> minimum_driver_for(Version cuda) {
  for (const Release& r : kReleases)
    if (r.major == cuda.major && r.minor == cuda.minor)
      return requirement(r, fmt::format("CUDA {}.{} GA", r.major, r.minor));
  return minor_compatibility_driver(cuda.major);
}

std::optional<int> minimum_compute_capability(int cuda_major) {
  // Source: CUDA 13.0 release notes, "Deprecated Architectures" (offline compilation and
  // library support for Maxwell, Pascal and Volta removed); CUDA 12.0 dropped sm_35/sm_37.
  switch (cuda_major) {
    case 13: return 75;
    case 12: return 50;
    case 11: return 35;
    default: return std::nullopt;
  }
}

}  // namespace tokenmill::doctor
