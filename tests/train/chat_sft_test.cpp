// Chat/SFT encoding: ids and assistant-only masks identical to transformers' (fixture from
// tests/fixtures/chat_sft/make_chat_sft_fixture.py) on real chat templates (SmolLM2's ChatML,
// Qwen2.5's, Llama 3.1's, and Llama 2's and Mistral v1's with SentencePiece tokenizers that
// put a "▁" before every piece of text); the scored tokens decode to exactly the assistant
// turns, a token merged across the start of a turn counting with it; bad messages, a missing
// template and a template that is not prefix-stable are refused.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "core/json_file.h"
#include "support/expect_error.h"
#include "train/chat_sft.h"

namespace tokenmill {
namespace {

using testing::expect_error;

const std::filesystem::path kFixtures(TOKENMILL_FIXTURES_DIR);

Tokenizer load_tokenizer(const std::string& path) {
  const std::filesystem::path p = kFixtures / path;
  return std::filesystem::is_directory(p) ? Tokenizer::from_model_dir(p) : Tokenizer::from_file(p);
}

std::string read_fixture(const std::string& path) {
  std::ifstream in(kFixtures / path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return std::move(text).str();
}

std::vector<ChatMessage> messages_of(const nlohmann::json& conversation) {
  return parse_chat_messages(conversation["messages"], "fixture");
}

// The scored runs of a document, each decoded with special tokens kept.
std::vector<std::string> scored_runs(const Tokenizer& tokenizer, const ChatDocument& doc) {
  std::vector<std::string> runs;
  std::vector<int32_t> run;
  for (size_t i = 0; i <= doc.tokens.size(); ++i) {
    if (i < doc.tokens.size() && doc.scored[i] != 0) {
      run.push_back(doc.tokens[i]);
    } else if (!run.empty()) {
      runs.push_back(tokenizer.decode(run));
      run.clear();
    }
  }
  return runs;
}

TEST(ChatSft, MatchesTransformersAndScoresExactlyTheAssistantTurns) {
  const nlohmann::json expected = read_json_file(kFixtures / "chat_sft" / "expected.json");
  ASSERT_EQ(expected["cases"].size(), 5u);
  for (const auto& c : expected["cases"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    const Tokenizer tokenizer = load_tokenizer(c["tokenizer"]);
    const ChatSftEncoder encoder =
        c["template"].is_null()
            ? ChatSftEncoder::from_tokenizer(tokenizer, "fixture")
            : ChatSftEncoder(tokenizer, ChatTemplate(read_fixture(c["template"].get<std::string>())));
    // ChatML closes a turn with "<|im_end|>\n", Llama 3 with "<|eot_id|>", Llama 2 and Mistral
    // with "</s>" (their turns' spaces are checked by the ids and the mask above).
    const std::string name = c["name"];
    const bool spm = name.ends_with("_spm");
    const std::string end_of_turn = name == "llama3" ? "<|eot_id|>" : spm ? "</s>" : "<|im_end|>\n";
    for (const auto& conversation : c["conversations"]) {
      const std::vector<ChatMessage> messages = messages_of(conversation);
      const ChatDocument doc = encoder.encode(messages, "fixture");
      EXPECT_EQ(doc.tokens, conversation["ids"].get<std::vector<int32_t>>());
      EXPECT_EQ(doc.scored, conversation["scored"].get<std::vector<uint8_t>>());
      EXPECT_EQ(tokenizer.decode(doc.tokens), conversation["decoded"].get<std::string>());
      if (!spm) {
        EXPECT_EQ(conversation["decoded"], conversation["rendered"]);
      }
      // The SentencePiece cases are those where encoding turn by turn would go wrong.
      EXPECT_EQ(conversation["turn_by_turn_differs"].get<bool>(), spm);
      std::vector<std::string> turns;
      for (const ChatMessage& m : messages)
        if (m.role == "assistant") turns.push_back(m.content + end_of_turn);
      std::vector<std::string> runs = scored_runs(tokenizer, doc);
      if (spm) {  // decoding drops a run's leading space; Llama 2 ends a turn " </s>", Mistral v1 "</s> "
        for (std::string& run : runs) {
          if (run.ends_with(" ")) run.pop_back();
          if (const size_t eot = run.rfind(" </s>"); eot != std::string::npos) run.erase(eot, 1);
        }
      }
      EXPECT_EQ(runs, turns);
    }
  }
}

TEST(ChatSft, ATokenMergedAcrossACutGoesWithTheTextAfterIt) {
  const Tokenizer tokenizer = load_tokenizer("hf/smollm_chat");
  const ChatSftEncoder plain(tokenizer, ChatTemplate("{% for m in messages %}{{ m.content }}{% endfor %}"));
  const ChatDocument doc = plain.encode({{"user", "I read th"}, {"assistant", "e play."}}, "t");
  EXPECT_EQ(doc.tokens, tokenizer.encode("I read the play.", {.add_special_tokens = false}));
  // " the" is one token, begun in the user's text: it is scored, what comes before is not.
  const auto first_scored = std::find(doc.scored.begin(), doc.scored.end(), 1) - doc.scored.begin();
  ASSERT_LT(first_scored, std::ssize(doc.tokens));
  EXPECT_EQ(tokenizer.decode(std::span(doc.tokens).first(static_cast<size_t>(first_scored))), "I read");
  EXPECT_EQ(tokenizer.decode(std::span(doc.tokens).subspan(static_cast<size_t>(first_scored), 1)), " the");
  EXPECT_TRUE(
      std::all_of(doc.scored.begin() + first_scored, doc.scored.end(), [](uint8_t s) { return s == 1; }));
}

TEST(ChatSft, RefusesMalformedMessages) {
  const auto refuse = [](const char* json, std::initializer_list<std::string> parts) {
    expect_error([&] { parse_chat_messages(nlohmann::json::parse(json), "d.jsonl:4"); }, parts);
  };
  refuse(R"({"role": "user"})", {"d.jsonl:4", "non-empty array"});
  refuse(R"([])", {"d.jsonl:4", "non-empty array"});
  refuse(R"([{"role": "user", "content": "hi"}, "text"])", {"d.jsonl:4", "message 1", "exactly the keys"});
  refuse(R"([{"role": "user", "content": "hi", "name": "x"}])", {"message 0", "exactly the keys"});
  refuse(R"([{"role": "user", "content": ["hi"]}, {"role": "assistant", "content": "a"}])",
         {"message 0", "must be strings"});
  refuse(R"([{"role": "user", "content": "hi"}, {"role": "bot", "content": "a"}])",
         {"message 1", "role \"bot\"", "\"assistant\""});
  refuse(R"([{"role": "system", "content": "s"}, {"role": "user", "content": "hi"}])",
         {"d.jsonl:4", "no \"assistant\" message"});
  refuse(R"([{"role": "assistant", "content": "a"}, {"role": "user", "content": "hi"}])",
         {"d.jsonl:4", "message 0 is an \"assistant\" message"});
}

TEST(ChatSft, NeedsAChatTemplate) {
  const Tokenizer bare = load_tokenizer("hf/smollm_chat/tokenizer.json");
  expect_error([&] { ChatSftEncoder::from_tokenizer(bare, "d.jsonl:2"); },
               {"d.jsonl:2", "needs a chat template", "tokenizer_config.json", "chat_template.jinja"});
}

TEST(ChatSft, RefusesATemplateThatIsNotPrefixStable) {
  const Tokenizer tokenizer = load_tokenizer("hf/smollm_chat");
  // Marks the last message: rendering more messages changes the text of the earlier ones.
  const ChatSftEncoder moving(tokenizer,
                              ChatTemplate("{% for m in messages %}{{ m.role }}: {{ m.content }}{% if "
                                           "loop.last %} (last){% endif %}\n{% endfor %}"
                                           "{% if add_generation_prompt %}assistant: {% endif %}"));
  const std::vector<ChatMessage> chat = {{"user", "hi"}, {"assistant", "hello"}};
  expect_error([&] { moving.encode(chat, "d.jsonl:9"); }, {"d.jsonl:9", "not prefix-stable at message 1"});
  const ChatSftEncoder raising(tokenizer, ChatTemplate("{{ raise_exception('roles must alternate') }}"));
  expect_error([&] { raising.encode(chat, "d.jsonl:9"); }, {"d.jsonl:9", "roles must alternate"});
}

}  // namespace
}  // namespace tokenmill
