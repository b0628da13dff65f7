#include "serve/structured_output.h"

#include <string>

#include "grammar/json_schema_grammar.h"
#include "serve/api_error.h"
#include "serve/request_fields.h"

namespace tokenmill {

namespace {

using nlohmann::json;

// The schema of a json_schema response format, from the raw body when there is one so that
// its properties keep their order.
std::string schema_grammar(const json& schema, std::string_view raw_body) {
  if (!raw_body.empty()) {
    const auto ordered = nlohmann::ordered_json::parse(raw_body, nullptr, /*allow_exceptions=*/false);
    const auto path = nlohmann::ordered_json::json_pointer("/response_format/json_schema/schema");
    if (!ordered.is_discarded() && ordered.contains(path)) return json_schema_to_gbnf(ordered.at(path));
  }
  return json_schema_to_gbnf(schema);
}

// The GBNF text a request asks for, or "" for free text.
std::string requested_grammar(const json& body, std::string_view raw_body) {
  const json* format = field(body, "response_format");
  const json* grammar = field(body, "grammar");
  if (format && grammar)
    fail_request("grammar", "Invalid 'grammar': give either 'response_format' or 'grammar', not both.");
  if (grammar) {
    if (!grammar->is_string() || grammar->get_ref<const std::string&>().empty())
      fail_request("grammar", "Invalid 'grammar': expected GBNF text (a non-empty string).");
    return grammar->get<std::string>();
  }
  if (!format) return "";
  if (!format->is_object()) fail_request("response_format", "Invalid 'response_format': expected an object.");
  const json* type = field(*format, "type");
  if (!type || !type->is_string())
    fail_request("response_format.type",
                 "Invalid 'response_format.type': expected 'text', 'json_object' or 'json_schema'.");
  const std::string& kind = type->get_ref<const std::string&>();
  if (kind == "text") return "";
  if (kind == "json_object") return json_object_gbnf();
  if (kind != "json_schema")
    fail_request("response_format.type",
                 "Invalid 'response_format.type': '{}' is not one of 'text', 'json_object', 'json_schema'.",
                 kind);
  const json* spec = field(*format, "json_schema");
  if (!spec || !spec->is_object())
    fail_request("response_format.json_schema", "Missing required parameter: 'response_format.json_schema'.");
  const json* schema = field(*spec, "schema");
  if (!schema)
    fail_request("response_format.json_schema.schema",
                 "Missing required parameter: 'response_format.json_schema.schema'.");
  if (!schema->is_object() && !schema->is_boolean())
    fail_request("response_format.json_schema.schema",
                 "Invalid 'response_format.json_schema.schema': expected a JSON Schema object.");
  try {
    return schema_grammar(*schema, raw_body);
  } catch (const ApiException&) {
    throw;
  } catch (const Error& e) {
    fail_request("response_format.json_schema.schema", "Invalid 'response_format.json_schema.schema': {}",
                 e.what());
  }
}

}  // namespace

std::shared_ptr<const ConstrainedGrammar> read_output_grammar(const json& body, std::string_view raw_body,
                                                              const ServedModel& model) {
  const std::string gbnf = requested_grammar(body, raw_body);
  if (gbnf.empty()) return nullptr;
  const char* param = field(body, "grammar") ? "grammar" : "response_format";
  if (!model.grammars) fail_request(param, "Structured outputs are not available on this server.");
  try {
    return model.grammars->get(gbnf);
  } catch (const Error& e) {
    fail_request(param, "Invalid '{}': {}", param, e.what());
  }
}

}  // namespace tokenmill
