// libFuzzer target for chat templates: parses arbitrary template text and renders it with a
// fixed conversation, tools and kwargs under tight limits.
//
// Every input must either render or throw tokenmill::Error; any other exception, a crash, a
// hang, or a sanitizer report (out-of-bounds access, use after free, leak, stack overflow)
// is a bug.
#include <cstddef>
#include <cstdint>
#include <ctime>
#include <string>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "tokenizer/chat_template.h"

namespace {

const nlohmann::ordered_json& messages() {
  static const nlohmann::ordered_json kMessages = nlohmann::ordered_json::parse(R"([
    {"role": "system", "content": "You are helpful. /no_think"},
    {"role": "user", "content": "  Hello, 世界 😀\n"},
    {"role": "assistant", "content": "<think>\nhm\n</think>\n\nHi!", "tool_calls": [
      {"id": "abc123xyz", "type": "function", "function": {"name": "f", "arguments": {"x": [1, 2.5, null, true]}}}]},
    {"role": "tool", "tool_call_id": "abc123xyz", "content": {"result": "ok"}},
    {"role": "user", "content": "Thanks"}
  ])");
  return kMessages;
}

const nlohmann::ordered_json& extra() {
  static const nlohmann::ordered_json kExtra = nlohmann::ordered_json::parse(R"({
    "tools": [{"type": "function", "function": {"name": "f", "description": "d",
               "parameters": {"type": "object", "properties": {"x": {"type": "array"}}}}}],
    "enable_thinking": false, "date_string": "26 Jul 2024", "builtin_tools": ["brave_search"]
  })");
  return kExtra;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string source(reinterpret_cast<const char*>(data), size);
  try {
    const tokenmill::ChatTemplate tpl(source);
    tokenmill::ChatTemplateOptions options;
    options.bos_token = "<s>";
    options.eos_token = "</s>";
    options.now = std::tm{};
    options.limits.max_output_bytes = 1 << 16;
    options.limits.max_loop_iterations = 20000;
    options.limits.max_call_depth = 16;
    options.limits.max_work = 1 << 22;
    (void)tpl.render_ordered(messages(), extra(), options);
  } catch (const tokenmill::Error&) {
    // Refusing a template (syntax, unsupported construct, template error, limit) is expected.
  }
  return 0;
}
