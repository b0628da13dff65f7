// The real vocabularies in shared/data/tokenizers (GGUF, vocab only): every test string
// encodes to exactly the ids Hugging Face `tokenizers` produced (recorded in .out, without
// BOS) and decodes back to the input where HF round-trips.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace tokenmill {
namespace {

const std::filesystem::path kDir = std::filesystem::path(TOKENMILL_SHARED_DATA_DIR) / "tokenizers";

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// The llama.cpp convention: each string is followed by "\n__ggml_vocab_test__\n".
std::vector<std::string> read_inputs(const std::filesystem::path& path) {
  const std::string text = read_file(path);
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t next = text.find(sep, pos);
    if (next == std::string::npos) break;
    out.push_back(text.substr(pos, next - pos));
    pos = next + sep.size();
  }
  return out;
}

std::vector<std::vector<int32_t>> read_outputs(const std::filesystem::path& path) {
  std::istringstream in(read_file(path));
  std::vector<std::vector<int32_t>> out;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ids(line);
    std::vector<int32_t> row;
    int32_t id = 0;
    while (ids >> id) row.push_back(id);
    out.push_back(row);
  }
  return out;
}

std::string show(const std::string& s) {
  std::string out;
  for (const char c : s) {
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else {
      out.push_back(c);
    }
  }
  return out;
}

class GgmlVocabTest : public ::testing::TestWithParam<std::string> {};

TEST_P(GgmlVocabTest, EncodesLikeHuggingFaceAndRoundTrips) {
  const auto gguf = kDir / ("ggml-vocab-" + GetParam() + ".gguf");
  if (!std::filesystem::exists(gguf)) GTEST_SKIP() << gguf << " not present";
  const Tokenizer tok = Tokenizer::from_file(gguf);
  const auto inputs = read_inputs(gguf.string() + ".inp");
  const auto expected = read_outputs(gguf.string() + ".out");
  ASSERT_EQ(inputs.size(), expected.size());
  ASSERT_FALSE(inputs.empty());
  size_t encode_ok = 0, decode_ok = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const auto ids = tok.encode(inputs[i], {.add_special_tokens = false});
    EXPECT_EQ(ids, expected[i]) << "string " << i << ": \"" << show(inputs[i]) << "\"";
    encode_ok += ids == expected[i];
    // The dummy-prefix space that SentencePiece adds is stripped again by its decoder, so
    // every string round-trips, leading spaces included.
    const std::string& want = inputs[i];
    const std::string text = tok.decode(ids);
    EXPECT_EQ(text, want) << "decode of string " << i;
    decode_ok += text == want;
  }
  std::cout << GetParam() << ": " << encode_ok << "/" << inputs.size() << " encode exactly, " << decode_ok
            << "/" << inputs.size() << " round-trip\n";
}

INSTANTIATE_TEST_SUITE_P(RealVocabularies, GgmlVocabTest,
                         ::testing::Values("gpt-2", "llama-spm", "deepseek-llm", "falcon"));

}  // namespace
}  // namespace tokenmill
