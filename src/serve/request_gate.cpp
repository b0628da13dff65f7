#include "serve/request_gate.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <string_view>
#include <utility>

#include "serve/http_head.h"

namespace tokenmill {

namespace {

// The client hung up, or a read failed or timed out, before a whole request arrived.
struct ConnectionEnded {};

// The bytes read from the connection, consumed from the front.
class Input {
 public:
  explicit Input(httplib::Stream& stream) : stream_(stream) {}

  // Reads more bytes; throws ConnectionEnded when there are none.
  void fill() {
    if (pos_ >= kCompactAt) {
      data_.erase(0, pos_);
      pos_ = 0;
    }
    char chunk[16384];
    const ssize_t n = stream_.read(chunk, sizeof chunk);
    if (n <= 0) throw ConnectionEnded{};
    data_.append(chunk, static_cast<size_t>(n));
  }
  std::string_view unread() const { return std::string_view(data_).substr(pos_); }
  void consume(size_t n) { pos_ += n; }

  // The next line, without its CRLF; `max` bytes at most, else RequestRefused(status, ...).
  std::string_view line(size_t max, int status, std::string_view what) {
    size_t searched = 0;
    for (;;) {
      const size_t end = unread().find("\r\n", searched);
      if (end != std::string_view::npos && end <= max) {
        line_.assign(unread().substr(0, end));
        consume(end + 2);
        return line_;
      }
      if (unread().size() > max + 1)
        throw RequestRefused(status, fmt::format("{} is longer than {} bytes", what, max));
      searched = unread().empty() ? 0 : unread().size() - 1;
      fill();
    }
  }

  // Consumes the CRLF that ends a chunk's data.
  void expect_crlf() {
    while (unread().size() < 2) fill();
    if (!unread().starts_with("\r\n"))
      throw RequestRefused(400, "malformed HTTP request: a chunk is longer than its size");
    consume(2);
  }

  // Appends the next `n` bytes to `out`.
  void take(size_t n, std::string& out) {
    while (n > 0) {
      if (unread().empty()) fill();
      const size_t piece = std::min(n, unread().size());
      out.append(unread().substr(0, piece));
      consume(piece);
      n -= piece;
    }
  }

 private:
  static constexpr size_t kCompactAt = 1u << 16;
  httplib::Stream& stream_;
  std::string data_;
  size_t pos_ = 0;
  std::string line_;
};

// Reads the head: skips the empty lines a client may send before a request (RFC 9112 2.2),
// then reads up to the blank line.
HttpHead read_head(Input& input, const RequestLimits& limits) {
  for (;;) {
    while (input.unread().starts_with("\r\n")) input.consume(2);
    if (input.unread().size() >= 2) break;
    input.fill();
  }
  size_t searched = 0;
  for (;;) {
    const std::string_view data = input.unread();
    const size_t end = data.find("\r\n\r\n", searched);
    const size_t request_line_end = data.find("\r\n");
    if ((request_line_end == std::string_view::npos ? data.size() : request_line_end) >
        HttpHead::kMaxRequestLine)
      throw RequestRefused(
          414, fmt::format("the request line is longer than {} bytes", HttpHead::kMaxRequestLine));
    if ((end == std::string_view::npos ? data.size() : end) > limits.max_head_bytes)
      throw RequestRefused(431,
                           fmt::format("the request head is longer than {} bytes", limits.max_head_bytes));
    if (end != std::string_view::npos) {
      HttpHead head = parse_http_head(data.substr(0, end));
      input.consume(end + 4);
      if (head.fields.size() > limits.max_header_fields)
        throw RequestRefused(431, fmt::format("the request has {} header fields: at most {} are taken",
                                              head.fields.size(), limits.max_header_fields));
      return head;
    }
    searched = data.size() < 3 ? 0 : data.size() - 3;
    input.fill();
  }
}

// A Content-Length value: decimal digits; over `max` is 413.
uint64_t content_length(const std::string& value, uint64_t max) {
  if (value.empty() || !std::all_of(value.begin(), value.end(), [](char c) { return c >= '0' && c <= '9'; }))
    throw RequestRefused(400,
                         fmt::format("malformed HTTP request: Content-Length '{}' is not a decimal number",
                                     value.substr(0, 32)));
  uint64_t length = 0;
  for (const char c : value) {
    length = length * 10 + static_cast<uint64_t>(c - '0');
    if (length > max)
      throw RequestRefused(413, fmt::format("the request body exceeds the limit of {} bytes", max));
  }
  return length;
}

// The size on a chunk line: hexadecimal digits, then optional whitespace and extensions.
uint64_t chunk_size(std::string_view line) {
  std::string_view digits = line.substr(0, line.find(';'));
  while (!digits.empty() && (digits.back() == ' ' || digits.back() == '\t')) digits.remove_suffix(1);
  if (digits.empty() || digits.size() > 16 || !std::all_of(digits.begin(), digits.end(), [](char c) {
        return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
      }))
    throw RequestRefused(400, "malformed HTTP request: a chunk size is not a hexadecimal number");
  uint64_t size = 0;
  for (const char c : digits)
    size = size * 16 + static_cast<uint64_t>(c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10);
  return size;
}

// Decodes a chunked body (RFC 9112 7.1). The trailer fields are read and dropped; they count
// against the head limits with the `head_fields` already taken.
std::string read_chunked_body(Input& input, const RequestLimits& limits, size_t head_fields) {
  std::string body;
  for (;;) {
    const uint64_t size = chunk_size(input.line(kMaxChunkLine, 400, "a chunk-size line"));
    if (size == 0) break;
    if (size > limits.max_body_bytes - body.size())
      throw RequestRefused(
          413, fmt::format("the request body exceeds the limit of {} bytes", limits.max_body_bytes));
    input.take(static_cast<size_t>(size), body);
    input.expect_crlf();
  }
  size_t trailer_bytes = 0;
  for (size_t fields = head_fields;; ++fields) {
    const std::string_view line = input.line(limits.max_head_bytes, 431, "a trailer field");
    if (line.empty()) break;
    trailer_bytes += line.size() + 2;
    if (trailer_bytes > limits.max_head_bytes || fields >= limits.max_header_fields)
      throw RequestRefused(431, "the chunked body's trailer fields pass the request head limits");
  }
  return body;
}

// Checks the framing fields and makes `head` framed by Content-Length; returns the decoded
// body when it was chunked (read from `input`), else "".
std::string reframe(HttpHead& head, Input& input, httplib::Stream& stream, const RequestLimits& limits) {
  const std::vector<std::string> lengths = head.values("Content-Length");
  const std::vector<std::string> codings = head.values("Transfer-Encoding");
  for (const std::string& encoding : head.values("Content-Encoding"))
    if (!same_token(encoding, "identity"))
      throw RequestRefused(415,
                           fmt::format("Content-Encoding '{}' is not accepted: send the body uncompressed",
                                       encoding.substr(0, 32)));
  if (!codings.empty() && !lengths.empty())
    throw RequestRefused(400, "malformed HTTP request: both Content-Length and Transfer-Encoding are set");
  if (lengths.size() > 1)
    throw RequestRefused(400, "malformed HTTP request: Content-Length is set more than once");
  if (codings.empty()) {
    const uint64_t length = lengths.empty() ? 0 : content_length(lengths.front(), limits.max_body_bytes);
    head.remove("Content-Length");
    head.fields.push_back({"Content-Length", std::to_string(length)});  // no framing: no body
    return "";
  }
  if (head.version == "HTTP/1.0")
    throw RequestRefused(400, "malformed HTTP request: Transfer-Encoding in an HTTP/1.0 request");
  if (codings.size() > 1 || !same_token(codings.front(), "chunked"))
    throw RequestRefused(
        501, fmt::format("Transfer-Encoding '{}' is not supported: send chunked or Content-Length",
                         codings.front().substr(0, 32)));
  const std::vector<std::string> expect = head.values("Expect");
  if (expect.size() == 1 && same_token(expect.front(), "100-continue")) {
    constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
    stream.write(kContinue.data(), kContinue.size());
    head.remove("Expect");
  }
  std::string body = read_chunked_body(input, limits, head.fields.size());
  head.remove("Transfer-Encoding");
  head.fields.push_back({"Content-Length", std::to_string(body.size())});
  return body;
}

}  // namespace

Admission admit_request(httplib::Stream& stream, const RequestLimits& limits) {
  Input input(stream);
  try {
    HttpHead head = read_head(input, limits);
    std::string body = reframe(head, input, stream, limits);
    if (head.version == "HTTP/1.0") {
      head.remove("Connection");
      head.fields.push_back({"Connection", "close"});
    }
    std::string request = head.serialize();
    request += body;
    request += input.unread();
    return {.refusal = std::nullopt, .request = std::move(request)};
  } catch (const RequestRefused& e) {
    return {.refusal = GateRefusal{e.status(), e.what()}, .request = std::nullopt};
  } catch (const ConnectionEnded&) {
    return {};
  }
}

const char* reason_phrase(int status) {
  switch (status) {
    case 400: return "Bad Request";
    case 413: return "Payload Too Large";
    case 414: return "URI Too Long";
    case 415: return "Unsupported Media Type";
    case 431: return "Request Header Fields Too Large";
    case 501: return "Not Implemented";
    case 505: return "HTTP Version Not Supported";
    default: return "Error";
  }
}

}  // namespace tokenmill
