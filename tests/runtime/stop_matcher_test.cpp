// StopMatcher: stop strings split over any number of pieces, prefixes that turn out not to
// match, several (overlapping) stop strings, multi-byte UTF-8, flush, silence after a stop,
// and a randomized comparison against a byte-by-byte reference.
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/stop_matcher.h"

namespace tokenmill {
namespace {

struct Outcome {
  std::string text;  // everything released, flush included when no stop string matched
  bool stopped = false;
};

Outcome run(const std::vector<std::string>& stops, const std::vector<std::string>& pieces) {
  StopMatcher matcher(stops);
  Outcome out;
  for (const std::string& piece : pieces) out.text += matcher.push(piece);
  out.stopped = matcher.stopped();
  out.text += matcher.flush();
  return out;
}

std::vector<std::string> bytes_of(const std::string& text) {
  std::vector<std::string> pieces;
  for (char c : text) pieces.emplace_back(1, c);
  return pieces;
}

// The text before the first stop string completed while reading `text` byte by byte (the
// longest if several complete at the same byte), and whether there was one.
Outcome reference(const std::vector<std::string>& stops, const std::string& text) {
  for (size_t end = 1; end <= text.size(); ++end) {
    size_t longest = 0;
    for (const std::string& stop : stops)
      if (!stop.empty() && stop.size() > longest && text.substr(0, end).ends_with(stop))
        longest = stop.size();
    if (longest > 0) return {text.substr(0, end - longest), true};
  }
  return {text, false};
}

TEST(StopMatcher, FindsAStopStringSplitOverAnyNumberOfPieces) {
  const std::vector<std::string> stops = {"</end>"};
  const Outcome expected{"hello", true};
  for (const auto& pieces : std::vector<std::vector<std::string>>{
           {"hello</end>world"},
           {"hello</e", "nd>world"},
           {"hello<", "/en", "d>world"},
           {"hel", "lo", "<", "/", "e", "n", "d", ">", "wor", "ld"},
           bytes_of("hello</end>world"),
       }) {
    const Outcome got = run(stops, pieces);
    EXPECT_EQ(got.text, expected.text) << pieces.size() << " pieces";
    EXPECT_TRUE(got.stopped) << pieces.size() << " pieces";
  }
}

TEST(StopMatcher, ReleasesTextAsSoonAsItCannotStartAStopString) {
  StopMatcher matcher({"</end>"});
  EXPECT_EQ(matcher.push("hello</e"), "hello");  // "</e" may start "</end>"
  EXPECT_EQ(matcher.push("x"), "</ex");          // it did not
  EXPECT_EQ(matcher.push("<"), "");
  EXPECT_EQ(matcher.push("<"), "<");  // only the last "<" can still start it
  EXPECT_FALSE(matcher.stopped());
  EXPECT_EQ(matcher.flush(), "<");
}

TEST(StopMatcher, NothingIsReleasedAfterAStop) {
  StopMatcher matcher({"STOP"});
  EXPECT_EQ(matcher.push("abSTOPcd"), "ab");
  EXPECT_TRUE(matcher.stopped());
  EXPECT_EQ(matcher.push("more text"), "");
  EXPECT_EQ(matcher.flush(), "");
  EXPECT_TRUE(matcher.stopped());
}

TEST(StopMatcher, FlushReleasesTheHeldBackText) {
  StopMatcher matcher({"STOP"});
  EXPECT_EQ(matcher.push("abcST"), "abc");
  EXPECT_EQ(matcher.flush(), "ST");
  EXPECT_FALSE(matcher.stopped());
}

TEST(StopMatcher, WithoutStopStringsEverythingPassesThrough) {
  StopMatcher none;
  EXPECT_EQ(none.push("abc"), "abc");
  StopMatcher empty_only({""});  // empty stop strings are ignored
  EXPECT_EQ(empty_only.push("abc"), "abc");
  EXPECT_FALSE(empty_only.stopped());
}

TEST(StopMatcher, TheFirstStopStringCompletedWins) {
  // "ab" is a prefix of "abc": it completes first.
  EXPECT_EQ(run({"abc", "ab"}, {"xabcd"}).text, "x");
  // "b" completes before "abc" could.
  EXPECT_EQ(run({"abc", "b"}, {"xabc"}).text, "xa");
  // Both end at the same byte: the longer one wins, whatever the order of the list.
  EXPECT_EQ(run({"bc", "abc"}, {"xabc"}).text, "x");
  EXPECT_EQ(run({"abc", "bc"}, bytes_of("xabc")).text, "x");
  // Two prefixes held back together, then neither matches.
  const Outcome got = run({"abc", "abd"}, {"xab", "e"});
  EXPECT_EQ(got.text, "xabe");
  EXPECT_FALSE(got.stopped);
}

TEST(StopMatcher, MultiByteUtf8IsReleasedInWholeCharacters) {
  // "à" (c3 a0) and "é" (c3 a9) share their first byte.
  const std::vector<std::string> stops = {"世界", "é"};
  const std::vector<std::string> chars = {"你", "好", "世", "人", "à", "é", "!"};
  StopMatcher matcher(stops);
  std::string out;
  for (const std::string& c : chars) {
    const std::string released = matcher.push(c);
    // A released piece never ends inside a character: its last lead byte starts a
    // character whose length (from the lead byte) fits.
    if (!released.empty()) {
      size_t lead = released.size() - 1;
      while (lead > 0 && (static_cast<unsigned char>(released[lead]) & 0xC0) == 0x80) --lead;
      const auto b = static_cast<unsigned char>(released[lead]);
      const size_t length = b < 0x80 ? 1 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4;
      EXPECT_EQ(released.size() - lead, length) << "after " << c;
    }
    out += released;
  }
  EXPECT_EQ(out, "你好世人à");
  EXPECT_TRUE(matcher.stopped());
  EXPECT_EQ(run(stops, bytes_of("你好世界")).text, "你好");
}

// Random texts over a small alphabet (so partial matches are frequent), cut into random
// pieces: the output is the reference's, and what is held back is a proper prefix of a
// stop string.
TEST(StopMatcher, MatchesTheByteByByteReferenceOnRandomPieces) {
  std::mt19937 rng(42);
  const auto below = [&](size_t n) { return static_cast<size_t>(rng() % n); };
  const auto random_text = [&](size_t max_length) {
    std::string s(below(max_length + 1), 'a');
    for (char& c : s) c = static_cast<char>('a' + below(3));
    return s;
  };
  int stopped = 0;
  for (int trial = 0; trial < 5000; ++trial) {
    std::vector<std::string> stops(1 + below(4));
    for (std::string& s : stops) s = random_text(4);
    const std::string text = random_text(40);
    const Outcome expected = reference(stops, text);

    StopMatcher matcher(stops);
    Outcome got;
    size_t consumed = 0;
    while (consumed < text.size()) {
      const size_t n = 1 + below(6);
      got.text += matcher.push(std::string_view(text).substr(consumed, n));
      consumed = std::min(text.size(), consumed + n);
      if (matcher.stopped()) continue;
      ASSERT_EQ(text.substr(0, got.text.size()), got.text);
      ASSERT_LE(got.text.size(), consumed);
      const std::string held = text.substr(got.text.size(), consumed - got.text.size());
      bool is_prefix = held.empty();
      for (const std::string& s : stops) is_prefix |= held.size() < s.size() && s.starts_with(held);
      ASSERT_TRUE(is_prefix) << "holds back \"" << held << "\" of \"" << text << "\"";
    }
    got.stopped = matcher.stopped();
    got.text += matcher.flush();
    std::string case_name = "text \"" + text + "\", stops";
    for (const std::string& s : stops) case_name += " \"" + s + "\"";
    ASSERT_EQ(got.text, expected.text) << case_name;
    ASSERT_EQ(got.stopped, expected.stopped) << case_name;
    stopped += got.stopped;
  }
  EXPECT_GT(stopped, 1000);  // both outcomes are well exercised
  EXPECT_LT(stopped, 4000);
}

}  // namespace
}  // namespace tokenmill
