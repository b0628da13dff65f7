// A throughput to price: tokens per second of one phase (training or inference).
#pragma once

#include <cstdint>
#include <string>

namespace tokenmill {

struct Throughput {
  std::string phase;  // "train" (training), "decode" or "prefill" (inference), or "given"
  int64_t batch = 0;  // the batch size it was measured at; 0 when not known
  double tokens_per_s = 0;
  std::string source;  // where the figure comes from: "--tokens-per-s" or "FILE phases[i]"
};

}  // namespace tokenmill
