// ServerMetrics: what GET /metrics reports, in the Prometheus text exposition format 0.0.4,
// every family named tokenmill_*.
//
// Gauges and counters of the engine come from an EngineSnapshot taken at render time; the
// latency histograms, the finished-request counters, the HTTP response counters and the
// tokens/s gauge are accumulated here from the engine's observer callbacks (engine thread)
// and from on_http_response (HTTP threads). Every member is safe to call from any thread.
//
// Histogram buckets are vLLM's (v1 engine, vllm/v1/metrics/loggers.py):
//   time to first token (s): 0.001 0.005 0.01 0.02 0.04 0.06 0.08 0.1 0.25 0.5 0.75 1 2.5 5
//                            7.5 10 20 40 80 160 640 2560
//   inter-token latency (s): 0.01 0.025 0.05 0.075 0.1 0.15 0.2 0.3 0.4 0.5 0.75 1 2.5 5 7.5
//                            10 20 40 80
//   end-to-end latency (s):  0.3 0.5 0.8 1 1.5 2 2.5 5 10 15 20 30 40 50 60 120 240 480 960
//                            1920 7680
//
// Tokens/s: the tokens generated (one per on_first_token or on_next_token call) whose call
// time falls in the sliding window [w, now], divided by now - w, where w is the start of
// the oldest of the 100 slots of 100 ms that end at now (so now - w is in [9.9 s, 10 s);
// slots are counted from construction, and in the first 10 s the window reaches back
// before it: the rate ramps up rather than spiking on a few tokens).
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "serve/engine.h"

namespace tokenmill {

class ServerMetrics final : public EngineObserver {
 public:
  using Clock = std::function<std::chrono::steady_clock::time_point()>;

  // `clock` stamps the token events and the render (tests pass a manual clock).
  explicit ServerMetrics(Clock clock = std::chrono::steady_clock::now);

  void on_first_token(double seconds_since_submit) override;
  void on_next_token(double seconds_since_previous) override;
  void on_finished(FinishReason reason, double seconds_since_submit, int64_t prompt_tokens,
                   int64_t completion_tokens) override;

  // Counts one HTTP response by status class (1xx .. 5xx); a status outside 100..599 is
  // not an HTTP status and is not counted.
  void on_http_response(int status);

  double tokens_per_second() const;

  // The whole exposition: the snapshot's gauges and counters, then what was observed here.
  std::string render(const EngineSnapshot& snapshot) const;

 private:
  // Observations in fixed buckets: counts_[i] holds values in (bounds[i-1], bounds[i]]; the
  // last count holds those above every bound (the +Inf bucket).
  class Histogram {
   public:
    explicit Histogram(std::span<const double> bounds);
    void observe(double value);
    void render(std::string& out, const char* name, const char* help) const;

   private:
    std::vector<double> bounds_;
    std::vector<int64_t> counts_;
    double sum_ = 0.0;
  };

  // Generated tokens per 100 ms slot over the last 10 s (see the header comment).
  class TokenRate {
   public:
    explicit TokenRate(std::chrono::steady_clock::time_point origin) : origin_(origin) {}
    void add(std::chrono::steady_clock::time_point now);
    double per_second(std::chrono::steady_clock::time_point now) const;

   private:
    static constexpr std::chrono::milliseconds kSlot{100};
    static constexpr size_t kSlots = 100;
    int64_t period(std::chrono::steady_clock::time_point now) const;

    std::chrono::steady_clock::time_point origin_;
    std::array<int64_t, kSlots> slot_period_{};  // the 100 ms period each slot counts
    std::array<int64_t, kSlots> slot_tokens_{};
  };

  static constexpr size_t kFinishReasons = 6;  // FinishReason's values
  static constexpr size_t kStatusClasses = 5;  // 1xx .. 5xx

  Clock clock_;
  mutable std::mutex mutex_;
  Histogram time_to_first_token_;
  Histogram inter_token_latency_;
  Histogram e2e_latency_;
  TokenRate token_rate_;
  std::array<int64_t, kFinishReasons> finished_{};
  std::array<int64_t, kStatusClasses> http_responses_{};
};

}  // namespace tokenmill
