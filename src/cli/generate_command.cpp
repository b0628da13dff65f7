#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "backend/backend.h"
#include "cli/commands.h"
#include "cli/device_flag.h"
#include "cli/sampling_flags.h"
#include "core/error.h"
#include "runtime/generator.h"
#include "runtime/text_model.h"
#include "tokenizer/streaming_decoder.h"

namespace tokenmill::cli {

namespace {

struct GenerateFlags {
  std::string model_dir;
  std::string device = "auto";
  HostWeights host_weights = HostWeights::Mapped;
  std::string prompt_text;
  std::vector<int32_t> prompt_ids;
  int64_t max_new_tokens = 64;
  SamplingFlags sampling;
  bool ignore_eos = false;
  bool parse_special = false;
  bool json = false;
  bool warmup = false;
};

const char* finish_name(GenerateFinish r) {
  switch (r) {
    case GenerateFinish::Eos: return "stop";
    case GenerateFinish::Length: return "length";
    case GenerateFinish::Context: return "context";
  }
  return "?";
}

std::vector<int32_t> prompt_of(const GenerateFlags& f, const TextModel& m) {
  if (f.prompt_ids.empty())
    return m.require_tokenizer("a text prompt (-p)")
        .encode(f.prompt_text, {.parse_special = f.parse_special});
  for (int32_t id : f.prompt_ids)
    if (id < 0 || id >= m.model->config.vocab_size)
      fail("--prompt-ids: token id {} is outside the vocabulary [0, {})", id, m.model->config.vocab_size);
  return f.prompt_ids;
}

void run_generate(const GenerateFlags& f) {
  const TextModel m = TextModel::load(f.model_dir);
  const auto backend = open_device(f.device, *m.model, f.host_weights);
  GenerateRequest request;
  request.prompt = prompt_of(f, m);
  // The KV cache holds what this one request can reach (capped at the model's context), not
  // the whole context, and is committed before the prefill rather than faulted in during it.
  Transformer transformer(*m.model, *backend, static_cast<int64_t>(request.prompt.size()) + f.max_new_tokens);
  transformer.commit_cache();

  request.max_new_tokens = f.max_new_tokens;
  request.eos_token_ids = m.eos_token_ids;
  request.ignore_eos = f.ignore_eos;
  request.sampling = resolve_sampling(f.sampling, m.model->config);
  request.sampling.vocab_limit = m.sampling_vocab_limit();

  if (f.warmup) {  // the prompt once, untimed and discarded: buffers and caches as a server's
    GenerateRequest warm = request;
    warm.max_new_tokens = std::min<int64_t>(request.max_new_tokens, 2);
    generate(transformer, warm, nullptr);
    transformer.reset();  // else the timed run would reuse the cached prompt
  }

  // Text streams out as it completes; without a tokenizer the ids do.
  std::unique_ptr<StreamingDecoder> stream;
  if (m.tokenizer) stream = std::make_unique<StreamingDecoder>(*m.tokenizer);
  const GenerateResult result = generate(transformer, request, [&](int32_t token) {
    if (!f.json) {
      fmt::print("{}", stream ? stream->push(token) : fmt::format("{} ", token));
      std::fflush(stdout);
    }
    return true;
  });
  if (f.json) {
    nlohmann::json out = {{"prompt_ids", request.prompt},
                          {"ids", result.ids},
                          {"finish_reason", finish_name(result.finish)},
                          {"seed", request.sampling.seed},
                          {"prompt_tokens_per_s", result.prompt_tokens_per_second()},
                          {"decode_tokens_per_s", result.decode_tokens_per_second()}};
    if (m.tokenizer) out["text"] = m.tokenizer->decode(result.ids);
    fmt::print("{}\n", out.dump());
    return;
  }
  fmt::print("{}\n", stream ? stream->flush() : "");
  fmt::print(stderr,
             "[{} prompt tokens at {:.1f} tok/s, {} generated at {:.1f} tok/s, finish: {}, seed {}]\n",
             result.prompt_tokens, result.prompt_tokens_per_second(), result.ids.size(),
             result.decode_tokens_per_second(), finish_name(result.finish), request.sampling.seed);
}

}  // namespace

void add_generate_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("generate", "Continue a prompt with a model");
  auto f = std::make_shared<GenerateFlags>();
  cmd->add_option("-m,--model", f->model_dir,
                  "Model directory (config.json + *.safetensors [+ tokenizer.json]) or GGUF file")
      ->required();
  auto* text = cmd->add_option("-p,--prompt", f->prompt_text, "Prompt text (needs the model's tokenizer)");
  auto* ids = cmd->add_option("--prompt-ids", f->prompt_ids, "Prompt as token ids: 1,2,3")->delimiter(',');
  text->excludes(ids);
  cmd->add_option("-n,--max-tokens", f->max_new_tokens, "Tokens to generate (default 64)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 30));
  add_sampling_flags(*cmd, f->sampling);
  add_device_flag(*cmd, f->device);
  add_no_mmap_flag(*cmd, f->host_weights);
  cmd->add_flag("--ignore-eos", f->ignore_eos, "Do not stop at end-of-sequence tokens");
  cmd->add_flag("--parse-special", f->parse_special, "Recognise special tokens written in the prompt text");
  cmd->add_flag("--json", f->json, "Print one JSON object");
  cmd->add_flag("--warmup", f->warmup,
                "Before the timed run, run the prompt once untimed (memory and caches warm, as in a "
                "long-running server; for benchmarks)");
  cmd->callback([f, text, ids] {
    if (text->count() == 0 && ids->count() == 0)
      fail("generate needs a prompt: -p TEXT or --prompt-ids 1,2,3");
    run_generate(*f);
  });
}

}  // namespace tokenmill::cli
