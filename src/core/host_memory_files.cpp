#include "core/host_memory_files.h"

#include <charconv>
#include <fstream>
#include <iterator>

namespace tokenmill {

namespace {

constexpr std::string_view kSpace = " \t\r\n";

std::string_view trim(std::string_view s) {
  const size_t first = s.find_first_not_of(kSpace);
  if (first == std::string_view::npos) return {};
  return s.substr(first, s.find_last_not_of(kSpace) - first + 1);
}

// Calls line(text) for each line of `text` until it returns true.
template <class F>
void for_each_line(std::string_view text, F line) {
  while (!text.empty()) {
    const size_t end = text.find('\n');
    if (line(text.substr(0, end))) return;
    if (end == std::string_view::npos) return;
    text.remove_prefix(end + 1);
  }
}

}  // namespace

std::optional<std::string> read_host_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

std::optional<uint64_t> parse_decimal_u64(std::string_view text) {
  const std::string_view t = trim(text);
  uint64_t value = 0;
  const auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), value);
  if (t.empty() || ec != std::errc() || end != t.data() + t.size()) return std::nullopt;
  return value;
}

std::optional<std::string> proc_field(std::string_view text, std::string_view key) {
  std::optional<std::string> value;
  for_each_line(text, [&](std::string_view line) {
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos || trim(line.substr(0, colon)) != key) return false;
    value = std::string(trim(line.substr(colon + 1)));
    return true;
  });
  return value;
}

std::optional<uint64_t> meminfo_bytes(std::string_view meminfo, std::string_view key) {
  const std::optional<std::string> value = proc_field(meminfo, key);
  if (!value || !value->ends_with(" kB")) return std::nullopt;
  const std::optional<uint64_t> kib =
      parse_decimal_u64(std::string_view(*value).substr(0, value->size() - 3));
  if (!kib || *kib > UINT64_MAX / 1024) return std::nullopt;
  return *kib * 1024;
}

ProcSelfCgroup parse_proc_self_cgroup(std::string_view text) {
  ProcSelfCgroup cgroup;
  for_each_line(text, [&](std::string_view line) {
    const size_t first = line.find(':');
    const size_t second = first == std::string_view::npos ? first : line.find(':', first + 1);
    if (second == std::string_view::npos) return false;
    std::string_view controllers = line.substr(first + 1, second - first - 1);
    const std::string path(line.substr(second + 1));
    cgroup.paths.push_back(path);
    if (controllers.empty()) cgroup.unified = path;
    while (!controllers.empty()) {
      const size_t comma = controllers.find(',');
      cgroup.controllers[std::string(controllers.substr(0, comma))] = path;
      controllers.remove_prefix(comma == std::string_view::npos ? controllers.size() : comma + 1);
    }
    return false;
  });
  return cgroup;
}

std::optional<uint64_t> parse_cgroup_memory_limit(std::string_view text) {
  if (trim(text) == "max") return kNoCgroupMemoryLimit;
  const std::optional<uint64_t> bytes = parse_decimal_u64(text);
  if (bytes && *bytes >= uint64_t{1} << 62) return kNoCgroupMemoryLimit;
  return bytes;
}

}  // namespace tokenmill
