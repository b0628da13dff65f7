// ChatSession: a conversation with a model through its chat template.
//
// Each turn renders the whole conversation with the model's Jinja template (as
// transformers' apply_chat_template(add_generation_prompt=True) does), tokenizes it
// without adding BOS/EOS again (the template writes them) and with special tokens parsed,
// and generates until an eos id. The transformer's KV cache keeps the earlier turns, so a
// turn only computes its new tokens.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "model/transformer.h"
#include "runtime/sampler.h"
#include "runtime/text_model.h"
#include "tokenizer/chat_template.h"

namespace tokenmill {

struct ChatOptions {
  std::string system_prompt;  // empty: none (the template may add its own default)
  int64_t max_new_tokens = 512;
  SamplingParams sampling;
};

class ChatSession {
 public:
  // Error if the model has no tokenizer or no chat template.
  ChatSession(const TextModel& model, Transformer& transformer, ChatOptions options);

  // Adds a user message, generates the assistant's reply (each piece of text passed to
  // on_text as soon as it is complete UTF-8), records it and returns it.
  std::string reply(std::string_view user_text, const std::function<void(std::string_view)>& on_text);

  // Forgets the conversation (the system prompt stays).
  void reset();
  const nlohmann::json& messages() const { return messages_; }

 private:
  const TextModel& model_;
  const Tokenizer& tokenizer_;
  Transformer& transformer_;
  ChatOptions options_;
  ChatTemplate template_;
  nlohmann::json messages_ = nlohmann::json::array();
};

}  // namespace tokenmill
