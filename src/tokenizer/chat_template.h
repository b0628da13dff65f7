// Chat templates: Hugging Face's Jinja chat templates rendered as transformers'
// `apply_chat_template` renders them, byte for byte.
//
// transformers compiles the template in a jinja2 ImmutableSandboxedEnvironment with
// trim_blocks=True, lstrip_blocks=True and the loopcontrols extension, replaces the `tojson`
// filter with json.dumps(ensure_ascii=False), adds the globals raise_exception() and
// strftime_now(), and renders it with messages, tools (None), documents (None),
// add_generation_prompt and the tokenizer's special tokens plus any extra kwargs. This is a
// small Jinja interpreter for that dialect (see jinja_parser.h for the supported subset);
// constructs outside it are refused with an Error naming the line and column.
//
// Known differences from Python: integers are 64-bit (overflow is an Error, Python would
// use big integers); upper/lower/title map case only for Latin, Greek, Cyrillic and
// full-width letters; |safe and |escape return plain strings (no Markup); jinja2's
// compile-time folding of literal-only expressions (e.g. `1[0:1]` printing "") is not
// reproduced; printing a generator or a bound method shows no memory address.
//
// Rendering is bounded: output size, loop iterations, call depth and the total work of one
// render are limited (ChatTemplateLimits), so an untrusted template cannot hang or exhaust
// the process; a template that exceeds a limit fails with an Error saying which.
#pragma once

#include <cstddef>
#include <ctime>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace tokenmill {

namespace jinja {
struct Template;
}

struct ChatMessage {
  std::string role;
  std::string content;
};

struct ChatTemplateLimits {
  std::size_t max_output_bytes = std::size_t{64} << 20;  // the rendered text, and any one string value
  std::size_t max_loop_iterations = 1'000'000;           // all loops of one render together
  std::size_t max_call_depth = 64;                       // nested macro calls and recursive loops
  // Bytes and elements produced or scanned; everything a render allocates is counted here,
  // so this bounds its memory as well as its time.
  std::size_t max_work = std::size_t{1} << 28;
};

struct ChatTemplateOptions {
  bool add_generation_prompt = true;
  // The tokenizer's special tokens; an empty string means the tokenizer has none, and the
  // template sees the variable undefined (as transformers leaves it out of the kwargs).
  std::string bos_token;
  std::string eos_token;
  // More template kwargs (tools, documents, date_string, enable_thinking, ...); they override
  // the variables above. Objects here have sorted keys; use render_ordered to keep key order.
  nlohmann::json extra = nlohmann::json::object();
  // The local time strftime_now() formats; unset means the current local time.
  std::optional<std::tm> now;
  ChatTemplateLimits limits;
};

class ChatTemplate {
 public:
  // Parses the template; throws Error ("chat template syntax error at LINE:COL: ...") when
  // it is not valid Jinja or uses a construct this interpreter does not support.
  // Copies share the parsed template; rendering is const and safe from several threads.
  explicit ChatTemplate(std::string source);

  // Renders a conversation of plain role/content messages.
  std::string render(const std::vector<ChatMessage>& messages, const ChatTemplateOptions& options) const;
  // Renders messages given as a JSON array of objects (any fields: tool_calls, ...). As in
  // transformers, keys whose value is null are dropped and reasoning fields are aliased.
  std::string render_json(const nlohmann::json& messages, const ChatTemplateOptions& options) const;
  // As render_json, but objects keep their key order as Python dicts do (it shows in tojson
  // and items()); `extra` is merged over options.extra.
  std::string render_ordered(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& extra,
                             const ChatTemplateOptions& options) const;

 private:
  std::shared_ptr<const jinja::Template> template_;
};

}  // namespace tokenmill
