#include "serve/http_server.h"

#include <httplib.h>
#include <spdlog/spdlog.h>

#include <sys/socket.h>

#include <algorithm>
#include <map>
#include <optional>
#include <utility>

#include "serve/cors.h"
#include "serve/embeddings.h"
#include "serve/generation.h"
#include "serve/guarded_server.h"
#include "serve/web_ui.h"

namespace tokenmill {

namespace {

constexpr const char* kJson = "application/json";

void send_json(httplib::Response& res, int status, const nlohmann::json& body) {
  res.status = status;
  res.set_content(dump_json(body), kJson);
}

void send_error(httplib::Response& res, const ApiError& error) {
  send_json(res, error.status, error_body(error));
}

// The comparison takes the same time wherever the strings differ (only the length leaks).
bool same_secret(std::string_view given, std::string_view key) {
  if (given.size() != key.size() || key.empty()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < key.size(); ++i) diff |= static_cast<unsigned char>(given[i] ^ key[i]);
  return diff == 0;
}

// Runs `submit` (what hands requests to the engine), turning the engine's refusals into API
// errors: busy 429 (with Retry-After), stopping 503, any other Error 400.
template <class Submit>
auto on_engine(httplib::Response& res, Submit&& submit) {
  try {
    return submit();
  } catch (const EngineBusy& e) {
    res.set_header("Retry-After", "1");
    throw ApiException(api_error(429, e.what()));
  } catch (const EngineStopped& e) {
    throw ApiException(api_error(503, e.what()));
  } catch (const ApiException&) {
    throw;
  } catch (const Error& e) {
    throw ApiException(api_error(400, e.what()));
  }
}

}  // namespace

struct HttpServer::Impl {
  Impl(Engine& e, const ServedModel& m, ServerMetrics& me, HttpServerOptions o)
      : engine(e),
        model(m),
        metrics(me),
        options(std::move(o)),
        server(static_cast<size_t>(std::max(options.threads, 1)), options.receive_timeout,
               RequestLimits{.max_body_bytes = options.max_body_bytes},
               [&me](int status) { me.on_http_response(status); }),
        cors(options.allowed_origins) {}

  void configure();
  // Registers a route and records its method for the 405 answers.
  void route(const std::string& method, const std::string& path, httplib::Server::Handler handler);
  bool needs_key(const std::string& path) const;
  bool authorized(const httplib::Request& req) const;
  void generate(const httplib::Request& req, httplib::Response& res, Endpoint endpoint);
  void handle_errors(const httplib::Request& req, httplib::Response& res);

  Engine& engine;
  const ServedModel& model;
  ServerMetrics& metrics;
  HttpServerOptions options;
  GuardedServer server;
  CorsPolicy cors;
  std::map<std::string, std::string> allowed_methods;  // path -> "GET, HEAD" or "POST"
  int listening_socket = -1;
};

bool HttpServer::Impl::needs_key(const std::string& path) const {
  if (options.api_keys.empty()) return false;
  if (options.api_key_scope == ApiKeyScope::All) return path != "/" && path != "/health" && path != "/ready";
  return path.starts_with("/v1/");
}

bool HttpServer::Impl::authorized(const httplib::Request& req) const {
  if (options.api_keys.empty()) return true;
  const std::string header = req.get_header_value("Authorization");
  constexpr std::string_view kBearer = "Bearer ";
  if (header.size() <= kBearer.size() || header.compare(0, kBearer.size(), kBearer) != 0) return false;
  const std::string_view key = std::string_view(header).substr(kBearer.size());
  bool match = false;
  for (const std::string& k : options.api_keys) match |= same_secret(key, k);
  return match;
}

void HttpServer::Impl::generate(const httplib::Request& req, httplib::Response& res, Endpoint endpoint) {
  const nlohmann::json body = parse_json_body(req.body);
  ParsedRequest parsed = endpoint == Endpoint::Chat ? parse_chat(body, model, req.body)
                                                    : parse_completion(body, model, req.body);
  const auto deadline = std::chrono::steady_clock::now() + options.request_timeout;
  for (EngineRequest& r : parsed.requests) r.deadline = deadline;
  const bool streaming = parsed.options.stream;
  std::shared_ptr<Generation> generation;
  generation = on_engine(
      res, [&] { return std::make_shared<Generation>(engine, model, std::move(parsed), endpoint); });
  // Streaming or not, the body is written in pieces as the engine runs, so a client that
  // hangs up is noticed at the next write and its requests are cancelled at once. HTTP/1.1
  // clients get it chunked; HTTP/1.0 clients, which do not know chunked, read it to the end
  // of the connection (the request gate made their requests "Connection: close").
  res.set_header("Cache-Control", "no-cache");
  const char* content_type = streaming ? "text/event-stream" : kJson;
  auto provider = [generation, streaming](size_t, httplib::DataSink& sink) {
    const Generation::Writer write = [&sink](std::string_view piece) {
      return sink.write(piece.data(), piece.size());
    };
    if (streaming ? generation->stream(write) : generation->respond(write)) sink.done();
    return true;
  };
  auto release = [generation](bool) { generation->cancel(); };
  if (req.version == "HTTP/1.0")
    res.set_content_provider(content_type, std::move(provider), std::move(release));
  else
    res.set_chunked_content_provider(content_type, std::move(provider), std::move(release));
}

// Every error status gets an OpenAI-shaped JSON body (413 from the body limit, 404 from
// routing, ...) unless a handler already wrote one.
void HttpServer::Impl::handle_errors(const httplib::Request& req, httplib::Response& res) {
  if (!res.body.empty()) return;
  switch (res.status) {
    case 404: {
      const auto known = allowed_methods.find(req.path);
      if (known == allowed_methods.end()) {
        send_error(res, api_error(404, "no route " + req.method + " " + req.path));
        break;
      }
      res.set_header("Allow", known->second);
      send_error(res, api_error(405, fmt::format("{} does not take {}: use {}", req.path, req.method,
                                                 known->second)));
      break;
    }
    case 413:
      send_error(res, api_error(413, fmt::format("the request body exceeds the limit of {} bytes",
                                                 options.max_body_bytes)));
      break;
    case 400: send_error(res, api_error(400, "malformed HTTP request")); break;
    case 414: send_error(res, api_error(414, "the request line is too long")); break;
    default: send_error(res, api_error(res.status, fmt::format("HTTP status {}", res.status))); break;
  }
}

void HttpServer::Impl::route(const std::string& method, const std::string& path,
                             httplib::Server::Handler handler) {
  if (method == "GET") {
    server.Get(path, std::move(handler));
    allowed_methods[path] = "GET, HEAD";  // cpp-httplib answers HEAD with the GET handler
  } else {
    server.Post(path, std::move(handler));
    allowed_methods[path] = "POST";
  }
}

void HttpServer::Impl::configure() {
  server.set_payload_max_length(options.max_body_bytes);
  server.set_read_timeout(options.read_timeout.count(), 0);
  server.set_keep_alive_timeout(5);
  // httplib 0.11 listens with a backlog of 5: a burst of clients would have its connections
  // dropped and retried by the kernel. Keep the socket so bind() can listen again with the system's maximum
  // backlog.
  server.set_socket_options([this](socket_t sock) {
    httplib::default_socket_options(sock);
    listening_socket = sock;
  });

  server.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    cors.annotate(req, res);
    if (req.method == "OPTIONS")
      return httplib::Server::HandlerResponse::Unhandled;  // preflights carry no key
    if (needs_key(req.path) && !authorized(req)) {
      send_error(res,
                 api_error(401, "a valid API key is required: send the header 'Authorization: Bearer <key>'",
                           "", "invalid_api_key"));
      return httplib::Server::HandlerResponse::Handled;
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });
  server.set_exception_handler(
      [](const httplib::Request& req, httplib::Response& res, std::exception_ptr ep) {
        try {
          std::rethrow_exception(ep);
        } catch (const ApiException& e) {
          send_error(res, e.error());
        } catch (const std::exception& e) {
          spdlog::error("{} {}: internal error: {}", req.method, req.path, e.what());
          send_error(res, api_error(500, std::string("internal error: ") + e.what()));
        } catch (...) {
          send_error(res, api_error(500, "internal error"));
        }
      });
  server.set_error_handler(
      [this](const httplib::Request& req, httplib::Response& res) { handle_errors(req, res); });
  server.set_logger([this](const httplib::Request& req, const httplib::Response& res) {
    metrics.on_http_response(res.status);
    spdlog::info("{} {} {}", req.method, req.path, res.status);  // never headers: they hold the API key
  });

  if (cors.enabled()) {
    server.Options(".*", [this](const httplib::Request& req, httplib::Response& res) {
      if (!cors.preflight(req, res))
        send_error(res, api_error(403, fmt::format(
                                           "the origin '{}' may not call this server (see --allowed-origins)",
                                           req.get_header_value("Origin"))));
    });
  }
  route("GET", "/", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(std::string(web_ui_html()), "text/html; charset=utf-8");
  });
  route("GET", "/health", [](const httplib::Request&, httplib::Response& res) {
    send_json(res, 200, {{"status", "ok"}});
  });
  route("GET", "/ready", [this](const httplib::Request&, httplib::Response& res) {
    send_json(res, 200, {{"status", "ready"}, {"model", model.id}});
  });
  route("GET", "/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics.render(engine.snapshot()), "text/plain; version=0.0.4; charset=utf-8");
  });
  route("GET", "/v1/models",
        [this](const httplib::Request&, httplib::Response& res) { send_json(res, 200, models_list(model)); });
  route("POST", "/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
    generate(req, res, Endpoint::Completions);
  });
  route("POST", "/v1/chat/completions",
        [this](const httplib::Request& req, httplib::Response& res) { generate(req, res, Endpoint::Chat); });
  route("POST", "/v1/embeddings", [this](const httplib::Request& req, httplib::Response& res) {
    const EmbeddingRequest request = parse_embeddings(parse_json_body(req.body), model);
    send_json(res, 200, on_engine(res, [&] {
                return run_embeddings(engine, model, request, options.request_timeout);
              }));
  });
  route("POST", "/tokenize", [this](const httplib::Request& req, httplib::Response& res) {
    send_json(res, 200,
              tokenize_response(parse_tokenize(parse_json_body(req.body), model), model.context_length));
  });
  route("POST", "/detokenize", [this](const httplib::Request& req, httplib::Response& res) {
    send_json(res, 200,
              detokenize_response(model.tokenizer, parse_detokenize(parse_json_body(req.body), model)));
  });
}

HttpServer::HttpServer(Engine& engine, const ServedModel& model, ServerMetrics& metrics,
                       HttpServerOptions options)
    : impl_(std::make_unique<Impl>(engine, model, metrics, std::move(options))) {
  impl_->configure();
}

HttpServer::~HttpServer() { stop(); }

int HttpServer::bind() {
  const HttpServerOptions& o = impl_->options;
  const int port = o.port == 0 ? impl_->server.bind_to_any_port(o.host)
                               : (impl_->server.bind_to_port(o.host, o.port) ? o.port : -1);
  if (port < 0) fail("cannot listen on {}:{}: is the port in use or the address not local?", o.host, o.port);
  if (impl_->listening_socket >= 0) ::listen(impl_->listening_socket, SOMAXCONN);
  return port;
}

void HttpServer::serve() { impl_->server.listen_after_bind(); }

void HttpServer::stop() { impl_->server.stop(); }

}  // namespace tokenmill
