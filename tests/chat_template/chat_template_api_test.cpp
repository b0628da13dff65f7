// The ChatTemplate API: the three render entry points, the variables transformers passes,
// message normalization, the injectable clock, sharing across threads, and the Python
// value formatting the interpreter relies on.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/jinja_unicode.h"
#include "tokenizer/jinja_value.h"

namespace tokenmill {
namespace {

using ::testing::MatchesRegex;

constexpr const char* kChatML =
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] | trim + '<|im_end|>\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

TEST(ChatTemplateApi, RendersPlainMessages) {
  const ChatTemplate tpl(kChatML);
  ChatTemplateOptions options;
  EXPECT_EQ(
      tpl.render({{"system", "Be brief."}, {"user", "  Hi!  "}}, options),
      "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi!<|im_end|>\n<|im_start|>assistant\n");
  options.add_generation_prompt = false;
  EXPECT_EQ(tpl.render({{"user", "Hi"}}, options), "<|im_start|>user\nHi<|im_end|>\n");
}

TEST(ChatTemplateApi, EntryPointsAgree) {
  const ChatTemplate tpl(kChatML);
  const ChatTemplateOptions options;
  const std::string expected = tpl.render({{"user", "你好 😀"}}, options);
  EXPECT_EQ(tpl.render_json(nlohmann::json::parse(R"([{"role": "user", "content": "你好 😀"}])"), options),
            expected);
  EXPECT_EQ(tpl.render_ordered(nlohmann::ordered_json::parse(R"([{"content": "你好 😀", "role": "user"}])"),
                               nlohmann::ordered_json::object(), options),
            expected);
}

TEST(ChatTemplateApi, SpecialTokensAndKwargs) {
  const ChatTemplate tpl(
      "[{{ bos_token is defined }}|{{ bos_token }}|{{ eos_token }}|{{ tools }}|{{ date_string }}]");
  ChatTemplateOptions options;
  EXPECT_EQ(tpl.render({{"user", "x"}}, options), "[False|||None|]");
  options.bos_token = "<s>";
  options.eos_token = "</s>";
  options.extra["date_string"] = "26 Jul 2024";
  EXPECT_EQ(tpl.render({{"user", "x"}}, options), "[True|<s>|</s>|None|26 Jul 2024]");
  options.extra["bos_token"] = "<override>";  // kwargs win over the special tokens, as in transformers
  options.extra["tools"] = nlohmann::json::array();
  EXPECT_EQ(tpl.render({{"user", "x"}}, options), "[True|<override>|</s>|[]|26 Jul 2024]");
}

TEST(ChatTemplateApi, KeyOrderFollowsTheJsonType) {
  const ChatTemplate tpl("{{ tools|tojson }}");
  const auto messages = nlohmann::json::parse(R"([{"role": "user", "content": "x"}])");
  ChatTemplateOptions options;
  options.extra["tools"] = nlohmann::json::parse(R"([{"name": "f", "description": "d"}])");
  EXPECT_EQ(tpl.render_json(messages, options), R"([{"description": "d", "name": "f"}])");
  const auto ordered_extra =
      nlohmann::ordered_json::parse(R"({"tools": [{"name": "f", "description": "d"}]})");
  EXPECT_EQ(tpl.render_ordered(nlohmann::ordered_json::parse(messages.dump()), ordered_extra, {}),
            R"([{"name": "f", "description": "d"}])");
}

TEST(ChatTemplateApi, NormalizesMessagesLikeTransformers) {
  const ChatTemplate tpl("{% for m in messages %}{{ m|tojson }};{% endfor %}");
  const auto messages = nlohmann::ordered_json::parse(R"([
    {"role": "assistant", "content": null, "tool_calls": [{"function": {"name": "f", "arguments": {}}}]},
    {"role": "assistant", "content": "a", "reasoning": "r"},
    {"role": "assistant", "reasoning_content": "rc", "content": "b", "thinking": "t"}
  ])");
  EXPECT_EQ(
      tpl.render_ordered(messages, nlohmann::ordered_json::object(), {}),
      R"({"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": {}}}]};)"
      R"({"thinking": "r", "role": "assistant", "content": "a", "reasoning": "r", "reasoning_content": "r"};)"
      R"({"thinking": "t", "role": "assistant", "reasoning_content": "rc", "content": "b"};)");
}

TEST(ChatTemplateApi, StrftimeNowUsesTheInjectedClock) {
  const ChatTemplate tpl("{{ strftime_now('%d %b %Y') }}|{{ strftime_now('%A %H:%M %f%z%Z') }}");
  ChatTemplateOptions options;
  std::tm tm{};
  tm.tm_year = 2025 - 1900;
  tm.tm_mon = 0;
  tm.tm_mday = 31;
  tm.tm_hour = 23;
  tm.tm_min = 59;
  options.now = tm;
  EXPECT_EQ(tpl.render({{"user", "x"}}, options), "31 Jan 2025|Friday 23:59 000000");
  options.now.reset();
  EXPECT_THAT(tpl.render({{"user", "x"}}, options), MatchesRegex("[0-9]{2} [A-Z][a-z]{2} [0-9]{4}\\|.*"));
}

TEST(ChatTemplateApi, CopiesShareOneTemplateAcrossThreads) {
  const ChatTemplate tpl(kChatML);
  const ChatTemplate copy = tpl;  // NOLINT(performance-unnecessary-copy-initialization): copies must work
  const std::string expected = tpl.render({{"user", "hello"}}, {});
  std::vector<std::thread> threads;
  std::vector<std::string> results(8);
  for (std::size_t i = 0; i < results.size(); ++i) {
    threads.emplace_back([&, i] {
      for (int k = 0; k < 50; ++k) results[i] = (i % 2 == 0 ? tpl : copy).render({{"user", "hello"}}, {});
    });
  }
  for (std::thread& t : threads) t.join();
  for (const std::string& r : results) EXPECT_EQ(r, expected);
}

TEST(ChatTemplateApi, InvalidUtf8PassesThroughUnchanged) {
  const ChatTemplate tpl(
      "{{ messages[0].content }}|{{ messages[0].content|upper }}|{{ messages[0].content|length }}");
  // Stray bytes and a truncated sequence: each undecodable byte is one code point, as with
  // Python's surrogateescape.
  const std::string content = "\xff\xfe ok \xe4\xbd";
  EXPECT_EQ(tpl.render({{"user", content}}, {}), content + "|\xff\xfe OK \xe4\xbd|8");
}

TEST(JinjaValues, PythonFloatRepr) {
  using jinja::format_float;
  EXPECT_EQ(format_float(1.0), "1.0");
  EXPECT_EQ(format_float(0.1), "0.1");
  EXPECT_EQ(format_float(-0.0), "-0.0");
  EXPECT_EQ(format_float(1e-4), "0.0001");
  EXPECT_EQ(format_float(1e-5), "1e-05");
  EXPECT_EQ(format_float(1e16), "1e+16");
  EXPECT_EQ(format_float(9999999999999998.0), "9999999999999998.0");
  EXPECT_EQ(format_float(123456789012345678.0), "1.2345678901234568e+17");
  EXPECT_EQ(format_float(2.5e-300), "2.5e-300");
  EXPECT_EQ(format_float(1.0 / 0.0), "inf");
  EXPECT_EQ(format_float(-1.0 / 0.0), "-inf");
}

TEST(JinjaValues, PythonStringRepr) {
  std::string out;
  jinja::append_string_repr(out, "it's");
  EXPECT_EQ(out, "\"it's\"");
  out.clear();
  jinja::append_string_repr(out, "a'b\"c\\\n\x01\u00e9\u200b");
  EXPECT_EQ(out, "'a\\'b\"c\\\\\\n\\x01\u00e9\\u200b'");
}

TEST(JinjaUnicode, PythonStringOperations) {
  EXPECT_EQ(jinja::strip("\u3000 x \n\u00a0", nullptr, true, true), "x");
  EXPECT_EQ(jinja::to_upper("straße"), "STRASSE");
  EXPECT_EQ(jinja::to_lower("ΟΔΥΣΣΕΥΣ"), "οδυσσευς");
  EXPECT_EQ(jinja::to_title("they're 3rd"), "They'Re 3Rd");
  EXPECT_EQ(jinja::code_point_count("é😀x"), 3u);
  EXPECT_EQ(jinja::splitlines("a\r\nb\rc\n", false), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(jinja::replace("abc", "", "-", -1), "-a-b-c-");
}

}  // namespace
}  // namespace tokenmill
