// libFuzzer target for structured-output grammars (src/grammar/): GBNF text and JSON Schemas
// as a request may send them, then token masks over the SmolLM fixture's 512-token vocabulary.
//
// The first input byte picks the mode: even, the rest is GBNF; odd, the rest is a JSON
// Schema (converted to GBNF first). Properties: parsing and converting fail only with
// tokenmill::Error (anything else would be a 500 or a crash in the server); for a grammar
// that compiles, along a few steps of a walk that takes allowed tokens, every token the mask
// allows is one the matcher takes, and every token it refuses is one the matcher refuses.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "grammar/constrained_grammar.h"
#include "grammar/json_schema_grammar.h"
#include "tokenizer/tokenizer.h"

namespace {

using tokenmill::ConstrainedGrammar;
using tokenmill::GrammarMatcher;

const tokenmill::Tokenizer& tokenizer() {
  static const tokenmill::Tokenizer t = tokenmill::Tokenizer::from_model_dir(
      std::filesystem::path(TOKENMILL_FIXTURES_DIR) / "hf" / "smollm_chat");
  return t;
}

void check(bool ok, const char* what) {
  if (ok) return;
  std::fprintf(stderr, "grammar_fuzz: property violated: %s\n", what);
  std::abort();
}

// A few steps of generation: at each, the mask agrees with the matcher token by token, then
// the first allowed token at or after `pick` is taken.
void walk(const ConstrainedGrammar& grammar, uint8_t pick) {
  GrammarMatcher matcher = grammar.start();
  const tokenmill::GrammarVocabulary& vocabulary = grammar.vocabulary();
  for (int step = 0; step < 6; ++step) {
    const auto mask = grammar.allowed_tokens(matcher);
    int32_t first = -1, from_pick = -1;
    for (size_t id = 0; id < vocabulary.size(); ++id) {
      const std::string& bytes = vocabulary.bytes(static_cast<int32_t>(id));
      GrammarMatcher trial = matcher;
      const bool takes = !bytes.empty() && trial.accept(bytes);
      check(mask->test(id) == takes, "the mask agrees with the matcher");
      if (takes && first < 0) first = static_cast<int32_t>(id);
      if (takes && from_pick < 0 && id >= pick) from_pick = static_cast<int32_t>(id);
    }
    const int32_t chosen = from_pick >= 0 ? from_pick : first;
    if (chosen < 0) return;  // the end, or characters the vocabulary lacks
    check(matcher.accept(vocabulary.bytes(chosen)), "an allowed token is taken");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  std::string gbnf = text;
  try {
    if (data[0] % 2 == 1) {
      const auto schema = nlohmann::ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
      if (schema.is_discarded()) return 0;
      gbnf = tokenmill::json_schema_to_gbnf(schema);
    }
    static tokenmill::GrammarCache cache(tokenizer());
    walk(*cache.get(gbnf), data[0]);
  } catch (const tokenmill::Error&) {
    // refused with a message: what the server answers 400 with
  }
  return 0;
}
