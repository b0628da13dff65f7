#include "runtime/text_model.h"

#include <algorithm>

#include "core/error.h"

namespace tokenmill {

TextModel TextModel::load(const std::filesystem::path& dir) {
  TextModel m;
  m.model = Model::load(dir);
  m.eos_token_ids = m.model->config.eos_token_ids;
  if (std::filesystem::exists(dir / "tokenizer.json")) {
    m.tokenizer = Tokenizer::from_model_dir(dir);
    if (m.tokenizer->vocab_size() > m.model->config.vocab_size)
      fail("{}: the tokenizer has {} tokens but the model only {} embedding rows", dir.string(),
           m.tokenizer->vocab_size(), m.model->config.vocab_size);
    for (int32_t id : m.tokenizer->eos_ids())
      if (std::find(m.eos_token_ids.begin(), m.eos_token_ids.end(), id) == m.eos_token_ids.end())
        m.eos_token_ids.push_back(id);
  }
  return m;
}

const Tokenizer& TextModel::require_tokenizer(std::string_view what) const {
  if (!tokenizer) fail("{} has no tokenizer.json: {} needs one", model->dir.string(), what);
  return *tokenizer;
}

}  // namespace tokenmill
