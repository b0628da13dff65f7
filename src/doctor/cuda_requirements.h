// NVIDIA's compatibility rules the doctor applies: the minimum Linux driver for a CUDA
// toolkit version, and the oldest GPU architecture a CUDA major version still supports.
#pragma once

#include <optional>
#include <string>

#include "doctor/version.h"

namespace tokenmill::doctor {

struct DriverRequirement {
  Version driver;     // minimum Linux x86_64 driver, e.g. 580.65.6 (written 580.65.06)
  std::string text;   // the driver version as NVIDIA writes it, "580.65.06"
  std::string basis;  // why: "CUDA 13.0 GA" or "minor-version compatibility for CUDA 13.x"
};

// The driver a CUDA `cuda` application needs. For a release in the table: the driver of
// that release (full feature set). For another minor of a known major (11, 12, 13): the
// floor of minor-version compatibility, under which the application runs with a limited
// feature set (no PTX JIT of newer PTX). nullopt for an unknown major.
std::optional<DriverRequirement> minimum_driver_for(Version cuda);

// The floor of minor-version compatibility for a CUDA major (any 13.x runs on >= 580), or
// nullopt for an unknown major.
std::optional<DriverRequirement> minor_compatibility_driver(int cuda_major);

// The oldest compute capability (10 * major + minor) that CUDA `cuda_major` compiles for
// and its libraries support: 75 for CUDA 13 (Maxwell, Pascal and Volta dropped), 50 for
// CUDA 12, 35 for CUDA 11; nullopt for an unknown major.
std::optional<int> minimum_compute_capability(int cuda_major);

}  // namespace tokenmill::doctor
