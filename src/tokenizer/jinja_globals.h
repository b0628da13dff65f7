// The globals transformers gives chat templates: raise_exception(message) (fails the render
// with the template's message), strftime_now(format) (the local time, or the injected
// ChatTemplateOptions::now), namespace(...), dict(...), and jinja2's sandboxed range().
#pragma once

#include <string_view>

#include "tokenizer/jinja_value.h"

namespace tokenmill::jinja {

class Interpreter;

void install_globals(Heap& heap, Scope& globals);
Value call_global(Interpreter& in, std::string_view name, const CallArgs& args);

}  // namespace tokenmill::jinja
