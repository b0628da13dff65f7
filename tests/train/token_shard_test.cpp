// Token shards: round trips in both widths, with and without a loss mask, version 1 files
// still read, and every kind of damaged file refused with a named error (header fields,
// flags, sizes, hash, out-of-vocabulary tokens, mask padding, random garbage), and the fuzz
// seed corpus replayed.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/fnv1a.h"
#include "formats/token_shard.h"
#include "support/corpus.h"
#include "support/expect_error.h"
#include "support/temp_dir.h"

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

std::vector<uint8_t> random_mask(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint8_t> m(n);
  for (auto& v : m) v = static_cast<uint8_t>(rng() % 2);
  return m;
}

TEST(TokenShard, RoundTripsTheLossMask) {
  const TempDir dir;
  for (const size_t n : {1u, 7u, 8u, 9u, 16u, 1001u}) {
    for (const uint32_t vocab : {300u, 100000u}) {
      const auto tokens = random_tokens(n, vocab, n);
      const auto mask = random_mask(n, n + vocab);
      const auto path = dir.path() / fmt::format("masked_{}_{}", n, vocab);
      write_token_shard(path, tokens, vocab, 0, mask);
      EXPECT_EQ(std::filesystem::file_size(path), 64 + n * (vocab <= 65536 ? 2 : 4) + (n + 7) / 8);
      const TokenShard shard(path);
      EXPECT_TRUE(shard.info().loss_mask);
      std::vector<int32_t> back(n);
      shard.read(0, back);
      EXPECT_EQ(back, tokens);
      std::vector<uint8_t> scored(n);
      shard.read_scored(0, scored);
      EXPECT_EQ(scored, mask);
      std::vector<uint8_t> tail(n / 2);
      shard.read_scored(static_cast<int64_t>(n - tail.size()), tail);
      EXPECT_TRUE(
          std::equal(tail.begin(), tail.end(), mask.end() - static_cast<std::ptrdiff_t>(tail.size())));
      std::vector<uint8_t> past(2);
      expect_error([&] { shard.read_scored(static_cast<int64_t>(n) - 1, past); }, {"outside [0,"});
    }
  }
  write_token_shard(dir.path() / "plain", std::vector<int32_t>{1, 2, 3}, 300, 0);
  const TokenShard plain(dir.path() / "plain");
  EXPECT_FALSE(plain.info().loss_mask);
  std::vector<uint8_t> scored(3, 7);
  plain.read_scored(0, scored);
  EXPECT_EQ(scored, (std::vector<uint8_t>{1, 1, 1}));
}

TEST(TokenShard, ReadsVersionOneFiles) {
  // Version 1 had no flags: the maskless version 2 layout with 1 in the version field, and
  // its bytes 40..63 were never read.
  const TempDir dir;
  const std::vector<int32_t> tokens = {4, 8, 15, 16, 23, 42};
  write_token_shard(dir.path() / "v2", tokens, 300, 2);
  std::string bytes = dir.read("v2");
  const uint32_t v1 = 1;
  std::memcpy(bytes.data() + 8, &v1, sizeof v1);
  bytes[50] = 'x';
  const TokenShard shard(dir.write("v1", bytes));
  EXPECT_FALSE(shard.info().loss_mask);
  EXPECT_EQ(shard.info().eod_token, 2u);
  std::vector<int32_t> back(tokens.size());
  shard.read(0, back);
  EXPECT_EQ(back, tokens);
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
  const std::vector<uint8_t> short_mask = {1};
  const std::vector<uint8_t> bad_mask = {1, 2};
  expect_error(
      [&] {
        write_token_shard(dir.path() / "d", std::vector<int32_t>{1, 2}, 300, 0, short_mask);
      },
      {"loss mask has 1 entries for 2 tokens"});
  expect_error(
      [&] {
        write_token_shard(dir.path() / "e", std::vector<int32_t>{1, 2}, 300, 0, bad_mask);
      },
      {"loss mask entry 2 at position 1"});
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "a"));
}

class DamagedShard : public ::testing::Test {
 protected:
  void SetUp() override {
    write_token_shard(dir_.path() / "good", std::vector<int32_t>{5, 6, 7, 8}, 300, 2);
    good_ = dir_.read("good");
    const std::vector<uint8_t> mask = {0, 1, 1, 0, 1};
    write_token_shard(dir_.path() / "masked", std::vector<int32_t>{5, 6, 7, 8, 9}, 300, 2, mask);
    masked_ = dir_.read("masked");
  }
  // Writes `bytes` as a shard file and expects opening it to fail with `part` in the message.
  void expect_refused(const std::string& bytes, const std::string& part) {
    const auto path = dir_.write("bad", bytes);
    expect_error([&] { TokenShard shard(path); }, {path.string(), part});
  }
  template <class T>
  static std::string with_field(std::string b, size_t offset, T value) {
    std::memcpy(b.data() + offset, &value, sizeof value);
    return b;
  }
  template <class T>
  std::string with_field(size_t offset, T value) const {
    return with_field(good_, offset, value);
  }
  // `b` with its hash recomputed, so only the checks after the hash can refuse it.
  static std::string rehashed(std::string b) {
    return with_field(b, 32, fnv1a(b.data() + 64, b.size() - 64));
  }
  TempDir dir_;
  std::string good_, masked_;
};

TEST_F(DamagedShard, EachHeaderFieldIsChecked) {
  expect_refused(good_.substr(0, 10), "shorter than the 64-byte header");
  std::string bad_magic = good_;
  bad_magic[0] = 'X';
  expect_refused(bad_magic, "bad magic");
  expect_refused(with_field<uint32_t>(8, 3), "version 3 is not supported");
  expect_refused(with_field<uint32_t>(40, 2), "unknown header flags 0x2");
  expect_refused(with_field<uint8_t>(63, 1), "reserved header byte 63");
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

TEST_F(DamagedShard, TheLossMaskIsChecked) {
  // 5 tokens of 2 bytes, then one mask byte 0b10110.
  ASSERT_EQ(masked_.size(), 64u + 10u + 1u);
  ASSERT_EQ(masked_.back(), '\x16');
  expect_refused(with_field<uint32_t>(good_, 40, 1), "header says 4 tokens and a loss mask (73 bytes)");
  expect_refused(with_field<uint32_t>(masked_, 40, 0), "header says 5 tokens (74 bytes)");
  expect_refused(masked_.substr(0, masked_.size() - 1), "truncated or damaged");
  std::string flipped = masked_;
  flipped.back() = '\x17';  // token 0 scored: the hash covers the mask
  expect_refused(flipped, "does not match its hash");
  flipped.back() = '\x36';  // bit 5 is past the 5th token
  expect_refused(rehashed(flipped), "loss mask sets bits past the last token");
  const uint32_t v1 = 1;  // a version 1 file never has a mask: the mask byte is excess
  expect_refused(with_field(masked_, 8, v1), "truncated or damaged");
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
  for (int trial = 0; trial < 1000; ++trial) {
    const std::string& original = trial % 4 < 2 ? good_ : masked_;
    std::string b = original;
    if (trial % 2 == 0) b.resize(rng() % (original.size() + 16), 'z');
    for (int flips = 0; flips < 1 + trial % 4 && !b.empty(); ++flips)
      b[rng() % b.size()] = static_cast<char>(rng());
    if (trial % 8 >= 6 && b.size() >= 64) b = rehashed(b);  // reach the checks after the hash
    try {
      const auto info = parse_token_shard(std::as_bytes(std::span(b.data(), b.size())), "garbage");
      // accepted only if consistent
      EXPECT_EQ(64 + info.count * info.bytes_per_token + (info.loss_mask ? (info.count + 7) / 8 : 0),
                b.size());
    } catch (const Error&) {
    }
  }
}

// The fuzz seed corpus (fuzz/make_token_shard_corpus.py), replayed in every build: the
// valid_* seeds parse to a shard of exactly their size, the invalid_* ones are refused.
TEST(TokenShardCorpus, EveryFileParsesOrFailsCleanly) {
  testing::replay_corpus(
      TOKENMILL_FUZZ_CORPUS_DIR, [](std::span<const std::byte> bytes, const std::string& label) {
        const TokenShardInfo info = parse_token_shard(bytes, label);
        EXPECT_EQ(64 + info.count * info.bytes_per_token + (info.loss_mask ? (info.count + 7) / 8 : 0),
                  bytes.size())
            << label;
      });
}

}  // namespace
}  // namespace tokenmill
