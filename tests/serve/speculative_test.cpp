// Prompt lookup drafting (serve/ngram_draft.h): the continuation of the most recent earlier
// occurrence of the longest matching suffix, bounded by max_tokens and the text's end; and
// the --speculative values accepted and refused (serve/speculative_spec.h).
#include "serve/ngram_draft.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "core/error.h"
#include "serve/speculative_spec.h"

namespace tokenmill {
namespace {

using Ids = std::vector<int32_t>;

Ids draft(const Ids& tokens, int64_t max_tokens, int64_t max_ngram = 3) {
  return ngram_draft(tokens, {.max_tokens = max_tokens, .max_ngram = max_ngram});
}

TEST(NgramDraft, ContinuesTheMostRecentEarlierOccurrenceOfTheLongestSuffix) {
  // Suffix "2 3" occurs at 1 (then 9 9) and at 5 (then 4 5): the most recent wins.
  EXPECT_EQ(draft({1, 2, 3, 9, 9, 2, 3, 4, 5, 7, 2, 3}, 2), (Ids{4, 5}));
  // The longest suffix first: "7 2 3" occurs once, followed by 8, though "3" alone occurs later.
  EXPECT_EQ(draft({7, 2, 3, 8, 3, 1, 7, 2, 3}, 1), (Ids{8}));
  EXPECT_EQ(draft({7, 2, 3, 8, 3, 1, 7, 2, 3}, 1, 1), (Ids{1}));  // n-grams of one token only
  // Near the end the continuation is shorter than asked for.
  EXPECT_EQ(draft({5, 6, 5}, 4), (Ids{6, 5}));
  // A repeated token continues with itself.
  EXPECT_EQ(draft({4, 4, 4, 4}, 3), (Ids{4}));
}

TEST(NgramDraft, IsEmptyWithoutAnEarlierOccurrenceOrRoom) {
  EXPECT_TRUE(draft({}, 4).empty());
  EXPECT_TRUE(draft({1}, 4).empty());
  EXPECT_TRUE(draft({1, 2, 3, 4}, 4).empty());
  EXPECT_TRUE(draft({1, 2, 1}, 0).empty());
  EXPECT_TRUE(draft({1, 2, 1}, -3).empty());
}

TEST(ParseSpeculative, TakesNgramOrADraftModelWithAnOptionalCount) {
  EXPECT_EQ(parse_speculative("ngram").max_tokens, 4);
  EXPECT_TRUE(parse_speculative("ngram").draft_model.empty());
  EXPECT_EQ(parse_speculative("ngram:1").max_tokens, 1);
  EXPECT_EQ(parse_speculative("ngram:16").max_tokens, 16);
  const SpeculativeSpec draft = parse_speculative("draft:/models/small.gguf");
  EXPECT_EQ(draft.draft_model, "/models/small.gguf");
  EXPECT_EQ(draft.max_tokens, 4);
  const SpeculativeSpec counted = parse_speculative("draft:/models/a:b/small:6");
  EXPECT_EQ(counted.draft_model, "/models/a:b/small");
  EXPECT_EQ(counted.max_tokens, 6);
  EXPECT_EQ(parse_speculative("draft:c:/small.gguf").draft_model, "c:/small.gguf");  // not a count
  for (const char* bad : {"", "ngram:", "ngram:0", "ngram:17", "ngram:2x", "ngram:-1", "ngrams", "medusa",
                          "ngram:99999999999999999999", "draft:", "draft", "draft::4", "draft:small.gguf:0",
                          "draft:small.gguf:17"})
    EXPECT_THROW(parse_speculative(bad), Error) << bad;
}

}  // namespace
}  // namespace tokenmill
