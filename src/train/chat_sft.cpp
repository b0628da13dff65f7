#include "train/chat_sft.h"

#include <algorithm>
#include <array>

#include "core/error.h"

namespace tokenmill {

namespace {

constexpr std::array<std::string_view, 3> kRoles = {"system", "user", "assistant"};

}  // namespace

std::vector<ChatMessage> parse_chat_messages(const nlohmann::json& messages, std::string_view where) {
  if (!messages.is_array() || messages.empty())
    fail("{}: \"messages\" must be a non-empty array of {{\"role\", \"content\"}} objects", where);
  std::vector<ChatMessage> out;
  bool has_assistant = false;
  for (size_t i = 0; i < messages.size(); ++i) {
    const nlohmann::json& m = messages[i];
    if (!m.is_object() || m.size() != 2 || !m.contains("role") || !m.contains("content"))
      fail("{}: message {} must be an object with exactly the keys \"role\" and \"content\"", where, i);
    if (!m["role"].is_string() || !m["content"].is_string())
      fail("{}: message {}: \"role\" and \"content\" must be strings", where, i);
    const std::string& role = m["role"].get_ref<const std::string&>();
    if (std::find(kRoles.begin(), kRoles.end(), role) == kRoles.end())
      fail("{}: message {} has role \"{}\" (use \"system\", \"user\" or \"assistant\")", where, i, role);
    has_assistant = has_assistant || role == "assistant";
    out.push_back({role, m["content"].get<std::string>()});
  }
  if (out.front().role == "assistant")
    fail(
        "{}: message 0 is an \"assistant\" message; a conversation starts with a \"system\" or \"user\" "
        "message",
        where);
  if (!has_assistant) fail("{}: no \"assistant\" message, so nothing would be trained on", where);
  return out;
}

ChatSftEncoder::ChatSftEncoder(const Tokenizer& tokenizer, ChatTemplate chat_template)
    : tokenizer_(tokenizer), template_(std::move(chat_template)) {}

ChatSftEncoder ChatSftEncoder::from_tokenizer(const Tokenizer& tokenizer, std::string_view where) {
  if (tokenizer.chat_template().empty())
    fail(
        "{}: a \"messages\" record needs a chat template, and {} has none (a model directory carries it in "
        "tokenizer_config.json \"chat_template\" or chat_template.jinja, a GGUF file in "
        "tokenizer.chat_template; give -m MODEL_DIR rather than a bare tokenizer.json)",
        where, tokenizer.source());
  return ChatSftEncoder(tokenizer, ChatTemplate(tokenizer.chat_template()));
}

std::string ChatSftEncoder::render(const std::vector<ChatMessage>& messages, size_t count,
                                   bool add_generation_prompt, std::string_view where) const {
  ChatTemplateOptions options;
  options.add_generation_prompt = add_generation_prompt;
  options.bos_token = tokenizer_.bos_token();
  options.eos_token = tokenizer_.eos_token();
  const std::vector<ChatMessage> head(messages.begin(),
                                      messages.begin() + static_cast<std::ptrdiff_t>(count));
  try {
    return template_.render(head, options);
  } catch (const Error& e) {
    fail("{}: rendering the first {} message(s) through the chat template: {}", where, count, e.what());
  }
}

ChatDocument ChatSftEncoder::encode(const std::vector<ChatMessage>& messages, std::string_view where) const {
  // `done` is the rendered text so far; each render must extend it. `cuts` are the byte
  // offsets where the text turns from unscored to scored (cuts 0, 2, ...) or back (1, 3, ...).
  std::string done;
  std::vector<size_t> cuts;
  const auto extend = [&](const std::string& text, size_t index, bool scored) {
    if (!text.starts_with(done))
      fail(
          "{}: the chat template is not prefix-stable at message {}: rendering the conversation up to it "
          "changes the text rendered before it, so its assistant turns cannot be cut out for the loss mask "
          "(use a template that renders earlier turns the same whatever follows them)",
          where, index);
    if (text.size() > done.size() && scored != (cuts.size() % 2 == 1)) cuts.push_back(done.size());
    done = text;
  };
  for (size_t i = 0; i < messages.size(); ++i) {
    if (messages[i].role != "assistant") continue;
    extend(render(messages, i, true, where), i, false);
    extend(render(messages, i + 1, false, where), i, true);
  }
  extend(render(messages, messages.size(), false, where), messages.size() - 1, false);

  const EncodeOptions options{.add_special_tokens = false, .parse_special = true};
  ChatDocument doc;
  doc.tokens = tokenizer_.encode(done, options);
  doc.scored.assign(doc.tokens.size(), 0);
  // A cut's token index: how many leading tokens the text before the cut encodes to on its own
  // that agree with the whole text's (so a token merged across the cut starts the later part).
  const auto tokens_before = [&](size_t cut) {
    const std::vector<int32_t> head = tokenizer_.encode(std::string_view(done).substr(0, cut), options);
    return static_cast<size_t>(
        std::mismatch(head.begin(), head.end(), doc.tokens.begin(), doc.tokens.end()).first - head.begin());
  };
  // Part c of the text (before cut 0, between cuts 0 and 1, ...) is scored iff c is odd.
  size_t begin = 0;
  for (size_t c = 0; c <= cuts.size(); ++c) {
    const size_t end = c == cuts.size() ? doc.tokens.size() : std::max(begin, tokens_before(cuts[c]));
    if (c % 2 == 1)
      std::fill(doc.scored.begin() + static_cast<std::ptrdiff_t>(begin),
                doc.scored.begin() + static_cast<std::ptrdiff_t>(end), uint8_t{1});
    begin = end;
  }
  return doc;
}

}  // namespace tokenmill
