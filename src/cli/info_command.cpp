#include <string>

#include <fmt/format.h>

#include "cli/commands.h"
#include "model/model_info.h"

namespace tokenmill::cli {

void add_info_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("info", "Describe a model: architecture, parameters, memory");
  auto model_dir = std::make_shared<std::string>();
  auto json = std::make_shared<bool>(false);
  cmd->add_option("-m,--model", *model_dir, "Model directory (config.json + *.safetensors) or GGUF file")
      ->required();
  cmd->add_flag("--json", *json, "Print one JSON object");
  cmd->callback([model_dir, json] {
    const ModelInfo info = describe(*Model::load(*model_dir));
    fmt::print("{}", *json ? to_json(info).dump(2) + "\n" : to_text(info));
  });
}

}  // namespace tokenmill::cli
