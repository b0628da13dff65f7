// Tool calls cut out of an assistant's text (serve/tool_calls.h), whole and streamed in every
// split of the text into two or three pieces, and the tool_choice grammars.
#include "serve/tool_calls.h"

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "support/grammar_sentence.h"

namespace tokenmill {
namespace {

const std::string kText =
    "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"unit\": "
    "\"c\"}}\n"
    "</tool_call>\n<tool_call>\n{\"name\": \"add\", \"arguments\": {\"b\": 2, \"a\": 1}}\n</tool_call>\n";

void expect_calls(const std::vector<ToolCall>& calls) {
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[0].name, "get_weather");
  EXPECT_EQ(calls[0].arguments, R"({"city":"Paris","unit":"c"})");
  EXPECT_EQ(calls[1].name, "add");
  EXPECT_EQ(calls[1].arguments, R"({"b":2,"a":1})");  // the model's key order
}

TEST(ToolCalls, CutsHermesCallsOutOfTheText) {
  const ToolCallSplit split = split_tool_calls(kText);
  EXPECT_EQ(split.content, "Let me check.");
  expect_calls(split.calls);
  EXPECT_TRUE(split_tool_calls("no calls here").calls.empty());
}

TEST(ToolCalls, LeavesWhatIsNotACallInTheContent) {
  for (const std::string text :
       {"<tool_call>\nnot json\n</tool_call>", "<tool_call>{\"arguments\": {}}</tool_call>",
        "<tool_call>[1, 2]</tool_call>", "<tool_call>{\"name\": \"f\""}) {
    const ToolCallSplit split = split_tool_calls(text);
    EXPECT_TRUE(split.calls.empty()) << text;
    EXPECT_EQ(split.content, text);
  }
  const ToolCallSplit string_arguments =
      split_tool_calls(R"(<tool_call>{"name": "f", "arguments": "{\"x\": 1}"}</tool_call>)");
  ASSERT_EQ(string_arguments.calls.size(), 1u);
  EXPECT_EQ(string_arguments.calls[0].arguments, R"({"x": 1})");
  EXPECT_EQ(split_tool_calls(R"(<tool_call>{"name": "f"}</tool_call>)").calls.at(0).arguments, "{}");
}

TEST(ToolCalls, StreamedInAnyPiecesGivesTheSameCallsAndContent) {
  for (size_t i = 0; i <= kText.size(); ++i) {
    for (size_t j = i; j <= kText.size(); j += 7) {
      ToolCallStream stream;
      std::string content;
      std::vector<ToolCall> calls;
      for (const std::string& piece : {kText.substr(0, i), kText.substr(i, j - i), kText.substr(j)}) {
        ToolCallSplit out = stream.push(piece);
        content += out.content;
        calls.insert(calls.end(), out.calls.begin(), out.calls.end());
      }
      content += stream.finish().content;
      SCOPED_TRACE(::testing::Message() << "split at " << i << ", " << j);
      EXPECT_EQ(content, "Let me check.\n\n\n");
      expect_calls(calls);
    }
  }
}

TEST(ToolCalls, StreamsContentWithoutWaitingUnlessATagMayStart) {
  ToolCallStream stream;
  EXPECT_EQ(stream.push("Hello <tool").content, "Hello ");  // "<tool" may begin a call
  EXPECT_EQ(stream.push("box> and").content, "<toolbox> and");
  EXPECT_EQ(stream.push(" <tool_call>{\"name\": ").content, " ");  // an open call is held
  EXPECT_EQ(stream.finish().content, "<tool_call>{\"name\": ");    // unclosed: content after all
}

nlohmann::json tools_body(const nlohmann::json& choice, bool parallel = true) {
  return {{"tools",
           {{{"type", "function"},
             {"function",
              {{"name", "add"},
               {"parameters",
                {{"type", "object"},
                 {"properties", {{"a", {{"type", "integer"}}}}},
                 {"required", {"a"}},
                 {"additionalProperties", false}}}}}},
            {{"type", "function"}, {"function", {{"name", "ping"}}}}}},
          {"tool_choice", choice},
          {"parallel_tool_calls", parallel}};
}

// Whether `text` is a whole sentence of the request's tool-call grammar.
bool enforced(const ToolRequest& request, const std::string& text) {
  return testing::sentence(testing::compile(request.gbnf, request.gbnf_root), text);
}

TEST(ToolCalls, RequiredAndNamedChoicesAreGrammars) {
  const nlohmann::json body = tools_body("required");
  const ToolRequest required = read_tools(body, body.dump()).value();
  EXPECT_EQ(required.choice, ToolChoice::Required);
  const std::string add = "<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 3}}\n</tool_call>";
  const std::string ping = "<tool_call>\n{\"name\":\"ping\",\"arguments\":{}}\n</tool_call>";
  EXPECT_TRUE(enforced(required, add));
  EXPECT_TRUE(enforced(required, add + "\n" + ping));
  EXPECT_FALSE(
      enforced(required, "<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": \"3\"}}\n</tool_call>"));
  EXPECT_FALSE(enforced(required, "Sure."));
  const nlohmann::json single = tools_body("required", false);
  EXPECT_FALSE(enforced(read_tools(single, single.dump()).value(), add + "\n" + ping));
  const nlohmann::json named_body = tools_body({{"type", "function"}, {"function", {{"name", "ping"}}}});
  const ToolRequest named = read_tools(named_body, named_body.dump()).value();
  EXPECT_TRUE(enforced(named, ping));
  EXPECT_FALSE(enforced(named, add));
  const nlohmann::json auto_body = tools_body("auto");
  EXPECT_TRUE(read_tools(auto_body, auto_body.dump()).value().gbnf.empty());
  EXPECT_FALSE(read_tools(nlohmann::json::object(), "{}"));
}

TEST(ToolCalls, Llama3AndMistralAnswersAreCallsOnlyWhenWhollyCalls) {
  const ToolCallSplit llama = split_tool_calls(
      R"(<|python_tag|>{"name": "add", "parameters": {"b": 2, "a": 1}})", ToolFormat::Llama3);
  ASSERT_EQ(llama.calls.size(), 1u);
  EXPECT_EQ(llama.calls[0].name, "add");
  EXPECT_EQ(llama.calls[0].arguments, R"({"b":2,"a":1})");
  EXPECT_EQ(llama.content, "");
  const ToolCallSplit mistral = split_tool_calls(
      R"([TOOL_CALLS][{"name": "add", "arguments": {"a": 1}}, {"name": "ping", "arguments": {}}])",
      ToolFormat::Mistral);
  ASSERT_EQ(mistral.calls.size(), 2u);
  EXPECT_EQ(mistral.calls[1].name, "ping");
  EXPECT_EQ(split_tool_calls(R"([{"name": "add", "arguments": {"a": 1}}])", ToolFormat::Mistral).calls.size(),
            1u);
  for (const auto& [text, format] :
       std::vector<std::pair<std::string, ToolFormat>>{{"{\"no\": \"name\"}", ToolFormat::Llama3},
                                                       {"{\"name\": \"add\"} and more", ToolFormat::Llama3},
                                                       {"[1] is a footnote", ToolFormat::Mistral},
                                                       {"[{\"name\": \"add\"}, 5]", ToolFormat::Mistral},
                                                       {"Plain text.", ToolFormat::Llama3}}) {
    const ToolCallSplit split = split_tool_calls(text, format);
    EXPECT_TRUE(split.calls.empty()) << text;
    EXPECT_EQ(split.content, text);
  }
}

TEST(ToolCalls, Llama3AndMistralStreamsHoldOnlyWhatMayBeCalls) {
  ToolCallStream text(ToolFormat::Mistral);
  EXPECT_EQ(text.push(" ").content, "");
  EXPECT_EQ(text.push(" Hello").content, "  Hello");  // cannot be calls: streamed at once
  EXPECT_EQ(text.push(" [1]").content, " [1]");
  const std::string answer = R"([TOOL_CALLS][{"name": "add", "arguments": {"a": 1}}])";
  for (size_t i = 0; i <= answer.size(); ++i) {
    ToolCallStream calls(ToolFormat::Mistral);
    EXPECT_EQ(calls.push(answer.substr(0, i)).content, "");
    EXPECT_EQ(calls.push(answer.substr(i)).content, "");
    const ToolCallSplit end = calls.finish();
    ASSERT_EQ(end.calls.size(), 1u) << i;
    EXPECT_EQ(end.calls[0].arguments, R"({"a":1})");
  }
  ToolCallStream footnote(ToolFormat::Mistral);
  EXPECT_EQ(footnote.push("[1] see").content, "");
  EXPECT_EQ(footnote.finish().content, "[1] see");  // held to the end, then content
}

TEST(ToolCalls, TheFormatComesFromTheChatTemplate) {
  const auto format_of = [](const char* name) {
    std::ifstream in(std::filesystem::path(TOKENMILL_FIXTURES_DIR) / "chat_templates" / "templates" / name);
    return detect_tool_format(std::string(std::istreambuf_iterator<char>(in), {}));
  };
  EXPECT_EQ(format_of("Qwen-Qwen2.5-7B-Instruct.jinja"), ToolFormat::Hermes);
  EXPECT_EQ(format_of("meta-llama-Llama-3.1-8B-Instruct.jinja"), ToolFormat::Llama3);
  EXPECT_EQ(format_of("mistralai-Mistral-Nemo-Instruct-2407.jinja"), ToolFormat::Mistral);
}

TEST(ToolCalls, EachFormatsGrammarWritesItsCalls) {
  const nlohmann::json body = tools_body("required");
  const ToolRequest llama = read_tools(body, body.dump(), ToolFormat::Llama3).value();
  EXPECT_TRUE(enforced(llama, R"({"name": "add", "parameters": {"a": 3}})"));
  EXPECT_FALSE(enforced(llama, R"({"name": "add", "arguments": {"a": 3}})"));
  const ToolRequest mistral = read_tools(body, body.dump(), ToolFormat::Mistral).value();
  EXPECT_TRUE(
      enforced(mistral, R"([{"name": "add", "arguments": {"a": 3}}, {"name": "ping", "arguments": {}}])"));
  EXPECT_FALSE(enforced(mistral, R"({"name": "add", "arguments": {"a": 3}})"));
  // What each grammar makes, each parser reads back.
  EXPECT_EQ(
      split_tool_calls(R"({"name": "add", "parameters": {"a": 3}})", ToolFormat::Llama3).calls.at(0).name,
      "add");
}

}  // namespace
}  // namespace tokenmill
