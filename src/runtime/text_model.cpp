#include "runtime/text_model.h"

#include <algorithm>
#include <string>

#include "core/error.h"

namespace tokenmill {

TextModel TextModel::load(const std::filesystem::path& path) {
  TextModel m;
  m.model = Model::load(path);
  m.eos_token_ids = m.model->config.eos_token_ids;
  if (m.model->gguf) {
    // "none" / "no_vocab": a model written without a vocabulary (ids in, ids out).
    const std::string kind = m.model->gguf->find_string("tokenizer.ggml.model").value_or("none");
    if (kind != "none" && kind != "no_vocab") m.tokenizer = Tokenizer::from_gguf(*m.model->gguf);
  } else if (std::filesystem::exists(path / "tokenizer.json")) {
    m.tokenizer = Tokenizer::from_model_dir(path);
  }
  if (m.tokenizer) {
    if (m.tokenizer->vocab_size() > m.model->config.vocab_size)
      fail("{}: the tokenizer has {} tokens but the model only {} embedding rows", path.string(),
           m.tokenizer->vocab_size(), m.model->config.vocab_size);
    for (int32_t id : m.tokenizer->eos_ids())
      if (std::find(m.eos_token_ids.begin(), m.eos_token_ids.end(), id) == m.eos_token_ids.end())
        m.eos_token_ids.push_back(id);
  }
  return m;
}

const Tokenizer& TextModel::require_tokenizer(std::string_view what) const {
  if (!tokenizer)
    fail("{} has no {}: {} needs one", model->path.string(),
         model->gguf ? "tokenizer.ggml.* metadata" : "tokenizer.json", what);
  return *tokenizer;
}

}  // namespace tokenmill
