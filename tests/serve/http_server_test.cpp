// The HTTP front end in process (HttpServerTest) with cpp-httplib's client. Checks routing
// (404 for unknown paths, 405 with Allow for a known path and another method),
// authentication, the OpenAI error shapes and limits, server-sent events, and that a client
// leaving mid-stream frees its KV blocks at once.
#include <httplib.h>

#include <chrono>
#include <string>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "http_test_server.h"
#include "serve/cors.h"

namespace tokenmill {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

TEST_F(HttpServerTest, ServesHealthModelsMetricsAndThePage) {
  start();
  auto c = client(false);
  EXPECT_EQ(c.Get("/health")->status, 200);
  EXPECT_EQ(c.Get("/ready")->status, 200);
  const auto page = c.Get("/");
  EXPECT_EQ(page->status, 200);
  EXPECT_NE(page->body.find("<html"), std::string::npos);
  EXPECT_NE(c.Get("/metrics")->body.find("tokenmill_"), std::string::npos);
  const auto models = client().Get("/v1/models");
  ASSERT_EQ(models->status, 200);
  EXPECT_EQ(body_of(models)["data"][0]["id"], "tiny");
}

TEST_F(HttpServerTest, EveryV1RouteNeedsTheKey) {
  start();
  for (const bool wrong : {false, true}) {
    auto c = client(false);
    if (wrong) c.set_bearer_token_auth("sk-test-1235");
    const auto r = c.Post("/v1/completions", R"({"prompt": "hi"})", "application/json");
    ASSERT_EQ(r->status, 401);
    EXPECT_EQ(body_of(r)["error"]["type"], "authentication_error");
    EXPECT_EQ(c.Get("/v1/models")->status, 401);
  }
}

TEST_F(HttpServerTest, KeyScopeAllCoversTokenizeDetokenizeAndMetricsButNotProbes) {
  HttpServerOptions http;
  http.api_key_scope = ApiKeyScope::All;
  start({}, http);
  auto anonymous = client(false);
  EXPECT_EQ(anonymous.Post("/tokenize", R"({"prompt": "hi"})", "application/json")->status, 401);
  EXPECT_EQ(anonymous.Post("/detokenize", R"({"tokens": [1]})", "application/json")->status, 401);
  EXPECT_EQ(anonymous.Get("/metrics")->status, 401);
  EXPECT_EQ(anonymous.Get("/v1/models")->status, 401);
  for (const char* open : {"/", "/health", "/ready"}) EXPECT_EQ(anonymous.Get(open)->status, 200) << open;
  auto keyed = client();
  EXPECT_EQ(keyed.Post("/tokenize", R"({"prompt": "hi"})", "application/json")->status, 200);
  EXPECT_EQ(keyed.Get("/metrics")->status, 200);
}

TEST_F(HttpServerTest, DefaultKeyScopeLeavesTokenizeOpen) {
  start();
  EXPECT_EQ(client(false).Post("/tokenize", R"({"prompt": "hi"})", "application/json")->status, 200);
}

TEST_F(HttpServerTest, CorsLetsAllowedOriginsReadAnswersAndPreflight) {
  HttpServerOptions http;
  http.allowed_origins = {"https://app.example.com/"};
  start({}, http);
  auto c = client(false);
  const httplib::Headers allowed{{"Origin", "https://app.example.com"}};
  const auto models = c.Get("/v1/models", allowed);  // no key: 401, still readable by the page
  EXPECT_EQ(models->status, 401);
  EXPECT_EQ(models->get_header_value("Access-Control-Allow-Origin"), "https://app.example.com");
  EXPECT_EQ(models->get_header_value("Vary"), "Origin");
  EXPECT_EQ(models->get_header_value_count("Access-Control-Allow-Origin"), 1u);
  const auto other = c.Get("/health", {{"Origin", "https://evil.example"}});
  EXPECT_EQ(other->status, 200);
  EXPECT_FALSE(other->has_header("Access-Control-Allow-Origin"));

  const auto preflight =
      c.Options("/v1/chat/completions", {{"Origin", "https://app.example.com"},
                                         {"Access-Control-Request-Method", "POST"},
                                         {"Access-Control-Request-Headers", "authorization, content-type"}});
  EXPECT_EQ(preflight->status, 204);
  EXPECT_EQ(preflight->get_header_value("Access-Control-Allow-Origin"), "https://app.example.com");
  EXPECT_EQ(preflight->get_header_value_count("Access-Control-Allow-Origin"), 1u);
  EXPECT_EQ(preflight->get_header_value("Access-Control-Allow-Headers"), "authorization, content-type");
  EXPECT_NE(preflight->get_header_value("Access-Control-Allow-Methods").find("POST"), std::string::npos);
  const auto refused = c.Options("/v1/chat/completions", {{"Origin", "https://evil.example"}});
  EXPECT_EQ(refused->status, 403);
  EXPECT_EQ(body_of(refused)["error"]["type"], "permission_error");
}

TEST_F(HttpServerTest, NoCorsHeadersWithoutAllowedOrigins) {
  start();
  const auto r = client(false).Get("/health", {{"Origin", "https://app.example.com"}});
  EXPECT_FALSE(r->has_header("Access-Control-Allow-Origin"));
}

TEST(CorsPolicy, RefusesWhatIsNotAnOrigin) {
  for (const char* bad : {"app.example.com", "https://a.example/path", "ftp://a.example", ""})
    EXPECT_THROW(CorsPolicy({bad}), Error) << bad;
  EXPECT_NO_THROW(CorsPolicy({"*", "http://localhost:3000", "https://a.example/"}));
}

TEST_F(HttpServerTest, CompletesAndStreamsTheSameText) {
  start();
  auto c = client();
  const json request = {
      {"prompt", "Once upon a time"}, {"max_tokens", 12}, {"temperature", 0}, {"ignore_eos", true}};
  const auto whole = c.Post("/v1/completions", request.dump(), "application/json");
  ASSERT_EQ(whole->status, 200) << whole->body;
  const json w = body_of(whole);
  EXPECT_EQ(w["usage"]["completion_tokens"], 12);

  json streaming = request;
  streaming["stream"] = true;
  std::string events;
  const auto r = c.Post("/v1/completions", streaming.dump(), "application/json");
  ASSERT_EQ(r->status, 200);
  EXPECT_EQ(r->get_header_value("Content-Type"), "text/event-stream");
  std::string text;
  size_t pos = 0;
  bool done = false;
  while ((pos = r->body.find("data: ", pos)) != std::string::npos) {
    const size_t end = r->body.find("\n\n", pos);
    const std::string data = r->body.substr(pos + 6, end - pos - 6);
    pos = end;
    if (data == "[DONE]") {
      done = true;
      break;
    }
    text += json::parse(data)["choices"][0]["text"].get<std::string>();
  }
  EXPECT_TRUE(done);
  EXPECT_EQ(text, w["choices"][0]["text"]);
}

TEST_F(HttpServerTest, AnswersErrorsInOpenAIShape) {
  start();
  auto c = client();
  const auto malformed = c.Post("/v1/chat/completions", "{not json", "application/json");
  EXPECT_EQ(malformed->status, 400);
  EXPECT_EQ(body_of(malformed)["error"]["type"], "invalid_request_error");
  const auto typed =
      c.Post("/v1/completions", R"({"prompt": "x", "max_tokens": "many"})", "application/json");
  EXPECT_EQ(typed->status, 400);
  EXPECT_EQ(body_of(typed)["error"]["param"], "max_tokens");
  const auto model = c.Post("/v1/completions", R"({"prompt": "x", "model": "gpt-9"})", "application/json");
  EXPECT_EQ(model->status, 404);
  const auto route = c.Get("/v2/nothing");
  EXPECT_EQ(route->status, 404);
  EXPECT_TRUE(body_of(route).contains("error"));
  const auto big = c.Post("/v1/completions", std::string(1 << 17, ' '), "application/json");
  EXPECT_EQ(big->status, 413);
  EXPECT_TRUE(body_of(big).contains("error"));
  EXPECT_EQ(c.Get("/health")->status, 200);
}

TEST_F(HttpServerTest, AKnownPathWithAnotherMethodIs405) {
  start();
  auto c = client();
  const auto expect_405 = [](const httplib::Result& r, const std::string& allow) {
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 405);
    EXPECT_EQ(r->get_header_value("Allow"), allow);
    const json error = body_of(r)["error"];
    EXPECT_EQ(error["type"], "invalid_request_error");
    EXPECT_NE(error["message"].get<std::string>().find(allow), std::string::npos) << error;
  };
  expect_405(c.Get("/v1/completions"), "POST");
  expect_405(c.Get("/v1/chat/completions"), "POST");
  expect_405(c.Delete("/tokenize"), "POST");
  expect_405(c.Post("/health", "{}", "application/json"), "GET, HEAD");
  expect_405(c.Put("/v1/models", "{}", "application/json"), "GET, HEAD");
  // Authentication comes first on /v1/ routes, and unknown paths stay 404 whatever the method.
  EXPECT_EQ(client(false).Get("/v1/completions")->status, 401);
  for (const auto& r : {c.Get("/v1/complete"), c.Post("/healthz", "{}", "application/json")}) {
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 404);
    EXPECT_FALSE(r->has_header("Allow"));
    EXPECT_EQ(body_of(r)["error"]["type"], "not_found_error");
  }
  EXPECT_EQ(c.Get("/health")->status, 200);
}

TEST_F(HttpServerTest, RefusesWithRetryAfterWhenTheQueueIsFull) {
  EngineOptions options;
  options.max_running = 1;
  options.max_waiting = 1;
  start(options);
  // 32 clients at once, each wanting 200 tokens, one running and one queued at a time: the
  // others are refused (each request takes longer than all the clients need to arrive).
  const json request = {{"prompt", "a b c"}, {"max_tokens", 200}, {"ignore_eos", true}};
  std::vector<int> statuses(32);
  std::vector<std::string> retry_after(32);
  std::vector<std::thread> clients;
  for (size_t i = 0; i < statuses.size(); ++i)
    clients.emplace_back([&, i] {
      const auto r = client().Post("/v1/completions", request.dump(), "application/json");
      if (!r) {
        ADD_FAILURE() << "request " << i << ": " << httplib::to_string(r.error());
        return;
      }
      statuses[i] = r->status;
      retry_after[i] = r->get_header_value("Retry-After");
      if (r->status == 429) {
        EXPECT_EQ(body_of(r)["error"]["type"], "rate_limit_error");
      } else if (r->status == 200) {
        EXPECT_EQ(body_of(r)["usage"]["completion_tokens"], 200);
      }
    });
  for (auto& t : clients) t.join();
  int refused = 0;
  for (size_t i = 0; i < statuses.size(); ++i) {
    EXPECT_TRUE(statuses[i] == 200 || statuses[i] == 429) << statuses[i];
    if (statuses[i] == 429) {
      ++refused;
      EXPECT_EQ(retry_after[i], "1");
    }
  }
  EXPECT_GT(refused, 0);
  EXPECT_LT(refused, 32);
}

// Slows the engine to ~50 tokens/s, so a 240-token request lasts ~5 s: far longer than the
// server needs to notice a client that hung up.
class SlowEngineObserver final : public EngineObserver {
 public:
  void on_first_token(double) override {}
  void on_next_token(double) override { std::this_thread::sleep_for(20ms); }
  void on_finished(FinishReason, double, int64_t, int64_t) override {}
};

// The request is cancelled (and its KV blocks freed) well before its 240 tokens.
void expect_cancelled_early(const Engine& engine) {
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  EngineSnapshot s = engine.snapshot();
  while ((s.running > 0 || s.kv_blocks_used > 0) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(20ms);
    s = engine.snapshot();
  }
  EXPECT_EQ(s.running, 0);
  EXPECT_EQ(s.kv_blocks_used, 0);
  EXPECT_LT(s.generated_tokens, 200);
}

const json kLongRequest = {{"prompt", "tell me"}, {"max_tokens", 240}, {"ignore_eos", true}};

TEST_F(HttpServerTest, ClientLeavingMidStreamFreesItsBlocks) {
  SlowEngineObserver slow;
  start({}, {}, &slow);
  httplib::Client c = client();
  json request = kLongRequest;
  request["stream"] = true;
  int chunks = 0;
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/completions";
  req.body = request.dump();
  req.set_header("Content-Type", "application/json");
  req.set_header("Authorization", std::string("Bearer ") + kKey);
  req.content_receiver = [&](const char*, size_t, uint64_t, uint64_t) {
    return ++chunks < 3;
  };  // then hang up
  c.send(req);
  EXPECT_GE(chunks, 3);
  expect_cancelled_early(*engine_);
}

TEST_F(HttpServerTest, ClientLeavingBeforeAWholeResponseCancelsIt) {
  SlowEngineObserver slow;
  start({}, {}, &slow);
  httplib::Client c = client();
  c.set_read_timeout(0, 300000);  // gives up after 0.3 s without a byte, and hangs up
  const auto r = c.Post("/v1/completions", kLongRequest.dump(), "application/json");
  EXPECT_FALSE(r);
  expect_cancelled_early(*engine_);
}

}  // namespace
}  // namespace tokenmill
