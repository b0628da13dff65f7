#include "train/checkpoint.h"

#include <algorithm>
#include <cstring>
#include <regex>

#include "core/atomic_file.h"
#include "core/checked_math.h"
#include "core/error.h"
#include "core/fnv1a.h"
#include "core/mapped_file.h"

namespace tokenmill {

namespace {

constexpr char kMagic[8] = {'T', 'M', 'C', 'K', 'P', 'T', '0', '2'};
constexpr char kFormat1Magic[8] = {'T', 'M', 'C', 'K', 'P', 'T', '0', '1'};
constexpr const char* kFormat = "tokenmill.checkpoint/2";
constexpr uint64_t kPreambleBytes = 16;  // magic + header length
constexpr uint64_t kTrailerBytes = 8;    // the hash of every byte before it
constexpr uint64_t kMaxHeaderBytes = 64u << 20;
constexpr uint64_t kAlign = 64;

nlohmann::json parameter_list(const ParameterBuffers& params) {
  nlohmann::json list = nlohmann::json::array();
  for (const Parameter& p : params.parameters())
    list.push_back({{"name", p.name}, {"shape", p.shape}, {"offset", p.offset}, {"numel", p.numel}});
  return list;
}

std::string step_name(int64_t step) { return fmt::format("step_{:08}.tmckpt", step); }

std::vector<std::pair<int64_t, std::filesystem::path>> checkpoints_in(const std::filesystem::path& dir) {
  std::vector<std::pair<int64_t, std::filesystem::path>> found;
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) return found;
  static const std::regex pattern(R"(step_(\d{8,})\.tmckpt)");
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    std::smatch m;
    const std::string name = entry.path().filename().string();
    if (entry.is_regular_file() && std::regex_match(name, m, pattern))
      found.emplace_back(std::stoll(m[1]), entry.path());
  }
  std::sort(found.begin(), found.end());
  return found;
}

struct Parsed {
  CheckpointState state;
  nlohmann::json parameters;
  uint64_t count = 0, data_offset = 0;
};

// Refuses a file whose bytes are not those that were written: the trailer is the hash of
// every byte before it (magic, header, padding and arrays), checked before anything is read.
void verify(std::span<const std::byte> bytes, const std::string& name) {
  if (bytes.size() >= sizeof kFormat1Magic && std::memcmp(bytes.data(), kFormat1Magic, sizeof kMagic) == 0)
    fail(
        "{}: a checkpoint of an older tokenmill (format 1, whose header no checksum covers) cannot be "
        "verified and is not read: export or resume it with the tokenmill that wrote it, or train again",
        name);
  if (bytes.size() < kPreambleBytes + kTrailerBytes || std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0)
    fail("{}: not a tokenmill checkpoint (bad magic)", name);
  const size_t body = bytes.size() - kTrailerBytes;
  uint64_t stored = 0;
  std::memcpy(&stored, bytes.data() + body, sizeof stored);
  if (fnv1a(bytes.data(), body) != stored)
    fail("{}: the checkpoint does not match its hash (truncated or damaged file)", name);
}

Parsed parse(std::span<const std::byte> bytes, const std::filesystem::path& path) {
  const std::string name = path.string();
  verify(bytes, name);
  uint64_t header_bytes = 0;
  std::memcpy(&header_bytes, bytes.data() + sizeof kMagic, sizeof header_bytes);
  if (header_bytes > kMaxHeaderBytes || header_bytes > bytes.size() - kPreambleBytes - kTrailerBytes)
    fail("{}: checkpoint header of {} bytes does not fit the file", name, header_bytes);
  Parsed out;
  nlohmann::json h;
  try {
    h = nlohmann::json::parse(
        std::string_view(reinterpret_cast<const char*>(bytes.data()) + kPreambleBytes, header_bytes));
    if (h.at("format") != kFormat) fail("{}: unknown checkpoint format {}", name, h["format"].dump());
    CheckpointState& s = out.state;
    s.step = h.at("step").get<int64_t>();
    s.tokens = h.at("tokens").get<int64_t>();
    s.optimizer_steps = h.at("optimizer_steps").get<int64_t>();
    s.loader = {h.at("loader").at("epoch").get<int64_t>(), h.at("loader").at("window").get<int64_t>()};
    s.loss_scale = h.at("loss_scaler").at("scale").get<double>();
    s.scaler_growth_tracker = h.at("loss_scaler").at("growth_tracker").get<int64_t>();
    s.model_config = h.at("model_config");
    s.options = h.at("options");
    if (h.contains("lora")) s.lora = h["lora"];
    out.parameters = h.at("parameters");
    out.count = h.at("count").get<uint64_t>();
  } catch (const nlohmann::json::exception& e) {
    fail("{}: damaged checkpoint header ({})", name, e.what());
  }
  out.data_offset = checked_add(kPreambleBytes, header_bytes, name);
  out.data_offset = checked_mul(checked_add(out.data_offset, kAlign - 1, name) / kAlign, kAlign, name);
  const uint64_t expected =
      checked_add(checked_add(out.data_offset, checked_mul(out.count, 3 * sizeof(float), name), name),
                  kTrailerBytes, name);
  if (expected != bytes.size())
    fail("{}: checkpoint should be {} bytes for {} parameters but is {} (truncated or damaged)", name,
         expected, out.count, bytes.size());
  return out;
}

}  // namespace

std::filesystem::path save_checkpoint(const std::filesystem::path& dir, const CheckpointState& state,
                                      const ParameterBuffers& params, int keep, const MomentSource& moments) {
  if (!moments && params.moments_end() - params.moments_begin() != params.count())
    fail("training: a checkpoint of sharded moments needs their source");
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) fail("{}: cannot create the checkpoint directory ({})", dir.string(), ec.message());
  const nlohmann::json header = {
      {"format", kFormat},
      {"step", state.step},
      {"tokens", state.tokens},
      {"optimizer_steps", state.optimizer_steps},
      {"loader", {{"epoch", state.loader.epoch}, {"window", state.loader.window}}},
      {"loss_scaler", {{"scale", state.loss_scale}, {"growth_tracker", state.scaler_growth_tracker}}},
      {"model_config", state.model_config},
      {"options", state.options},
      {"lora", state.lora},
      {"parameters", parameter_list(params)},
      {"count", params.count()},
  };
  const std::string text = header.dump();
  const uint64_t length = text.size();
  const std::filesystem::path path = dir / step_name(state.step);
  AtomicFile file(path);
  uint64_t hash = kFnv1aOffsetBasis;
  const auto write = [&](const void* data, size_t n) {
    hash = fnv1a(data, n, hash);
    file.write(data, n);
  };
  write(kMagic, sizeof kMagic);
  write(&length, sizeof length);
  write(text.data(), text.size());
  const std::vector<char> pad((kAlign - (kPreambleBytes + text.size()) % kAlign) % kAlign, '\0');
  write(pad.data(), pad.size());
  const auto write_floats = [&](std::span<const float> chunk) { write(chunk.data(), chunk.size_bytes()); };
  params.read_chunks(params.values(), write_floats);
  for (const int which : {0, 1}) {
    if (moments)
      moments(which, write_floats);
    else
      params.read_chunks(which == 0 ? params.first_moments() : params.second_moments(), write_floats);
  }
  file.write(&hash, sizeof hash);
  file.commit();
  const auto all = checkpoints_in(dir);
  for (size_t i = 0; i + static_cast<size_t>(std::max(keep, 1)) < all.size(); ++i)
    std::filesystem::remove(all[i].second, ec);
  return path;
}

CheckpointState read_checkpoint_state(const std::filesystem::path& path) {
  const MappedFile file(path);
  return parse(file.bytes(), path).state;
}

CheckpointState load_checkpoint(const std::filesystem::path& path, ParameterBuffers& params) {
  const MappedFile file(path);
  const Parsed parsed = parse(file.bytes(), path);
  if (parsed.parameters != parameter_list(params) || parsed.count != static_cast<uint64_t>(params.count()))
    fail("{}: the checkpoint's parameters do not match this model (different architecture or size)",
         path.string());
  // The arrays start 64-byte aligned in the mapping, so they can be read as floats.
  const auto* data = reinterpret_cast<const float*>(file.bytes().data() + parsed.data_offset);
  const auto count = static_cast<size_t>(params.count());
  const auto part = static_cast<size_t>(params.moments_begin());
  params.upload(params.values(), {data, count});
  params.upload(params.first_moments(), {data + count + part, params.first_moments().size()});
  params.upload(params.second_moments(), {data + 2 * count + part, params.second_moments().size()});
  return parsed.state;
}

std::filesystem::path latest_checkpoint(const std::filesystem::path& dir) {
  const auto all = checkpoints_in(dir);
  return all.empty() ? std::filesystem::path{} : all.back().second;
}

std::filesystem::path newest_valid_checkpoint(const std::filesystem::path& dir,
                                              const SkippedCheckpoint& on_skipped) {
  const auto all = checkpoints_in(dir);
  for (auto it = all.rbegin(); it != all.rend(); ++it) {
    try {
      read_checkpoint_state(it->second);
      return it->second;
    } catch (const Error& e) {
      if (on_skipped) on_skipped(it->second, e.what());
    }
  }
  return {};
}

void check_checkpoint_dir(const std::filesystem::path& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) fail("{}: cannot create the checkpoint directory ({})", dir.string(), ec.message());
  try {
    const AtomicFile probe(dir / ".write_test");  // its temporary is removed uncommitted
  } catch (const Error& e) {
    fail("{}: checkpoints cannot be written there ({})", dir.string(), e.what());
  }
}

std::vector<std::filesystem::path> remove_stale_temporaries(const std::filesystem::path& dir) {
  std::vector<std::filesystem::path> removed;
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) return removed;
  static const std::regex pattern(R"(step_\d{8,}\.tmckpt\.tmp)");
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec))
    if (std::regex_match(entry.path().filename().string(), pattern)) removed.push_back(entry.path());
  for (const auto& path : removed) std::filesystem::remove(path, ec);
  return removed;
}

}  // namespace tokenmill
