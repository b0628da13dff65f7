// Tokenizer for Jinja templates, as jinja2's lexer does it with trim_blocks=True and
// lstrip_blocks=True (transformers' settings).
//
// Whitespace control follows jinja2 exactly: a single trailing newline of the template is
// dropped; `{%-`/`{{-`/`{#-` strip all whitespace before the tag and `-%}`/`-}}`/`-#}` all
// whitespace after it; `%}` and `#}` eat one newline (trim_blocks) unless written `+%}`;
// a block or comment tag alone on its line loses the indentation before it (lstrip_blocks)
// unless written `{%+`. `{% raw %}` regions are passed through verbatim.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tokenmill::jinja {

enum class TokenType : std::uint8_t {
  kData,
  kVariableBegin,
  kVariableEnd,
  kBlockBegin,
  kBlockEnd,
  kName,
  kString,
  kInteger,
  kFloat,
  kOperator,
  kEof,
};

struct Token {
  TokenType type = TokenType::kEof;
  std::string text;  // data, name, decoded string literal, or the operator
  std::int64_t integer = 0;
  double number = 0;
  std::size_t offset = 0;  // into the normalized source
};

struct TokenizedSource {
  std::string source;  // the template after newline normalization; offsets refer to it
  std::vector<Token> tokens;
};

// Throws Error naming line:column on a lexical error.
TokenizedSource tokenize(std::string_view raw_source);

// "LINE:COLUMN" (both 1-based; columns count code points) of a byte offset.
std::string describe_position(std::string_view source, std::size_t offset);
[[noreturn]] void syntax_error(std::string_view source, std::size_t offset, const std::string& message);

}  // namespace tokenmill::jinja
