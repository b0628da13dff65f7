#include "tokenizer/chat_template.h"

#include <fmt/format.h>

#include <functional>

#include "core/error.h"
#include "tokenizer/jinja_eval.h"
#include "tokenizer/jinja_globals.h"
#include "tokenizer/jinja_json.h"
#include "tokenizer/jinja_lexer.h"
#include "tokenizer/jinja_parser.h"

namespace tokenmill {
namespace {

using jinja::Dict;
using jinja::Heap;
using jinja::Kind;
using jinja::Value;

constexpr std::string_view kReasoningFields[] = {"reasoning_content", "thinking", "reasoning"};

// transformers' _normalize_chat_messages and _alias_reasoning_fields: keys holding None are
// dropped, and a message with reasoning under any of its names gets `thinking` (first) and
// `reasoning_content` set to it.
Value normalize_message(Heap& heap, const Value& message, std::size_t index) {
  if (!message.is(Kind::kDict)) {
    jinja::eval_fail(
        fmt::format("chat message {} should be a JSON object, not {}", index, jinja::type_name(message)));
  }
  Dict kept;
  for (const auto& entry : message.as_dict().entries) {
    if (!entry.second.is_none()) kept.entries.push_back(entry);
  }
  const Value* reasoning = nullptr;
  for (std::string_view field : kReasoningFields) {
    if ((reasoning = kept.find(field)) != nullptr) break;
  }
  if (reasoning == nullptr) return heap.dict(std::move(kept));
  const Value r = *reasoning;
  Dict aliased;
  const Value* thinking = kept.find(std::string_view("thinking"));
  aliased.entries.emplace_back(heap.string("thinking"), thinking != nullptr ? *thinking : r);
  for (const auto& [key, value] : kept.entries) {
    if (key.is_string() && key.as_string() == "thinking") continue;
    const bool is_reasoning_content = key.is_string() && key.as_string() == "reasoning_content";
    aliased.entries.emplace_back(key, is_reasoning_content ? r : value);
  }
  if (kept.find(std::string_view("reasoning_content")) == nullptr) {
    aliased.entries.emplace_back(heap.string("reasoning_content"), r);
  }
  return heap.dict(std::move(aliased));
}

Value normalize_messages(Heap& heap, const Value& messages) {
  if (!messages.is(Kind::kList)) {
    jinja::eval_fail(fmt::format("messages should be a JSON array, not {}", jinja::type_name(messages)));
  }
  if (messages.as_list().items.empty()) {
    jinja::eval_fail("cannot apply a chat template to an empty conversation; provide at least one message");
  }
  std::vector<Value> normalized;
  for (std::size_t i = 0; i < messages.as_list().items.size(); ++i) {
    normalized.push_back(normalize_message(heap, messages.as_list().items[i], i));
  }
  return heap.list(std::move(normalized));
}

template <class Json>
void set_kwargs(Heap& heap, jinja::Scope& context, const Json& extra) {
  if (!extra.is_object()) jinja::eval_fail("extra template kwargs should be a JSON object");
  for (const auto& [key, value] : extra.items()) {
    context.set(*heap.intern(key), jinja::value_from_json(value, heap));
  }
}

std::string run(const jinja::Template& tpl, const ChatTemplateOptions& options,
                const std::function<Value(Heap&)>& make_messages,
                const nlohmann::ordered_json* ordered_extra) {
  jinja::Budget budget(options.limits);
  Heap heap(budget);
  jinja::Interpreter interpreter(tpl, heap, options.now);
  try {
    jinja::Scope* globals = heap.scope(nullptr);
    jinja::install_globals(heap, *globals);
    jinja::Scope* context = heap.scope(globals);
    context->set("messages", normalize_messages(heap, make_messages(heap)));
    context->set("tools", Value::none());
    context->set("documents", Value::none());
    context->set("add_generation_prompt", Value::from_bool(options.add_generation_prompt));
    if (!options.bos_token.empty()) context->set("bos_token", heap.string(options.bos_token));
    if (!options.eos_token.empty()) context->set("eos_token", heap.string(options.eos_token));
    set_kwargs(heap, *context, options.extra);
    if (ordered_extra != nullptr) set_kwargs(heap, *context, *ordered_extra);
    return interpreter.render(context);
  } catch (const jinja::EvalError& e) {
    if (e.offset == jinja::EvalError::kNoOffset)
      throw Error(fmt::format("chat template error: {}", e.what()));
    throw Error(fmt::format("chat template {} at {}: {}",
                            e.raised_by_template ? "raised an exception" : "error",
                            jinja::describe_position(tpl.source, e.offset), e.what()));
  }
}

}  // namespace

ChatTemplate::ChatTemplate(std::string source) : template_(jinja::parse_template(source)) {}

std::string ChatTemplate::render(const std::vector<ChatMessage>& messages,
                                 const ChatTemplateOptions& options) const {
  return run(
      *template_, options,
      [&](Heap& heap) {
        std::vector<Value> items;
        for (const ChatMessage& m : messages) {
          Dict d;
          d.entries.emplace_back(heap.string("role"), heap.string(m.role));
          d.entries.emplace_back(heap.string("content"), heap.string(m.content));
          items.push_back(heap.dict(std::move(d)));
        }
        return heap.list(std::move(items));
      },
      nullptr);
}

std::string ChatTemplate::render_json(const nlohmann::json& messages,
                                      const ChatTemplateOptions& options) const {
  return run(
      *template_, options, [&](Heap& heap) { return jinja::value_from_json(messages, heap); }, nullptr);
}

std::string ChatTemplate::render_ordered(const nlohmann::ordered_json& messages,
                                         const nlohmann::ordered_json& extra,
                                         const ChatTemplateOptions& options) const {
  return run(
      *template_, options, [&](Heap& heap) { return jinja::value_from_json(messages, heap); }, &extra);
}

}  // namespace tokenmill
