// Throughputs read from a bench.json (schema "tokenmill.bench/1", written by `tokenmill bench`).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "cost/throughput.h"

namespace tokenmill {

struct BenchThroughputs {
  std::string device_name;         // device.name
  std::vector<Throughput> phases;  // the phases chosen, in the order asked
};

// Reads `path` and takes phases[].tokens_per_s of the entry with the largest batch of each
// phase asked: `phase` when not empty, otherwise "train" (training) and "decode" (inference),
// whichever the file has. Throws Error naming the file and the field when the file is not
// JSON, its schema is not "tokenmill.bench/1", a field is missing or has the wrong type, a
// chosen tokens_per_s is null or not > 0, or no phase asked is in the file.
BenchThroughputs read_bench_throughputs(const std::filesystem::path& path, const std::string& phase);

}  // namespace tokenmill
