// Structured outputs: the grammar a request's generated text must follow, from OpenAI's
// `response_format` — {"type": "text"} (free text), {"type": "json_object"} (any JSON object),
// {"type": "json_schema", "json_schema": {"name", "schema", "strict"}} (JSON valid against the
// schema; grammar/json_schema_grammar.h says which keywords are supported) — or from
// llama.cpp's `grammar` extension (GBNF text, grammar/grammar.h). Both at once are refused.
// A schema's properties are generated in their order in the request body when `raw_body` is
// given (JSON objects parsed as nlohmann::json sort their keys).
#pragma once

#include <memory>
#include <string_view>

#include <nlohmann/json.hpp>

#include "grammar/constrained_grammar.h"
#include "serve/openai_request.h"

namespace tokenmill {

// The compiled grammar, or nullptr for free text. Throws ApiException 400 naming the field
// (an unsupported schema keyword, a GBNF syntax error, a server without grammars).
std::shared_ptr<const ConstrainedGrammar> read_output_grammar(const nlohmann::json& body,
                                                              std::string_view raw_body,
                                                              const ServedModel& model);

}  // namespace tokenmill
