#include "tokenizer/jinja_predicates.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>

#include "tokenizer/jinja_args.h"
#include "tokenizer/jinja_eval.h"
#include "tokenizer/jinja_filters.h"
#include "tokenizer/jinja_unicode.h"

namespace tokenmill::jinja {
namespace {

constexpr std::array<std::string_view, 39> kTests = {
    "!=",       "<",           "<=",          "==",      ">",       ">=",        "boolean",  "callable",
    "defined",  "divisibleby", "eq",          "equalto", "escaped", "even",      "false",    "filter",
    "float",    "ge",          "greaterthan", "gt",      "in",      "integer",   "iterable", "le",
    "lessthan", "lower",       "lt",          "mapping", "ne",      "none",      "number",   "odd",
    "sameas",   "sequence",    "string",      "test",    "true",    "undefined", "upper"};

// Python's % for the odd/even/divisibleby tests.
Value modulo(const Value& a, const Value& b) {
  if (a.is_undefined()) fail_undefined(a);
  if (!a.is_number() || !b.is_number()) {
    eval_fail(fmt::format("unsupported operand type(s) for %: '{}' and '{}'", type_name(a), type_name(b)));
  }
  if (a.is_integral() && b.is_integral()) {
    if (b.as_int() == 0) eval_fail("integer modulo by zero");
    if (b.as_int() == -1) return Value::from_int(0);
    std::int64_t r = a.as_int() % b.as_int();
    if (r != 0 && ((r < 0) != (b.as_int() < 0))) r += b.as_int();
    return Value::from_int(r);
  }
  if (b.to_double() == 0.0) eval_fail("float modulo");
  double r = std::fmod(a.to_double(), b.to_double());
  if (r != 0.0 && ((r < 0) != (b.to_double() < 0))) r += b.to_double();
  return Value::from_float(r);
}

const Value& one_arg(std::string_view test, const CallArgs& args) {
  if (args.positional.size() + args.keywords.size() != 1) {
    eval_fail(fmt::format("test '{}' takes exactly one argument", test));
  }
  return args.positional.empty() ? args.keywords[0].second : args.positional[0];
}

bool string_all(const std::string& s, bool (*predicate)(char32_t)) {
  bool any_cased = false;
  std::size_t pos = 0;
  while (pos < s.size()) {
    const char32_t c = next_code_point(s, pos);
    if (is_cased(c)) {
      if (!predicate(c)) return false;
      any_cased = true;
    }
  }
  return any_cased;
}

bool is_same(const Value& a, const Value& b) {
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Kind::kNone: return true;
    case Kind::kBool: return a.as_bool() == b.as_bool();
    case Kind::kInt:  // CPython caches small ints; others are distinct objects
      return a.as_int() == b.as_int() && a.as_int() >= -5 && a.as_int() <= 256;
    case Kind::kString: return &a.as_string() == &b.as_string();
    case Kind::kList: return &a.as_list() == &b.as_list();
    case Kind::kDict: return &a.as_dict() == &b.as_dict();
    case Kind::kNamespace: return &a.as_namespace() == &b.as_namespace();
    case Kind::kCallable: return &a.as_callable() == &b.as_callable();
    case Kind::kGenerator: return &a.as_generator() == &b.as_generator();
    case Kind::kLoop: return &a.as_loop() == &b.as_loop();
    default: return false;
  }
}

}  // namespace

bool is_supported_test(std::string_view name) {
  return std::find(kTests.begin(), kTests.end(), name) != kTests.end();
}

bool is_jinja_test(std::string_view name) { return is_supported_test(name); }

bool apply_test(Interpreter& in, std::string_view name, const Value& v, const CallArgs& args) {
  if (!is_supported_test(name)) eval_fail(fmt::format("no test named '{}'", name));
  const auto no_args = [&] {
    if (!args.positional.empty() || !args.keywords.empty())
      eval_fail(fmt::format("test '{}' takes no arguments", name));
  };
  if (name == "defined") return no_args(), !v.is_undefined();
  if (name == "undefined") return no_args(), v.is_undefined();
  if (name == "none") return no_args(), v.is_none();
  if (name == "boolean") return no_args(), v.is(Kind::kBool);
  if (name == "false") return no_args(), v.is(Kind::kBool) && !v.as_bool();
  if (name == "true") return no_args(), v.is(Kind::kBool) && v.as_bool();
  if (name == "integer") return no_args(), v.is(Kind::kInt);
  if (name == "float") return no_args(), v.is(Kind::kFloat);
  if (name == "number") return no_args(), v.is_number();
  if (name == "string") return no_args(), v.is_string();
  if (name == "mapping") return no_args(), v.is(Kind::kDict);
  if (name == "callable") {
    no_args();
    return v.is(Kind::kCallable) || v.is_undefined() || v.is(Kind::kLoop);
  }
  if (name == "escaped") return no_args(), false;
  if (name == "iterable") {
    no_args();
    return v.is_undefined() || v.is_string() || v.is(Kind::kList) || v.is(Kind::kDict) ||
           v.is(Kind::kGenerator) || v.is(Kind::kLoop);
  }
  if (name == "sequence") {
    no_args();
    return v.is_undefined() || v.is_string() || v.is(Kind::kDict) ||
           (v.is(Kind::kList) &&
            (v.as_list().flavor == ListFlavor::kList || v.as_list().flavor == ListFlavor::kTuple));
  }
  if (name == "lower" || name == "upper") {
    no_args();
    const std::string s = in.str(v);
    return string_all(s, name == "lower" ? is_lower : is_upper);
  }
  if (name == "odd" || name == "even") {
    no_args();
    const Value r = modulo(v, Value::from_int(2));
    return equals(r, Value::from_int(name == "odd" ? 1 : 0));
  }
  if (name == "divisibleby") {
    BoundArgs a("divisibleby", args, {"num"}, 1);
    return equals(modulo(v, a.get(0)), Value::from_int(0));
  }
  if (name == "filter" || name == "test") {
    no_args();
    if (!v.is_string()) return false;
    return name == "filter" ? is_supported_filter(v.as_string()) : is_supported_test(v.as_string());
  }
  const Value& other = one_arg(name, args);
  if (name == "sameas") return is_same(v, other);
  if (name == "in") {
    if (other.is_string()) {
      if (!v.is_string())
        eval_fail(fmt::format("'in <string>' requires string as left operand, not {}", type_name(v)));
      return other.as_string().find(v.as_string()) != std::string::npos;
    }
    if (other.is(Kind::kDict)) {
      check_hashable(v);
      return other.as_dict().find(v) != nullptr;
    }
    const std::vector<Value> items = in.iterate(other);
    return std::any_of(items.begin(), items.end(), [&](const Value& item) { return equals(item, v); });
  }
  if (name == "==" || name == "eq" || name == "equalto") return equals(v, other);
  if (name == "!=" || name == "ne") return !equals(v, other);
  if (name == "<" || name == "lt" || name == "lessthan") return compare_values(v, other, "<");
  if (name == "<=" || name == "le") return compare_values(v, other, "<=");
  if (name == ">" || name == "gt" || name == "greaterthan") return compare_values(v, other, ">");
  return compare_values(v, other, ">=");
}

}  // namespace tokenmill::jinja
