#include "tokenizer/jinja_lexer.h"

#include <fmt/format.h>

#include <charconv>
#include <limits>

#include "core/error.h"
#include "tokenizer/jinja_unicode.h"

namespace tokenmill::jinja {
namespace {

bool is_ascii_digit(char c) { return c >= '0' && c <= '9'; }
bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_name_char(char c) { return is_name_start(c) || is_ascii_digit(c); }

// jinja2 splits on \r\n, \r and \n, joins with \n, and drops one trailing newline
// (keep_trailing_newline=False).
std::string normalize_newlines(std::string_view raw) {
  std::string out;
  out.reserve(raw.size());
  for (std::size_t i = 0; i < raw.size(); ++i) {
    if (raw[i] == '\r') {
      out += '\n';
      if (i + 1 < raw.size() && raw[i + 1] == '\n') ++i;
    } else {
      out += raw[i];
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

class Lexer {
 public:
  explicit Lexer(std::string source) { out_.source = std::move(source); }

  TokenizedSource run() {
    const std::string& src = out_.source;
    std::size_t pos = 0;
    bool line_starting = true;
    while (pos < src.size()) {
      const std::size_t tag = find_tag(pos);
      if (tag == std::string::npos) {
        emit(TokenType::kData, src.substr(pos), pos);
        break;
      }
      const char kind = src[tag + 1];
      std::size_t after = tag + 2;
      char sign = 0;
      if (after < src.size() && (src[after] == '-' || src[after] == '+')) sign = src[after++];
      std::size_t raw_end = 0;
      const bool raw = kind == '%' && match_raw_begin(after, raw_end);
      const std::string_view text =
          lstrip(std::string_view(src).substr(pos, tag - pos), sign, kind != '{', line_starting);
      if (!text.empty()) emit(TokenType::kData, std::string(text), pos);
      if (raw) {
        pos = lex_raw(raw_end, src[raw_end - 1] == '\n', tag, line_starting);
      } else if (kind == '#') {
        pos = skip_comment(after, tag, line_starting);
      } else {
        emit(kind == '%' ? TokenType::kBlockBegin : TokenType::kVariableBegin, "", tag);
        pos = lex_tag(after, kind, line_starting);
      }
    }
    emit(TokenType::kEof, "", src.size());
    return std::move(out_);
  }

 private:
  const std::string& src() const { return out_.source; }
  bool starts(std::size_t pos, std::string_view s) const {
    return std::string_view(src()).substr(pos, s.size()) == s;
  }

  [[noreturn]] void fail(std::size_t offset, const std::string& message) const {
    syntax_error(src(), offset, message);
  }

  void emit(TokenType type, std::string text, std::size_t offset) {
    Token t;
    t.type = type;
    t.text = std::move(text);
    t.offset = offset;
    out_.tokens.push_back(std::move(t));
  }

  std::size_t find_tag(std::size_t pos) const {
    for (std::size_t i = src().find('{', pos); i != std::string::npos; i = src().find('{', i + 1)) {
      if (i + 1 < src().size() && (src()[i + 1] == '{' || src()[i + 1] == '%' || src()[i + 1] == '#'))
        return i;
    }
    return std::string::npos;
  }

  // Length of the whitespace (Python's \s) starting at pos.
  std::size_t space_run(std::size_t pos) const {
    std::size_t end = pos;
    while (end < src().size()) {
      std::size_t next = end;
      if (!is_space(next_code_point(src(), next))) break;
      end = next;
    }
    return end - pos;
  }

  // The data before a tag, after `-` stripping or lstrip_blocks.
  static std::string_view lstrip(std::string_view text, char sign, bool lstrip_allowed, bool line_starting) {
    if (sign == '-') {
      std::size_t end = text.size();
      // Strip trailing Python whitespace, code point by code point from the end.
      while (end > 0) {
        std::size_t start = end - 1;
        while (start > 0 && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) --start;
        std::size_t probe = start;
        if (!is_space(next_code_point(text, probe)) || probe != end) break;
        end = start;
      }
      return text.substr(0, end);
    }
    if (sign != '+' && lstrip_allowed) {
      const std::size_t nl = text.rfind('\n');
      const std::size_t line_pos = nl == std::string_view::npos ? 0 : nl + 1;
      if ((line_pos > 0 || line_starting) && line_pos < text.size()) {
        std::size_t p = line_pos;
        bool all_space = true;
        while (p < text.size() && all_space) all_space = is_space(next_code_point(text, p));
        if (all_space) return text.substr(0, line_pos);
      }
    }
    return text;
  }

  // `{% raw %}` (the `{%` and sign already consumed): \s* raw \s* (-%}\s* | %})
  bool match_raw_begin(std::size_t pos, std::size_t& end) const {
    pos += space_run(pos);
    if (!starts(pos, "raw")) return false;
    pos += 3;
    pos += space_run(pos);
    if (starts(pos, "-%}")) {
      pos += 3;
      end = pos + space_run(pos);
      return end > 0;
    }
    if (starts(pos, "%}")) {
      end = pos + 2;
      return true;
    }
    return false;
  }

  std::size_t lex_raw(std::size_t pos, bool raw_line_starting, std::size_t tag, bool& line_starting) {
    for (std::size_t p = src().find("{%", pos); p != std::string::npos; p = src().find("{%", p + 1)) {
      std::size_t q = p + 2;
      char sign = 0;
      if (q < src().size() && (src()[q] == '-' || src()[q] == '+')) sign = src()[q++];
      q += space_run(q);
      if (!starts(q, "endraw")) continue;
      q += 6;
      q += space_run(q);
      std::size_t end = 0;
      if (starts(q, "+%}")) {
        end = q + 3;
      } else if (starts(q, "-%}")) {
        end = q + 3 + space_run(q + 3);
      } else if (starts(q, "%}")) {
        end = q + 2;
        if (end < src().size() && src()[end] == '\n') ++end;
      } else {
        continue;
      }
      const std::string_view text =
          lstrip(std::string_view(src()).substr(pos, p - pos), sign, true, raw_line_starting);
      if (!text.empty()) emit(TokenType::kData, std::string(text), pos);
      line_starting = src()[end - 1] == '\n';
      return end;
    }
    fail(tag, "missing end of raw directive ({% endraw %})");
  }

  std::size_t skip_comment(std::size_t pos, std::size_t tag, bool& line_starting) {
    for (std::size_t p = src().find("#}", pos); p != std::string::npos; p = src().find("#}", p + 1)) {
      std::size_t end = p + 2;
      if (p > pos && src()[p - 1] == '-') {
        end += space_run(end);
      } else if (!(p > pos && src()[p - 1] == '+') && end < src().size() && src()[end] == '\n') {
        ++end;
      }
      line_starting = src()[end - 1] == '\n';
      return end;
    }
    fail(tag, "missing end of comment tag (#})");
  }

  // Tokens inside {% %} or {{ }} up to and including the end tag.
  std::size_t lex_tag(std::size_t pos, char kind, bool& line_starting) {
    std::string balance;
    while (pos < src().size()) {
      if (balance.empty()) {
        const std::size_t end = match_tag_end(pos, kind);
        if (end != 0) {
          emit(kind == '%' ? TokenType::kBlockEnd : TokenType::kVariableEnd, "", pos);
          line_starting = src()[end - 1] == '\n';
          return end;
        }
      }
      if (const std::size_t spaces = space_run(pos); spaces > 0) {
        pos += spaces;
      } else if (const std::size_t n = lex_number(pos); n > 0) {
        pos = n;
      } else if (is_name_start(src()[pos])) {
        std::size_t end = pos;
        while (end < src().size() && is_name_char(src()[end])) ++end;
        emit(TokenType::kName, src().substr(pos, end - pos), pos);
        pos = end;
      } else if (src()[pos] == '\'' || src()[pos] == '"') {
        pos = lex_string(pos);
      } else {
        pos = lex_operator(pos, balance);
      }
    }
    return pos;  // unterminated tag: the parser reports the unexpected end
  }

  // End offset of the tag end at pos, or 0.
  std::size_t match_tag_end(std::size_t pos, char kind) const {
    if (kind == '%') {
      if (starts(pos, "+%}")) return pos + 3;
      if (starts(pos, "-%}")) return pos + 3 + space_run(pos + 3);
      if (starts(pos, "%}")) return pos + 2 + (pos + 2 < src().size() && src()[pos + 2] == '\n' ? 1 : 0);
      return 0;
    }
    if (starts(pos, "-}}")) return pos + 3 + space_run(pos + 3);
    if (starts(pos, "}}")) return pos + 2;
    return 0;
  }

  // (\d+_)*\d+ starting at pos; returns its end or pos.
  std::size_t digit_run(std::size_t pos) const {
    std::size_t end = pos;
    while (end < src().size() && is_ascii_digit(src()[end])) {
      while (end < src().size() && is_ascii_digit(src()[end])) ++end;
      if (end + 1 < src().size() && src()[end] == '_' && is_ascii_digit(src()[end + 1])) ++end;
    }
    return end;
  }

  std::size_t exponent_end(std::size_t pos) const {
    if (pos >= src().size() || (src()[pos] != 'e' && src()[pos] != 'E')) return 0;
    std::size_t p = pos + 1;
    if (p < src().size() && (src()[p] == '+' || src()[p] == '-')) ++p;
    const std::size_t end = digit_run(p);
    return end > p ? end : 0;
  }

  std::size_t fraction_end(std::size_t pos) const {
    if (pos >= src().size() || src()[pos] != '.') return 0;
    const std::size_t end = digit_run(pos + 1);
    return end > pos + 1 ? end : 0;
  }

  static std::string without_underscores(std::string_view text) {
    std::string out;
    for (char c : text) {
      if (c != '_') out += c;
    }
    return out;
  }

  // Float, then integer (jinja2's order); returns the end, or 0 when neither matches.
  std::size_t lex_number(std::size_t pos) {
    if (!is_ascii_digit(src()[pos])) return 0;
    if (pos == 0 || src()[pos - 1] != '.') {
      const std::size_t int_end = digit_run(pos);
      std::size_t end = 0;
      if (const std::size_t frac = fraction_end(int_end); frac != 0 && exponent_end(frac) != 0) {
        end = exponent_end(frac);
      } else if (exponent_end(int_end) != 0) {
        end = exponent_end(int_end);
      } else {
        end = fraction_end(int_end);
      }
      if (end != 0) {
        const std::string text = without_underscores(std::string_view(src()).substr(pos, end - pos));
        Token t;
        t.type = TokenType::kFloat;
        t.text = text;
        t.offset = pos;
        std::from_chars(text.data(), text.data() + text.size(), t.number);
        out_.tokens.push_back(std::move(t));
        return end;
      }
    }
    return lex_integer(pos);
  }

  std::size_t lex_integer(std::size_t pos) {
    int base = 10;
    std::size_t digits_begin = pos;
    std::size_t end = pos;
    const char prefix = pos + 1 < src().size() ? static_cast<char>(src()[pos + 1] | 0x20) : 0;
    const auto prefixed_run = [&](std::size_t p, int b) {
      // (_?[digit])+
      std::size_t e = p;
      while (true) {
        std::size_t q = e;
        if (q < src().size() && src()[q] == '_') ++q;
        if (q < src().size() && hex_value(src()[q]) >= 0 && hex_value(src()[q]) < b) {
          e = q + 1;
        } else {
          return e;
        }
      }
    };
    if (src()[pos] == '0' && (prefix == 'b' || prefix == 'o' || prefix == 'x')) {
      base = prefix == 'b' ? 2 : prefix == 'o' ? 8 : 16;
      end = prefixed_run(pos + 2, base);
      if (end != pos + 2) {
        digits_begin = pos + 2;
      } else {
        base = 10;
      }
    }
    if (base == 10) {
      if (src()[pos] == '0') {
        end = pos + 1;  // 0(_?0)*
        while (true) {
          std::size_t q = end;
          if (q < src().size() && src()[q] == '_') ++q;
          if (q < src().size() && src()[q] == '0') {
            end = q + 1;
          } else {
            break;
          }
        }
      } else {
        end = prefixed_run(pos + 1, 10);
      }
    }
    const std::string digits =
        without_underscores(std::string_view(src()).substr(digits_begin, end - digits_begin));
    Token t;
    t.type = TokenType::kInteger;
    t.text = std::string(std::string_view(src()).substr(pos, end - pos));
    t.offset = pos;
    const auto result = std::from_chars(digits.data(), digits.data() + digits.size(), t.integer, base);
    if (result.ec != std::errc()) fail(pos, "integer literal too large (tokenmill integers are 64-bit)");
    out_.tokens.push_back(std::move(t));
    return end;
  }

  std::size_t lex_string(std::size_t pos) {
    const char quote = src()[pos];
    std::size_t p = pos + 1;
    while (p < src().size() && src()[p] != quote) p += src()[p] == '\\' ? 2 : 1;
    if (p >= src().size()) fail(pos, fmt::format("unexpected char '{}' (unterminated string)", quote));
    Token t;
    t.type = TokenType::kString;
    t.text = decode_string(std::string_view(src()).substr(pos + 1, p - pos - 1), pos);
    t.offset = pos;
    out_.tokens.push_back(std::move(t));
    return p + 1;
  }

  // jinja2 decodes literals as .encode("ascii", "backslashreplace").decode("unicode-escape").
  std::string decode_string(std::string_view body, std::size_t offset) const {
    std::string ascii;
    std::size_t p = 0;
    while (p < body.size()) {
      const char32_t cp = next_code_point(body, p);
      if (cp < 0x80) {
        ascii += static_cast<char>(cp);
      } else if (cp <= 0xFF) {
        ascii += fmt::format("\\x{:02x}", static_cast<unsigned>(cp));
      } else if (cp <= 0xFFFF) {
        ascii += fmt::format("\\u{:04x}", static_cast<unsigned>(cp));
      } else {
        ascii += fmt::format("\\U{:08x}", static_cast<unsigned>(cp));
      }
    }
    std::string out;
    std::size_t i = 0;
    while (i < ascii.size()) {
      const char c = ascii[i++];
      if (c != '\\') {
        out += c;
        continue;
      }
      if (i >= ascii.size()) fail(offset, "\\ at end of string literal");
      const char e = ascii[i++];
      switch (e) {
        case '\n': break;
        case '\\': out += '\\'; break;
        case '\'': out += '\''; break;
        case '"': out += '"'; break;
        case 'a': out += '\a'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'v': out += '\v'; break;
        case 'x':
        case 'u':
        case 'U': {
          const std::size_t width = e == 'x' ? 2 : e == 'u' ? 4 : 8;
          char32_t cp = 0;
          for (std::size_t k = 0; k < width; ++k) {
            if (i + k >= ascii.size() || hex_value(ascii[i + k]) < 0) {
              fail(offset, fmt::format("truncated \\{} escape in string literal", e));
            }
            cp = cp * 16 + static_cast<char32_t>(hex_value(ascii[i + k]));
          }
          if (cp > 0x10FFFF) fail(offset, "illegal Unicode character in string literal");
          i += width;
          append_utf8(out, cp);
          break;
        }
        case 'N': fail(offset, "\\N{...} escapes are not supported in string literals");
        default:
          if (e >= '0' && e <= '7') {
            char32_t cp = static_cast<char32_t>(e - '0');
            for (int k = 0; k < 2 && i < ascii.size() && ascii[i] >= '0' && ascii[i] <= '7'; ++k) {
              cp = cp * 8 + static_cast<char32_t>(ascii[i++] - '0');
            }
            append_utf8(out, cp);
          } else {
            out += '\\';
            out += e;
          }
      }
    }
    return out;
  }

  std::size_t lex_operator(std::size_t pos, std::string& balance) {
    static constexpr std::string_view kTwo[] = {"//", "**", "==", "!=", ">=", "<="};
    static constexpr std::string_view kOne = "+-/*%~[](){}><=.:|,;";
    std::string op;
    for (std::string_view two : kTwo) {
      if (starts(pos, two)) op = std::string(two);
    }
    if (op.empty() && kOne.find(src()[pos]) != std::string_view::npos) op = std::string(1, src()[pos]);
    if (op.empty()) {
      std::size_t p = pos;
      std::string ch;
      append_utf8(ch, next_code_point(src(), p));
      fail(pos, fmt::format("unexpected char '{}'", ch));
    }
    if (op == "{") balance += '}';
    if (op == "(") balance += ')';
    if (op == "[") balance += ']';
    if (op == "}" || op == ")" || op == "]") {
      if (balance.empty()) fail(pos, fmt::format("unexpected '{}'", op));
      const char expected = balance.back();
      balance.pop_back();
      if (expected != op[0]) fail(pos, fmt::format("unexpected '{}', expected '{}'", op, expected));
    }
    emit(TokenType::kOperator, op, pos);
    return pos + op.size();
  }

  TokenizedSource out_;
};

}  // namespace

TokenizedSource tokenize(std::string_view raw_source) { return Lexer(normalize_newlines(raw_source)).run(); }

std::string describe_position(std::string_view source, std::size_t offset) {
  offset = std::min(offset, source.size());
  std::size_t line = 1;
  std::size_t line_start = 0;
  for (std::size_t i = 0; i < offset; ++i) {
    if (source[i] == '\n') {
      ++line;
      line_start = i + 1;
    }
  }
  const std::size_t column = code_point_count(source.substr(line_start, offset - line_start)) + 1;
  return fmt::format("{}:{}", line, column);
}

void syntax_error(std::string_view source, std::size_t offset, const std::string& message) {
  throw Error(
      fmt::format("chat template syntax error at {}: {}", describe_position(source, offset), message));
}

}  // namespace tokenmill::jinja
