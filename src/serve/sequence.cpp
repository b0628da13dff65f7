#include "serve/sequence.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "runtime/logprobs.h"

namespace tokenmill {

const char* finish_reason_name(FinishReason reason) {
  switch (reason) {
    case FinishReason::Length: return "length";
    case FinishReason::Stop: return "stop";
    case FinishReason::Cancelled: return "cancelled";
    case FinishReason::Timeout: return "timeout";
    case FinishReason::Shutdown: return "shutdown";
    case FinishReason::Error: return "error";
  }
  return "unknown";
}

Sequence::Sequence(uint64_t id, EngineRequest request, std::shared_ptr<RequestStream> stream,
                   const Tokenizer* tokenizer, const std::vector<int32_t>& eos_ids, int64_t max_total)
    : id_(id),
      request_(std::move(request)),
      stream_(std::move(stream)),
      tokens_(request_.prompt),
      prompt_length_(static_cast<int64_t>(request_.prompt.size())),
      max_total_(max_total),
      eos_ids_(eos_ids),
      sampler_(request_.sampling),
      stops_(request_.stop) {
  if (tokenizer != nullptr) decoder_.emplace(*tokenizer, request_.skip_special_tokens);
  if (request_.grammar) grammar_.emplace(request_.grammar->start());
}

bool Sequence::is_stop_token(int32_t token) const {
  const auto has = [token](const std::vector<int32_t>& ids) {
    return std::find(ids.begin(), ids.end(), token) != ids.end();
  };
  return has(request_.stop_token_ids) || (!request_.ignore_eos && has(eos_ids_));
}

void Sequence::constrain(std::span<float> logits) const {
  const auto allowed = request_.grammar->allowed_tokens(*grammar_);
  std::vector<std::pair<size_t, float>> ends;  // the end-of-generation logits, kept aside
  const auto keep = [&](const std::vector<int32_t>& ids) {
    for (const int32_t id : ids)
      if (id >= 0 && static_cast<size_t>(id) < logits.size())
        ends.emplace_back(id, logits[static_cast<size_t>(id)]);
  };
  keep(request_.stop_token_ids);
  if (!request_.ignore_eos) keep(eos_ids_);
  bool any = false;
  for (size_t id = 0; id < logits.size(); ++id) {
    const bool ok = allowed->test(id);
    if (!ok) logits[id] = -std::numeric_limits<float>::infinity();
    any |= ok;
  }
  if (grammar_->accepting() || !any)
    for (const auto& [id, logit] : ends) logits[id] = logit;
}

bool Sequence::grammar_allows(int32_t token) const {
  if (is_stop_token(token)) return grammar_->accepting();
  const GrammarVocabulary& vocabulary = request_.grammar->vocabulary();
  if (token < 0 || static_cast<size_t>(token) >= vocabulary.size() || vocabulary.bytes(token).empty())
    return false;
  GrammarMatcher trial = *grammar_;
  return trial.accept(vocabulary.bytes(token));
}

int32_t Sequence::sample_constrained(std::span<float> logits) {
  const SamplingParams& p = request_.sampling;
  const bool truncated = p.temperature != 0.0f && (p.top_k > 0 || p.top_p < 1.0f || p.min_p > 0.0f);
  if (!truncated) {
    unconstrained_logits_.assign(logits.begin(), logits.end());
    const int32_t token = sampler_.sample(logits, tokens_, static_cast<size_t>(prompt_length_));
    if (grammar_allows(token)) return token;
    std::copy(unconstrained_logits_.begin(), unconstrained_logits_.end(), logits.begin());
  }
  constrain(logits);
  return sampler_.sample(logits, tokens_, static_cast<size_t>(prompt_length_));
}

StreamEvent Sequence::advance(std::span<float> logits) {
  StreamEvent event;
  if (request_.top_logprobs >= 0) raw_logits_.assign(logits.begin(), logits.end());
  const int32_t token = grammar_ ? sample_constrained(logits)
                                 : sampler_.sample(logits, tokens_, static_cast<size_t>(prompt_length_));
  // The grammar took the token (constrain allowed it) unless it ends the generation.
  const bool grammar_done = grammar_ && !is_stop_token(token) &&
                            grammar_->accept(request_.grammar->vocabulary().bytes(token)) &&
                            !grammar_->can_continue();
  tokens_.push_back(token);
  last_token_ = Clock::now();
  event.tokens.push_back(token);
  if (request_.top_logprobs >= 0)
    event.logprobs.push_back(token_logprob(raw_logits_, token, request_.top_logprobs));
  if (decoder_) event.text = stops_.push(decoder_->push(token));
  if (stops_.stopped()) return finished_event(std::move(event), FinishReason::Stop);
  if (is_stop_token(token) || grammar_done) return finished_event(std::move(event), FinishReason::Stop);
  if (static_cast<int64_t>(tokens_.size()) >= max_total_)
    return finished_event(std::move(event), FinishReason::Length);
  return event;
}

std::span<const int32_t> Sequence::step_tokens(int64_t count, int64_t drafted) {
  if (drafted == 0)
    return std::span(tokens_).subspan(static_cast<size_t>(computed), static_cast<size_t>(count));
  drafted_step_.assign(1, tokens_.back());
  drafted_step_.insert(drafted_step_.end(), draft.begin(), draft.begin() + drafted);
  return drafted_step_;
}

StreamEvent Sequence::end(FinishReason reason) { return finished_event(StreamEvent{}, reason); }

StreamEvent Sequence::embedded(std::vector<float> hidden) {
  StreamEvent event;
  event.embedding = std::move(hidden);
  last_token_ = Clock::now();
  return finished_event(std::move(event), FinishReason::Stop);
}

StreamEvent Sequence::finished_event(StreamEvent event, FinishReason reason) {
  if (!stops_.stopped()) {
    if (decoder_) event.text += stops_.push(decoder_->flush());
    if (!stops_.stopped()) event.text += stops_.flush();
  }
  event.finish = reason;
  event.prompt_tokens = prompt_length_;
  event.completion_tokens = generated();
  event.cached_prompt_tokens = cached_prompt_tokens;
  return event;
}

}  // namespace tokenmill
