#include "serve/http_head.h"

#include <fmt/format.h>

#include <algorithm>

namespace tokenmill {

namespace {

// RFC 9110 tchar: the characters of a method or a field name.
bool is_token_char(char c) {
  if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) return true;
  return std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

bool is_token(std::string_view s) { return !s.empty() && std::all_of(s.begin(), s.end(), is_token_char); }

// Field values: visible ASCII, space, tab and obs-text (bytes >= 0x80); no other control.
bool is_value_char(char c) {
  const auto u = static_cast<unsigned char>(c);
  return u == '\t' || (u >= 0x20 && u != 0x7F);
}

// The request target: visible ASCII and obs-text, no space or control.
bool is_target_char(char c) {
  const auto u = static_cast<unsigned char>(c);
  return u > 0x20 && u != 0x7F;
}

[[noreturn]] void malformed(std::string_view what) {
  throw RequestRefused(400, fmt::format("malformed HTTP request: {}", what));
}

std::string_view trim_whitespace(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

void parse_request_line(std::string_view line, HttpHead& head) {
  if (line.size() > HttpHead::kMaxRequestLine)
    throw RequestRefused(414,
                         fmt::format("the request line is longer than {} bytes", HttpHead::kMaxRequestLine));
  const size_t first = line.find(' ');
  const size_t last = line.rfind(' ');
  if (first == std::string_view::npos || first == last)
    malformed("the request line is not 'METHOD TARGET VERSION'");
  const std::string_view method = line.substr(0, first);
  const std::string_view target = line.substr(first + 1, last - first - 1);
  const std::string_view version = line.substr(last + 1);
  if (!is_token(method)) malformed("the method is not a token");
  if (target.empty() || !std::all_of(target.begin(), target.end(), is_target_char))
    malformed("the request target is empty or holds spaces or control characters");
  if (version.substr(0, 5) != "HTTP/" || !std::all_of(version.begin() + 5, version.end(), [](char c) {
        return (c >= '0' && c <= '9') || c == '.';
      }))
    malformed("the request line does not end in an HTTP version");
  if (version != "HTTP/1.1" && version != "HTTP/1.0")
    throw RequestRefused(505, fmt::format("{} is not supported: send HTTP/1.1", version));
  head.method = method;
  head.target = target;
  head.version = version;
}

HeaderField parse_field(std::string_view line) {
  if (line.front() == ' ' || line.front() == '\t')
    malformed("a header line is folded (starts with whitespace)");
  const size_t colon = line.find(':');
  if (colon == std::string_view::npos) malformed("a header line has no ':'");
  const std::string_view name = line.substr(0, colon);
  if (!is_token(name)) malformed("a header name is empty or not a token (no space before ':')");
  const std::string_view value = trim_whitespace(line.substr(colon + 1));
  if (!std::all_of(value.begin(), value.end(), is_value_char))
    malformed("a header value holds a control character");
  return {std::string(name), std::string(value)};
}

}  // namespace

bool same_token(std::string_view a, std::string_view b) {
  const auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; };
  return a.size() == b.size() &&
         std::equal(a.begin(), a.end(), b.begin(), [&](char x, char y) { return lower(x) == lower(y); });
}

std::vector<std::string> HttpHead::values(std::string_view name) const {
  std::vector<std::string> out;
  for (const HeaderField& f : fields)
    if (same_token(f.name, name)) out.push_back(f.value);
  return out;
}

void HttpHead::remove(std::string_view name) {
  std::erase_if(fields, [&](const HeaderField& f) { return same_token(f.name, name); });
}

std::string HttpHead::serialize() const {
  std::string out = fmt::format("{} {} {}\r\n", method, target, version);
  for (const HeaderField& f : fields) fmt::format_to(std::back_inserter(out), "{}: {}\r\n", f.name, f.value);
  out += "\r\n";
  return out;
}

HttpHead parse_http_head(std::string_view head) {
  HttpHead out;
  bool request_line = true;
  while (!head.empty()) {
    const size_t end = head.find("\r\n");
    const std::string_view line = head.substr(0, end);
    if (line.find('\r') != std::string_view::npos || line.find('\n') != std::string_view::npos)
      malformed("a line does not end in CRLF");
    if (request_line) {
      parse_request_line(line, out);
      request_line = false;
    } else {
      if (line.empty()) malformed("an empty line inside the head");
      out.fields.push_back(parse_field(line));
    }
    if (end == std::string_view::npos) break;
    head.remove_prefix(end + 2);
  }
  if (request_line) malformed("no request line");
  return out;
}

}  // namespace tokenmill
