// Chat/SFT documents: a conversation rendered through the chat template and tokenized, with
// a loss mask that scores the assistant turns only.
//
// Assistant turns by incremental rendering: for each assistant message i,
//   prefix = render(messages[:i], add_generation_prompt=true)
//   full   = render(messages[:i+1], add_generation_prompt=false)
// and full[prefix.size():] is the assistant turn: its content plus whatever the template
// closes the turn with (ChatML's "<|im_end|>\n", Llama 3's "<|eot_id|>"). Each render must
// extend the text before it (full starts with prefix, prefix with the previous full), else the
// template is not prefix-stable (it rewrites earlier turns, e.g. drops past reasoning) and the
// conversation is refused. What follows the last assistant turn in render(messages,
// add_generation_prompt=false) is a last unscored segment.
//
// Tokenization is of the whole rendered text at once (no added BOS/EOS, special tokens
// parsed, as the chat session encodes a prompt), so the ids are those of Hugging Face's
// encode(text, add_special_tokens=False) also for SentencePiece tokenizers that put a "▁"
// before every piece of text they encode (Llama 2, Mistral): encoding segment by segment
// would add one at every turn. The token index of each cut between scored and unscored
// text is the number of leading tokens that the text before the cut, encoded on its own,
// shares with the whole text's; a token merged across a cut thus goes with the text after
// it. That costs one more encode of a prefix of the text per cut.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace tokenmill {

struct ChatDocument {
  std::vector<int32_t> tokens;
  std::vector<uint8_t> scored;  // per token: 1 in an assistant turn, else 0
};

// A record's "messages" value: a non-empty array of {"role", "content"} objects with string
// values, roles "system", "user" or "assistant", at least one "assistant" but not as the first
// message (the template renders the conversation before each reply, and transformers refuses
// an empty one). Throws Error prefixed with `where` (e.g. "data.jsonl:7") naming the message
// index otherwise.
std::vector<ChatMessage> parse_chat_messages(const nlohmann::json& messages, std::string_view where);

// Renders and encodes conversations; holds a reference to the tokenizer, which must outlive it.
class ChatSftEncoder {
 public:
  // `chat_template` rendered with the tokenizer's bos/eos token strings.
  ChatSftEncoder(const Tokenizer& tokenizer, ChatTemplate chat_template);
  // The tokenizer's own chat template; throws Error (prefixed with `where`, the first record
  // that needs it) saying where a template comes from when the tokenizer has none.
  static ChatSftEncoder from_tokenizer(const Tokenizer& tokenizer, std::string_view where);

  // `messages` as parse_chat_messages returns them. Throws Error prefixed with `where` when
  // rendering fails or the template is not prefix-stable (naming the message index).
  ChatDocument encode(const std::vector<ChatMessage>& messages, std::string_view where) const;

 private:
  std::string render(const std::vector<ChatMessage>& messages, size_t count, bool add_generation_prompt,
                     std::string_view where) const;

  const Tokenizer& tokenizer_;
  ChatTemplate template_;
};

}  // namespace tokenmill
