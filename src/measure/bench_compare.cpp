#include "measure/bench_compare.h"

#include <sys/wait.h>

#include <array>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace tokenmill {

Comparison run_peer(const std::string& command) {
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) fail("--compare: cannot start '{}'", command);
  std::string output;
  std::array<char, 4096> buffer{};
  size_t n = 0;
  while ((n = fread(buffer.data(), 1, buffer.size(), pipe)) > 0) output.append(buffer.data(), n);
  const int status = pclose(pipe);
  if (status == -1 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
    fail("--compare: '{}' failed ({}); run it alone to see why", command,
         status != -1 && WIFEXITED(status) ? fmt::format("exit status {}", WEXITSTATUS(status))
                                           : std::string("killed or not waited for"));
  return parse_peer_output(command, output);
}

Comparison parse_peer_output(const std::string& command, const std::string& output) {
  const auto json = nlohmann::json::parse(output, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded() || !json.is_object()) {
    const std::string start = output.substr(0, 200);
    fail("--compare: '{}' did not print one JSON object (got: '{}')", command,
         start.substr(0, start.find_last_not_of(" \t\r\n") + 1));
  }
  if (!json.contains("phases") || !json["phases"].is_array())
    fail("--compare: the JSON of '{}' has no \"phases\" array", command);
  Comparison c{command, {}};
  for (size_t i = 0; i < json["phases"].size(); ++i) {
    const nlohmann::json& p = json["phases"][i];
    if (!p.is_object() || !p.contains("phase") || !p["phase"].is_string() || !p.contains("batch") ||
        !p["batch"].is_number_integer() || !p.contains("tokens_per_s") || !p["tokens_per_s"].is_number())
      fail(
          "--compare: phases[{}] of '{}' needs \"phase\" (string), \"batch\" (integer) and \"tokens_per_s\" "
          "(number), got {}",
          i, command, p.dump());
    c.phases.push_back(
        {p["phase"].get<std::string>(), p["batch"].get<int64_t>(), p["tokens_per_s"].get<double>()});
  }
  return c;
}

std::optional<double> throughput_ratio(const BenchRun& run, const PeerPhase& peer) {
  if (!(peer.tokens_per_s > 0)) return std::nullopt;
  for (const PhaseMeasurement& p : run.phases)
    if (p.phase == peer.phase && p.batch == peer.batch && p.seconds > 0)
      return p.tokens_per_s() / peer.tokens_per_s;
  return std::nullopt;
}

}  // namespace tokenmill
