// The request gate (serve/request_gate.h) over requests in memory, each read in pieces of 1,
// 7 and 4096 bytes so that every boundary falls inside a line, a chunk or the head's end.
#include "serve/request_gate.h"

#include <string>

#include <gtest/gtest.h>

#include "support/memory_stream.h"

namespace tokenmill {
namespace {

constexpr size_t kBodyLimit = 1000;

class RequestGateTest : public ::testing::TestWithParam<size_t> {
 protected:
  Admission admit(const std::string& bytes, RequestLimits limits = {.max_body_bytes = kBodyLimit}) {
    stream_ = std::make_unique<MemoryStream>(bytes, GetParam());
    return admit_request(*stream_, limits);
  }
  // What the server reads next: the canonical request the gate hands on, then what the gate
  // left unread. Fails the test on a refusal.
  std::string admitted(const std::string& bytes) {
    const Admission a = admit(bytes);
    EXPECT_FALSE(a.refusal) << a.refusal->status << " " << a.refusal->message;
    EXPECT_TRUE(a.request);
    return a.request.value_or("") + stream_->unread();
  }
  // The status of the refusal; fails the test if the request was admitted.
  int refused(const std::string& bytes, RequestLimits limits = {.max_body_bytes = kBodyLimit}) {
    const Admission a = admit(bytes, limits);
    EXPECT_TRUE(a.refusal) << "admitted: " << a.request.value_or("(connection ended)");
    EXPECT_FALSE(a.request);
    return a.refusal ? a.refusal->status : 0;
  }

  std::unique_ptr<MemoryStream> stream_;
};

TEST_P(RequestGateTest, AdmitsARequestWithoutABodyAsContentLengthZeroAndKeepsThePipelinedNext) {
  EXPECT_EQ(admitted("\r\nGET /health HTTP/1.1\r\nHost:  a \r\nAccept: */*\r\n\r\nGET /ready HTTP/1.1\r\n"),
            "GET /health HTTP/1.1\r\nHost: a\r\nAccept: */*\r\nContent-Length: 0\r\n\r\n"
            "GET /ready HTTP/1.1\r\n");
}

TEST_P(RequestGateTest, LeavesAContentLengthBodyToTheServer) {
  const std::string head = "POST /tokenize HTTP/1.1\r\nContent-Length: 11\r\n\r\n";
  EXPECT_EQ(admitted(head + "{\"a\": true}"), head + "{\"a\": true}");
  EXPECT_EQ(admitted("POST /x HTTP/1.1\r\ncontent-length: 000\r\n\r\n"),
            "POST /x HTTP/1.1\r\nContent-Length: 0\r\n\r\n");
}

TEST_P(RequestGateTest, DecodesAChunkedBodyIntoContentLengthFraming) {
  EXPECT_EQ(
      admitted("POST /x HTTP/1.1\r\nTransfer-Encoding: Chunked\r\nHost: h\r\n\r\n"
               "4\r\nWiki\r\n5 ; name=value\r\npedia\r\nA\r\n in chunks\r\n0\r\nTrailer: t\r\n\r\nNEXT"),
      "POST /x HTTP/1.1\r\nHost: h\r\nContent-Length: 19\r\n\r\nWikipedia in chunksNEXT");
}

TEST_P(RequestGateTest, AnswersExpectContinueBeforeReadingAChunkedBody) {
  EXPECT_EQ(admitted("POST /x HTTP/1.1\r\nExpect: 100-continue\r\nTransfer-Encoding: chunked\r\n\r\n"
                     "2\r\nok\r\n0\r\n\r\n"),
            "POST /x HTTP/1.1\r\nContent-Length: 2\r\n\r\nok");
  EXPECT_EQ(stream_->written(), "HTTP/1.1 100 Continue\r\n\r\n");
}

TEST_P(RequestGateTest, ClosesHttp10Connections) {
  EXPECT_EQ(admitted("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"),
            "GET / HTTP/1.0\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
}

TEST_P(RequestGateTest, RefusesAChunkedBodyOverTheLimitBeforeReadingIt) {
  const std::string head = "POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n";
  EXPECT_EQ(refused(head + "3E9\r\n" + std::string(1001, 'a') + "\r\n0\r\n\r\n"), 413);
  EXPECT_LE(stream_->bytes_read(), head.size() + 5 + 4096);
  // Many small chunks: refused at the one that would pass the limit.
  std::string small;
  for (int i = 0; i < 200; ++i) small += "A\r\n0123456789\r\n";
  EXPECT_EQ(refused(head + small + "0\r\n\r\n"), 413);
  EXPECT_LE(stream_->bytes_read(), head.size() + 101 * 15 + 4096);
  // Exactly at the limit is admitted.
  EXPECT_EQ(admitted(head + "3E8\r\n" + std::string(1000, 'a') + "\r\n0\r\n\r\n").size(),
            std::string("POST /x HTTP/1.1\r\nContent-Length: 1000\r\n\r\n").size() + 1000);
}

TEST_P(RequestGateTest, RefusesMalformedChunks) {
  const std::string head = "POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n";
  EXPECT_EQ(refused(head + "2\r\nabc\r\n0\r\n\r\n"), 400);                // data longer than its size
  EXPECT_EQ(refused(head + "-2\r\nab\r\n0\r\n\r\n"), 400);                // not hexadecimal
  EXPECT_EQ(refused(head + "\r\nab\r\n0\r\n\r\n"), 400);                  // no size
  EXPECT_EQ(refused(head + "00000000000000001\r\na\r\n0\r\n\r\n"), 400);  // 17 digits
  EXPECT_EQ(refused(head + "FFFFFFFFFFFFFFFF\r\n"), 413);
  EXPECT_EQ(refused(head + "1;" + std::string(kMaxChunkLine, 'e') + "\r\na\r\n0\r\n\r\n"), 400);
}

TEST_P(RequestGateTest, RefusesContentLengthWithTransferEncoding) {
  EXPECT_EQ(refused("POST /x HTTP/1.1\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"),
            400);
  EXPECT_EQ(refused("POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 4\r\n\r\n0\r\n\r\n"),
            400);
}

TEST_P(RequestGateTest, RefusesOtherTransferEncodings) {
  EXPECT_EQ(refused("POST /x HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n"), 501);
  EXPECT_EQ(refused("POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n"),
            501);
  EXPECT_EQ(refused("POST /x HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"), 400);
}

TEST_P(RequestGateTest, RefusesBadContentLengthsAtOnce) {
  EXPECT_EQ(refused("POST /x HTTP/1.1\r\nContent-Length: -1\r\n\r\n"), 400);
  EXPECT_EQ(refused("POST /x HTTP/1.1\r\nContent-Length: 1 2\r\n\r\n"), 400);
  EXPECT_EQ(refused("POST /x HTTP/1.1\r\nContent-Length: 0x10\r\n\r\n"), 400);
  EXPECT_EQ(refused("POST /x HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\nhello"), 400);
  // Over the limit, or past any integer type: 413 without waiting for the body.
  const std::string head = "POST /x HTTP/1.1\r\nContent-Length: 1001\r\n\r\n";
  EXPECT_EQ(refused(head + std::string(1001, 'a')), 413);
  EXPECT_LE(stream_->bytes_read(), head.size() + 4096);
  EXPECT_EQ(refused("POST /x HTTP/1.1\r\nContent-Length: 99999999999999999999999999999\r\n\r\n"), 413);
}

TEST_P(RequestGateTest, RefusesCompressedBodies) {
  EXPECT_EQ(refused("POST /x HTTP/1.1\r\nContent-Encoding: gzip\r\nContent-Length: 3\r\n\r\nabc"), 415);
  EXPECT_EQ(refused("POST /x HTTP/1.1\r\nContent-Encoding: br\r\nTransfer-Encoding: chunked\r\n\r\n"), 415);
  EXPECT_EQ(admitted("POST /x HTTP/1.1\r\nContent-Encoding: identity\r\nContent-Length: 0\r\n\r\n"),
            "POST /x HTTP/1.1\r\nContent-Encoding: identity\r\nContent-Length: 0\r\n\r\n");
}

TEST_P(RequestGateTest, CapsTheHeadsSizeAndFieldCount) {
  const RequestLimits limits{.max_body_bytes = kBodyLimit, .max_head_bytes = 8192, .max_header_fields = 10};
  std::string fields;
  for (int i = 0; i < 11; ++i) fields += "X-" + std::to_string(i) + ": v\r\n";
  EXPECT_EQ(refused("GET / HTTP/1.1\r\n" + fields + "\r\n", limits), 431);
  // A huge head is refused after reading about the limit, not the whole head.
  std::string huge = "GET / HTTP/1.1\r\n";
  while (huge.size() < (1u << 20)) huge += "X-Padding: " + std::string(100, 'p') + "\r\n";
  EXPECT_EQ(refused(huge + "\r\n", limits), 431);
  EXPECT_LE(stream_->bytes_read(), 8192u + 16384u);
  EXPECT_EQ(refused("GET / HTTP/1.1\r\nX: " + std::string(9000, 'v') + "\r\n\r\n", limits), 431);
  // Trailer fields count too.
  EXPECT_EQ(refused("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n" + fields + "\r\n", limits),
            431);
}

TEST_P(RequestGateTest, RefusesAnOverlongRequestLineWith414) {
  EXPECT_EQ(refused("GET /" + std::string(9000, 'a') + " HTTP/1.1\r\n\r\n"), 414);
  EXPECT_EQ(refused("GET /" + std::string(9000, 'a')), 414);  // before its end arrives
}

TEST_P(RequestGateTest, RefusesMalformedHeads) {
  EXPECT_EQ(refused("POST /x HTTP/1.1\r\nContent-Length : 5\r\n\r\nhello"), 400);  // space before ':'
  EXPECT_EQ(refused("GET / HTTP/1.1\nHost: a\r\n\r\n"), 400);                      // bare LF
  EXPECT_EQ(refused("GET / HTTP/1.1\r\nHost: a\r\n folded\r\n\r\n"), 400);
  EXPECT_EQ(refused("GET / HTTP/1.1\r\nHost: a\x01b\r\n\r\n"), 400);
  EXPECT_EQ(refused("GET / HTTP/1.1\r\nno colon\r\n\r\n"), 400);
  EXPECT_EQ(refused("GET /a b HTTP/1.1\r\n\r\n"), 400);
  EXPECT_EQ(refused("GET / HTTP/2.0\r\n\r\n"), 505);
  EXPECT_EQ(refused("GET / SPDY/3\r\n\r\n"), 400);
  EXPECT_EQ(refused("GET\r\n\r\n"), 400);
  EXPECT_EQ(refused("G(T / HTTP/1.1\r\n\r\n"), 400);
}

TEST_P(RequestGateTest, EndsQuietlyWhenTheConnectionEndsFirst) {
  for (const std::string bytes : {"", "\r\n", "GET / HTTP/1.1\r\nHost: a\r\n",
                                  "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab"}) {
    const Admission a = admit(bytes);
    EXPECT_FALSE(a.refusal) << bytes;
    EXPECT_FALSE(a.request) << bytes;
  }
}

INSTANTIATE_TEST_SUITE_P(ReadPieces, RequestGateTest, ::testing::Values(1, 7, 4096));

}  // namespace
}  // namespace tokenmill
