// grammar_mask_bench: the cost of one structured-output token mask (GrammarVocabulary::allowed,
// uncached) on a real vocabulary, for the states a decode step meets:
//   any-text   nearly every token allowed (a bounded string's inside): the whole trie walked;
//   json-key   between two properties of a schema: only a few tokens fit;
//   digits     an integer: the walk leaves most tokens at their first byte.
//
//   TOKENMILL_GGUF=$(python3 scripts/smollm2_gguf.py) build/release/bench/grammar_mask_bench
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "formats/gguf.h"
#include "grammar/grammar_matcher.h"
#include "grammar/grammar_vocabulary.h"
#include "grammar/json_schema_grammar.h"

namespace {

using tokenmill::GrammarMatcher;

const tokenmill::GrammarVocabulary& vocabulary() {
  static const tokenmill::GrammarVocabulary v = [] {
    const char* path = std::getenv("TOKENMILL_GGUF");
    if (path == nullptr) {
      std::fprintf(stderr, "set TOKENMILL_GGUF to a GGUF file whose vocabulary to use\n");
      std::exit(2);
    }
    return tokenmill::GrammarVocabulary(tokenmill::Tokenizer::from_gguf(tokenmill::GgufFile::open(path)));
  }();
  return v;
}

// The mask after `prefix` has been matched against `gbnf`.
void mask_after(benchmark::State& state, const std::string& gbnf, const std::string& prefix) {
  GrammarMatcher matcher(std::make_shared<const tokenmill::Grammar>(tokenmill::Grammar::parse_gbnf(gbnf)));
  if (!matcher.accept(prefix)) state.SkipWithError("the prefix does not match the grammar");
  tokenmill::TokenMask mask;
  for (auto _ : state) {
    vocabulary().allowed(matcher, matcher.state(), mask);
    benchmark::DoNotOptimize(&mask);
  }
  state.counters["allowed"] = static_cast<double>(mask.count());
}

const nlohmann::json kSchema = nlohmann::json::parse(R"({"type": "object", "properties": {
  "name": {"type": "string", "maxLength": 4000}, "age": {"type": "integer"}}, "required": ["name", "age"],
  "additionalProperties": false})");

void BM_AnyText(benchmark::State& state) {
  mask_after(state, tokenmill::json_schema_to_gbnf(kSchema), R"({"age":1,"name":"Ad)");
}
void BM_JsonKey(benchmark::State& state) {
  mask_after(state, tokenmill::json_schema_to_gbnf(kSchema), R"({"age":12,)");
}
void BM_Digits(benchmark::State& state) {
  mask_after(state, tokenmill::json_schema_to_gbnf(kSchema), R"({"age":1)");
}

BENCHMARK(BM_AnyText)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_JsonKey)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Digits)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
