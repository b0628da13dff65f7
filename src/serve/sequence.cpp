#include "serve/sequence.h"

#include <algorithm>
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
                   const Tokenizer& tokenizer, const std::vector<int32_t>& eos_ids, int64_t max_total)
    : id_(id),
      request_(std::move(request)),
      stream_(std::move(stream)),
      tokens_(request_.prompt),
      prompt_length_(static_cast<int64_t>(request_.prompt.size())),
      max_total_(max_total),
      eos_ids_(eos_ids),
      sampler_(request_.sampling),
      decoder_(tokenizer, request_.skip_special_tokens),
      stops_(request_.stop) {}

bool Sequence::is_stop_token(int32_t token) const {
  const auto has = [token](const std::vector<int32_t>& ids) {
    return std::find(ids.begin(), ids.end(), token) != ids.end();
  };
  return has(request_.stop_token_ids) || (!request_.ignore_eos && has(eos_ids_));
}

StreamEvent Sequence::advance(std::span<float> logits) {
  StreamEvent event;
  if (request_.top_logprobs >= 0) raw_logits_.assign(logits.begin(), logits.end());
  const int32_t token = sampler_.sample(logits, tokens_, static_cast<size_t>(prompt_length_));
  tokens_.push_back(token);
  last_token_ = Clock::now();
  event.tokens.push_back(token);
  if (request_.top_logprobs >= 0)
    event.logprobs.push_back(token_logprob(raw_logits_, token, request_.top_logprobs));
  event.text = stops_.push(decoder_.push(token));
  if (stops_.stopped()) return finished_event(std::move(event), FinishReason::Stop);
  if (is_stop_token(token)) return finished_event(std::move(event), FinishReason::Stop);
  if (static_cast<int64_t>(tokens_.size()) >= max_total_)
    return finished_event(std::move(event), FinishReason::Length);
  return event;
}

StreamEvent Sequence::end(FinishReason reason) { return finished_event(StreamEvent{}, reason); }

StreamEvent Sequence::finished_event(StreamEvent event, FinishReason reason) {
  if (!stops_.stopped()) {
    event.text += stops_.push(decoder_.flush());
    if (!stops_.stopped()) event.text += stops_.flush();
  }
  event.finish = reason;
  event.prompt_tokens = prompt_length_;
  event.completion_tokens = generated();
  event.cached_prompt_tokens = cached_prompt_tokens;
  return event;
}

}  // namespace tokenmill
