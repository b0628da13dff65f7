#include "train/export.h"

#include "core/error.h"
#include "core/json_file.h"
#include "model/hf_export.h"
#include "train/checkpoint.h"
#include "train/parameters.h"

namespace tokenmill {

namespace {

// The directory holding the tokenizer the run used: the fine-tuned model's, or the one
// that `prepare` recorded for the dataset.
std::filesystem::path tokenizer_dir(const nlohmann::json& options) {
  const std::string from = options.value("from_model", "");
  if (!from.empty()) return from;
  const std::filesystem::path data = options.value("data_dir", "");
  const nlohmann::json meta = read_json_file(data / "meta.json");
  return std::filesystem::path(meta.at("tokenizer").get<std::string>()).parent_path();
}

}  // namespace

std::filesystem::path run_checkpoint(const std::filesystem::path& run_dir) {
  const std::filesystem::path latest = latest_checkpoint(run_dir / "checkpoints");
  if (latest.empty()) fail("{}: no checkpoint in {}", run_dir.string(), (run_dir / "checkpoints").string());
  return latest;
}

void export_checkpoint(const std::filesystem::path& checkpoint, const std::filesystem::path& out_dir,
                       DType dtype) {
  const CheckpointState header = read_checkpoint_state(checkpoint);
  const ModelConfig config = parse_model_config(header.model_config, checkpoint.string() + " (model_config)");
  ParameterSet params(config);
  load_checkpoint(checkpoint, params);
  export_hf_model(config, header.model_config, params.weights(), dtype, out_dir);
  const std::filesystem::path source = tokenizer_dir(header.options);
  if (!std::filesystem::is_regular_file(source / "tokenizer.json"))
    fail("{}: no tokenizer.json to export with the model (the run's tokenizer moved?)", source.string());
  for (const char* name : {"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"}) {
    if (!std::filesystem::is_regular_file(source / name)) continue;
    std::error_code ec;
    std::filesystem::copy_file(source / name, out_dir / name,
                               std::filesystem::copy_options::overwrite_existing, ec);
    if (ec) fail("{}: cannot copy to {} ({})", (source / name).string(), out_dir.string(), ec.message());
  }
}

}  // namespace tokenmill
