// A small bench.json (schema "tokenmill.bench/1") for the cost tests: a CPU device, prefill at
// batch 1, decode at batches 1 and 8, no training phase.
#pragma once

#include <nlohmann/json.hpp>

namespace tokenmill::testing {

inline nlohmann::json phase_entry(const char* phase, int batch, double tokens_per_s) {
  return {{"phase", phase},
          {"batch", batch},
          {"tokens", 128},
          {"seconds", 1.0},
          {"tokens_per_s", tokens_per_s},
          {"flops_per_token", 2.7e8},
          {"achieved_flops", nullptr},
          {"mfu", nullptr},
          {"bytes_per_token", nullptr},
          {"achieved_bandwidth", nullptr},
          {"roofline_fraction", nullptr},
          {"bound", "memory"}};
}

inline nlohmann::json sample_bench(const char* device_name = "AMD EPYC 9R14 96-Core Processor") {
  return {
      {"schema", "tokenmill.bench/1"},
      {"created_utc", "2026-12-03T04:10:00Z"},
      {"tokenmill_version", "0.1.0"},
      {"device", {{"backend", "cpu"}, {"name", device_name}, {"threads", 2}, {"isa", "avx512"}}},
      {"phases",
       {phase_entry("prefill", 1, 1312.0), phase_entry("decode", 1, 209.0), phase_entry("decode", 8, 900.0)}},
      {"peak_memory_bytes", 412000000},
      {"gpu_samples", nullptr}};
}

}  // namespace tokenmill::testing
