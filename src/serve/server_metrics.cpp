#include "serve/server_metrics.h"

#include <fmt/format.h>

#include <algorithm>
#include <iterator>
#include <utility>

namespace tokenmill {
namespace {

constexpr double kTimeToFirstTokenBounds[] = {0.001, 0.005, 0.01, 0.02,  0.04,  0.06,  0.08, 0.1,
                                              0.25,  0.5,   0.75, 1.0,   2.5,   5.0,   7.5,  10.0,
                                              20.0,  40.0,  80.0, 160.0, 640.0, 2560.0};
constexpr double kInterTokenLatencyBounds[] = {0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2,  0.3,  0.4, 0.5,
                                               0.75, 1.0,   2.5,  5.0,   7.5, 10.0, 20.0, 40.0, 80.0};
constexpr double kE2eLatencyBounds[] = {0.3,  0.5,   0.8,   1.0,   1.5,   2.0,    2.5,
                                        5.0,  10.0,  15.0,  20.0,  30.0,  40.0,   50.0,
                                        60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0};

constexpr FinishReason kAllFinishReasons[] = {FinishReason::Length,    FinishReason::Stop,
                                              FinishReason::Cancelled, FinishReason::Timeout,
                                              FinishReason::Shutdown,  FinishReason::Error};

// "# HELP" and "# TYPE" lines of one family (`help` holds no backslash or newline).
void family(std::string& out, const char* name, const char* type, const char* help) {
  fmt::format_to(std::back_inserter(out), "# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
}

// A family of one unlabelled sample.
template <class T>
void single(std::string& out, const char* name, const char* type, const char* help, T value) {
  family(out, name, type, help);
  fmt::format_to(std::back_inserter(out), "{} {}\n", name, value);
}

}  // namespace

ServerMetrics::Histogram::Histogram(std::span<const double> bounds)
    : bounds_(bounds.begin(), bounds.end()), counts_(bounds.size() + 1, 0) {}

void ServerMetrics::Histogram::observe(double value) {
  // Buckets are "less than or equal": the first bound >= value.
  const auto bucket = std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin();
  ++counts_[static_cast<size_t>(bucket)];
  sum_ += value;
}

void ServerMetrics::Histogram::render(std::string& out, const char* name, const char* help) const {
  family(out, name, "histogram", help);
  auto it = std::back_inserter(out);
  int64_t cumulative = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cumulative += counts_[i];
    fmt::format_to(it, "{}_bucket{{le=\"{}\"}} {}\n", name, bounds_[i], cumulative);
  }
  cumulative += counts_.back();
  fmt::format_to(it, "{}_bucket{{le=\"+Inf\"}} {}\n{}_sum {}\n{}_count {}\n", name, cumulative, name, sum_,
                 name, cumulative);
}

int64_t ServerMetrics::TokenRate::period(std::chrono::steady_clock::time_point now) const {
  return std::chrono::duration_cast<std::chrono::milliseconds>(now - origin_) / kSlot;
}

void ServerMetrics::TokenRate::add(std::chrono::steady_clock::time_point now) {
  const int64_t p = period(now);
  const size_t slot = static_cast<size_t>(p) % kSlots;
  if (slot_period_[slot] != p) {
    slot_period_[slot] = p;
    slot_tokens_[slot] = 0;
  }
  ++slot_tokens_[slot];
}

double ServerMetrics::TokenRate::per_second(std::chrono::steady_clock::time_point now) const {
  const int64_t p = period(now);
  const int64_t oldest = p - static_cast<int64_t>(kSlots) + 1;  // negative in the first 10 s
  int64_t tokens = 0;
  for (size_t i = 0; i < kSlots; ++i)
    if (slot_tokens_[i] > 0 && slot_period_[i] >= oldest && slot_period_[i] <= p) tokens += slot_tokens_[i];
  const std::chrono::duration<double> covered = now - (origin_ + oldest * kSlot);
  return covered.count() > 0.0 ? static_cast<double>(tokens) / covered.count() : 0.0;
}

ServerMetrics::ServerMetrics(Clock clock)
    : clock_(std::move(clock)),
      time_to_first_token_(kTimeToFirstTokenBounds),
      inter_token_latency_(kInterTokenLatencyBounds),
      e2e_latency_(kE2eLatencyBounds),
      token_rate_(clock_()) {
  static_assert(std::size(kAllFinishReasons) == kFinishReasons);
}

void ServerMetrics::on_first_token(double seconds_since_submit) {
  const auto now = clock_();
  const std::lock_guard lock(mutex_);
  time_to_first_token_.observe(seconds_since_submit);
  token_rate_.add(now);
}

void ServerMetrics::on_next_token(double seconds_since_previous) {
  const auto now = clock_();
  const std::lock_guard lock(mutex_);
  inter_token_latency_.observe(seconds_since_previous);
  token_rate_.add(now);
}

// The token counts are in the snapshot's counters already.
void ServerMetrics::on_finished(FinishReason reason, double seconds_since_submit, int64_t, int64_t) {
  const std::lock_guard lock(mutex_);
  e2e_latency_.observe(seconds_since_submit);
  ++finished_[static_cast<size_t>(reason)];
}

void ServerMetrics::on_http_response(int status) {
  if (status < 100 || status > 599) return;
  const std::lock_guard lock(mutex_);
  ++http_responses_[static_cast<size_t>(status / 100 - 1)];
}

double ServerMetrics::tokens_per_second() const {
  const auto now = clock_();
  const std::lock_guard lock(mutex_);
  return token_rate_.per_second(now);
}

std::string ServerMetrics::render(const EngineSnapshot& s) const {
  std::string out;
  single(out, "tokenmill_num_requests_running", "gauge", "Requests in the running batch.", s.running);
  single(out, "tokenmill_num_requests_waiting", "gauge", "Requests queued, not yet running.", s.waiting);
  const double usage = s.kv_blocks_total > 0
                           ? static_cast<double>(s.kv_blocks_used) / static_cast<double>(s.kv_blocks_total)
                           : 0.0;
  single(out, "tokenmill_kv_cache_usage_ratio", "gauge",
         "Fraction of the KV cache blocks held by running sequences (0 to 1).", usage);
  single(out, "tokenmill_kv_cache_used_blocks", "gauge", "KV cache blocks held by running sequences.",
         s.kv_blocks_used);
  single(out, "tokenmill_kv_cache_capacity_blocks", "gauge", "KV cache blocks in the pool.",
         s.kv_blocks_total);
  single(out, "tokenmill_prefix_cache_queries_total", "counter",
         "Prompt tokens looked up in the prefix cache.", s.prefix_cache_queries);
  single(out, "tokenmill_prefix_cache_hits_total", "counter",
         "Prompt tokens found in the prefix cache (their KV reused, not computed).", s.prefix_cache_hits);
  single(out, "tokenmill_num_preemptions_total", "counter",
         "Sequences preempted when the KV cache was full (recomputed later).", s.preemptions);
  single(out, "tokenmill_prompt_tokens_total", "counter",
         "Prompt tokens computed (prefix cache hits excluded).", s.prompt_tokens);
  single(out, "tokenmill_generation_tokens_total", "counter", "Tokens generated.", s.generated_tokens);
  single(out, "tokenmill_engine_steps_total", "counter", "Batched forward steps run by the engine.", s.steps);
  single(out, "tokenmill_spec_draft_tokens_total", "counter",
         "Speculative (prompt lookup) tokens run after decode tokens.", s.draft_tokens);
  single(out, "tokenmill_spec_accepted_tokens_total", "counter",
         "Speculative tokens the model confirmed (each saved a forward step).", s.accepted_tokens);

  const auto now = clock_();
  const std::lock_guard lock(mutex_);
  single(out, "tokenmill_generation_tokens_per_second", "gauge",
         "Tokens generated per second over the last 10 seconds.", token_rate_.per_second(now));
  time_to_first_token_.render(out, "tokenmill_time_to_first_token_seconds",
                              "Time from a request's submission to its first token.");
  inter_token_latency_.render(out, "tokenmill_inter_token_latency_seconds",
                              "Time between two consecutive tokens of a request.");
  e2e_latency_.render(out, "tokenmill_e2e_request_latency_seconds",
                      "Time from a request's submission to its end, whatever the reason.");

  auto it = std::back_inserter(out);
  family(out, "tokenmill_requests_finished_total", "counter", "Requests finished, by finish reason.");
  for (const FinishReason reason : kAllFinishReasons)
    fmt::format_to(it, "tokenmill_requests_finished_total{{reason=\"{}\"}} {}\n", finish_reason_name(reason),
                   finished_[static_cast<size_t>(reason)]);
  family(out, "tokenmill_http_responses_total", "counter", "HTTP responses sent, by status class.");
  for (size_t c = 0; c < kStatusClasses; ++c)
    fmt::format_to(it, "tokenmill_http_responses_total{{code=\"{}xx\"}} {}\n", c + 1, http_responses_[c]);
  return out;
}

}  // namespace tokenmill
