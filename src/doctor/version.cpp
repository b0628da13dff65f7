#include "doctor/version.h"

#include <charconv>

#include <fmt/format.h>

namespace tokenmill::doctor {

std::string Version::text() const { return fmt::format("{}.{}.{}", major, minor, patch); }
std::string Version::short_text() const { return fmt::format("{}.{}", major, minor); }

std::optional<Version> parse_version(std::string_view text) {
  int parts[3] = {0, 0, 0};
  const char* p = text.data();
  const char* end = text.data() + text.size();
  for (int i = 0; i < 3; ++i) {
    const auto [next, ec] = std::from_chars(p, end, parts[i]);
    if (ec != std::errc() || parts[i] < 0) return std::nullopt;
    p = next;
    if (p == end) return Version{parts[0], parts[1], parts[2]};
    if (*p != '.' || i == 2) return std::nullopt;
    ++p;
  }
  return std::nullopt;
}

Version cuda_version_from_code(int code) { return {code / 1000, code % 1000 / 10, 0}; }

Version cudnn_version_from_code(long long code) {
  if (code >= 90000) return {int(code / 10000), int(code % 10000 / 100), int(code % 100)};
  return {int(code / 1000), int(code % 1000 / 100), int(code % 100)};
}

Version nccl_version_from_code(int code) {
  if (code >= 10000) return {code / 10000, code % 10000 / 100, code % 100};
  return {code / 1000, code % 1000 / 100, code % 100};
}

Version cublas_version_from_code(long long code) {
  return {int(code / 10000), int(code % 10000 / 100), int(code % 100)};
}

}  // namespace tokenmill::doctor
