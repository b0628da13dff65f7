// Tool calling (OpenAI's `tools` and `tool_choice`) in the Hermes format, which the chat
// templates of Qwen2.5, Qwen3, Hermes and SmolLM3 teach their models: a call is
//
//   <tool_call>
//   {"name": "get_weather", "arguments": {"city": "Paris"}}
//   </tool_call>
//
// in the assistant's text. The request's tools reach the chat template as transformers passes
// them (the `tools` kwarg); the model's calls are cut out of its text into `tool_calls`, with
// finish_reason "tool_calls". tool_choice "required" and a named function are enforced with a
// grammar (structured outputs), so their arguments always validate against the function's
// `parameters` schema (local $refs inside `parameters` are not supported there); "auto" lets
// the model choose; "none" leaves the tools out. A named function is called once, "required"
// makes one call or, with parallel_tool_calls (the default), up to 16.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace tokenmill {

enum class ToolChoice { None, Auto, Required, Named };

struct ToolRequest {
  nlohmann::json tools;  // as the request gave them, for the chat template
  ToolChoice choice = ToolChoice::Auto;
  std::string named;     // ToolChoice::Named: the function
  bool parallel = true;  // parallel_tool_calls: "required" may make up to 16 calls, else one
  // Required and Named: the GBNF the text must follow and its start rule; else "".
  std::string gbnf;
  std::string gbnf_root;
};

// Reads `tools` and `tool_choice` (400s naming the field): nullopt without tools. The
// parameters schemas are read from `raw_body` when given, to keep their property order.
std::optional<ToolRequest> read_tools(const nlohmann::json& body, std::string_view raw_body);

struct ToolCall {
  std::string name;
  std::string arguments;  // compact JSON text (OpenAI sends arguments as a string)
};

// An assistant text split into its content (the text outside the calls, whitespace-trimmed)
// and its calls. A <tool_call> block whose body is not a JSON object with a string "name"
// stays in the content, as does an unclosed one.
struct ToolCallSplit {
  std::string content;
  std::vector<ToolCall> calls;
};
ToolCallSplit split_tool_calls(std::string_view text);

// The same on a stream of text pieces: content as soon as it cannot be the start of a call,
// calls once closed. Only what might begin a <tool_call> tag, or an open call, is held back.
class ToolCallStream {
 public:
  ToolCallSplit push(std::string_view piece);
  // The end of the text: whatever is held back (an unclosed call stays content).
  ToolCallSplit finish();

 private:
  std::string pending_;
};

}  // namespace tokenmill
