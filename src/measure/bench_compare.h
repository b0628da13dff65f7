// `tokenmill bench --compare CMD`: a peer's benchmark run in the same session, for ratios.
//
// The peer command is run through the shell (popen) and must print one JSON object on its
// standard output with a "phases" array of {"phase": str, "batch": int, "tokens_per_s": number}
// (anything else in the object is ignored). A command that cannot start, exits non-zero,
// prints something else or a phase without those fields is an Error naming the command.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "measure/bench_runner.h"

namespace tokenmill {

struct PeerPhase {
  std::string phase;
  int64_t batch = 1;
  double tokens_per_s = 0;
};

struct Comparison {
  std::string command;
  std::vector<PeerPhase> phases;
};

// Runs `command` and reads its phases.
Comparison run_peer(const std::string& command);

// Parses the peer's output; `command` names it in errors.
Comparison parse_peer_output(const std::string& command, const std::string& output);

// ours / peer tokens per second for the peer's phase, or nullopt when this run has no phase
// of that name and batch, or the peer's throughput is not positive.
std::optional<double> throughput_ratio(const BenchRun& run, const PeerPhase& peer);

}  // namespace tokenmill
