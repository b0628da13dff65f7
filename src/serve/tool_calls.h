// Tool calling (OpenAI's `tools` and `tool_choice`) in the formats chat templates teach their
// models (ToolFormat, found in the template by detect_tool_format): Hermes (Qwen2.5, Qwen3,
// Hermes; the default), Llama 3.1's JSON calls and Mistral's [TOOL_CALLS]. A Hermes call is
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

enum class ToolFormat {
  Hermes,   // <tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>, one block per call
  Llama3,   // the whole answer {"name": ..., "parameters": {...}} (after <|python_tag|>, if kept)
  Mistral,  // the whole answer [TOOL_CALLS][{"name": ..., "arguments": {...}}, ...] (the tag may be gone)
};
// The format a chat template teaches: Mistral's if it mentions [TOOL_CALLS], Llama 3.1's if it
// mentions <|python_tag|> or "parameters", else Hermes.
ToolFormat detect_tool_format(std::string_view template_source);

struct ToolRequest {
  nlohmann::ordered_json tools;  // as the request gave them (key order kept), for the chat template
  ToolChoice choice = ToolChoice::Auto;
  ToolFormat format = ToolFormat::Hermes;
  std::string named;     // ToolChoice::Named: the function
  bool parallel = true;  // parallel_tool_calls: "required" may make up to 16 calls, else one
  // Required and Named: the GBNF the text must follow and its start rule; else "".
  std::string gbnf;
  std::string gbnf_root;
};

// Reads `tools` and `tool_choice` (400s naming the field): nullopt without tools. The
// parameters schemas are read from `raw_body` when given, to keep their property order;
// `format` shapes the grammar of "required" and named choices.
std::optional<ToolRequest> read_tools(const nlohmann::json& body, std::string_view raw_body,
                                      ToolFormat format = ToolFormat::Hermes);

struct ToolCall {
  std::string name;
  std::string arguments;  // compact JSON text (OpenAI sends arguments as a string)
};

// An assistant text split into its content (the text outside the calls, whitespace-trimmed)
// and its calls. A Hermes block whose body is not a JSON object with a string "name" stays in
// the content, as does an unclosed one; a Llama 3 or Mistral answer is calls only when all of
// it parses as such.
struct ToolCallSplit {
  std::string content;
  std::vector<ToolCall> calls;
};
ToolCallSplit split_tool_calls(std::string_view text, ToolFormat format = ToolFormat::Hermes);

// The same on a stream of text pieces: content as soon as it cannot be the start of a call,
// calls once closed. Hermes holds back only what might begin a <tool_call> tag, or an open
// call; Llama 3 and Mistral hold back an answer that begins as calls do ('{', '[', their tag)
// to its end, and stream any other.
class ToolCallStream {
 public:
  explicit ToolCallStream(ToolFormat format = ToolFormat::Hermes) : format_(format) {}
  ToolCallSplit push(std::string_view piece);
  // The end of the text: whatever is held back (an unclosed call stays content).
  ToolCallSplit finish();

 private:
  ToolCallSplit push_hermes();
  ToolFormat format_;
  std::string pending_;
  bool streaming_content_ = false;  // Llama 3 / Mistral: the answer is not calls
};

}  // namespace tokenmill
