// Errors: syntax errors and unsupported constructs name line:column; template failures
// (raise_exception, Python exceptions) surface as tokenmill::Error; every resource limit
// stops a hostile template with an Error that names the limit, never a crash or a hang.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "tokenizer/chat_template.h"

namespace tokenmill {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "<no error>";
}

std::string parse_error(const std::string& source) {
  return error_of([&] { const ChatTemplate tpl(source); });
}

std::string render_error(const std::string& source, const ChatTemplateOptions& options = {}) {
  const ChatTemplate tpl(source);
  return error_of([&] { tpl.render({{"user", "hi"}}, options); });
}

// ---- syntax errors ---------------------------------------------------------------------

TEST(ChatTemplateSyntax, IncompleteExpressionNamesLineAndColumn) {
  EXPECT_THAT(parse_error("{% if x %}\n  {{ 1 + }}\n{% endif %}"),
              HasSubstr("chat template syntax error at 2:10: unexpected end of print statement"));
}

TEST(ChatTemplateSyntax, ColumnsCountCodePoints) {
  EXPECT_THAT(parse_error("{{ 'é' + }}"), HasSubstr("at 1:10:"));
}

TEST(ChatTemplateSyntax, UnclosedBlockNamesTheOpeningTag) {
  EXPECT_THAT(parse_error("Hello\n{% for m in messages %}\n{{ m }}"),
              AllOf(HasSubstr("unexpected end of template"), HasSubstr("'endfor' or 'else'"),
                    HasSubstr("close the 'for' at 2:4")));
}

TEST(ChatTemplateSyntax, MismatchedEndTag) {
  EXPECT_THAT(parse_error("{% if x %}{% endfor %}"), AllOf(HasSubstr("at 1:14: unknown tag 'endfor'"),
                                                           HasSubstr("'endif'"), HasSubstr("'if' at 1:4")));
}

TEST(ChatTemplateSyntax, UnknownTag) {
  EXPECT_THAT(parse_error("{% frobnicate %}"), HasSubstr("at 1:4: unknown tag 'frobnicate'"));
}

TEST(ChatTemplateSyntax, UnsupportedTagsAreNamed) {
  EXPECT_THAT(parse_error("ok\n{% include 'other.jinja' %}"),
              HasSubstr("at 2:4: the 'include' tag is not supported in chat templates"));
  EXPECT_THAT(parse_error("{% extends 'base' %}"), HasSubstr("'extends' tag is not supported"));
  EXPECT_THAT(parse_error("{% call m() %}x{% endcall %}"), HasSubstr("'call' tag is not supported"));
}

TEST(ChatTemplateSyntax, UnknownFilterIsNamed) {
  EXPECT_THAT(parse_error("line1\n{{ messages|frobnicate }}"),
              HasSubstr("at 2:13: no filter named 'frobnicate'"));
}

TEST(ChatTemplateSyntax, UnsupportedJinjaFilterIsNamed) {
  EXPECT_THAT(parse_error("{{ messages|groupby('role') }}"),
              HasSubstr("at 1:13: the 'groupby' filter is not supported in chat templates"));
}

TEST(ChatTemplateSyntax, UnknownTestIsNamed) {
  EXPECT_THAT(parse_error("{{ x is frobnicated }}"), HasSubstr("at 1:9: no test named 'frobnicated'"));
}

TEST(ChatTemplateSyntax, UnknownFilterInsideIfFailsOnlyWhenRun) {
  // jinja2 compiles if-blocks "softly": the unknown filter only fails when reached.
  const ChatTemplate tpl("{% if add_generation_prompt %}{{ x|frobnicate }}{% endif %}ok");
  ChatTemplateOptions options;
  options.add_generation_prompt = false;
  EXPECT_EQ(tpl.render({{"user", "hi"}}, options), "ok");
  options.add_generation_prompt = true;
  EXPECT_THAT(error_of([&] {
                tpl.render({{"user", "hi"}}, options);
              }),
              HasSubstr("chat template error at 1:36: no filter named 'frobnicate'"));
}

TEST(ChatTemplateSyntax, LexicalErrors) {
  EXPECT_THAT(parse_error("{{ 'abc }}"), HasSubstr("at 1:4: unexpected char ''' (unterminated string)"));
  EXPECT_THAT(parse_error("{{ a ! b }}"), HasSubstr("at 1:6: unexpected char '!'"));
  EXPECT_THAT(parse_error("x {# never closed"), HasSubstr("at 1:3: missing end of comment tag"));
  EXPECT_THAT(parse_error("{% raw %}never closed"), HasSubstr("missing end of raw directive"));
  EXPECT_THAT(parse_error("{{ (1 }}"), HasSubstr("unexpected '}', expected ')'"));
  EXPECT_THAT(parse_error("{{ 99999999999999999999 }}"), HasSubstr("integer literal too large"));
  EXPECT_THAT(parse_error("{{ '\\x4' }}"), HasSubstr("truncated \\x escape"));
}

TEST(ChatTemplateSyntax, GrammarErrors) {
  EXPECT_THAT(parse_error("{% break %}"), HasSubstr("'break' outside of a for loop"));
  EXPECT_THAT(parse_error("{% for x in y %}{% macro m() %}{% continue %}{% endmacro %}{% endfor %}"),
              HasSubstr("'continue' outside of a for loop"));
  EXPECT_THAT(parse_error("{% set 1 = 2 %}"), HasSubstr("can't assign to this expression"));
  EXPECT_THAT(parse_error("{% macro m(a=1, b) %}{% endmacro %}"),
              HasSubstr("non-default argument follows default"));
  EXPECT_THAT(parse_error("{{ x is defined is defined }}"), HasSubstr("cannot chain multiple tests"));
  EXPECT_THAT(parse_error("{{ }}"), HasSubstr("expected an expression"));
}

TEST(ChatTemplateSyntax, DeepNestingIsRefusedNotOverflowed) {
  const std::string parens = "{{ " + std::string(5000, '(') + "1" + std::string(5000, ')') + " }}";
  EXPECT_THAT(parse_error(parens), HasSubstr("nested more than 100 levels deep"));
  std::string sum = "{{ 1";
  for (int i = 0; i < 20000; ++i) sum += " + 1";
  EXPECT_THAT(parse_error(sum + " }}"), HasSubstr("nested more than 100 levels deep"));
  std::string filters = "{{ x";
  for (int i = 0; i < 20000; ++i) filters += "|trim";
  EXPECT_THAT(parse_error(filters + " }}"), HasSubstr("nested more than 100 levels deep"));
  std::string blocks;
  for (int i = 0; i < 5000; ++i) blocks += "{% if x %}";
  EXPECT_THAT(parse_error(blocks), HasSubstr("nested more than 100 levels deep"));
  std::string nots = "{{ ";
  for (int i = 0; i < 20000; ++i) nots += "not ";
  EXPECT_THAT(parse_error(nots + "x }}"), HasSubstr("nested more than 100 levels deep"));
}

// ---- template errors -------------------------------------------------------------------

TEST(ChatTemplateRuntime, RaiseExceptionCarriesTheMessage) {
  EXPECT_THAT(
      render_error("ok\n  {{ raise_exception('Conversation roles must alternate user/assistant') }}"),
      HasSubstr(
          "chat template raised an exception at 2:6: Conversation roles must alternate user/assistant"));
}

TEST(ChatTemplateRuntime, GemmaRejectsSystemRole) {
  const ChatTemplate tpl(
      "{{ bos_token }}{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not "
      "supported') }}"
      "{% endif %}");
  EXPECT_THAT(error_of([&] {
                tpl.render({{"system", "be nice"}, {"user", "hi"}}, {});
              }),
              HasSubstr("System role not supported"));
}

TEST(ChatTemplateRuntime, PythonExceptionsBecomeErrors) {
  EXPECT_THAT(render_error("{{ messages[5].role }}"), HasSubstr("at 1:15: list object has no element 5"));
  EXPECT_THAT(render_error("{{ 'a' + 1 }}"), HasSubstr("can only concatenate str (not \"int\") to str"));
  EXPECT_THAT(render_error("{{ 1 // 0 }}"), HasSubstr("integer division or modulo by zero"));
  EXPECT_THAT(render_error("{{ [1].append(2) }}"),
              HasSubstr("access to attribute 'append' of 'list' object is unsafe"));
  EXPECT_THAT(render_error("{{ missing.attr }}"), HasSubstr("'missing' is undefined"));
  EXPECT_THAT(render_error("{{ 9223372036854775807 + 1 }}"), HasSubstr("integer overflow"));
  EXPECT_THAT(render_error("{% set ns = namespace() %}{% set ns._private = 1 %}"),
              HasSubstr("underscore-prefixed"));
}

TEST(ChatTemplateRuntime, InputErrors) {
  const ChatTemplate tpl("{{ messages }}");
  EXPECT_THAT(error_of([&] { tpl.render({}, {}); }), HasSubstr("empty conversation"));
  EXPECT_THAT(error_of([&] { tpl.render_json(nlohmann::json::parse(R"(["hi"])"), {}); }),
              HasSubstr("chat message 0 should be a JSON object"));
  EXPECT_THAT(error_of([&] { tpl.render_json(nlohmann::json::parse(R"({"role": "user"})"), {}); }),
              HasSubstr("should be a JSON array"));
  nlohmann::json deep = "x";
  for (int i = 0; i < 1000; ++i) deep = nlohmann::json::array({deep});
  nlohmann::json messages = nlohmann::json::array({{{"role", "user"}, {"content", deep}}});
  EXPECT_THAT(error_of([&] { tpl.render_json(messages, {}); }),
              HasSubstr("nested more than 200 levels deep"));
  ChatTemplateOptions options;
  options.extra = nlohmann::json::array();
  EXPECT_THAT(error_of([&] {
                tpl.render({{"user", "hi"}}, options);
              }),
              HasSubstr("kwargs should be a JSON object"));
}

// ---- limits ------------------------------------------------------------------------------

TEST(ChatTemplateLimits, LoopIterations) {
  ChatTemplateOptions options;
  options.limits.max_loop_iterations = 1000;
  EXPECT_THAT(
      render_error("{% for i in range(100) %}{% for j in range(100) %}{% endfor %}{% endfor %}", options),
      HasSubstr("max_loop_iterations = 1000"));
  // The default still allows large, real conversations.
  const ChatTemplate tpl("{% for i in range(1000) %}{% for j in range(100) %}{% endfor %}{% endfor %}done");
  EXPECT_EQ(tpl.render({{"user", "hi"}}, {}), "done");
}

TEST(ChatTemplateLimits, MacroRecursion) {
  EXPECT_THAT(render_error("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}"),
              HasSubstr("max_call_depth = 64"));
  EXPECT_THAT(render_error("{% for x in [1] recursive %}{{ loop([1]) }}{% endfor %}"),
              HasSubstr("max_call_depth"));
  // Recursion with deep expressions at every level stays within the stack.
  std::string deep = "{% macro f(n) %}{% if n > 0 %}{{ ";
  for (int i = 0; i < 40; ++i) deep += "(";
  deep += "f(n - 1)";
  for (int i = 0; i < 40; ++i) deep += ")|trim";
  deep += " }}{% endif %}{% endmacro %}{{ f(1000) }}";
  EXPECT_THAT(render_error(deep), AllOf(HasSubstr("chat template error"), HasSubstr("nested")));
}

TEST(ChatTemplateLimits, OutputSize) {
  ChatTemplateOptions options;
  options.limits.max_output_bytes = 1000;
  EXPECT_THAT(render_error("{% for i in range(100) %}{{ 'xxxxxxxxxxxxxxxxxxxx' }}{% endfor %}", options),
              HasSubstr("max_output_bytes = 1000"));
  // Huge values are refused before they are built.
  EXPECT_THAT(render_error("{{ 'x' * 1000000000000 }}"), HasSubstr("max_output_bytes"));
  ChatTemplateOptions one_megabyte;
  one_megabyte.limits.max_output_bytes = 1 << 20;
  EXPECT_THAT(
      render_error("{% set ns = namespace(s='x') %}{% for i in range(100) %}{% set ns.s = ns.s ~ ns.s %}"
                   "{% endfor %}",
                   one_megabyte),
      HasSubstr("max_output_bytes = 1048576"));
  EXPECT_THAT(render_error("{{ ([1] * 100000000000)|length }}"), HasSubstr("max_work"));
  // Results that grow from small inputs are checked before (or while) they are built.
  ChatTemplateOptions small;
  small.limits.max_output_bytes = 1 << 16;
  for (const char* source : {
           "{{ ('\\n' * 1000)|indent(100000) }}",
           "{{ ('x' * 10000)|replace('', 'yyyyyyyyyy') }}",
           "{{ ('x' * 10000).replace('x', 'yyyyyyyyyy') }}",
           "{{ ['\\x01' * 20000]|string }}",
           "{{ ('\\x01' * 20000)|tojson }}",
           "{{ [[[1]]]|tojson(indent=' ' * 30000) }}",
           "{{ 'x'|center(100000) }}",
           "{{ '%100000s' % 'x' }}",
       }) {
    EXPECT_THAT(render_error(source, small), HasSubstr("max_output_bytes = 65536")) << source;
  }
}

TEST(ChatTemplateLimits, Work) {
  ChatTemplateOptions options;
  options.limits.max_work = 100000;
  EXPECT_THAT(
      render_error(
          "{% set s = 'x' * 50000 %}{% for i in range(1000) %}{% if 'y' in s %}{% endif %}{% endfor %}",
          options),
      HasSubstr("max_work = 100000"));
}

TEST(ChatTemplateLimits, NestedAndCyclicValues) {
  EXPECT_THAT(
      render_error(
          "{% set ns = namespace(x=[]) %}{% for i in range(1000) %}{% set ns.x = [ns.x] %}{% endfor %}"
          "{{ ns.x }}"),
      HasSubstr("nested more than 200 levels deep"));
  EXPECT_THAT(render_error("{% set ns = namespace() %}{% set ns.me = ns %}{{ ns }}"), HasSubstr("nested"));
  EXPECT_THAT(render_error("{% set ns = namespace() %}{% set ns.me = [ns] %}{{ ns.me|tojson }}"),
              HasSubstr("not JSON serializable"));
}

TEST(ChatTemplateLimits, ATemplateThatFailsCanRenderAgain) {
  const ChatTemplate tpl("{% if messages|length > 1 %}{{ raise_exception('too long') }}{% endif %}ok");
  EXPECT_THAT(error_of([&] { tpl.render({{"user", "a"}, {"user", "b"}}, {}); }), HasSubstr("too long"));
  EXPECT_EQ(tpl.render({{"user", "a"}}, {}), "ok");
}

}  // namespace
}  // namespace tokenmill
