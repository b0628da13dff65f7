// HttpHead: one HTTP/1.x request head (request line and header fields), parsed strictly, so
// that what the server checks is exactly what it then serves: lines end in CRLF, field names
// are RFC 9110 tokens with the colon right after them (no space: "Content-Length :" is the
// classic smuggling vector), no obsolete line folding, no control characters in values, and
// the version is HTTP/1.0 or HTTP/1.1. serialize() writes the head back canonically.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"

namespace tokenmill {

// A request the server answers with `status` and `message` without serving it; the
// connection is closed after the answer.
class RequestRefused : public Error {
 public:
  RequestRefused(int status, const std::string& message) : Error(message), status_(status) {}
  int status() const { return status_; }

 private:
  int status_;
};

struct HeaderField {
  std::string name;   // as sent
  std::string value;  // without the optional whitespace around it
};

struct HttpHead {
  // The longest request line (method, target and version): longer is 414 URI Too Long.
  static constexpr size_t kMaxRequestLine = 8192;

  std::string method, target, version;
  std::vector<HeaderField> fields;

  // Every value of the field `name` (case-insensitive), in order.
  std::vector<std::string> values(std::string_view name) const;
  bool has(std::string_view name) const { return !values(name).empty(); }
  // Removes every field `name` (case-insensitive).
  void remove(std::string_view name);
  // Request line, fields and the blank line, each ending in CRLF.
  std::string serialize() const;
};

// Parses `head`: the request line and fields, each line ending in CRLF, without the blank
// line that ends the head. Throws RequestRefused: 400 for a malformed line, 414 for a request
// line over kMaxRequestLine, 505 for another HTTP version.
HttpHead parse_http_head(std::string_view head);

// ASCII case-insensitive equality (field names, codings).
bool same_token(std::string_view a, std::string_view b);

}  // namespace tokenmill
