#include "runtime/chat_session.h"

#include <algorithm>

#include "core/error.h"
#include "runtime/generator.h"
#include "tokenizer/streaming_decoder.h"

namespace tokenmill {

namespace {
const std::string& template_of(const TextModel& model) {
  const Tokenizer& tokenizer = model.require_tokenizer("chat");
  if (tokenizer.chat_template().empty())
    fail("{} has no chat template (tokenizer_config.json chat_template): use generate instead",
         model.model->path.string());
  return tokenizer.chat_template();
}
}  // namespace

ChatSession::ChatSession(const TextModel& model, Transformer& transformer, ChatOptions options)
    : model_(model),
      tokenizer_(model.require_tokenizer("chat")),
      transformer_(transformer),
      options_(std::move(options)),
      template_(template_of(model)) {
  reset();
}

void ChatSession::reset() {
  messages_ = nlohmann::json::array();
  if (!options_.system_prompt.empty())
    messages_.push_back({{"role", "system"}, {"content", options_.system_prompt}});
}

std::string ChatSession::reply(std::string_view user_text,
                               const std::function<void(std::string_view)>& on_text) {
  messages_.push_back({{"role", "user"}, {"content", std::string(user_text)}});
  ChatTemplateOptions render;
  render.add_generation_prompt = true;
  render.bos_token = tokenizer_.bos_token();
  render.eos_token = tokenizer_.eos_token();
  const std::string prompt = template_.render_json(messages_, render);

  GenerateRequest request;
  request.prompt = tokenizer_.encode(prompt, {.add_special_tokens = false, .parse_special = true});
  request.max_new_tokens =
      std::min(options_.max_new_tokens, transformer_.context() - static_cast<int64_t>(request.prompt.size()));
  if (request.max_new_tokens <= 0) {
    messages_.erase(messages_.end() - 1);
    fail("the conversation ({} tokens) fills the {} token context: start over with /reset",
         request.prompt.size(), transformer_.context());
  }
  request.sampling = options_.sampling;
  request.eos_token_ids = model_.eos_token_ids;

  StreamingDecoder stream(tokenizer_, /*skip_special=*/true);
  std::string text;
  const auto& eos = request.eos_token_ids;
  generate(transformer_, request, [&](int32_t token) {
    if (std::find(eos.begin(), eos.end(), token) != eos.end()) return true;
    const std::string piece = stream.push(token);
    text += piece;
    if (!piece.empty()) on_text(piece);
    return true;
  });
  const std::string tail = stream.flush();
  text += tail;
  if (!tail.empty()) on_text(tail);
  messages_.push_back({{"role", "assistant"}, {"content", text}});
  return text;
}

}  // namespace tokenmill
