// UTF-8 and the slice of Python's str semantics the Jinja interpreter needs.
//
// Python strings are sequences of code points; ours are UTF-8 bytes. Decoding is lenient:
// a byte that is not part of valid UTF-8 becomes the lone surrogate U+DC80+byte (Python's
// "surrogateescape") and encodes back to the same byte, so no input is ever rejected or
// altered by a round trip.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace tokenmill::jinja {

// Decodes one code point starting at `pos`; advances `pos` past it.
char32_t next_code_point(std::string_view text, std::size_t& pos);
std::vector<char32_t> decode_utf8(std::string_view text);
void append_utf8(std::string& out, char32_t cp);
std::string encode_utf8(const std::vector<char32_t>& cps);
// Byte offset of every code point, plus text.size() at the end (size = count + 1).
std::vector<std::size_t> code_point_offsets(std::string_view text);
std::size_t code_point_count(std::string_view text);

// Python str.isspace() / the `\s` of Python's re module.
bool is_space(char32_t cp);
// Python str.splitlines() line boundaries (\r\n counts as one).
bool is_line_break(char32_t cp);
// Python str.isprintable() for one code point (used by repr); unassigned code points are
// treated as printable.
bool is_printable(char32_t cp);

// Case mapping covers ASCII, Latin-1, Latin Extended-A, Greek, Cyrillic and full-width
// Latin letters, with Python's special cases there (ß -> SS, final sigma, İ -> i̇);
// other scripts are left unchanged.
bool is_cased(char32_t cp);
bool is_upper(char32_t cp);
bool is_lower(char32_t cp);
bool is_alpha(char32_t cp);
bool is_digit(char32_t cp);
std::string to_upper(std::string_view text);
std::string to_lower(std::string_view text);
// Python str.title() and str.capitalize().
std::string to_title(std::string_view text);
std::string capitalize(std::string_view text);

// Python str.strip()/lstrip()/rstrip(): `chars` null strips whitespace.
std::string strip(std::string_view text, const std::string* chars, bool left, bool right);
// Python str.replace(old, new, count); count < 0 replaces all.
std::string replace(std::string_view text, std::string_view old, std::string_view replacement,
                    long long count);
// The size of replace()'s result, computed without building it (saturates at SIZE_MAX).
std::size_t replaced_size(std::string_view text, std::string_view old, std::string_view replacement,
                          long long count);
// Python str.splitlines(keepends).
std::vector<std::string> splitlines(std::string_view text, bool keepends);

}  // namespace tokenmill::jinja
