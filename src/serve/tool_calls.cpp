#include "serve/tool_calls.h"

#include <algorithm>
#include <cctype>
#include <set>

#include "core/error.h"
#include "grammar/json_schema_grammar.h"
#include "serve/api_error.h"
#include "serve/request_fields.h"

namespace tokenmill {

namespace {

using nlohmann::json;
using nlohmann::ordered_json;

constexpr std::string_view kOpen = "<tool_call>";
constexpr std::string_view kClose = "</tool_call>";
constexpr std::string_view kPythonTag = "<|python_tag|>";  // Llama 3
constexpr std::string_view kMistralTag = "[TOOL_CALLS]";
constexpr size_t kMaxTools = 128;
constexpr size_t kMaxParallelCalls = 16;

bool valid_function_name(const std::string& name) {
  return !name.empty() && name.size() <= 64 && std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_' || c == '-';
  });
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front())) != 0) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back())) != 0) s.remove_suffix(1);
  return s;
}

// The key a format writes the arguments under.
const char* arguments_key(ToolFormat format) {
  return format == ToolFormat::Llama3 ? "parameters" : "arguments";
}

// The schema one call of `name` must follow: {"name": name, "<arguments key>": parameters}.
ordered_json call_schema(const std::string& name, const ordered_json& parameters, ToolFormat format) {
  const char* key = arguments_key(format);
  ordered_json properties = ordered_json::object();
  properties["name"] = {{"const", name}};
  properties[key] = parameters.is_null() ? ordered_json{{"type", "object"}} : parameters;
  return {{"type", "object"},
          {"properties", properties},
          {"required", {"name", key}},
          {"additionalProperties", false}};
}

// The tool-call grammar for Required (one call or more) and Named (one call of that function).
void add_grammar(ToolRequest& request, const std::vector<std::pair<std::string, ordered_json>>& functions) {
  ordered_json schema;
  if (request.choice == ToolChoice::Named) {
    for (const auto& [name, parameters] : functions)
      if (name == request.named) schema = call_schema(name, parameters, request.format);
  } else {
    schema = {{"anyOf", ordered_json::array()}};
    for (const auto& [name, parameters] : functions)
      schema["anyOf"].push_back(call_schema(name, parameters, request.format));
  }
  // `root` is one call's JSON object; each format wraps one call or several.
  const size_t more = kMaxParallelCalls - 1;
  std::string wrappers;
  switch (request.format) {
    case ToolFormat::Hermes:
      wrappers = fmt::format(
          "tool-call ::= \"<tool_call>\\n\" root \"\\n</tool_call>\"\n"
          "tool-calls ::= tool-call (\"\\n\" tool-call){{0,{}}}\n",
          more);
      break;
    case ToolFormat::Llama3:
      wrappers = "tool-call ::= root\ntool-calls ::= root\n";
      break;  // one call a turn
    case ToolFormat::Mistral:
      wrappers = fmt::format(
          "tool-call ::= \"[\" root \"]\"\n"
          "tool-calls ::= \"[\" root (\",\" \" \"? root){{0,{}}} \"]\"\n",
          more);
      break;
  }
  request.gbnf = json_schema_to_gbnf(schema) + "\n" + wrappers;
  const bool one = request.choice == ToolChoice::Named || !request.parallel;
  request.gbnf_root = one ? "tool-call" : "tool-calls";
}

// The call in a <tool_call> block's body, if it is one.
std::optional<ToolCall> parse_call(std::string_view body) {
  const ordered_json call = ordered_json::parse(trim(body), nullptr, /*allow_exceptions=*/false);
  if (call.is_discarded() || !call.is_object() || !call.contains("name") || !call["name"].is_string())
    return std::nullopt;
  std::string arguments = "{}";
  if (const auto found = call.find("arguments"); found != call.end() && !found->is_null())
    arguments = found->is_string() ? found->get<std::string>() : found->dump();
  return ToolCall{call["name"].get<std::string>(), std::move(arguments)};
}

// Llama 3 and Mistral: the whole answer is the calls, or it is content.
ToolCallSplit split_whole_answer(std::string_view text, ToolFormat format) {
  std::string_view body = trim(text);
  const std::string_view tag = format == ToolFormat::Llama3 ? kPythonTag : kMistralTag;
  if (body.starts_with(tag)) body = trim(body.substr(tag.size()));
  const ordered_json parsed = ordered_json::parse(body, nullptr, /*allow_exceptions=*/false);
  const bool one_call = format == ToolFormat::Llama3 && parsed.is_object();
  const bool call_list = format == ToolFormat::Mistral && parsed.is_array() && !parsed.empty();
  ToolCallSplit out;
  out.content = trim(text);
  if (!one_call && !call_list) return out;
  std::vector<ToolCall> calls;
  for (ordered_json call : one_call ? ordered_json::array({parsed}) : parsed) {
    // parse_call reads "arguments"; Llama 3 writes "parameters".
    if (call.is_object() && call.contains("parameters") && !call.contains("arguments"))
      call["arguments"] = call["parameters"];
    std::optional<ToolCall> parsed_call = call.is_object() ? parse_call(call.dump()) : std::nullopt;
    if (!parsed_call) return out;  // not all calls: the answer is content
    calls.push_back(std::move(*parsed_call));
  }
  out.content.clear();
  out.calls = std::move(calls);
  return out;
}

}  // namespace

ToolFormat detect_tool_format(std::string_view template_source) {
  if (template_source.find(kMistralTag) != std::string_view::npos) return ToolFormat::Mistral;
  if (template_source.find(kPythonTag) != std::string_view::npos ||
      template_source.find("\"parameters\"") != std::string_view::npos)
    return ToolFormat::Llama3;
  return ToolFormat::Hermes;
}

std::optional<ToolRequest> read_tools(const json& body, std::string_view raw_body, ToolFormat format) {
  const json* tools = field(body, "tools");
  const json* choice = field(body, "tool_choice");
  if (tools == nullptr) {
    if (choice != nullptr && *choice != "none" && *choice != "auto")
      fail_request("tool_choice", "Invalid 'tool_choice': it needs 'tools'.");
    return std::nullopt;
  }
  if (!tools->is_array() || tools->empty() || tools->size() > kMaxTools)
    fail_request("tools", "Invalid 'tools': expected a non-empty array of at most {} tools.", kMaxTools);
  // The parameters in their written order, when the raw body parses (it always does when
  // `body` came from it).
  const ordered_json ordered = ordered_json::parse(raw_body, nullptr, /*allow_exceptions=*/false);
  ToolRequest request;
  request.tools =
      !ordered.is_discarded() && ordered.contains("tools") ? ordered["tools"] : ordered_json(*tools);
  request.format = format;
  std::vector<std::pair<std::string, ordered_json>> functions;
  std::set<std::string> names;
  for (size_t i = 0; i < tools->size(); ++i) {
    const std::string param = fmt::format("tools[{}]", i);
    const json& tool = (*tools)[i];
    if (!tool.is_object() || tool.value("type", "") != "function")
      fail_request(param + ".type",
                   "Invalid '{}': expected {{\"type\": \"function\", \"function\": {{...}}}}.", param);
    const json* function = field(tool, "function");
    if (function == nullptr || !function->is_object())
      fail_request(param + ".function", "Missing required parameter: '{}.function'.", param);
    const json* name = field(*function, "name");
    if (name == nullptr || !name->is_string() || !valid_function_name(name->get<std::string>()))
      fail_request(param + ".function.name",
                   "Invalid '{}.function.name': expected 1 to 64 letters, digits, '_' or '-'.", param);
    if (!names.insert(name->get<std::string>()).second)
      fail_request(param + ".function.name", "Invalid '{}.function.name': '{}' is named twice.", param,
                   name->get<std::string>());
    ordered_json parameters;
    if (const json* p = field(*function, "parameters")) {
      if (!p->is_object())
        fail_request(param + ".function.parameters",
                     "Invalid '{}.function.parameters': expected a JSON Schema object.", param);
      const auto pointer = ordered_json::json_pointer(fmt::format("/tools/{}/function/parameters", i));
      parameters =
          !ordered.is_discarded() && ordered.contains(pointer) ? ordered.at(pointer) : ordered_json(*p);
      try {
        json_schema_to_gbnf(parameters);
      } catch (const Error& e) {
        fail_request(param + ".function.parameters", "Invalid '{}.function.parameters': {}", param, e.what());
      }
    }
    functions.emplace_back(name->get<std::string>(), std::move(parameters));
  }
  if (choice == nullptr || *choice == "auto") {
    request.choice = ToolChoice::Auto;
  } else if (*choice == "none") {
    request.choice = ToolChoice::None;
  } else if (*choice == "required") {
    request.choice = ToolChoice::Required;
  } else {
    const json* function = choice->is_object() ? field(*choice, "function") : nullptr;
    const json* name = function != nullptr && function->is_object() ? field(*function, "name") : nullptr;
    if (name == nullptr || !name->is_string() || choice->value("type", "") != "function")
      fail_request("tool_choice",
                   "Invalid 'tool_choice': expected 'none', 'auto', 'required' or {{\"type\": \"function\", "
                   "\"function\": {{\"name\": ...}}}}.");
    if (!names.contains(name->get<std::string>()))
      fail_request("tool_choice", "Invalid 'tool_choice': no tool is named '{}'.", name->get<std::string>());
    request.choice = ToolChoice::Named;
    request.named = name->get<std::string>();
  }
  if (const json* parallel = field(body, "parallel_tool_calls")) {
    if (!parallel->is_boolean())
      fail_request("parallel_tool_calls", "Invalid 'parallel_tool_calls': expected a boolean.");
    request.parallel = parallel->get<bool>();
  }
  if (request.choice == ToolChoice::Required || request.choice == ToolChoice::Named)
    add_grammar(request, functions);
  return request;
}

ToolCallSplit split_tool_calls(std::string_view text, ToolFormat format) {
  if (format != ToolFormat::Hermes) return split_whole_answer(text, format);
  ToolCallSplit out;
  std::string content;
  for (size_t pos = 0;;) {
    const size_t start = text.find(kOpen, pos);
    const size_t end = start == std::string_view::npos ? start : text.find(kClose, start + kOpen.size());
    if (end == std::string_view::npos) {
      content += text.substr(pos);
      break;
    }
    const std::optional<ToolCall> call =
        parse_call(text.substr(start + kOpen.size(), end - start - kOpen.size()));
    const size_t after = end + kClose.size();
    if (call) {
      content += text.substr(pos, start - pos);
      out.calls.push_back(*call);
    } else {
      content += text.substr(pos, after - pos);
    }
    pos = after;
  }
  out.content = trim(content);
  return out;
}

ToolCallSplit ToolCallStream::push(std::string_view piece) {
  pending_ += piece;
  if (format_ == ToolFormat::Hermes) return push_hermes();
  ToolCallSplit out;
  if (!streaming_content_) {
    // Undecided while the answer so far is blank or could still begin as calls do.
    const std::string_view start = trim(pending_);
    const std::string_view tag = format_ == ToolFormat::Llama3 ? kPythonTag : kMistralTag;
    const char opening = format_ == ToolFormat::Llama3 ? '{' : '[';
    const bool may_be_calls =
        start.empty() || start.front() == opening || tag.starts_with(start) || start.starts_with(tag);
    if (may_be_calls) return out;
    streaming_content_ = true;
  }
  out.content = std::move(pending_);
  pending_.clear();
  return out;
}

ToolCallSplit ToolCallStream::push_hermes() {
  ToolCallSplit out;
  for (;;) {
    const size_t start = pending_.find(kOpen);
    if (start == std::string::npos) {
      // Keep what could be the start of a tag.
      size_t keep = std::min(pending_.size(), kOpen.size() - 1);
      while (keep > 0 && !std::string_view(pending_).ends_with(kOpen.substr(0, keep))) --keep;
      out.content += pending_.substr(0, pending_.size() - keep);
      pending_.erase(0, pending_.size() - keep);
      break;
    }
    const size_t end = pending_.find(kClose, start + kOpen.size());
    if (end == std::string::npos) {  // an open call: the text before it goes out
      out.content += pending_.substr(0, start);
      pending_.erase(0, start);
      break;
    }
    const size_t after = end + kClose.size();
    ToolCallSplit block = split_tool_calls(std::string_view(pending_).substr(0, after));
    if (block.calls.empty()) {
      out.content += pending_.substr(0, after);
    } else {
      out.content += pending_.substr(0, start);
      out.calls.insert(out.calls.end(), block.calls.begin(), block.calls.end());
    }
    pending_.erase(0, after);
  }
  return out;
}

ToolCallSplit ToolCallStream::finish() {
  ToolCallSplit out;
  if (format_ != ToolFormat::Hermes && !streaming_content_)
    out = split_tool_calls(pending_, format_);
  else
    out.content = std::move(pending_);
  pending_.clear();
  return out;
}

}  // namespace tokenmill
