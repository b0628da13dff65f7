#include <cmath>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/device_flag.h"
#include "core/error.h"
#include "serve/lora_adapters.h"
#include "serve/serve_app.h"
#include "serve/speculative_spec.h"

namespace tokenmill::cli {

namespace {

struct ServeFlags {
  ServeConfig config;
  std::string api_key_file;
  std::string api_key_scope = "v1";
  int64_t request_timeout = 600;
  int64_t read_timeout = 10;
  double receive_timeout = 30;
  int64_t shutdown_grace = 30;
  bool no_prefix_caching = false;
  std::string speculative;        // empty: none
  std::vector<std::string> lora;  // NAME=DIR each
};

// One key per line; blank lines and lines starting with '#' are skipped.
std::vector<std::string> read_api_keys(const std::string& path) {
  std::ifstream in(path);
  if (!in) fail("--api-key-file {}: cannot read the file", path);
  std::vector<std::string> keys;
  for (std::string line; std::getline(in, line);) {
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
    if (!line.empty() && line.front() != '#') keys.push_back(line);
  }
  if (keys.empty()) fail("--api-key-file {}: no key in the file", path);
  return keys;
}

void run_serve(ServeFlags& f) {
  ServeConfig& c = f.config;
  if (!f.api_key_file.empty()) {
    const std::vector<std::string> keys = read_api_keys(f.api_key_file);
    c.http.api_keys.insert(c.http.api_keys.end(), keys.begin(), keys.end());
  }
  c.http.api_key_scope = f.api_key_scope == "all" ? ApiKeyScope::All : ApiKeyScope::V1;
  c.http.request_timeout = std::chrono::seconds(f.request_timeout);
  c.http.read_timeout = std::chrono::seconds(f.read_timeout);
  c.http.receive_timeout = std::chrono::milliseconds(std::llround(f.receive_timeout * 1000));
  c.shutdown_grace = std::chrono::seconds(f.shutdown_grace);
  c.engine.prefix_caching = !f.no_prefix_caching;
  if (!f.speculative.empty()) {
    const SpeculativeSpec spec = parse_speculative(f.speculative);
    c.engine.speculative.max_tokens = spec.max_tokens;
    c.draft_model = spec.draft_model;
  }
  for (const std::string& spec : f.lora) c.lora_adapters.push_back(parse_lora_adapter_spec(spec));
  run_server(c);
}

}  // namespace

void add_serve_command(CLI::App& app) {
  auto f = std::make_shared<ServeFlags>();
  ServeConfig& c = f->config;
  c.engine.kv_cache_bytes = 0;  // --kv-cache-fraction unless --kv-cache-memory is given
  CLI::App* cmd =
      app.add_subcommand("serve", "Serve a model over an OpenAI-compatible HTTP API, with a web UI");
  cmd->add_option("-m,--model", c.model, "Model directory (Hugging Face) or GGUF file")->required();
  cmd->add_option("--host", c.http.host, "Address to listen on")
      ->envname("TOKENMILL_HOST")  // container images set 0.0.0.0: reachable from outside
      ->capture_default_str();
  cmd->add_option("--port", c.http.port, "Port (0: any free port)")
      ->capture_default_str()
      ->check(CLI::Range(0, 65535));
  cmd->add_option("--api-key", c.http.api_keys,
                  "Key every request in --api-key-scope must send as 'Authorization: Bearer KEY' "
                  "(repeatable)");
  cmd->add_option("--api-key-file", f->api_key_file,
                  "File with one API key per line (keeps keys off the command line)");
  cmd->add_option("--api-key-scope", f->api_key_scope,
                  "Routes the API keys cover: v1 (every /v1 route) or all (also /tokenize, /detokenize and "
                  "/metrics; /, /health and /ready stay open)")
      ->capture_default_str()
      ->check(CLI::IsMember({"v1", "all"}));
  cmd->add_option("--allowed-origins", c.http.allowed_origins,
                  "Browser origins (https://app.example.com, or *) whose pages may call the API (CORS; "
                  "repeatable or comma-separated; default: none, same origin only)")
      ->delimiter(',');
  cmd->add_option("--served-model-name", c.served_model_name,
                  "Model id in the API (default: the model directory's name, or the GGUF file's without "
                  ".gguf)");
  cmd->add_option(
      "--lora", f->lora,
      "NAME=DIR: serve the LoRA adapter in DIR (a PEFT adapter directory) as model NAME beside the "
      "model itself; requests of every adapter share each step (repeatable)");
  cmd->add_option("--chat-template", c.chat_template_file,
                  "Jinja chat template file to use instead of the tokenizer's (e.g. one that renders tools)");
  add_device_flag(*cmd, c.device);
  add_no_mmap_flag(*cmd, c.host_weights);
  cmd->add_option("--context", c.engine.context,
                  "Longest sequence, prompt + completion (default: the model's)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--kv-cache-memory", c.engine.kv_cache_bytes,
                  "KV cache size in bytes (default: --kv-cache-fraction of the device's free memory)");
  cmd->add_option("--kv-cache-fraction", c.kv_cache_fraction,
                  "Share of the device's free memory for the KV cache")
      ->capture_default_str();
  cmd->add_option("--block-size", c.engine.block_size, "Tokens per KV cache block (a power of two)")
      ->capture_default_str();
  cmd->add_option("--max-batch-tokens", c.engine.max_batch_tokens,
                  "Tokens per engine step (decodes + prefill chunks)")
      ->capture_default_str();
  cmd->add_option("--max-prefill-with-decodes", c.engine.max_prefill_with_decodes,
                  "Prompt tokens a step takes while streams are decoding: lower keeps the gaps between "
                  "tokens short, higher takes new prompts in faster")
      ->capture_default_str();
  cmd->add_option("--max-running", c.engine.max_running, "Sequences in the running batch")
      ->capture_default_str();
  cmd->add_option("--max-waiting", c.engine.max_waiting, "Queued requests before answering 429")
      ->capture_default_str();
  cmd->add_flag("--no-prefix-caching", f->no_prefix_caching, "Do not share KV blocks between prompts");
  cmd->add_option("--speculative", f->speculative,
                  "Speculative decoding: ngram[:N] guesses up to N (default 4) tokens per step from earlier "
                  "text (prompt lookup), draft:MODEL[:N] with a smaller model that has the same tokenizer; "
                  "the output stays what it would be without");
  cmd->add_option("--speculative-rows", c.engine.speculative_rows,
                  "Guesses join a step only while its decode rows, guesses included, stay within this many "
                  "(a step costs about the same up to a few rows: 4 on the CPU; raise it on a GPU)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--max-n", c.limits.max_n, "Largest n (choices per prompt)")->capture_default_str();
  cmd->add_flag("--clamp-max-tokens", c.limits.clamp_max_tokens,
                "Cut a max_tokens larger than the context leaves to what it leaves (default: answer 400, as "
                "OpenAI does)");
  cmd->add_option("--max-body", c.http.max_body_bytes, "Largest request body in bytes (413 above)")
      ->capture_default_str();
  cmd->add_option("--request-timeout", f->request_timeout, "Seconds a generation request may run")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--read-timeout", f->read_timeout, "Seconds a client may stall while sending a request")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--receive-timeout", f->receive_timeout,
                  "Seconds a client may take to send a whole request, head and body (slow clients are cut)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--http-threads", c.http.threads, "Connections served at once")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--shutdown-grace", f->shutdown_grace,
                  "Seconds in-flight requests get to finish on SIGTERM")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->callback([f] { run_serve(*f); });
}

}  // namespace tokenmill::cli
