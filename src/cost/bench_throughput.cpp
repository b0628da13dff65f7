#include "cost/bench_throughput.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/json_file.h"

namespace tokenmill {

namespace {

using nlohmann::json;

constexpr const char* kSchema = "tokenmill.bench/1";

struct PhaseEntry {
  std::string phase;
  int64_t batch = 0;
  std::optional<double> tokens_per_s;  // null: not measured
  size_t index = 0;
};

// Typed access to the fields of one file, with errors that name the file and the field.
class BenchFields {
 public:
  explicit BenchFields(std::string file) : file_(std::move(file)) {}

  const json& member(const json& object, const char* key, const std::string& where) const {
    const auto it = object.find(key);
    if (it == object.end()) fail("{}: missing field {}{}", file_, where, key);
    return *it;
  }
  void expect(const json& value, bool ok, const std::string& field, const char* type) const {
    if (!ok) fail("{}: {} must be {}, not {}", file_, field, type, value.type_name());
  }
  std::string string(const json& object, const char* key, const std::string& where) const {
    const json& v = member(object, key, where);
    expect(v, v.is_string(), where + key, "a string");
    return v.get<std::string>();
  }
  int64_t integer(const json& object, const char* key, const std::string& where) const {
    const json& v = member(object, key, where);
    expect(v, v.is_number_integer(), where + key, "an integer");
    return v.get<int64_t>();
  }
  std::optional<double> number_or_null(const json& object, const char* key, const std::string& where) const {
    const json& v = member(object, key, where);
    if (v.is_null()) return std::nullopt;
    expect(v, v.is_number(), where + key, "a number or null");
    return v.get<double>();
  }
  const std::string& file() const { return file_; }

 private:
  std::string file_;
};

std::vector<PhaseEntry> read_phases(const json& root, const BenchFields& f) {
  const json& phases = f.member(root, "phases", "");
  f.expect(phases, phases.is_array(), "phases", "an array");
  std::vector<PhaseEntry> entries;
  for (size_t i = 0; i < phases.size(); ++i) {
    const std::string where = fmt::format("phases[{}].", i);
    f.expect(phases[i], phases[i].is_object(), fmt::format("phases[{}]", i), "an object");
    entries.push_back({.phase = f.string(phases[i], "phase", where),
                       .batch = f.integer(phases[i], "batch", where),
                       .tokens_per_s = f.number_or_null(phases[i], "tokens_per_s", where),
                       .index = i});
  }
  return entries;
}

// The entry of `phase` with the largest batch, or nullptr.
const PhaseEntry* largest_batch(const std::vector<PhaseEntry>& entries, const std::string& phase) {
  const PhaseEntry* best = nullptr;
  for (const PhaseEntry& e : entries)
    if (e.phase == phase && (best == nullptr || e.batch > best->batch)) best = &e;
  return best;
}

Throughput to_throughput(const PhaseEntry& e, const BenchFields& f) {
  const std::string field = fmt::format("phases[{}].tokens_per_s", e.index);
  if (!e.tokens_per_s)
    fail("{}: {} is null ({} at batch {} was not measured); choose another phase with --phase", f.file(),
         field, e.phase, e.batch);
  if (!std::isfinite(*e.tokens_per_s) || *e.tokens_per_s <= 0)
    fail("{}: {} is {}, not a throughput > 0", f.file(), field, *e.tokens_per_s);
  return {.phase = e.phase,
          .batch = e.batch,
          .tokens_per_s = *e.tokens_per_s,
          .source = fmt::format("{} phases[{}]", f.file(), e.index)};
}

std::string phase_names(const std::vector<PhaseEntry>& entries) {
  std::vector<std::string> names;
  for (const PhaseEntry& e : entries)
    if (std::find(names.begin(), names.end(), e.phase) == names.end()) names.push_back(e.phase);
  return names.empty() ? "none" : fmt::format("{}", fmt::join(names, ", "));
}

}  // namespace

BenchThroughputs read_bench_throughputs(const std::filesystem::path& path, const std::string& phase) {
  const BenchFields f(path.string());
  const json root = read_json_file(path);
  if (!root.is_object())
    fail("{}: not a tokenmill bench file (expected a JSON object with \"schema\": \"{}\")", f.file(),
         kSchema);
  const std::string schema = f.string(root, "schema", "");
  if (schema != kSchema)
    fail("{}: schema is \"{}\", expected \"{}\" (write the file with `tokenmill bench --json`)", f.file(),
         schema, kSchema);
  const json& device = f.member(root, "device", "");
  f.expect(device, device.is_object(), "device", "an object");
  BenchThroughputs out{.device_name = f.string(device, "name", "device."), .phases = {}};
  const std::vector<PhaseEntry> entries = read_phases(root, f);
  const std::vector<std::string> wanted =
      phase.empty() ? std::vector<std::string>{"train", "decode"} : std::vector<std::string>{phase};
  for (const std::string& name : wanted)
    if (const PhaseEntry* e = largest_batch(entries, name)) out.phases.push_back(to_throughput(*e, f));
  if (out.phases.empty())
    fail("{}: phases[] has no {} entry (phases present: {}); choose one with --phase", f.file(),
         phase.empty() ? "\"train\" or \"decode\"" : "\"" + phase + "\"", phase_names(entries));
  return out;
}

}  // namespace tokenmill
