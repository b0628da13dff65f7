// Parser for the Jinja dialect of Hugging Face chat templates.
//
// Supported: {{ }}, {% %}, {# #} with jinja2's whitespace control; statements if/elif/else,
// for (tuple targets, `if` filter, `else`, `recursive`, loop.* variables), break/continue,
// set (names, tuples, namespace attributes, block set with a filter), macro (defaults,
// varargs, kwargs), with, filter blocks, print, raw, and transformers' {% generation %};
// expressions with literals (strings with Python escapes, ints, floats, lists, tuples,
// dicts), attribute and item access, slices, calls with keyword and *args/**kwargs,
// filters, `is` tests, arithmetic, `~`, comparisons, in / not in, and/or/not and inline
// if-else. Template inheritance and includes (extends, block, include, import, from),
// call blocks and autoescape are refused with an Error naming the tag and its position,
// as are filters and tests outside the supported set (jinja_filters.h, jinja_predicates.h)
// except inside if-blocks and inline ifs, where jinja2 too only fails if they run.
#pragma once

#include <memory>
#include <string_view>

#include "tokenizer/jinja_ast.h"

namespace tokenmill::jinja {

// Parses a template; throws Error ("chat template syntax error at LINE:COL: ...").
std::unique_ptr<Template> parse_template(std::string_view source);

}  // namespace tokenmill::jinja
