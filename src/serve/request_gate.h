// The request gate: every request's head and framing, checked before cpp-httplib sees it.
// cpp-httplib 0.11 (Debian's, compiled) reads a chunked body whole whatever its size, inflates
// gzip and brotli bodies without bound, takes any number of header fields, accepts
// Content-Length together with Transfer-Encoding, and reads a too-long Content-Length body to
// its end before answering 413. The gate reads each request's head itself and hands
// cpp-httplib a canonical request (HttpHead::serialize), framed by Content-Length only:
//  - the head (request line and fields) is at most max_head_bytes with at most
//    max_header_fields fields, else 431; malformed lines 400 (see HttpHead);
//  - Transfer-Encoding with Content-Length: 400 (request smuggling behind a proxy);
//    Transfer-Encoding other than "chunked", or in an HTTP/1.0 request: 501 / 400;
//  - Content-Length repeated or not a decimal number: 400; over max_body_bytes: 413 at once,
//    without reading the body;
//  - Content-Encoding other than identity: 415 (bodies are taken uncompressed, so the body
//    limit is the decoded size);
//  - a chunked body is decoded here, at most max_body_bytes (413 as soon as it would pass
//    that), chunk lines at most kMaxChunkLine, trailers counted in the head limit and dropped;
//    an "Expect: 100-continue" client gets its 100 before the body is read;
//  - an HTTP/1.0 request's Connection field becomes "close": such a client reads a streamed
//    response to the end of the connection (see HttpServer).
#pragma once

#include <httplib.h>

#include <cstddef>
#include <optional>
#include <string>

namespace tokenmill {

struct RequestLimits {
  size_t max_body_bytes = 4u << 20;  // decoded body
  size_t max_head_bytes = 32u << 10;
  size_t max_header_fields = 100;
};

struct GateRefusal {
  int status;
  std::string message;
};

// What admit_request found: a refusal to answer, the bytes to hand on to cpp-httplib (the
// canonical request, then whatever was read past it: the rest of a Content-Length body, a
// pipelined request), or neither when the connection ended or failed before a whole head.
struct Admission {
  std::optional<GateRefusal> refusal;
  std::optional<std::string> request;
};

// The longest chunk-size line of a chunked body (size and extensions).
inline constexpr size_t kMaxChunkLine = 4096;

// Reads one request's head (and a chunked body) from `stream`, whose reads carry the
// connection's timeouts; writes to it only a 100 Continue.
Admission admit_request(httplib::Stream& stream, const RequestLimits& limits);

// The reason phrase of an HTTP status the gate or the server answers ("Payload Too Large").
const char* reason_phrase(int status);

}  // namespace tokenmill
