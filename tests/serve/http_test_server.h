// HttpServerTest: a real engine on the tiny smollm_chat fixture (real tokenizer and chat
// template, random weights) behind a real HttpServer on a free port, with an API key.
#pragma once

#include <httplib.h>

#include <filesystem>
#include <memory>
#include <optional>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "backend/backend.h"
#include "runtime/text_model.h"
#include "serve/http_server.h"

namespace tokenmill {

inline const std::filesystem::path kModel =
    std::filesystem::path(TOKENMILL_FIXTURES_DIR) / "hf" / "smollm_chat";
inline constexpr const char* kKey = "sk-test-1234";

class HttpServerTest : public ::testing::Test {
 protected:
  void start(EngineOptions engine_options = {}, HttpServerOptions http = {},
             EngineObserver* observer = nullptr) {
    model_ = TextModel::load(kModel);
    backend_ = make_cpu_backend();
    engine_ = std::make_unique<Engine>(model_, *backend_, engine_options, observer ? observer : &metrics_);
    served_.emplace(ServedModel{"tiny", *model_.tokenizer, ChatTemplate(model_.tokenizer->chat_template()),
                                engine_->context(), 0, ServeLimits{},
                                std::make_shared<GrammarCache>(*model_.tokenizer)});
    http.port = 0;
    http.api_keys = {kKey};
    http.max_body_bytes = 1 << 16;
    server_ = std::make_unique<HttpServer>(*engine_, *served_, metrics_, http);
    port_ = server_->bind();
    thread_ = std::thread([this] { server_->serve(); });
  }
  void TearDown() override {
    if (server_) server_->stop();
    if (thread_.joinable()) thread_.join();
  }
  httplib::Client client(bool with_key = true) const {
    httplib::Client c("127.0.0.1", port_);
    c.set_read_timeout(60, 0);
    if (with_key) c.set_bearer_token_auth(kKey);
    return c;
  }
  static nlohmann::json body_of(const httplib::Result& r) { return nlohmann::json::parse(r->body); }

  TextModel model_;
  std::unique_ptr<Backend> backend_;
  ServerMetrics metrics_;
  std::unique_ptr<Engine> engine_;
  std::optional<ServedModel> served_;
  std::unique_ptr<HttpServer> server_;
  std::thread thread_;
  int port_ = 0;
};

}  // namespace tokenmill
