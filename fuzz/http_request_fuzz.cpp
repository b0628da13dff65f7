// libFuzzer target for the request gate (serve/request_gate.h): arbitrary bytes as they come
// off a connection, read in pieces of 1 to 64 bytes (the first input byte picks the size) so
// that reads end anywhere in a line, a chunk or the head's end. The body limit is 256 bytes,
// the head limit 1 KiB and 16 fields, so that the limits are reached.
//
// Properties: the gate refuses only with the statuses it documents, or admits a request whose
// canonical form has exactly one Content-Length, within the body limit, and no
// Transfer-Encoding or compressed Content-Encoding; the canonical request is a fixed point
// (admitting it again, in one read, gives the same bytes); an HTTP/1.0 request is marked
// "Connection: close". Anything else, or any other exception, is a crash.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "serve/http_head.h"
#include "serve/request_gate.h"
#include "support/memory_stream.h"

namespace {

constexpr tokenmill::RequestLimits kLimits{
    .max_body_bytes = 256, .max_head_bytes = 1024, .max_header_fields = 16};

void check(bool ok, const char* what) {
  if (ok) return;
  std::fprintf(stderr, "http_request_fuzz: property violated: %s\n", what);
  std::abort();
}

void check_canonical(const std::string& request) {
  const size_t end = request.find("\r\n\r\n");
  check(end != std::string::npos, "the admitted request has a whole head");
  const tokenmill::HttpHead head = tokenmill::parse_http_head(std::string_view(request).substr(0, end));
  const auto lengths = head.values("Content-Length");
  check(lengths.size() == 1, "one Content-Length");
  check(std::stoull(lengths.front()) <= kLimits.max_body_bytes, "Content-Length within the limit");
  check(!head.has("Transfer-Encoding"), "no Transfer-Encoding");
  for (const std::string& coding : head.values("Content-Encoding"))
    check(tokenmill::same_token(coding, "identity"), "no compressed body");
  if (head.version == "HTTP/1.0") {
    const auto connection = head.values("Connection");
    check(connection.size() == 1 && connection.front() == "close", "HTTP/1.0 is closed");
  }
  // The canonical head may be a little longer than the original (a space after each colon,
  // the Content-Length and Connection fields), so the head limits get that much room.
  tokenmill::RequestLimits roomier = kLimits;
  roomier.max_head_bytes = 2 * kLimits.max_head_bytes + 64;
  roomier.max_header_fields = kLimits.max_header_fields + 2;
  tokenmill::MemoryStream again(request, request.size());
  const tokenmill::Admission twice = tokenmill::admit_request(again, roomier);
  check(twice.request && *twice.request + again.unread() == request,
        "the canonical request is a fixed point");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const size_t piece = 1 + data[0] % 64;
  tokenmill::MemoryStream stream(std::string(reinterpret_cast<const char*>(data) + 1, size - 1), piece);
  const tokenmill::Admission admission = tokenmill::admit_request(stream, kLimits);
  if (admission.refusal) {
    const int s = admission.refusal->status;
    check(s == 400 || s == 413 || s == 414 || s == 415 || s == 431 || s == 501 || s == 505,
          "a documented status");
    check(!admission.request, "refused or admitted, not both");
  } else if (admission.request) {
    check_canonical(*admission.request);
  }
  return 0;
}
