// JSON Schema -> GBNF. Converter::visit() turns a schema into a rule body; bodies become named
// rules where they are referenced (properties, items, $ref targets), named after the schema path
// ("root-address-city"; $ref targets after their last pointer token), and the shared rules
// (value, object, string, char, number, integer, ws, formats, ...) are written once at the end,
// only those used. Numeric bounds become digit-by-digit ranges (number_range_grammar.h), patterns
// go through regex_grammar.h and formats take their rules from string_format_grammar.h.
#include "grammar/json_schema_grammar.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "grammar/gbnf_expression.h"
#include "grammar/number_range_grammar.h"
#include "grammar/regex_grammar.h"
#include "grammar/string_format_grammar.h"

namespace tokenmill {
namespace {

using gbnf::alternation;
using gbnf::atom;
using gbnf::Bound;
using gbnf::is_name;
using gbnf::kMaxCount;
using gbnf::kMaxMagnitude;
using gbnf::kUnbounded;
using gbnf::literal;
using gbnf::repeat;
using gbnf::seq;
using gbnf::SharedRule;

constexpr int kMaxDepth = 64;  // nested schemas: bounds the recursion

// The shared rules, each with the shared rules it uses: the JSON values, then the formats.
const std::vector<SharedRule>& primitives() {
  static const std::vector<SharedRule> list = [] {
    std::vector<SharedRule> rules = {
        {"value",
         "object | array | string | number | boolean | null",
         {"object", "array", "string", "number", "boolean", "null"}},
        {"object", R"("{" ws ( member ( "," ws member )* ws )? "}")", {"ws", "member"}},
        {"member", R"(string ":" ws value)", {"string", "ws", "value"}},
        {"array", R"("[" ws ( value ( "," ws value )* ws )? "]")", {"ws", "value"}},
        {"string", R"("\"" char* "\"")", {"char"}},
        {"char", R"([^"\\\x00-\x1F] | "\\" ( ["\\/bfnrt] | "u" [0-9a-fA-F]{4} ))", {}},
        {"number", R"(integer ( "." [0-9]{1,16} )? ( [eE] [-+]? [0-9]{1,3} )?)", {"integer"}},
        {"integer", R"("-"? ( "0" | [1-9] [0-9]{0,15} ))", {}},
        {"boolean", R"("true" | "false")", {}},
        {"null", R"("null")", {}},
        {"ws", R"(" "?)", {}},
    };
    const std::vector<SharedRule>& formats = gbnf::string_format_rules();
    rules.insert(rules.end(), formats.begin(), formats.end());
    return rules;
  }();
  return list;
}

// clang-format off
const std::set<std::string, std::less<>> kAnnotations = {
    "$schema", "$id", "$comment", "$defs", "definitions", "title", "description", "default",
    "examples", "deprecated", "readOnly", "writeOnly"};
const std::set<std::string, std::less<>> kSupported = {
    "type", "enum", "const", "anyOf", "oneOf", "allOf", "$ref",
    "minLength", "maxLength", "format", "pattern",
    "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
    "properties", "required", "additionalProperties",
    "items", "prefixItems", "additionalItems", "minItems", "maxItems", "uniqueItems"};
// clang-format on

template <class Json>
class Converter {
 public:
  explicit Converter(const Json& root) : root_(root) {
    for (const SharedRule& p : primitives()) taken_.insert(p.name);
    taken_.insert("root");
    ref_rules_["#"] = "root";
  }

  std::string run() {
    try {
      define("root", [&] { return visit(root_, "#", "root"); });
    } catch (const typename Json::exception& e) {
      fail("JSON schema: {}", e.what());
    }
    std::string out;
    for (const auto& [name, body] : rules_) out += name + " ::= " + body + "\n";
    for (const SharedRule& p : primitives())
      if (used_.count(p.name)) out += std::string(p.name) + " ::= " + p.body + "\n";
    return out;
  }

 private:
  // The name of a shared rule, marked for output with the rules it uses.
  std::string use(const char* name) {
    if (!used_.insert(name).second) return name;
    for (const SharedRule& p : primitives())
      if (p.name == std::string_view(name))
        for (const char* dep : p.uses) use(dep);
    return name;
  }

  // A fresh rule name from a path: [a-zA-Z0-9-] only, numbered if taken.
  std::string fresh_name(std::string_view hint) {
    std::string name;
    for (char c : hint) {
      bool ok = std::isalnum(static_cast<unsigned char>(c));
      if (ok)
        name += c;
      else if (!name.empty() && name.back() != '-')
        name += '-';
    }
    while (!name.empty() && name.back() == '-') name.pop_back();
    if (name.empty()) name = "rule";
    std::string unique = name;
    for (int i = 2; taken_.count(unique); ++i) unique = fmt::format("{}-{}", name, i);
    taken_.insert(unique);
    return unique;
  }

  // Defines `name` as the body `make` returns, listed before the rules that `make` defines.
  template <class Make>
  void define(const std::string& name, Make make) {
    size_t slot = rules_.size();
    rules_.emplace_back(name, "");
    std::string body = make();
    rules_[slot].second = std::move(body);
  }

  // `body` as something to reference: itself when it is a rule name, else a new rule.
  std::string named(std::string_view hint, std::string body) {
    if (is_name(body)) return body;
    std::string name = fresh_name(hint);
    define(name, [&] { return std::move(body); });
    return name;
  }

  static std::string child(const std::string& pointer, std::string_view token) {
    std::string escaped;
    for (char c : token) escaped += c == '~' ? "~0" : c == '/' ? "~1" : std::string(1, c);
    return pointer + "/" + escaped;
  }

  static bool has(const Json& schema, const char* key) { return schema.contains(key); }

  // Refuses keywords other than annotations and `allowed` beside `keyword`.
  static void alone(const Json& schema, const std::string& pointer, const char* keyword,
                    std::initializer_list<std::string_view> allowed = {}) {
    for (const auto& [key, value] : schema.items())
      if (key != keyword && !kAnnotations.count(key) &&
          std::find(allowed.begin(), allowed.end(), key) == allowed.end())
        fail("{}: \"{}\" beside \"{}\" is not supported", pointer, key, keyword);
  }

  std::string visit(const Json& schema, const std::string& pointer, const std::string& hint) {
    if (++depth_ > kMaxDepth) fail("{}: schemas nested deeper than {} are not supported", pointer, kMaxDepth);
    std::string body = visit_schema(schema, pointer, hint);
    --depth_;
    return body;
  }

  std::string visit_schema(const Json& schema, const std::string& pointer, const std::string& hint) {
    if (schema.is_boolean()) {
      if (!schema.template get<bool>()) fail("{}: the schema false accepts no value here", pointer);
      return use("value");
    }
    if (!schema.is_object())
      fail("{}: a schema must be an object or a boolean, not {}", pointer, schema.dump());
    for (const auto& [key, value] : schema.items())
      if (!kAnnotations.count(key) && !kSupported.count(key))
        fail("{}: the keyword \"{}\" is not supported", pointer, key);
    if (has(schema, "$ref")) return ref(schema, pointer);
    if (has(schema, "allOf")) {
      alone(schema, pointer, "allOf");
      const Json& all = schema["allOf"];
      if (!all.is_array() || all.size() != 1)
        fail("{}/allOf: only an allOf with exactly one schema is supported", pointer);
      return visit(all[0], child(child(pointer, "allOf"), "0"), hint);
    }
    for (const char* keyword : {"anyOf", "oneOf"})
      if (has(schema, keyword)) return any_of(schema, keyword, pointer, hint);
    if (has(schema, "const") || has(schema, "enum")) return literals(schema, pointer);
    std::vector<std::string> alternatives;
    for (const std::string& type : types(schema, pointer))
      alternatives.push_back(typed(type, schema, pointer, hint));
    return alternation(alternatives);
  }

  std::string ref(const Json& schema, const std::string& pointer) {
    alone(schema, pointer, "$ref");
    const Json& target = schema["$ref"];
    if (!target.is_string()) fail("{}/$ref: must be a string", pointer);
    std::string to = target.template get<std::string>();
    if (auto it = ref_rules_.find(to); it != ref_rules_.end()) return it->second;
    if (to.empty() || to[0] != '#')
      fail("{}/$ref: \"{}\" is not a local reference (\"#/$defs/...\"); remote schemas are not supported",
           pointer, to);
    const Json* resolved = nullptr;
    try {
      resolved = &root_.at(typename Json::json_pointer(to.substr(1)));
    } catch (const typename Json::exception&) {
      fail("{}/$ref: \"{}\" does not name a schema in this document", pointer, to);
    }
    std::string name = fresh_name(to.substr(to.find_last_of('/') + 1));
    ref_rules_[to] = name;
    define(name, [&] { return visit(*resolved, to, name); });
    return name;
  }

  std::string any_of(const Json& schema, const char* keyword, const std::string& pointer,
                     const std::string& hint) {
    alone(schema, pointer, keyword);
    const Json& list = schema[keyword];
    std::string at = child(pointer, keyword);
    if (!list.is_array() || list.empty()) fail("{}: must be a non-empty array of schemas", at);
    std::vector<std::string> alternatives;
    for (size_t i = 0; i < list.size(); ++i)
      alternatives.push_back(
          atom(visit(list[i], child(at, std::to_string(i)), fmt::format("{}-{}", hint, i))));
    return alternation(alternatives);
  }

  std::vector<std::string> types(const Json& schema, const std::string& pointer) {
    static const std::set<std::string> kTypes = {"string", "number", "integer", "boolean",
                                                 "null",   "object", "array"};
    std::vector<std::string> out;
    if (!has(schema, "type")) {
      auto any = [&](std::initializer_list<const char*> keys) {
        return std::any_of(keys.begin(), keys.end(), [&](const char* k) { return has(schema, k); });
      };
      if (any({"properties", "required", "additionalProperties"})) out.push_back("object");
      if (any({"items", "prefixItems", "additionalItems", "minItems", "maxItems"})) out.push_back("array");
      if (any({"minLength", "maxLength", "format", "pattern"})) out.push_back("string");
      if (any({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"})) out.push_back("number");
      if (out.empty()) out.push_back("any");
      return out;
    }
    const Json& type = schema["type"];
    if (type.is_string())
      out.push_back(type.template get<std::string>());
    else if (type.is_array())
      for (const Json& t : type) out.push_back(t.is_string() ? t.template get<std::string>() : t.dump());
    for (const std::string& t : out)
      if (!kTypes.count(t)) fail("{}/type: unknown type {}", pointer, t);
    if (out.empty()) fail("{}/type: must be a type name or a non-empty array of them", pointer);
    return out;
  }

  std::string typed(const std::string& type, const Json& schema, const std::string& pointer,
                    const std::string& hint) {
    if (type == "string") return string(schema, pointer);
    if (type == "integer") return number(schema, pointer, true);
    if (type == "number") return number(schema, pointer, false);
    if (type == "object") return object(schema, pointer, hint);
    if (type == "array") return array(schema, pointer, hint);
    if (type == "boolean") return use("boolean");
    if (type == "null") return use("null");
    return use("value");
  }

  static bool has_type(const Json& value, const std::string& type) {
    if (type == "integer")
      return value.is_number_integer() ||
             (value.is_number_float() &&
              std::trunc(value.template get<double>()) == value.template get<double>());
    if (type == "number") return value.is_number();
    if (type == "string") return value.is_string();
    if (type == "boolean") return value.is_boolean();
    if (type == "null") return value.is_null();
    if (type == "object") return value.is_object();
    return value.is_array();
  }

  std::string literals(const Json& schema, const std::string& pointer) {
    const char* keyword = has(schema, "const") ? "const" : "enum";
    alone(schema, pointer, keyword, {"type"});
    std::vector<Json> values;
    if (has(schema, "const"))
      values.push_back(schema["const"]);
    else if (schema["enum"].is_array())
      values.assign(schema["enum"].begin(), schema["enum"].end());
    if (values.empty()) fail("{}/enum: must be a non-empty array", pointer);
    std::vector<std::string> allowed =
        has(schema, "type") ? types(schema, pointer) : std::vector<std::string>{};
    std::vector<std::string> alternatives;
    for (const Json& value : values) {
      if (!allowed.empty() && std::none_of(allowed.begin(), allowed.end(),
                                           [&](const std::string& t) { return has_type(value, t); }))
        fail("{}/{}: the value {} is not of the schema's type", pointer, keyword, value.dump());
      alternatives.push_back(literal(value.dump()));
    }
    return alternation(alternatives);
  }

  // A non-negative count keyword, or `fallback` when absent.
  static int64_t count(const Json& schema, const char* keyword, const std::string& pointer,
                       int64_t fallback) {
    if (!has(schema, keyword)) return fallback;
    const Json& value = schema[keyword];
    if (!value.is_number_integer() || value.template get<int64_t>() < 0)
      fail("{}/{}: must be a non-negative integer, not {}", pointer, keyword, value.dump());
    if (value.template get<int64_t>() > kMaxCount)
      fail("{}/{}: {} is over the supported {}", pointer, keyword, value.dump(), kMaxCount);
    return value.template get<int64_t>();
  }

  static void check_range(int64_t min, int64_t max, const std::string& pointer, const char* lo,
                          const char* hi) {
    if (max != kUnbounded && min > max) fail("{}: {} {} exceeds {} {}", pointer, lo, min, hi, max);
  }

  std::string string(const Json& schema, const std::string& pointer) {
    if (has(schema, "format")) {
      const Json& format = schema["format"];
      for (const SharedRule& known : gbnf::string_format_rules())
        if (format == known.name) {
          alone(schema, pointer, "format", {"type"});
          return seq({R"("\"")", use(known.name), R"("\"")"});
        }
    }
    if (has(schema, "pattern")) {
      alone(schema, pointer, "pattern", {"type"});
      const Json& pattern = schema["pattern"];
      if (!pattern.is_string()) fail("{}/pattern: must be a string", pointer);
      return seq(
          {R"("\"")",
           gbnf::pattern_to_gbnf(pattern.template get<std::string>(), pointer + "/pattern", use("char")),
           R"("\"")"});
    }
    int64_t min = count(schema, "minLength", pointer, 0),
            max = count(schema, "maxLength", pointer, kUnbounded);
    check_range(min, max, pointer, "minLength", "maxLength");
    if (min == 0 && max == kUnbounded) return use("string");
    return seq({R"("\"")", repeat(use("char"), min, max), R"("\"")"});
  }

  static double floor_of(double x) { return std::floor(x); }
  static double ceil_of(double x) { return std::ceil(x); }

  // `value` rounded by `round` and clamped to just outside the 16-digit range.
  static int64_t clamped(const Json& value, double (*round)(double)) {
    if (value.is_number_unsigned())
      return static_cast<int64_t>(std::min<uint64_t>(value.template get<uint64_t>(), kMaxMagnitude + 1));
    if (value.is_number_integer())
      return std::clamp<int64_t>(value.template get<int64_t>(), -kMaxMagnitude - 1, kMaxMagnitude + 1);
    return static_cast<int64_t>(std::clamp(round(value.template get<double>()), -1e16, 1e16));
  }

  // The tighter of `inclusive` and `exclusive` (minimum and exclusiveMinimum, or the maxima).
  // Integer bounds are made inclusive; number bounds must be integral.
  static std::optional<Bound> bound(const Json& schema, const std::string& pointer, const char* inclusive,
                                    const char* exclusive, bool lower, bool integer) {
    std::optional<Bound> out;
    for (const char* keyword : {inclusive, exclusive}) {
      if (!has(schema, keyword)) continue;
      const Json& value = schema[keyword];
      if (!value.is_number()) fail("{}/{}: must be a number, not {}", pointer, keyword, value.dump());
      double x = value.template get<double>();
      if (!integer && std::trunc(x) != x)
        fail("{}/{}: only integral bounds are supported on numbers, not {}", pointer, keyword, value.dump());
      bool is_exclusive = keyword == exclusive;
      Bound b = {clamped(value, lower == is_exclusive ? floor_of : ceil_of), is_exclusive};
      if (integer && is_exclusive) b = {b.value + (lower ? 1 : -1), false};
      bool tighter = !out || (lower ? b.value > out->value : b.value < out->value) ||
                     (b.value == out->value && b.exclusive);
      if (tighter) out = b;
    }
    return out;
  }

  std::string number(const Json& schema, const std::string& pointer, bool integer) {
    std::optional<Bound> lo = bound(schema, pointer, "minimum", "exclusiveMinimum", true, integer);
    std::optional<Bound> hi = bound(schema, pointer, "maximum", "exclusiveMaximum", false, integer);
    if (!lo && !hi) return use(integer ? "integer" : "number");
    std::string range = gbnf::number_range(lo, hi, integer);
    if (range.empty())
      fail("{}: no {} of at most 16 digits lies between the minimum and the maximum", pointer,
           integer ? "integer" : "number");
    return range;
  }

  std::string object(const Json& schema, const std::string& pointer, const std::string& hint) {
    std::set<std::string> required;
    if (has(schema, "required")) {
      const Json& list = schema["required"];
      if (!list.is_array()) fail("{}/required: must be an array of property names", pointer);
      for (const Json& name : list) {
        if (!name.is_string()) fail("{}/required: must be an array of property names", pointer);
        required.insert(name.template get<std::string>());
      }
    }
    struct Member {
      std::string rule;  // key, colon and value
      bool required;
    };
    std::vector<Member> members;
    if (has(schema, "properties")) {
      const Json& properties = schema["properties"];
      if (!properties.is_object()) fail("{}/properties: must be an object", pointer);
      for (const auto& [key, value] : properties.items()) {
        std::string at = child(child(pointer, "properties"), key);
        bool needed = required.erase(key) > 0;
        if (value.is_boolean() && !value.template get<bool>()) {
          if (needed) fail("{}: property \"{}\" is required but its schema is false", pointer, key);
          continue;
        }
        std::string name = hint + "-" + key;
        std::string body = named(name, visit(value, at, name));
        members.push_back(
            {named(name + "-kv", seq({literal(Json(key).dump() + ":"), use("ws"), body})), needed});
      }
    }
    if (!required.empty())
      fail("{}/required: \"{}\" is not among the properties", pointer, *required.begin());
    std::string extra;  // the rule for one further key and value, "" if none may appear
    const std::string at = child(pointer, "additionalProperties");
    if (has(schema, "additionalProperties") ? schema["additionalProperties"] != Json(false)
                                            : members.empty()) {
      const Json& value = has(schema, "additionalProperties") ? schema["additionalProperties"] : Json(true);
      std::string body = named(hint + "-additional", visit(value, at, hint + "-additional"));
      extra = body == "value"
                  ? use("member")
                  : named(hint + "-additional-kv", seq({use("string"), R"(":")", use("ws"), body}));
    }
    if (members.empty() && extra == "member") return use("object");
    // The members in order: each alternative starts with member i, every earlier one absent;
    // none before the first required member can be skipped.
    std::string more_extra = extra.empty() ? "" : repeat(seq({R"(",")", use("ws"), extra}), 0, kUnbounded);
    std::vector<std::string> alternatives;
    bool all_optional = true;
    for (size_t i = 0; i < members.size() && all_optional; ++i) {
      std::string alternative = members[i].rule;
      for (size_t j = i + 1; j < members.size(); ++j) {
        std::string next = seq({R"(",")", use("ws"), members[j].rule});
        alternative = seq({alternative, members[j].required ? next : atom(next) + "?"});
      }
      alternatives.push_back(seq({alternative, more_extra}));
      all_optional = !members[i].required;
    }
    if (all_optional && !extra.empty()) alternatives.push_back(seq({extra, more_extra}));
    use("ws");
    if (alternatives.empty()) return R"("{" ws "}")";
    std::string content =
        seq({alternatives.size() == 1 ? alternatives[0] : "( " + alternation(alternatives) + " )", "ws"});
    return seq({R"("{" ws)", all_optional ? atom(content) + "?" : content, R"("}")"});
  }

  std::string array(const Json& schema, const std::string& pointer, const std::string& hint) {
    if (has(schema, "uniqueItems") && schema["uniqueItems"] != Json(false))
      fail("{}/uniqueItems: only false is supported", pointer);
    // Legacy tuples: items as an array, then additionalItems.
    bool legacy = has(schema, "items") && schema["items"].is_array();
    const char* prefix_key = legacy ? "items" : "prefixItems";
    const char* rest_key = legacy ? "additionalItems" : "items";
    std::vector<std::string> elements;
    if (has(schema, prefix_key)) {
      const Json& prefix = schema[prefix_key];
      if (!prefix.is_array()) fail("{}/{}: must be an array of schemas", pointer, prefix_key);
      for (size_t i = 0; i < prefix.size(); ++i) {
        std::string name = fmt::format("{}-{}", hint, i);
        elements.push_back(
            named(name, visit(prefix[i], child(child(pointer, prefix_key), std::to_string(i)), name)));
      }
    }
    const int64_t fixed = static_cast<int64_t>(elements.size());
    int64_t min = count(schema, "minItems", pointer, 0), max = count(schema, "maxItems", pointer, kUnbounded);
    check_range(min, max, pointer, "minItems", "maxItems");
    std::string rest;
    if (has(schema, rest_key) && schema[rest_key] == Json(false)) {
      if (min > fixed) fail("{}/minItems: {} exceeds the {} items allowed", pointer, min, fixed);
      max = max == kUnbounded ? fixed : std::min(max, fixed);
    } else {
      const Json& value = has(schema, rest_key) ? schema[rest_key] : Json(true);
      rest = named(hint + "-item", visit(value, child(pointer, rest_key), hint + "-item"));
    }
    use("ws");
    if (max == 0) return R"("[" ws "]")";
    // The elements after the first i: the fixed ones one by one, then repetitions of `rest`.
    std::function<std::string(int64_t)> after = [&](int64_t i) -> std::string {
      if (i >= fixed) {
        int64_t lo = std::max<int64_t>(min - i, 0), hi = max == kUnbounded ? kUnbounded : max - i;
        return repeat(seq({R"(",")", "ws", rest}), lo, hi);
      }
      if (max != kUnbounded && i >= max) return "";
      std::string next = seq({R"(",")", "ws", elements[i], after(i + 1)});
      return i < min ? next : atom(next) + "?";
    };
    std::string content = seq({fixed > 0 ? elements[0] : rest, after(1), "ws"});
    return seq({R"("[" ws)", min == 0 ? atom(content) + "?" : content, R"("]")"});
  }

  const Json& root_;
  std::vector<std::pair<std::string, std::string>> rules_;  // in definition order, root first
  std::set<std::string> taken_;
  std::set<std::string> used_;
  std::map<std::string, std::string> ref_rules_;  // $ref text -> rule name
  int depth_ = 0;                                 // schemas being visited
};

}  // namespace

std::string json_schema_to_gbnf(const nlohmann::json& schema) { return Converter(schema).run(); }
std::string json_schema_to_gbnf(const nlohmann::ordered_json& schema) { return Converter(schema).run(); }

std::string json_object_gbnf() { return json_schema_to_gbnf(nlohmann::json{{"type", "object"}}); }

}  // namespace tokenmill
