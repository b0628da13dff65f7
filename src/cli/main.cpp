// tokenmill: train, fine-tune and serve language models. This file only wires the
// subcommands and turns errors into "error: ..." and a non-zero exit status.
#include <cstdio>
#include <exception>
#include <string>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "cli/commands.h"
#include "core/error.h"
#include "core/parallel.h"

int main(int argc, char** argv) {
  CLI::App app{"tokenmill: a native engine to train, fine-tune and serve language models"};
  app.require_subcommand(1);
  int threads = 0;
  app.add_option("-t,--threads", threads,
                 "CPU threads (default: all cores or OMP_NUM_THREADS, fewer while other processes keep some "
                 "busy; a count given here stays fixed)")
      ->check(CLI::NonNegativeNumber);
  app.parse_complete_callback([&] {
    tokenmill::set_thread_count(threads);
    tokenmill::set_thread_count_follows_load(threads == 0);
  });
  tokenmill::cli::add_info_command(app);
  tokenmill::cli::add_generate_command(app);
  tokenmill::cli::add_chat_command(app);
  tokenmill::cli::add_tokenize_commands(app);
  tokenmill::cli::add_convert_command(app);
  tokenmill::cli::add_quantize_command(app);
  tokenmill::cli::add_prepare_command(app);
  tokenmill::cli::add_train_command(app);
  tokenmill::cli::add_export_command(app);
  tokenmill::cli::add_cost_command(app);
  tokenmill::cli::add_bench_command(app);
  tokenmill::cli::add_doctor_command(app);
  tokenmill::cli::add_serve_command(app);
  if (argc >= 2 && argv[1][0] != '-') {
    std::string known;
    bool found = false;
    for (const CLI::App* sub : app.get_subcommands({})) {
      known += (known.empty() ? "" : ", ") + sub->get_name();
      found = found || sub->get_name() == argv[1];
    }
    if (!found) {
      fmt::print(stderr, "error: unknown command '{}' (commands: {})\n", argv[1], known);
      return 1;
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const tokenmill::Error& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    fmt::print(stderr, "error: internal failure: {}\n", e.what());
    return 2;
  }
  return tokenmill::cli::command_exit_status();
}
