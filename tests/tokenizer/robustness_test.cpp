// Bad and extreme input: invalid UTF-8, empty text, a 10 MB text, malformed tokenizer.json,
// ids out of range. Every failure is a tokenmill::Error with a message; nothing crashes.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/json_file.h"
#include "tokenizer/streaming_decoder.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_json.h"
#include "tokenizer/utf8.h"

namespace tokenmill {
namespace {

const std::filesystem::path kDir = std::filesystem::path(TOKENMILL_FIXTURES_DIR) / "tokenizers";

Tokenizer load(const std::string& name) { return Tokenizer::from_file(kDir / name / "tokenizer.json"); }

// Expects `fn` to throw a tokenmill::Error whose message contains `needle`.
template <class Fn>
void expect_error(Fn&& fn, const std::string& needle) {
  try {
    fn();
    ADD_FAILURE() << "no error; expected one mentioning \"" << needle << "\"";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

nlohmann::json gpt2_json() { return read_json_file(kDir / "gpt2" / "tokenizer.json"); }

TEST(TokenizerInput, EmptyTextGivesOnlyTheTemplate) {
  const Tokenizer spm = load("spm_legacy");
  EXPECT_TRUE(spm.encode("", {.add_special_tokens = false}).empty());
  EXPECT_EQ(spm.encode(""), std::vector<int32_t>{*spm.bos_id()});
  EXPECT_EQ(spm.decode(std::vector<int32_t>{}), "");
}

TEST(TokenizerInput, InvalidUtf8IsRepairedLikePythonReplace) {
  const Tokenizer tok = load("gpt2");
  const std::string bad = "abc\xE4\xBD xyz\xFF\xC0\xAF";
  const std::string repaired = "abc\xEF\xBF\xBD xyz\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD";
  EXPECT_EQ(utf8::make_valid(bad), repaired);
  EXPECT_EQ(tok.encode(bad), tok.encode(repaired));
  EXPECT_EQ(tok.decode(tok.encode(bad)), repaired);
}

TEST(TokenizerInput, SpecialTokensAreTextUnlessParseSpecial) {
  const Tokenizer tok = load("qwen2");
  const auto im_start = tok.token_to_id("<|im_start|>");
  ASSERT_TRUE(im_start);
  const auto plain = tok.encode("<|im_start|>user");
  EXPECT_EQ(std::count(plain.begin(), plain.end(), *im_start), 0);
  const auto parsed = tok.encode("<|im_start|>user", {.parse_special = true});
  ASSERT_FALSE(parsed.empty());
  EXPECT_EQ(parsed.front(), *im_start);
  EXPECT_EQ(tok.decode(parsed), "<|im_start|>user");
  EXPECT_EQ(tok.decode(parsed, true), "user");
  EXPECT_TRUE(tok.is_special(*im_start));
}

std::string mixed_text(size_t bytes) {
  const std::string corpus = [] {
    const nlohmann::json doc = read_json_file(kDir / "corpus.json");
    std::string all;
    for (const auto& h : doc["inputs_hex"]) {
      const std::string hex = h.get<std::string>();
      for (size_t i = 0; i + 1 < hex.size(); i += 2)
        all.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
      all.push_back('\n');
    }
    return all;
  }();
  std::string shakespeare;
  if (std::ifstream in(std::filesystem::path(TOKENMILL_SHARED_DATA_DIR) / "corpus" / "tinyshakespeare.txt");
      in) {
    std::ostringstream s;
    s << in.rdbuf();
    shakespeare = s.str();
  }
  std::string text;
  while (text.size() < bytes) {
    text += corpus;
    text += shakespeare.substr(0, std::min<size_t>(shakespeare.size(), 400000));
  }
  text.resize(bytes);
  return utf8::make_valid(text);
}

TEST(TokenizerInput, TenMegabytesEncodeInSaneTime) {
  const std::string text = mixed_text(10u << 20);
  for (const char* name : {"llama3", "spm_legacy"}) {
    const Tokenizer tok = load(name);
    const auto start = std::chrono::steady_clock::now();
    const auto ids = tok.encode(text);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_GT(ids.size(), text.size() / 16);
    EXPECT_LT(seconds, 60.0) << name;
    std::cout << name << ": 10 MiB in " << seconds << " s (" << 10.0 / seconds << " MiB/s)\n";
    if (name == std::string("llama3")) {
      EXPECT_EQ(tok.decode(ids, /*skip_special=*/true), text);
    }
  }
  // One long run of a single character (one huge word for the BPE model).
  const Tokenizer spm = load("spm_legacy");
  EXPECT_FALSE(spm.encode(std::string(2u << 20, ' ')).empty());
  EXPECT_FALSE(load("gpt2").encode(std::string(2u << 20, 'a')).empty());
}

// Single-thread throughput on ~2 MiB of mixed text (reported; see bench/tokenizer_bench.py
// for the side-by-side comparison with HF tokenizers).
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif
#else
constexpr bool kSanitized = false;
#endif

TEST(TokenizerInput, ThroughputReport) {
  if (kSanitized) GTEST_SKIP() << "timings under a sanitizer mean nothing";
  const std::string text = mixed_text(2u << 20);
  std::vector<std::string_view> lines;
  for (size_t pos = 0; pos < text.size();) {
    const size_t end = std::min(text.find('\n', pos), text.size() - 1) + 1;
    lines.push_back(std::string_view(text).substr(pos, end - pos));
    pos = end;
  }
  std::vector<std::pair<std::string, Tokenizer>> tokenizers;
  for (const char* name : {"gpt2", "llama3", "qwen2", "deepseek", "falcon", "spm_legacy", "spm_metaspace"})
    tokenizers.emplace_back(name, load(name));
  const auto real = std::filesystem::path(TOKENMILL_SHARED_DATA_DIR) / "tokenizers" / "ggml-vocab-gpt-2.gguf";
  if (std::filesystem::exists(real)) tokenizers.emplace_back("gpt2-real", Tokenizer::from_file(real));
  for (const auto& [name, tok] : tokenizers) {
    tok.encode(text.substr(0, 100000));  // warm up
    for (const bool per_line : {false, true}) {
      double best = 1e9;
      size_t count = 0;
      for (int repeat = 0; repeat < 3; ++repeat) {
        const auto start = std::chrono::steady_clock::now();
        count = 0;
        if (per_line) {
          for (const std::string_view line : lines)
            count += tok.encode(line, {.add_special_tokens = false}).size();
        } else {
          count = tok.encode(text, {.add_special_tokens = false}).size();
        }
        best =
            std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
      }
      std::cout << "encode " << name << (per_line ? " lines" : " whole") << ": "
                << (text.size() / 1048576.0) / best << " MiB/s, " << count << " tokens\n";
    }
  }
}

TEST(TokenizerDecode, OutOfRangeIdsAreErrors) {
  const Tokenizer tok = load("gpt2");
  expect_error([&] { tok.decode(std::vector<int32_t>{1, -1}); }, "outside the vocabulary");
  expect_error([&] { tok.decode(std::vector<int32_t>{tok.vocab_size()}); }, "outside the vocabulary");
  expect_error([&] { tok.piece(1 << 30); }, "outside the vocabulary");
  StreamingDecoder stream(tok);
  expect_error([&] { stream.push(-5); }, "outside the vocabulary");
  EXPECT_EQ(stream.push(*tok.token_to_id("a")), "a");
}

// A token's own bytes, before UTF-8 repair (OpenAI's logprobs `bytes`): for byte-level BPE,
// the tokens of a text give back exactly its bytes, even where a token ends mid-character;
// for SentencePiece byte fallback, <0xNN> is the byte itself.
TEST(TokenizerDecode, TokenBytesAreTheRawBytesOfOneToken) {
  const std::string text = "x 🦙🦙 北京 café";
  for (const char* name : {"gpt2", "llama3", "qwen2"}) {
    SCOPED_TRACE(name);
    const Tokenizer tok = load(name);
    std::string joined;
    bool split_character = false;
    for (const int32_t id : tok.encode(text, {.add_special_tokens = false})) {
      const std::string bytes = tok.token_bytes(id);
      split_character |= !utf8::is_valid(bytes);
      joined += bytes;
    }
    EXPECT_EQ(joined, text);
    EXPECT_TRUE(split_character || std::string(name) != "gpt2") << "the text should split a character";
  }
  const Tokenizer spm = load("spm_legacy");
  EXPECT_EQ(spm.token_bytes(*spm.token_to_id("<0xE4>")), "\xE4");
  EXPECT_EQ(spm.decode(std::vector<int32_t>{*spm.token_to_id("<0xE4>")}), "\xEF\xBF\xBD");
}

TEST(TokenizerDecode, StreamingNeverSplitsACharacter) {
  const Tokenizer tok = load("spm_legacy");  // byte fallback: emoji become 4 byte tokens
  const auto ids = tok.encode("x 🦙🦙 北京 done", {.add_special_tokens = false});
  StreamingDecoder stream(tok);
  std::string all;
  for (const int32_t id : ids) {
    const std::string part = stream.push(id);
    EXPECT_TRUE(utf8::is_valid(part));
    EXPECT_EQ(part.find("\xEF\xBF\xBD"), std::string::npos) << "a half character was emitted";
    all += part;
  }
  all += stream.flush();
  EXPECT_EQ(all, "x 🦙🦙 北京 done");
  // A dangling partial character is only given back by flush(), as U+FFFD.
  const auto e4 = tok.token_to_id("<0xE4>");
  ASSERT_TRUE(e4);
  EXPECT_EQ(stream.push(*e4), "");
  EXPECT_EQ(stream.flush(), "\xEF\xBF\xBD");
}

// A decoder that strips the start of the joined text (Llama 2's decoder strips one space;
// this one strips up to two) must strip it only where the text starts, however the stream
// cuts the ids into windows. A fuzzer found a stream of space tokens losing one.
TEST(TokenizerDecode, StreamingStripsOnlyTheStartOfTheText) {
  const Tokenizer tok = Tokenizer::from_spec(parse_tokenizer_json_text(R"({
    "model": {"type": "BPE", "vocab": {"<unk>": 0, "▁": 1, "H": 2, "▁H": 3}, "merges": [["▁", "H"]]},
    "decoder": {"type": "Sequence", "decoders": [
      {"type": "Replace", "pattern": {"String": "▁"}, "content": " "}, {"type": "Fuse"},
      {"type": "Strip", "content": " ", "start": 2, "stop": 0}]}})",
                                                                       "strip.json"));
  for (const std::vector<int32_t>& ids :
       {std::vector<int32_t>{3, 1, 1, 1, 1}, {1, 1, 3, 1, 3}, {1, 3, 1, 1, 1, 2, 1, 1, 3}}) {
    StreamingDecoder stream(tok);
    std::string streamed;
    for (const int32_t id : ids) streamed += stream.push(id);
    streamed += stream.flush();
    EXPECT_EQ(streamed, tok.decode(ids)) << ids.size() << " ids";
  }
  EXPECT_EQ(tok.decode(std::vector<int32_t>{1, 1, 1, 3}), "  H");
  EXPECT_EQ(tok.decode_continuation(std::vector<int32_t>{1, 1, 1, 3}), "    H");
}

// Metaspace after a Fuse sees one token, the whole text, and drops every "▁" in it (HF's
// decoder); a stream's later windows are part of that token too. (Review found the stream
// turning them into spaces.)
TEST(TokenizerDecode, StreamingKeepsMetaspaceAfterAJoin) {
  const Tokenizer tok = Tokenizer::from_spec(parse_tokenizer_json_text(R"({
    "model": {"type": "BPE", "vocab": {"<unk>": 0, "▁a": 1, "▁b": 2, "c": 3}, "merges": []},
    "decoder": {"type": "Sequence", "decoders": [{"type": "Fuse"},
      {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always", "split": true}]}})",
                                                                       "metaspace.json"));
  const std::vector<int32_t> ids = {1, 2, 3, 1, 2};
  EXPECT_EQ(tok.decode(ids), "abcab");
  StreamingDecoder stream(tok);
  std::string streamed;
  for (const int32_t id : ids) streamed += stream.push(id);
  EXPECT_EQ(streamed + stream.flush(), "abcab");
}

TEST(TokenizerJson, MalformedFilesAreClearErrors) {
  expect_error([] { parse_tokenizer_json_text("{not json", "t.json"); }, "invalid JSON");
  // nlohmann throws out_of_range, not parse_error, for a number too large for a double.
  expect_error([] { parse_tokenizer_json_text("{\"version\": 7E7777777}", "t.json"); }, "invalid JSON");
  expect_error([] { parse_tokenizer_json_text("[]", "t.json"); }, "expected a JSON object");
  expect_error([] { parse_tokenizer_json_text("{}", "t.json"); }, "missing field \"model\"");
  auto with = [](auto&& edit) {
    nlohmann::json doc = gpt2_json();
    edit(doc);
    return Tokenizer::from_spec(parse_tokenizer_json(doc, "t.json"));
  };
  expect_error([&] { with([](auto& d) { d["model"]["type"] = "Unigram"; }); },
               "\"Unigram\" is not supported");
  expect_error([&] { with([](auto& d) { d["model"].erase("vocab"); }); }, "missing field \"vocab\"");
  expect_error(
      [&] {
        with([](auto& d) {
          d["model"]["vocab"] = nlohmann::json::object();
          d["added_tokens"] = nlohmann::json::array();
        });
      },
      "the vocabulary is empty");
  expect_error(
      [&] {
        with([](auto& d) {
          d["model"]["vocab"] = {{"a", 0}};
          d["added_tokens"] = nlohmann::json::array();
        });
      },
      "merge 0");
  expect_error([&] { with([](auto& d) { d["model"]["vocab"]["x"] = -3; }); }, "out of range");
  expect_error([&] { with([](auto& d) { d["model"]["vocab"]["x"] = 1 << 30; }); }, "far beyond");
  expect_error([&] { with([](auto& d) { d["model"]["vocab"]["x"] = "7"; }); }, "expected an integer");
  expect_error([&] { with([](auto& d) { d["model"]["vocab"]["dup"] = 5; }); }, "given to two tokens");
  expect_error([&] { with([](auto& d) { d["model"]["merges"][0] = "a b c"; }); }, "model.merges[0]");
  expect_error([&] { with([](auto& d) { d["model"]["merges"][0] = 5; }); }, "model.merges[0]");
  expect_error([&] { with([](auto& d) { d["model"]["merges"].push_back("zz qq"); }); },
               "not in the vocabulary");
  expect_error([&] { with([](auto& d) { d["model"]["dropout"] = 0.1; }); }, "dropout");
  expect_error([&] { with([](auto& d) {
                       d["normalizer"] = {{"type", "BertNormalizer"}};
                     }); },
               "normalizer: type \"BertNormalizer\" is not supported");
  expect_error([&] { with([](auto& d) { d["pre_tokenizer"] = {{"type", "Split"}}; }); }, "pre_tokenizer");
  expect_error(
      [&] {
        with([](auto& d) {
          d["pre_tokenizer"] = {
              {"type", "Split"}, {"pattern", {{"Regex", "(unclosed"}}}, {"behavior", "Isolated"}};
        });
      },
      "does not compile");
  expect_error([&] { with([](auto& d) { d["decoder"] = {{"type", "WordPiece"}}; }); }, "WordPiece");
  expect_error([&] { with([](auto& d) {
                       d["post_processor"] = {{"type", "TemplateProcessing"}};
                     }); },
               "single");
  // The fuzzer found a template token id past the vocabulary read before it was checked.
  expect_error(
      [&] {
        with([](auto& d) {
          d["post_processor"] = {
              {"type", "TemplateProcessing"},
              {"single", {{{"SpecialToken", {{"id", "<s>"}}}}, {{"Sequence", {{"id", "A"}}}}}},
              {"special_tokens", {{"<s>", {{"id", "<s>"}, {"ids", {1 << 20}}}}}}};
        });
      },
      "post_processor: token id 1048576 is outside the vocabulary");
  expect_error([&] { with([](auto& d) { d["added_tokens"][0]["id"] = 1u << 30; }); }, "far beyond");
  expect_error([&] { with([](auto& d) { d["added_tokens"][0]["content"] = ""; }); }, "must not be empty");
  expect_error([&] { with([](auto& d) { d["added_tokens"][0].erase("content"); }); },
               "missing field \"content\"");
  expect_error([] { Tokenizer::from_file(kDir / "no-such-file.json"); }, "no such file");
  expect_error([] { Tokenizer::from_model_dir(kDir); }, "no tokenizer.json");
}

TEST(TokenizerJson, ModelDirectoryReadsTokenizerConfig) {
  const Tokenizer tok = Tokenizer::from_model_dir(kDir / "spm_legacy");
  ASSERT_TRUE(tok.bos_id() && tok.eos_id());
  EXPECT_EQ(tok.bos_token(), "<s>");
  EXPECT_EQ(tok.eos_token(), "</s>");
  EXPECT_TRUE(tok.adds_bos());
  const auto ids = tok.encode("hello");  // add_eos_token: true in tokenizer_config.json
  EXPECT_EQ(ids.front(), *tok.bos_id());
  EXPECT_EQ(ids.back(), *tok.eos_id());
  EXPECT_NE(tok.chat_template().find("bos_token"), std::string::npos);
  EXPECT_EQ(tok.eos_ids(), std::vector<int32_t>{*tok.eos_id()});
}

TEST(Utf8, IncompleteTailAndValidation) {
  EXPECT_EQ(utf8::incomplete_tail("ab\xE4\xBD"), 2u);
  EXPECT_EQ(utf8::incomplete_tail("ab\xF0"), 1u);
  EXPECT_EQ(utf8::incomplete_tail("ab\xE4\xBD\xA0"), 0u);
  EXPECT_EQ(utf8::incomplete_tail("ab\xFF"), 0u);
  EXPECT_FALSE(utf8::is_valid("\xED\xA0\x80"));  // a surrogate
  EXPECT_EQ(utf8::make_valid("\xED\xA0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(utf8::make_valid("\xF0\x9F\x98"), "\xEF\xBF\xBD");
}

}  // namespace
}  // namespace tokenmill
