// HttpServer: the OpenAI-compatible HTTP/1.1 front of the engine, on cpp-httplib (Debian's
// libcpp-httplib: a maintained, dependency-free server with a thread pool, chunked
// responses for server-sent events, body-size and read-timeout limits; one blocking thread
// per connection suits a server whose work happens on the engine thread anyway).
//
// Routes: GET / (web UI), /health, /ready, /metrics, /v1/models; POST /v1/completions,
// /v1/chat/completions, /tokenize, /detokenize; OPTIONS (CORS preflight) when origins are
// allowed. With API keys, every route of their scope (ApiKeyScope) needs
// "Authorization: Bearer <key>" (401 otherwise); keys are never logged. Every error is an
// OpenAI-shaped JSON body: 400 naming the field, 401, 404 (unknown path), 405 with an Allow
// header (a known path, another method), 413 (body over the limit, however it is framed;
// compressed bodies are refused with 415), 431 (too many or too long header fields), 429
// with Retry-After (queue full), 503 (shutting down), 500 (a bug: the server keeps serving).
// Framing is checked before any handler runs (see request_gate.h). A streaming
// client that disconnects cancels its requests at once (the engine frees their KV blocks at
// its next step). Slow clients (see GuardedServer): a client that stalls mid-request is
// dropped after the read timeout, one that takes longer than the receive timeout to send a
// request is cut, and when every thread is busy the connection that has waited longest
// without sending a whole request is cut for the newcomer.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "serve/engine.h"
#include "serve/openai_request.h"
#include "serve/server_metrics.h"

namespace tokenmill {

// The routes API keys cover: V1 every /v1/ route (as vLLM), All also /tokenize,
// /detokenize and /metrics. GET /, /health and /ready stay open (the page, probes).
enum class ApiKeyScope { V1, All };

struct HttpServerOptions {
  std::string host = "127.0.0.1";
  int port = 8000;                    // 0: any free port (see bind())
  std::vector<std::string> api_keys;  // empty: no authentication
  ApiKeyScope api_key_scope = ApiKeyScope::V1;
  std::vector<std::string> allowed_origins;          // CORS (see cors.h); empty: same origin only
  size_t max_body_bytes = 4u << 20;                  // decoded request body, however framed
  std::chrono::seconds request_timeout{600};         // per generation request
  std::chrono::seconds read_timeout{10};             // per read of a request's headers or body
  std::chrono::milliseconds receive_timeout{30000};  // to send a whole request, head and body
  int threads = 512;                                 // connections served at once
};

class HttpServer {
 public:
  // `engine`, `model` and `metrics` must outlive the server.
  HttpServer(Engine& engine, const ServedModel& model, ServerMetrics& metrics, HttpServerOptions options);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds the listening socket; returns the port. Throws Error if it cannot.
  int bind();
  // Serves until stop(); returns once every in-flight handler has finished.
  void serve();
  // Stops accepting connections (thread-safe; serve() then drains and returns).
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tokenmill
