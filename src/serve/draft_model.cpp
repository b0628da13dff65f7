#include "serve/draft_model.h"

#include <algorithm>
#include <string_view>

#include "core/error.h"

namespace tokenmill {

namespace {

// A text whose tokens tell two vocabularies apart.
constexpr std::string_view kTokenizerProbe =
    "Speculative decoding: The quick brown fox jumps over 13 lazy dogs! def f(x): return x ** 2\n";

// The id of the largest of logits row `row`'s first `limit` entries (the lowest id of a tie,
// as greedy sampling picks).
int32_t greedy_token(const Tensor& logits, int64_t row, int64_t limit) {
  const float* first = logits.as<float>() + row * logits.cols();
  return static_cast<int32_t>(std::max_element(first, first + limit) - first);
}

}  // namespace

DraftModel::DraftModel(const TextModel& draft, const TextModel& target, Backend& backend, int64_t num_blocks,
                       int64_t block_size, int64_t max_tokens, int64_t max_slices, int64_t context)
    : vocab_limit_(std::min(draft.model->config.vocab_size, target.sampling_vocab_limit() > 0
                                                                ? target.sampling_vocab_limit()
                                                                : target.model->config.vocab_size)),
      max_tokens_(max_tokens),
      runner_(*draft.model, backend, num_blocks, block_size, max_tokens, max_slices,
              draft.model->default_kv_dtype(), context),
      claimed_(static_cast<size_t>(num_blocks)) {
  const Tokenizer& ours = draft.require_tokenizer("a draft model");
  const Tokenizer& theirs = target.require_tokenizer("speculative decoding");
  if (ours.vocab_size() != theirs.vocab_size() || draft.eos_token_ids != target.eos_token_ids ||
      ours.encode(kTokenizerProbe) != theirs.encode(kTokenizerProbe))
    fail(
        "the draft model {} does not share the served model's tokenizer ({} tokens against {}): its "
        "guesses would be other tokens",
        draft.model->path.string(), ours.vocab_size(), theirs.vocab_size());
  if (draft.model->config.context_length() < context)
    fail("the draft model {} has a context of {} tokens, shorter than the served {}",
         draft.model->path.string(), draft.model->config.context_length(), context);
}

bool DraftModel::claim_blocks(const Sequence& s, int64_t tokens) {
  const int64_t first = s.draft_computed / runner_.block_size(),
                last = (s.draft_computed + tokens - 1) / runner_.block_size();
  for (int64_t b = first; b <= last; ++b)
    if (claimed_[static_cast<size_t>(s.table.blocks[static_cast<size_t>(b)])]) return false;
  for (int64_t b = first; b <= last; ++b)
    claimed_[static_cast<size_t>(s.table.blocks[static_cast<size_t>(b)])] = true;
  return true;
}

void DraftModel::propose(std::span<Sequence* const> decoding, int64_t max_tokens, int64_t total,
                         BlockManager& blocks) {
  // First step: every sequence's catch-up through its last token, a guess from the last row.
  std::fill(claimed_.begin(), claimed_.end(), false);
  slices_.clear();
  caught_up_.clear();
  guessing_.clear();
  wanted_.clear();
  int64_t budget = max_tokens_;
  for (Sequence* s : decoding) {
    s->draft.clear();
    s->draft_kv_ahead = 0;
    if (budget == 0) continue;
    // The last token (position computed) and the guesses after it need blocks of their own;
    // without them, the catch-up stops before the last token and nothing is guessed.
    int64_t want = std::min({max_tokens, s->room() - 1, total});
    const bool room = blocks.reserve(s->table, s->computed + std::max<int64_t>(want, 1));
    if (!room) want = 0;
    const int64_t behind = s->computed + (room ? 1 : 0) - s->draft_computed;
    if (behind == 0) continue;
    const int64_t tokens = std::min(behind, budget);
    if (!claim_blocks(*s, tokens)) continue;
    const bool guesses = want > 0 && tokens == behind;
    slices_.push_back(
        {std::span(s->tokens()).subspan(static_cast<size_t>(s->draft_computed), static_cast<size_t>(tokens)),
         s->draft_computed, s->table.blocks, guesses ? 1 : 0});
    caught_up_.emplace_back(s, tokens);
    budget -= tokens;
    if (guesses) {
      guessing_.push_back(s);
      wanted_.push_back(want);
      total -= want;
      s->draft_kv_ahead = want - 1;  // the further steps run guesses 1 .. want - 1
    }
  }
  if (slices_.empty()) return;
  Tensor logits = runner_.forward(slices_);
  for (const auto& [s, tokens] : caught_up_) s->draft_computed += tokens;
  for (size_t i = 0; i < guessing_.size(); ++i)
    guessing_[i]->draft.push_back(greedy_token(logits, static_cast<int64_t>(i), vocab_limit_));

  // Each further step runs the previous guess, at the position after the last one.
  // Sequences that want fewer guesses drop out; guessing_ keeps the rest, in order.
  for (int64_t j = 1;; ++j) {
    slices_.clear();
    size_t kept = 0;
    for (size_t i = 0; i < guessing_.size(); ++i) {
      if (wanted_[i] <= j) continue;
      Sequence* s = guessing_[i];
      slices_.push_back({std::span(&s->draft.back(), 1), s->computed + j, s->table.blocks, 1});
      guessing_[kept] = s;
      wanted_[kept++] = wanted_[i];
    }
    guessing_.resize(kept);
    wanted_.resize(kept);
    if (slices_.empty()) return;
    logits = runner_.forward(slices_);
    for (size_t i = 0; i < guessing_.size(); ++i)
      guessing_[i]->draft.push_back(greedy_token(logits, static_cast<int64_t>(i), vocab_limit_));
  }
}

}  // namespace tokenmill
