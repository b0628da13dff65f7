#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "backend/backend.h"
#include "cli/commands.h"
#include "core/error.h"
#include "runtime/generator.h"

namespace tokenmill::cli {

namespace {

struct GenerateFlags {
  std::string model_dir;
  std::string prompt_text;
  std::vector<int32_t> prompt_ids;
  int64_t max_new_tokens = 64;
  std::optional<float> temperature, top_p, min_p, repetition_penalty;
  std::optional<int32_t> top_k;
  std::optional<uint64_t> seed;
  bool ignore_eos = false;
  bool json = false;
};

const char* finish_name(FinishReason r) {
  switch (r) {
    case FinishReason::Eos: return "stop";
    case FinishReason::Length: return "length";
    case FinishReason::Context: return "context";
  }
  return "?";
}

void run_generate(const GenerateFlags& f) {
  if (!f.prompt_text.empty())
    fail(
        "text prompts need a tokenizer, which this build cannot load yet: pass token ids with --prompt-ids "
        "1,2,3");
  const auto model = Model::load(f.model_dir);
  const auto backend = make_cpu_backend();
  Transformer transformer(*model, *backend);

  GenerateRequest request;
  request.prompt = f.prompt_ids;
  for (int32_t id : request.prompt)
    if (id < 0 || id >= model->config.vocab_size)
      fail("--prompt-ids: token id {} is outside the vocabulary [0, {})", id, model->config.vocab_size);
  request.max_new_tokens = f.max_new_tokens;
  request.eos_token_ids = model->config.eos_token_ids;
  request.ignore_eos = f.ignore_eos;
  SamplingParams& s = request.sampling;
  s = default_sampling(model->config);
  if (f.temperature) s.temperature = *f.temperature;
  if (f.top_k) s.top_k = *f.top_k;
  if (f.top_p) s.top_p = *f.top_p;
  if (f.min_p) s.min_p = *f.min_p;
  if (f.repetition_penalty) s.repetition_penalty = *f.repetition_penalty;
  s.seed = f.seed ? *f.seed : std::random_device{}();

  const GenerateResult result = generate(transformer, request, [&](int32_t token) {
    if (!f.json) {
      fmt::print("{} ", token);
      std::fflush(stdout);
    }
    return true;
  });
  if (f.json) {
    const nlohmann::json out = {{"prompt_ids", request.prompt},
                                {"ids", result.ids},
                                {"finish_reason", finish_name(result.finish)},
                                {"seed", s.seed},
                                {"prompt_tokens_per_s", result.prompt_tokens_per_second()},
                                {"decode_tokens_per_s", result.decode_tokens_per_second()}};
    fmt::print("{}\n", out.dump());
  } else {
    fmt::print("\n");
    fmt::print(stderr,
               "[{} prompt tokens at {:.1f} tok/s, {} generated at {:.1f} tok/s, finish: {}, seed {}]\n",
               result.prompt_tokens, result.prompt_tokens_per_second(), result.ids.size(),
               result.decode_tokens_per_second(), finish_name(result.finish), s.seed);
  }
}

}  // namespace

void add_generate_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("generate", "Continue a prompt with a model");
  auto f = std::make_shared<GenerateFlags>();
  cmd->add_option("-m,--model", f->model_dir, "Model directory (config.json + *.safetensors)")->required();
  auto* text = cmd->add_option("-p,--prompt", f->prompt_text, "Prompt text");
  auto* ids = cmd->add_option("--prompt-ids", f->prompt_ids, "Prompt as token ids: 1,2,3")->delimiter(',');
  text->excludes(ids);
  cmd->add_option("-n,--max-tokens", f->max_new_tokens, "Tokens to generate (default 64)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 30));
  cmd->add_option("--temperature", f->temperature, "0 = greedy")->check(CLI::Range(0.0f, 1e6f));
  cmd->add_option("--top-k", f->top_k, "Keep the k most likely tokens (0 = off)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--top-p", f->top_p, "Nucleus sampling threshold in (0, 1]")->check(CLI::Range(0.0f, 1.0f));
  cmd->add_option("--min-p", f->min_p, "Drop tokens below min-p x the top probability")
      ->check(CLI::Range(0.0f, 1.0f));
  cmd->add_option("--repetition-penalty", f->repetition_penalty, "> 1 discourages repeats")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--seed", f->seed, "Sampling seed (default: random, printed)");
  cmd->add_flag("--ignore-eos", f->ignore_eos, "Do not stop at end-of-sequence tokens");
  cmd->add_flag("--json", f->json, "Print one JSON object");
  cmd->callback([f, text, ids] {
    if (text->count() == 0 && ids->count() == 0)
      fail("generate needs a prompt: --prompt-ids 1,2,3 (or -p TEXT)");
    run_generate(*f);
  });
}

}  // namespace tokenmill::cli
