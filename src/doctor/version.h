// Version: major.minor.patch of a driver or library, as the doctor compares them.
#pragma once

#include <compare>
#include <optional>
#include <string>
#include <string_view>

namespace tokenmill::doctor {

struct Version {
  int major = 0;
  int minor = 0;
  int patch = 0;

  auto operator<=>(const Version&) const = default;
  std::string text() const;        // "9.19.0"
  std::string short_text() const;  // "13.0": how CUDA versions are usually written
};

// Parses "13", "13.0" or "13.0.88" (missing parts are 0); nullopt for anything else,
// including an empty string.
std::optional<Version> parse_version(std::string_view text);

// The encodings the libraries' version calls return.
Version cuda_version_from_code(int code);          // 1000 * major + 10 * minor (13000 = 13.0)
Version cudnn_version_from_code(long long code);   // 9.x: 10000*M + 100*m + p; 8.x: 1000*M + 100*m + p
Version nccl_version_from_code(int code);          // >= 2.9: 10000*M + 100*m + p; before: 1000*M + 100*m + p
Version cublas_version_from_code(long long code);  // 10000*M + 100*m + p (130100 = 13.1.0)

}  // namespace tokenmill::doctor
