// Token shards: round trips in both widths, and every kind of damaged file refused with a
// named error (header fields, sizes, hash, out-of-vocabulary tokens, random garbage).
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "support/expect_error.h"
#include "support/temp_dir.h"
#include "train/token_shard.h"

namespace tokenmill {
namespace {

using testing::expect_error;
using testing::TempDir;

std::vector<int32_t> random_tokens(size_t n, uint32_t vocab, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<int32_t> t(n);
  for (auto& v : t) v = static_cast<int32_t>(rng() % vocab);
  return t;
}

TEST(TokenShard, RoundTripsInTwoAndFourBytes) {
  const TempDir dir;
  for (const uint32_t vocab : {300u, 65536u, 100000u}) {
    const auto tokens = random_tokens(1001, vocab, vocab);
    const auto path = dir.path() / fmt::format("shard_{}", vocab);
    write_token_shard(path, tokens, vocab, vocab - 1);
    const TokenShard shard(path);
    EXPECT_EQ(shard.info().bytes_per_token, vocab <= 65536 ? 2u : 4u);
    EXPECT_EQ(shard.info().vocab_size, vocab);
    EXPECT_EQ(shard.info().eod_token, vocab - 1);
    ASSERT_EQ(shard.size(), 1001);
    std::vector<int32_t> back(1001);
    shard.read(0, back);
    EXPECT_EQ(back, tokens);
    EXPECT_EQ(shard.token(1000), tokens[1000]);
    std::vector<int32_t> tail(2);
    expect_error([&] { shard.read(1000, tail); }, {"tokens [1000, 1002) outside [0, 1001)"});
    expect_error([&] { (void)shard.token(-1); }, {"token index -1"});
    EXPECT_FALSE(std::filesystem::exists(path.string() + ".tmp"));
  }
}

TEST(TokenShard, WriterRefusesTokensOutsideTheVocabulary) {
  const TempDir dir;
  expect_error(
      [&] {
        write_token_shard(dir.path() / "a", std::vector<int32_t>{1, 300}, 300, 0);
      },
      {"token 300 at position 1 is outside the vocabulary of 300"});
  expect_error([&] { write_token_shard(dir.path() / "b", std::vector<int32_t>{-2}, 300, 0); }, {"token -2"});
  expect_error([&] { write_token_shard(dir.path() / "c", std::vector<int32_t>{1}, 300, 300); },
               {"end-of-document token 300"});
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "a"));
}

class DamagedShard : public ::testing::Test {
 protected:
  void SetUp() override {
    write_token_shard(dir_.path() / "good", std::vector<int32_t>{5, 6, 7, 8}, 300, 2);
    good_ = dir_.read("good");
  }
  // Writes `bytes` as a shard file and expects opening it to fail with `part` in the message.
  void expect_refused(const std::string& bytes, const std::string& part) {
    const auto path = dir_.write("bad", bytes);
    expect_error([&] { TokenShard shard(path); }, {path.string(), part});
  }
  template <class T>
  std::string with_field(size_t offset, T value) const {
    std::string b = good_;
    std::memcpy(b.data() + offset, &value, sizeof value);
    return b;
  }
  TempDir dir_;
  std::string good_;
};

TEST_F(DamagedShard, EachHeaderFieldIsChecked) {
  expect_refused(good_.substr(0, 10), "shorter than the 64-byte header");
  std::string bad_magic = good_;
  bad_magic[0] = 'X';
  expect_refused(bad_magic, "bad magic");
  expect_refused(with_field<uint32_t>(8, 2), "version 2 is not supported");
  expect_refused(with_field<uint32_t>(12, 3), "bytes per token is 3");
  expect_refused(with_field<uint32_t>(24, 0), "vocabulary size 0");
  expect_refused(with_field<uint32_t>(24, 70000), "vocabulary size 70000 does not fit 2 bytes");
  expect_refused(with_field<uint32_t>(28, 300), "end-of-document token 300");
  expect_refused(with_field<uint64_t>(16, 5), "header says 5 tokens");
  expect_refused(with_field<uint64_t>(16, ~uint64_t{0}), "overflows");
  expect_refused(good_.substr(0, good_.size() - 1), "truncated or damaged");
  expect_refused(good_ + "x", "truncated or damaged");
  expect_refused(with_field<uint64_t>(32, 12345), "does not match its hash");
}

TEST_F(DamagedShard, OutOfVocabularyTokenIsFoundEvenWithAValidHash) {
  // A shard written for a larger vocabulary, relabelled as a smaller one: the hash of the
  // token bytes still matches, the vocabulary check catches it.
  write_token_shard(dir_.path() / "big", std::vector<int32_t>{5, 299}, 300, 2);
  std::string b = dir_.read("big");
  const uint32_t small = 200;
  std::memcpy(b.data() + 24, &small, sizeof small);
  expect_refused(b, "token 299 at position 1 is outside the vocabulary of 200");
}

TEST_F(DamagedShard, RandomGarbageNeverCrashes) {
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 500; ++trial) {
    std::string b = good_;
    if (trial % 2 == 0) b.resize(rng() % (good_.size() + 16), 'z');
    for (int flips = 0; flips < 1 + trial % 4 && !b.empty(); ++flips)
      b[rng() % b.size()] = static_cast<char>(rng());
    try {
      const auto info = parse_token_shard(std::as_bytes(std::span(b.data(), b.size())), "garbage");
      EXPECT_EQ(64 + info.count * info.bytes_per_token, b.size());  // accepted only if consistent
    } catch (const Error&) {
    }
  }
}

}  // namespace
}  // namespace tokenmill
