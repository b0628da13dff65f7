// ServerMetrics renders valid Prometheus text (0.0.4): the exposition is parsed back here
// and every family must have one HELP and one TYPE line before its samples, counters end
// in _total, histogram buckets are cumulative, end with +Inf and agree with the values
// observed, _count and _sum are right, the snapshot's values come out unchanged, finished
// requests and HTTP responses are counted by label, tokens/s follows its sliding-window
// definition, and renders stay consistent while other threads observe.
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "serve/server_metrics.h"

namespace tokenmill {
namespace {

using Labels = std::map<std::string, std::string>;

struct Sample {
  std::string name;
  Labels labels;
  double value = 0.0;
};

struct Family {
  std::string help, type;
  std::vector<Sample> samples;
};

using Families = std::map<std::string, Family>;

// {key="value",...} starting at text[pos] == '{'; returns the position after '}'.
size_t parse_labels(const std::string& text, size_t pos, Labels& labels) {
  ++pos;
  while (pos < text.size() && text[pos] != '}') {
    const size_t eq = text.find('=', pos);
    EXPECT_NE(eq, std::string::npos) << text;
    const std::string key = text.substr(pos, eq - pos);
    EXPECT_EQ(text.at(eq + 1), '"') << text;
    std::string value;
    for (pos = eq + 2; text.at(pos) != '"'; ++pos) {
      if (text[pos] == '\\') {
        const char escaped = text.at(++pos);
        EXPECT_TRUE(escaped == '\\' || escaped == '"' || escaped == 'n') << text;
        value += escaped == 'n' ? '\n' : escaped;
      } else {
        value += text[pos];
      }
    }
    EXPECT_TRUE(labels.emplace(key, value).second) << "label " << key << " twice in " << text;
    ++pos;
    if (text.at(pos) == ',') ++pos;
  }
  EXPECT_EQ(text.at(pos), '}') << text;
  return pos + 1;
}

// Parses the exposition, checking its grammar: every line ends in '\n'; a family's HELP and
// TYPE come once, before its samples, and its samples are contiguous (a histogram's are
// NAME_bucket, NAME_sum and NAME_count).
Families parse(const std::string& text) {
  EXPECT_FALSE(text.empty());
  EXPECT_EQ(text.back(), '\n');
  Families families;
  std::string current;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    EXPECT_FALSE(line.empty()) << "empty line";
    if (line.rfind("# HELP ", 0) == 0) {
      const size_t space = line.find(' ', 7);
      current = line.substr(7, space - 7);
      EXPECT_FALSE(families.count(current)) << "family " << current << " declared twice";
      families[current].help = line.substr(space + 1);
    } else if (line.rfind("# TYPE ", 0) == 0) {
      const size_t space = line.find(' ', 7);
      EXPECT_EQ(line.substr(7, space - 7), current) << "TYPE without HELP: " << line;
      EXPECT_TRUE(families[current].type.empty()) << line;
      families[current].type = line.substr(space + 1);
    } else {
      Sample sample;
      size_t pos = line.find_first_of("{ ");
      sample.name = line.substr(0, pos);
      if (line.at(pos) == '{') pos = parse_labels(line, pos, sample.labels);
      EXPECT_EQ(line.at(pos), ' ') << line;
      size_t used = 0;
      sample.value = std::stod(line.substr(pos + 1), &used);
      EXPECT_EQ(pos + 1 + used, line.size()) << "trailing text in " << line;
      Family& family = families[current];
      const bool own =
          sample.name == current || (family.type == "histogram" &&
                                     (sample.name == current + "_bucket" || sample.name == current + "_sum" ||
                                      sample.name == current + "_count"));
      EXPECT_TRUE(own) << sample.name << " is not a sample of the family above it, " << current;
      family.samples.push_back(sample);
    }
  }
  for (const auto& [name, family] : families) {
    EXPECT_EQ(name.rfind("tokenmill_", 0), 0u) << name;
    EXPECT_FALSE(family.help.empty()) << name;
    EXPECT_TRUE(family.type == "gauge" || family.type == "counter" || family.type == "histogram") << name;
    EXPECT_FALSE(family.samples.empty()) << name;
    if (family.type == "counter") {
      EXPECT_TRUE(name.ends_with("_total")) << name;
    }
  }
  return families;
}

// The unlabelled sample `sample` of `family`.
double value(const Families& families, const std::string& family, const std::string& sample) {
  const auto it = families.find(family);
  if (it == families.end()) {
    ADD_FAILURE() << "no family " << family;
    return NAN;
  }
  for (const Sample& s : it->second.samples)
    if (s.name == sample && s.labels.empty()) return s.value;
  ADD_FAILURE() << "no sample " << sample << " in " << family;
  return NAN;
}

double value(const Families& families, const std::string& name) { return value(families, name, name); }

// A labelled counter's samples, by the value of their one label.
std::map<std::string, double> by_label(const Families& families, const std::string& name,
                                       const std::string& label) {
  std::map<std::string, double> out;
  for (const Sample& s : families.at(name).samples) {
    EXPECT_EQ(s.labels.size(), 1u) << name;
    EXPECT_TRUE(out.emplace(s.labels.at(label), s.value).second) << name << " repeats " << s.labels.at(label);
  }
  return out;
}

// Checks a histogram family's structure; returns its buckets as (le, cumulative count).
std::vector<std::pair<double, double>> buckets(const Families& families, const std::string& name) {
  std::vector<std::pair<double, double>> out;
  const Family& family = families.at(name);
  EXPECT_EQ(family.type, "histogram");
  for (const Sample& s : family.samples) {
    if (s.name != name + "_bucket") continue;
    EXPECT_EQ(s.labels.size(), 1u);
    out.emplace_back(std::stod(s.labels.at("le")), s.value);
  }
  EXPECT_GE(out.size(), 2u) << name;
  EXPECT_TRUE(std::isinf(out.back().first)) << name << ": the last bucket must be +Inf";
  for (size_t i = 1; i < out.size(); ++i) {
    EXPECT_LT(out[i - 1].first, out[i].first) << name << ": bounds must increase";
    EXPECT_LE(out[i - 1].second, out[i].second) << name << ": buckets must be cumulative";
  }
  EXPECT_EQ(out.back().second, value(families, name, name + "_count")) << name;
  return out;
}

void expect_histogram(const Families& families, const std::string& name,
                      const std::vector<double>& observed) {
  for (const auto& [le, count] : buckets(families, name)) {
    double at_most = 0;
    for (double v : observed) at_most += v <= le ? 1 : 0;
    EXPECT_EQ(count, at_most) << name << " le=" << le;
  }
  double sum = 0.0;
  for (double v : observed) sum += v;
  EXPECT_DOUBLE_EQ(value(families, name, name + "_sum"), sum) << name;
  EXPECT_EQ(value(families, name, name + "_count"), static_cast<double>(observed.size())) << name;
}

// A clock the test moves by hand.
struct ManualClock {
  std::chrono::steady_clock::time_point now{};
  ServerMetrics::Clock clock() {
    return [this] { return now; };
  }
};

TEST(ServerMetrics, ReportsTheSnapshotInEveryFamily) {
  EngineSnapshot snapshot;
  snapshot.running = 3;
  snapshot.waiting = 7;
  snapshot.kv_blocks_total = 400;
  snapshot.kv_blocks_used = 100;
  snapshot.prefix_cache_queries = 1000;
  snapshot.prefix_cache_hits = 640;
  snapshot.preemptions = 2;
  snapshot.prompt_tokens = 12345;
  snapshot.generated_tokens = 6789;
  snapshot.steps = 555;
  snapshot.draft_tokens = 400;
  snapshot.accepted_tokens = 250;
  const ServerMetrics metrics;
  const Families f = parse(metrics.render(snapshot));

  struct Single {
    const char* name;
    const char* type;
    double value;
  };
  const Single singles[] = {
      {"tokenmill_num_requests_running", "gauge", 3},
      {"tokenmill_num_requests_waiting", "gauge", 7},
      {"tokenmill_kv_cache_usage_ratio", "gauge", 0.25},
      {"tokenmill_kv_cache_used_blocks", "gauge", 100},
      {"tokenmill_kv_cache_capacity_blocks", "gauge", 400},
      {"tokenmill_prefix_cache_queries_total", "counter", 1000},
      {"tokenmill_prefix_cache_hits_total", "counter", 640},
      {"tokenmill_num_preemptions_total", "counter", 2},
      {"tokenmill_prompt_tokens_total", "counter", 12345},
      {"tokenmill_generation_tokens_total", "counter", 6789},
      {"tokenmill_engine_steps_total", "counter", 555},
      {"tokenmill_spec_draft_tokens_total", "counter", 400},
      {"tokenmill_spec_accepted_tokens_total", "counter", 250},
      {"tokenmill_generation_tokens_per_second", "gauge", 0},
  };
  std::set<std::string> expected = {"tokenmill_time_to_first_token_seconds",
                                    "tokenmill_inter_token_latency_seconds",
                                    "tokenmill_e2e_request_latency_seconds",
                                    "tokenmill_requests_finished_total", "tokenmill_http_responses_total"};
  for (const Single& single : singles) {
    expected.insert(single.name);
    ASSERT_TRUE(f.count(single.name)) << single.name;
    EXPECT_EQ(f.at(single.name).type, single.type) << single.name;
    EXPECT_EQ(f.at(single.name).samples.size(), 1u) << single.name;
    EXPECT_EQ(value(f, single.name), single.value) << single.name;
  }
  std::set<std::string> names;
  for (const auto& [name, family] : f) names.insert(name);
  EXPECT_EQ(names, expected);
  for (const char* histogram :
       {"tokenmill_time_to_first_token_seconds", "tokenmill_inter_token_latency_seconds",
        "tokenmill_e2e_request_latency_seconds"})
    expect_histogram(f, histogram, {});
}

TEST(ServerMetrics, KvUsageIsZeroWithoutAPool) {
  const Families f = parse(ServerMetrics().render(EngineSnapshot{}));
  EXPECT_EQ(value(f, "tokenmill_kv_cache_usage_ratio"), 0.0);
}

TEST(ServerMetrics, HistogramsAgreeWithTheObservedValues) {
  ServerMetrics metrics;
  // Values below the first bound, on a bound (buckets are "<="), between bounds, above all.
  const std::vector<double> ttft = {0.0002, 0.001, 0.03, 0.1, 0.1, 7.0, 3000.0};
  const std::vector<double> itl = {0.004, 0.01, 0.012, 0.5, 0.61, 100.0};
  const std::vector<double> e2e = {0.1, 0.3, 1.2, 9.99, 8000.0};
  for (double v : ttft) metrics.on_first_token(v);
  for (double v : itl) metrics.on_next_token(v);
  for (double v : e2e) metrics.on_finished(FinishReason::Stop, v, 10, 20);
  const Families f = parse(metrics.render(EngineSnapshot{}));
  expect_histogram(f, "tokenmill_time_to_first_token_seconds", ttft);
  expect_histogram(f, "tokenmill_inter_token_latency_seconds", itl);
  expect_histogram(f, "tokenmill_e2e_request_latency_seconds", e2e);
  // vLLM's bounds: the ends of each list.
  const auto first_and_last_bound = [&](const std::string& name) {
    const auto b = buckets(f, name);
    return std::pair(b.front().first, b[b.size() - 2].first);
  };
  EXPECT_EQ(first_and_last_bound("tokenmill_time_to_first_token_seconds"), std::pair(0.001, 2560.0));
  EXPECT_EQ(first_and_last_bound("tokenmill_inter_token_latency_seconds"), std::pair(0.01, 80.0));
  EXPECT_EQ(first_and_last_bound("tokenmill_e2e_request_latency_seconds"), std::pair(0.3, 7680.0));
}

TEST(ServerMetrics, CountsFinishedRequestsByReasonAndResponsesByStatusClass) {
  ServerMetrics metrics;
  for (FinishReason r :
       {FinishReason::Stop, FinishReason::Stop, FinishReason::Length, FinishReason::Cancelled,
        FinishReason::Cancelled, FinishReason::Cancelled, FinishReason::Timeout})
    metrics.on_finished(r, 1.0, 5, 5);
  for (int status : {200, 200, 204, 101, 400, 401, 413, 429, 503, 99, 600, -1})
    metrics.on_http_response(status);
  const Families f = parse(metrics.render(EngineSnapshot{}));

  EXPECT_EQ(
      by_label(f, "tokenmill_requests_finished_total", "reason"),
      (std::map<std::string, double>{
          {"stop", 2}, {"length", 1}, {"cancelled", 3}, {"timeout", 1}, {"shutdown", 0}, {"error", 0}}));
  EXPECT_EQ(by_label(f, "tokenmill_http_responses_total", "code"),
            (std::map<std::string, double>{{"1xx", 1}, {"2xx", 3}, {"3xx", 0}, {"4xx", 4}, {"5xx", 1}}));
}

TEST(ServerMetrics, TokensPerSecondCountsTheLastTenSeconds) {
  using std::chrono::milliseconds;
  ManualClock time;
  ServerMetrics metrics(time.clock());
  const auto at = [&](int64_t ms) { time.now = std::chrono::steady_clock::time_point{} + milliseconds(ms); };

  at(0);
  EXPECT_EQ(metrics.tokens_per_second(), 0.0);
  at(50);
  for (int i = 0; i < 5; ++i) metrics.on_first_token(0.05);
  at(1000);
  // Now is in period 10: the window is periods -89..10, from -8.9 s to 1 s.
  EXPECT_DOUBLE_EQ(metrics.tokens_per_second(), 5.0 / 9.9);

  at(5000);
  for (int i = 0; i < 7; ++i) metrics.on_next_token(0.01);  // period 50
  at(5150);
  for (int i = 0; i < 11; ++i) metrics.on_next_token(0.01);  // period 51
  at(14900);
  for (int i = 0; i < 13; ++i) metrics.on_next_token(0.01);  // period 149
  at(15000);
  // Now is in period 150: the window is periods 51..150, from 5.1 s to 15 s.
  EXPECT_DOUBLE_EQ(metrics.tokens_per_second(), 24.0 / 9.9);
  at(15099);
  EXPECT_DOUBLE_EQ(metrics.tokens_per_second(), 24.0 / 9.999);
  const Families f = parse(metrics.render(EngineSnapshot{}));
  EXPECT_DOUBLE_EQ(value(f, "tokenmill_generation_tokens_per_second"), 24.0 / 9.999);

  at(15100);  // period 151: period 51 leaves the window
  EXPECT_DOUBLE_EQ(metrics.tokens_per_second(), 13.0 / 9.9);
  at(60000);  // a slot reused long after: its old count is not counted
  EXPECT_EQ(metrics.tokens_per_second(), 0.0);
  metrics.on_first_token(0.1);  // period 600 reuses slot 0
  at(60500);
  EXPECT_DOUBLE_EQ(metrics.tokens_per_second(), 1.0 / 9.9);  // 6 / 9.9 if slot 0 kept its count
}

TEST(ServerMetrics, RendersStayConsistentWhileThreadsObserve) {
  constexpr int kThreads = 4, kRounds = 3000;
  ServerMetrics metrics;
  const std::vector<std::string> histograms = {"tokenmill_time_to_first_token_seconds",
                                               "tokenmill_inter_token_latency_seconds",
                                               "tokenmill_e2e_request_latency_seconds"};
  // The observers start only after the first render, so that at least one render overlaps them
  // however the machine schedules the threads.
  std::atomic<bool> first_render_done{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&metrics, &first_render_done, t] {
      while (!first_render_done.load()) std::this_thread::yield();
      for (int i = 0; i < kRounds; ++i) {
        const double v = 0.001 * ((i * 7 + t) % 1000);
        metrics.on_first_token(v);
        metrics.on_next_token(v);
        metrics.on_finished(i % 2 ? FinishReason::Stop : FinishReason::Length, v, 1, 1);
        metrics.on_http_response(200);
      }
    });
  std::map<std::string, double> previous;
  int renders = 0;
  for (bool done = false; !done && !::testing::Test::HasFailure(); ++renders) {
    const Families f = parse(metrics.render(EngineSnapshot{}));
    for (const std::string& h : histograms) {
      buckets(f, h);  // cumulative, +Inf == _count
      const double count = value(f, h, h + "_count");
      EXPECT_GE(count, previous[h]) << h << ": counts only grow";
      previous[h] = count;
    }
    done = by_label(f, "tokenmill_http_responses_total", "code").at("2xx") == kThreads * kRounds;
    first_render_done.store(true);
  }
  for (std::thread& t : threads) t.join();
  EXPECT_GT(renders, 1);

  const Families f = parse(metrics.render(EngineSnapshot{}));
  for (const std::string& h : histograms) EXPECT_EQ(value(f, h, h + "_count"), kThreads * kRounds) << h;
  const auto finished = by_label(f, "tokenmill_requests_finished_total", "reason");
  EXPECT_EQ(finished.at("stop"), kThreads * kRounds / 2);
  EXPECT_EQ(finished.at("length"), kThreads * kRounds / 2);
  EXPECT_GT(metrics.tokens_per_second(), 0.0);
}

}  // namespace
}  // namespace tokenmill
