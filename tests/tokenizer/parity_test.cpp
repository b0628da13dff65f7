// Differential test against Hugging Face `tokenizers`: small BPE tokenizers of every
// pre-tokenizer family, trained and run by tests/fixtures/tokenizers/make_tokenizer_fixtures.py,
// with HF's ids and decodings for a multilingual corpus, invalid UTF-8 and 200 random strings.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/json_file.h"
#include "tokenizer/streaming_decoder.h"
#include "tokenizer/tokenizer.h"

namespace tokenmill {
namespace {

const std::filesystem::path kDir = std::filesystem::path(TOKENMILL_FIXTURES_DIR) / "tokenizers";

std::string from_hex(const std::string& hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2)
    out.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  return out;
}

std::vector<std::string> corpus() {
  std::vector<std::string> out;
  const nlohmann::json doc = read_json_file(kDir / "corpus.json");
  for (const auto& h : doc["inputs_hex"]) out.push_back(from_hex(h.get<std::string>()));
  return out;
}

// The concatenation of a StreamingDecoder's output for `ids`, pushed one at a time.
std::string stream_decode(const Tokenizer& tok, const std::vector<int32_t>& ids, bool skip_special) {
  StreamingDecoder stream(tok, skip_special);
  std::string streamed;
  for (const int32_t id : ids) streamed += stream.push(id);
  return streamed + stream.flush();
}

class ParityTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ParityTest, MatchesHuggingFace) {
  const Tokenizer tok = Tokenizer::from_file(kDir / GetParam() / "tokenizer.json");
  const auto inputs = corpus();
  const auto expected = read_json_file(kDir / GetParam() / "expected.json");
  ASSERT_EQ(inputs.size(), expected.size());
  size_t ok[5] = {};
  for (size_t i = 0; i < inputs.size(); ++i) {
    const auto& row = expected[i];
    const auto ids = tok.encode(inputs[i], {.add_special_tokens = false, .parse_special = false});
    const auto ids_special = tok.encode(inputs[i], {.add_special_tokens = true, .parse_special = true});
    EXPECT_EQ(ids, row["ids"].get<std::vector<int32_t>>()) << "input " << i << ": " << inputs[i];
    EXPECT_EQ(ids_special, row["ids_special"].get<std::vector<int32_t>>())
        << "input " << i << " (parse_special)";
    const auto ref_ids = row["ids_special"].get<std::vector<int32_t>>();
    const std::string decoded = tok.decode(ref_ids);
    const std::string decoded_skip = tok.decode(ref_ids, true);
    EXPECT_EQ(decoded, from_hex(row["decoded"].get<std::string>())) << "decode of input " << i;
    EXPECT_EQ(decoded_skip, from_hex(row["decoded_skip"].get<std::string>()))
        << "decode(skip_special) of input " << i;
    const std::string streamed = stream_decode(tok, ref_ids, false);
    EXPECT_EQ(streamed, decoded) << "streamed decode of input " << i;
    EXPECT_EQ(stream_decode(tok, ref_ids, true), decoded_skip)
        << "streamed decode(skip_special) of input " << i;
    ok[0] += ids == row["ids"].get<std::vector<int32_t>>();
    ok[1] += ids_special == ref_ids;
    ok[2] += decoded == from_hex(row["decoded"].get<std::string>());
    ok[3] += decoded_skip == from_hex(row["decoded_skip"].get<std::string>());
    ok[4] += streamed == decoded;
  }
  std::cout << GetParam() << ": of " << inputs.size() << " inputs, encode " << ok[0] << ", encode+special "
            << ok[1] << ", decode " << ok[2] << ", decode(skip) " << ok[3] << ", streaming " << ok[4]
            << " match\n";
}

INSTANTIATE_TEST_SUITE_P(Families, ParityTest,
                         ::testing::Values("gpt2", "llama3", "qwen2", "deepseek", "falcon", "smollm",
                                           "spm_legacy", "spm_metaspace", "spm_unk", "gpt2_prefix_lower"));

}  // namespace
}  // namespace tokenmill
