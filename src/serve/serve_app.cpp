#include "serve/serve_app.h"

#include <pthread.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <csignal>
#include <thread>

#include "serve/embeddings.h"
#include "serve/server_metrics.h"

namespace tokenmill {

namespace {

// Blocks SIGINT and SIGTERM in this thread and every thread it starts later, so that
// sigwait() in the main thread is the only place they arrive.
sigset_t block_stop_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  std::signal(SIGPIPE, SIG_IGN);  // a client gone mid-write is an error return, not a signal
  return set;
}

}  // namespace

void run_server(ServeConfig config) {
  spdlog::set_default_logger(spdlog::stderr_color_mt("serve"));  // stdout stays free for tools
  const sigset_t stop_signals = block_stop_signals();
  ServerMetrics metrics;
  config.require_tokenizer = true;
  EngineHost host(config, &metrics, [](std::string_view line) { spdlog::info("{}", line); });
  Engine& engine = host.engine();
  const Tokenizer& tokenizer = host.model().require_tokenizer("serving");
  ServedModel served{host.name(),      tokenizer,          host.chat_template(),
                     engine.context(), std::time(nullptr), config.limits};
  served.adapters = host.adapter_names();
  served.grammars = std::make_shared<GrammarCache>(tokenizer);
  served.tool_format = detect_tool_format(host.chat_template_source());
  served.hidden_size = host.model().model->config.hidden_size;
  served.pooling = read_embedding_pooling(host.model().model->path);
  HttpServer server(engine, served, metrics, config.http);
  const int port = server.bind();
  spdlog::info("serving {} on http://{}:{} (backend {}, {} API key{})", served.id, config.http.host, port,
               host.backend().name(), config.http.api_keys.size(),
               config.http.api_keys.size() == 1 ? "" : "s");
  std::thread http([&server] { server.serve(); });

  int signal = 0;
  sigwait(&stop_signals, &signal);
  spdlog::info("{}: stopping (grace period {} s)", signal == SIGINT ? "SIGINT" : "SIGTERM",
               config.shutdown_grace.count());
  std::thread drain([&] { engine.shutdown(config.shutdown_grace); });
  server.stop();
  http.join();
  drain.join();
  spdlog::info("stopped");
}

}  // namespace tokenmill
