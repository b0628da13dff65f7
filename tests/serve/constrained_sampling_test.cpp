// Sampling under a grammar (Sequence::advance with EngineRequest::grammar) on the fixture's
// 512-token vocabulary with random logits: greedy picks the masked argmax; plain sampling
// (drawn first, masked only when the grammar refuses) follows the masked distribution
// p(t) / P(allowed); truncated sampling never leaves the grammar; end-of-generation comes only
// after a whole sentence, and the request stops once nothing more is allowed.
#include <cmath>
#include <filesystem>
#include <limits>
#include <map>
#include <memory>
#include <random>
#include <span>
#include <vector>

#include <gtest/gtest.h>

#include "grammar/constrained_grammar.h"
#include "serve/sequence.h"
#include "support/fixture_tokenizer.h"
#include "tokenizer/tokenizer.h"

namespace tokenmill {
namespace {

const Tokenizer& tokenizer() { return testing::smollm_chat_tokenizer(); }

GrammarCache& grammars() {
  static GrammarCache cache(tokenizer());
  return cache;
}

std::vector<float> random_logits(std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 2.0f);
  std::vector<float> logits(static_cast<size_t>(tokenizer().vocab_size()));
  for (float& l : logits) l = normal(rng);
  return logits;
}

Sequence make_sequence(const std::string& gbnf, SamplingParams sampling) {
  EngineRequest request;
  request.prompt = {1};
  request.max_tokens = 64;
  request.sampling = sampling;
  request.grammar = grammars().get(gbnf);
  return Sequence(0, std::move(request), std::make_shared<RequestStream>(), &tokenizer(),
                  tokenizer().eos_ids(), 65);
}

// The tokens `gbnf` allows first, and the eos ids.
std::vector<int32_t> allowed_first(const std::string& gbnf) {
  const auto grammar = grammars().get(gbnf);
  const auto mask = grammar->allowed_tokens(grammar->start());
  std::vector<int32_t> ids;
  for (size_t id = 0; id < mask->size(); ++id)
    if (mask->test(id)) ids.push_back(static_cast<int32_t>(id));
  return ids;
}

constexpr const char* kLetters = R"(root ::= [a-e]{1,3})";

TEST(ConstrainedSampling, GreedyPicksTheMaskedArgmax) {
  const std::vector<int32_t> allowed = allowed_first(kLetters);
  ASSERT_GE(allowed.size(), 3u);
  std::mt19937 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<float> logits = random_logits(rng);
    int32_t best = allowed.front();
    for (const int32_t id : allowed)
      if (logits[static_cast<size_t>(id)] > logits[static_cast<size_t>(best)]) best = id;
    Sequence sequence = make_sequence(kLetters, SamplingParams{});
    EXPECT_EQ(sequence.advance(logits).tokens.at(0), best);
  }
}

TEST(ConstrainedSampling, PlainSamplingFollowsTheMaskedDistribution) {
  const std::vector<int32_t> allowed = allowed_first(kLetters);
  std::mt19937 rng(11);
  std::vector<float> logits = random_logits(rng);
  // Make the allowed tokens rare, so that most first draws are refused.
  for (const int32_t id : allowed) logits[static_cast<size_t>(id)] -= 3.0f;
  double total = 0;
  std::map<int32_t, double> expected;
  for (const int32_t id : allowed)
    total += expected[id] = std::exp(static_cast<double>(logits[static_cast<size_t>(id)]));
  constexpr int kDraws = 20000;
  std::map<int32_t, int> seen;
  for (int draw = 0; draw < kDraws; ++draw) {
    SamplingParams sampling;
    sampling.temperature = 1.0f;
    sampling.seed = static_cast<uint64_t>(draw);
    Sequence sequence = make_sequence(kLetters, sampling);
    std::vector<float> row = logits;
    ++seen[sequence.advance(row).tokens.at(0)];
  }
  for (const auto& [id, count] : seen) ASSERT_TRUE(expected.count(id)) << "token " << id << " is not allowed";
  for (const auto& [id, weight] : expected) {
    const double p = weight / total;
    const double sigma = std::sqrt(p * (1 - p) / kDraws);
    EXPECT_NEAR(seen[id] / static_cast<double>(kDraws), p, 5 * sigma + 1e-4) << "token " << id;
  }
}

TEST(ConstrainedSampling, TruncatedSamplingStaysInTheGrammar) {
  const std::vector<int32_t> allowed = allowed_first(kLetters);
  std::mt19937 rng(3);
  for (int draw = 0; draw < 300; ++draw) {
    SamplingParams sampling;
    sampling.temperature = 0.7f;
    sampling.top_p = 0.5f;
    sampling.top_k = 5;
    sampling.seed = static_cast<uint64_t>(draw);
    Sequence sequence = make_sequence(kLetters, sampling);
    std::vector<float> logits = random_logits(rng);
    const int32_t token = sequence.advance(logits).tokens.at(0);
    EXPECT_NE(std::find(allowed.begin(), allowed.end(), token), allowed.end()) << token;
  }
}

TEST(ConstrainedSampling, EndsOnlyAfterAWholeSentenceAndStopsWhenNothingMoreFits) {
  const std::string gbnf = R"(root ::= "ab" "c"?)";
  ASSERT_FALSE(tokenizer().eos_ids().empty());
  const auto eos = static_cast<size_t>(tokenizer().eos_ids().front());
  const auto id_of = [](const std::string& text) {
    const std::vector<int32_t> ids = tokenizer().encode(text, {.add_special_tokens = false});
    EXPECT_EQ(ids.size(), 1u) << text;
    return static_cast<size_t>(ids.at(0));
  };
  const size_t a = id_of("a"), b = id_of("b"), c = id_of("c");
  Sequence sequence = make_sequence(gbnf, SamplingParams{});
  std::vector<float> logits(static_cast<size_t>(tokenizer().vocab_size()), 0.0f);
  logits[eos] = 100;  // eos is the model's favourite, but "ab" is not a sentence yet
  logits[a] = 1;
  StreamEvent first = sequence.advance(logits);
  EXPECT_EQ(first.tokens.at(0), static_cast<int32_t>(a));
  EXPECT_FALSE(first.finish);
  std::fill(logits.begin(), logits.end(), 0.0f);
  logits[eos] = 100;
  logits[b] = 1;
  EXPECT_EQ(sequence.advance(logits).tokens.at(0), static_cast<int32_t>(b));
  // "ab" is a sentence: eos may end it now.
  std::fill(logits.begin(), logits.end(), 0.0f);
  logits[eos] = 100;
  const StreamEvent ended = sequence.advance(logits);
  EXPECT_EQ(ended.tokens.at(0), static_cast<int32_t>(eos));
  EXPECT_EQ(ended.finish, FinishReason::Stop);

  Sequence full = make_sequence(gbnf, SamplingParams{});
  const auto letters = [&] {  // a fresh row: advance() masks the one it gets
    std::fill(logits.begin(), logits.end(), 0.0f);
    logits[a] = logits[b] = logits[c] = 1;
    return std::span<float>(logits);
  };
  for (const size_t expected : {a, b})
    EXPECT_EQ(full.advance(letters()).tokens.at(0), static_cast<int32_t>(expected));
  const StreamEvent last = full.advance(letters());  // "abc": nothing may follow
  EXPECT_EQ(last.tokens.at(0), static_cast<int32_t>(c));
  EXPECT_EQ(last.finish, FinishReason::Stop);
  EXPECT_EQ(last.text, "c");
}

}  // namespace
}  // namespace tokenmill
