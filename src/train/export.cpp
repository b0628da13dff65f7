#include "train/export.h"

#include "core/error.h"
#include "core/json_file.h"
#include "core/staged_directory.h"
#include "model/hf_export.h"
#include "model/lora.h"
#include "model/model.h"
#include "train/checkpoint.h"
#include "train/dataset_meta.h"
#include "train/lora_export.h"
#include "train/lora_parameters.h"
#include "train/parameters.h"

namespace tokenmill {

DType parse_export_dtype(std::string_view name, std::string_view flag) {
  if (name == "f32") return DType::F32;
  if (name == "bf16") return DType::BF16;
  if (name == "f16") return DType::F16;
  fail("{} must be f32, bf16 or f16, got '{}'", flag, name);
}

LoraExport parse_lora_export(std::string_view name, std::string_view flag) {
  if (name == "merged") return LoraExport::Merged;
  if (name == "adapter") return LoraExport::Adapter;
  fail("{} must be merged or adapter, got '{}'", flag, name);
}

namespace {

// The tokenizer's files, copied beside the model when the source has them (tokenizer.json
// itself is required); chat_template.jinja is where transformers 5 keeps the chat template.
constexpr const char* kTokenizerFiles[] = {"tokenizer.json", "tokenizer_config.json",
                                           "special_tokens_map.json", "chat_template.jinja"};

// The directory holding the tokenizer the run used: the fine-tuned model's, or the one
// that `prepare` recorded for the dataset.
std::filesystem::path tokenizer_dir(const nlohmann::json& options) {
  const std::string from = options.value("from_model", "");
  if (!from.empty()) return from;
  return read_dataset_meta(options.value("data_dir", "")).tokenizer.parent_path();
}

void copy_one(const std::filesystem::path& from, const std::filesystem::path& to) {
  std::error_code ec;
  std::filesystem::copy_file(from, to, std::filesystem::copy_options::overwrite_existing, ec);
  if (ec) fail("{}: cannot copy to {} ({})", from.string(), to.string(), ec.message());
}

void copy_tokenizer_files(const std::filesystem::path& source, const std::filesystem::path& out_dir) {
  for (const char* name : kTokenizerFiles)
    if (std::filesystem::is_regular_file(source / name)) copy_one(source / name, out_dir / name);
}

// The pretrained model a checkpoint started from (a fine-tune's --from, a LoRA run's base),
// or empty for a model trained from scratch.
std::filesystem::path source_model(const CheckpointState& header) {
  if (!header.lora.is_null()) return header.lora.value("base_model", "");
  return header.options.value("from_model", "");
}

// A LoRA checkpoint: the adapter merged into its base model, or as a PEFT adapter.
void export_lora(const std::filesystem::path& checkpoint, const CheckpointState& header,
                 const ModelConfig& config, const std::filesystem::path& out_dir, DType dtype,
                 LoraExport form) {
  const std::string name = checkpoint.string();
  LoraConfig lora;
  std::string base_dir;
  try {
    lora.rank = header.lora.at("rank").get<int64_t>();
    lora.alpha = header.lora.at("alpha").get<double>();
    lora.targets = parse_lora_targets(header.lora.at("targets").get<std::string>());
    base_dir = header.lora.at("base_model").get<std::string>();
  } catch (const nlohmann::json::exception& e) {
    fail("{}: damaged LoRA description in the checkpoint header ({})", name, e.what());
  }
  LoraParameters adapter(config, lora);
  load_checkpoint(checkpoint, adapter);
  if (form == LoraExport::Adapter) {
    export_peft_adapter(config, lora, adapter.weights(), base_dir, dtype, out_dir);
    return;
  }
  if (read_json_file(std::filesystem::path(base_dir) / "config.json") != header.model_config)
    fail("{}: the base model {} has changed since training (its config.json differs); export --lora adapter",
         name, base_dir);
  const std::unique_ptr<Model> base = Model::load(base_dir);
  const ModelWeights merged = merge_lora(config, base->weights, adapter.weights());
  export_hf_model(config, header.model_config, merged, dtype, out_dir);
}

}  // namespace

std::filesystem::path run_checkpoint(const std::filesystem::path& run_dir,
                                     const SkippedCheckpoint& on_skipped) {
  const std::filesystem::path latest = newest_valid_checkpoint(run_dir / "checkpoints", on_skipped);
  if (latest.empty())
    fail("{}: no checkpoint that verifies in {}", run_dir.string(), (run_dir / "checkpoints").string());
  return latest;
}

void export_checkpoint(const std::filesystem::path& checkpoint, const std::filesystem::path& out_dir,
                       DType dtype, LoraExport lora) {
  const CheckpointState header = read_checkpoint_state(checkpoint);
  const ModelConfig config = parse_model_config(header.model_config, checkpoint.string() + " (model_config)");
  if (header.lora.is_null() && lora == LoraExport::Adapter)
    fail("{}: --lora adapter: this checkpoint is a fully trained model, not a LoRA adapter",
         checkpoint.string());
  // Everything the export reads is found before anything is written.
  const std::filesystem::path tokenizer = tokenizer_dir(header.options);
  if (!std::filesystem::is_regular_file(tokenizer / "tokenizer.json"))
    fail("{}: no tokenizer.json to export with the model (the run's tokenizer moved?); nothing was written",
         tokenizer.string());
  const std::filesystem::path source = source_model(header);
  StagedDirectory staged(out_dir);
  if (!header.lora.is_null()) {
    export_lora(checkpoint, header, config, staged.path(), dtype, lora);
  } else {
    ParameterSet params(config);
    load_checkpoint(checkpoint, params);
    export_hf_model(config, header.model_config, params.weights(), dtype, staged.path());
  }
  // The source's generation settings (eos lists, temperature, top_p) rather than those
  // rebuilt from config.json; a PEFT adapter has none of its own.
  if (lora != LoraExport::Adapter && !source.empty() &&
      std::filesystem::is_regular_file(source / "generation_config.json"))
    copy_one(source / "generation_config.json", staged.path() / "generation_config.json");
  copy_tokenizer_files(tokenizer, staged.path());
  staged.publish();
}

}  // namespace tokenmill
