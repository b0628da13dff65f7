// chat: an interactive conversation through the model's chat template. Reads one user
// message per line from standard input; "/reset" starts over, "/exit" (or end of input) quits.
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>

#include <unistd.h>

#include <fmt/format.h>

#include "backend/backend.h"
#include "cli/commands.h"
#include "cli/device_flag.h"
#include "cli/sampling_flags.h"
#include "core/error.h"
#include "runtime/chat_session.h"

namespace tokenmill::cli {

namespace {

struct ChatFlags {
  std::string model_dir;
  std::string device = "auto";
  HostWeights host_weights = HostWeights::Mapped;
  std::string system_prompt;
  int64_t max_new_tokens = 512;
  SamplingFlags sampling;
};

void run_chat(const ChatFlags& f) {
  const TextModel m = TextModel::load(f.model_dir);
  const auto backend = open_device(f.device, *m.model, f.host_weights);
  Transformer transformer(*m.model, *backend);
  ChatOptions options;
  options.system_prompt = f.system_prompt;
  options.max_new_tokens = f.max_new_tokens;
  options.sampling = resolve_sampling(f.sampling, m.model->config);
  options.sampling.vocab_limit = m.sampling_vocab_limit();
  ChatSession session(m, transformer, options);

  const bool interactive = isatty(STDIN_FILENO) != 0;
  if (interactive)
    fmt::print(stderr, "chat with {} (seed {}); /reset starts over, /exit quits\n", f.model_dir,
               options.sampling.seed);
  std::string line;
  while (true) {
    if (interactive) fmt::print("> ");
    std::fflush(stdout);
    if (!std::getline(std::cin, line) || line == "/exit") break;
    if (line == "/reset") {
      session.reset();
      continue;
    }
    if (line.empty()) continue;
    try {
      session.reply(line, [](std::string_view text) {
        fmt::print("{}", text);
        std::fflush(stdout);
      });
      fmt::print("\n");
    } catch (const Error& e) {
      fmt::print(stderr, "error: {}\n", e.what());  // the conversation goes on
    }
  }
}

}  // namespace

void add_chat_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("chat", "Talk with a model through its chat template");
  auto f = std::make_shared<ChatFlags>();
  cmd->add_option("-m,--model", f->model_dir,
                  "Model directory or GGUF file with a tokenizer and a chat template")
      ->required();
  cmd->add_option("--system", f->system_prompt, "System prompt");
  cmd->add_option("-n,--max-tokens", f->max_new_tokens, "Most tokens per reply (default 512)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 30));
  add_sampling_flags(*cmd, f->sampling);
  add_device_flag(*cmd, f->device);
  add_no_mmap_flag(*cmd, f->host_weights);
  cmd->callback([f] { run_chat(*f); });
}

}  // namespace tokenmill::cli
