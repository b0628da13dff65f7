// run_server(): `tokenmill serve` as a library call. Loads the model onto the chosen device
// and starts the engine (serve/engine_host.h: weights and KV cache in the device's memory;
// sampling stays on the host), starts the HTTP server, logs what fits, serves until SIGINT or
// SIGTERM, then shuts down gracefully: no new connections or requests (503), requests in
// flight finish within the grace period or are cut (finish_reason "abort"), and it returns.
#pragma once

#include <chrono>

#include "serve/engine_host.h"
#include "serve/http_server.h"
#include "serve/openai_request.h"

namespace tokenmill {

struct ServeConfig : EngineHostConfig {
  HttpServerOptions http;
  ServeLimits limits;
  std::chrono::seconds shutdown_grace{30};
};

void run_server(ServeConfig config);

}  // namespace tokenmill
