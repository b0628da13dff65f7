#include "tokenizer/jinja_value.h"

#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <cstdlib>

#include "tokenizer/jinja_unicode.h"

namespace tokenmill::jinja {
namespace {

// Python raises RecursionError long before this; we refuse rather than overflow the stack.
constexpr int kMaxValueDepth = 200;

void check_depth(int depth) {
  if (depth > kMaxValueDepth) eval_fail(fmt::format("value nested more than {} levels deep", kMaxValueDepth));
}

bool numbers_equal(const Value& a, const Value& b) {
  if (a.is_integral() && b.is_integral()) return a.as_int() == b.as_int();
  // int == float is exact in Python; doubles hold every int up to 2^53 exactly.
  const Value& f = a.is(Kind::kFloat) ? a : b;
  const Value& other = a.is(Kind::kFloat) ? b : a;
  if (other.is(Kind::kFloat)) return a.as_float() == b.as_float();
  const double d = f.as_float();
  if (!std::isfinite(d) || std::trunc(d) != d || std::fabs(d) >= 9.2e18) return false;
  return static_cast<std::int64_t>(d) == other.as_int();
}

bool equals_at(const Value& a, const Value& b, int depth) {
  check_depth(depth);
  if (a.is_number() && b.is_number()) return numbers_equal(a, b);
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Kind::kUndefined:
    case Kind::kNone: return true;
    case Kind::kString: return a.as_string() == b.as_string();
    case Kind::kList: {
      const List& x = a.as_list();
      const List& y = b.as_list();
      if (x.flavor != y.flavor || x.items.size() != y.items.size()) return false;
      for (std::size_t i = 0; i < x.items.size(); ++i) {
        if (!equals_at(x.items[i], y.items[i], depth + 1)) return false;
      }
      return true;
    }
    case Kind::kDict: {
      const Dict& x = a.as_dict();
      const Dict& y = b.as_dict();
      if (x.entries.size() != y.entries.size()) return false;
      for (const auto& [key, value] : x.entries) {
        const Value* other = y.find(key);
        if (other == nullptr || !equals_at(value, *other, depth + 1)) return false;
      }
      return true;
    }
    case Kind::kNamespace: return &a.as_namespace() == &b.as_namespace();
    case Kind::kCallable: return &a.as_callable() == &b.as_callable();
    case Kind::kGenerator: return &a.as_generator() == &b.as_generator();
    case Kind::kLoop: return &a.as_loop() == &b.as_loop();
    default: return false;
  }
}

template <class T>
bool ordered(const T& a, const T& b, std::string_view op) {
  if (op == "<") return a < b;
  if (op == "<=") return a <= b;
  if (op == ">") return a > b;
  return a >= b;
}

bool compare_at(const Value& a, const Value& b, std::string_view op, int depth) {
  check_depth(depth);
  if (a.is_undefined()) fail_undefined(a);
  if (b.is_undefined()) fail_undefined(b);
  if (a.is_number() && b.is_number()) {
    if (a.is_integral() && b.is_integral()) return ordered(a.as_int(), b.as_int(), op);
    return ordered(a.to_double(), b.to_double(), op);
  }
  if (a.is_string() && b.is_string())
    return ordered(a.as_string(), b.as_string(), op);  // UTF-8 keeps code point order
  if (a.is(Kind::kList) && b.is(Kind::kList) && a.as_list().flavor == b.as_list().flavor &&
      (a.as_list().flavor == ListFlavor::kList || a.as_list().flavor == ListFlavor::kTuple)) {
    // Python: the first differing items decide, else the lengths.
    const auto& x = a.as_list().items;
    const auto& y = b.as_list().items;
    for (std::size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (!equals_at(x[i], y[i], depth + 1)) return compare_at(x[i], y[i], op, depth + 1);
    }
    return ordered(x.size(), y.size(), op);
  }
  eval_fail(
      fmt::format("'{}' not supported between instances of '{}' and '{}'", op, type_name(a), type_name(b)));
}

void append_checked(std::string& out, std::string_view piece, Budget& budget) {
  budget.check_string_size(out.size() + piece.size());
  budget.charge(piece.size());
  out.append(piece);
}

void append_repr_at(std::string& out, const Value& v, Budget& budget, int depth);

void append_items(std::string& out, const std::vector<Value>& items, Budget& budget, int depth) {
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (i > 0) append_checked(out, ", ", budget);
    append_repr_at(out, items[i], budget, depth + 1);
  }
}

void append_dict(std::string& out, const Dict& d, Budget& budget, int depth) {
  append_checked(out, "{", budget);
  for (std::size_t i = 0; i < d.entries.size(); ++i) {
    if (i > 0) append_checked(out, ", ", budget);
    append_repr_at(out, d.entries[i].first, budget, depth + 1);
    append_checked(out, ": ", budget);
    append_repr_at(out, d.entries[i].second, budget, depth + 1);
  }
  append_checked(out, "}", budget);
}

void append_list(std::string& out, const List& l, Budget& budget, int depth) {
  switch (l.flavor) {
    case ListFlavor::kList:
      append_checked(out, "[", budget);
      append_items(out, l.items, budget, depth);
      append_checked(out, "]", budget);
      return;
    case ListFlavor::kTuple:
      append_checked(out, "(", budget);
      append_items(out, l.items, budget, depth);
      append_checked(out, l.items.size() == 1 ? ",)" : ")", budget);
      return;
    case ListFlavor::kDictKeys:
    case ListFlavor::kDictValues:
    case ListFlavor::kDictItems:
      append_checked(out, type_name(Value::from_list(&l)), budget);
      append_checked(out, "([", budget);
      append_items(out, l.items, budget, depth);
      append_checked(out, "])", budget);
      return;
  }
}

void append_repr_at(std::string& out, const Value& v, Budget& budget, int depth) {
  check_depth(depth);
  switch (v.kind()) {
    case Kind::kUndefined: append_checked(out, "Undefined", budget); return;
    case Kind::kString: append_string_repr(out, v.as_string(), &budget); return;
    case Kind::kList: append_list(out, v.as_list(), budget, depth); return;
    case Kind::kDict: append_dict(out, v.as_dict(), budget, depth); return;
    case Kind::kNamespace:
      append_checked(out, "<Namespace ", budget);
      append_dict(out, v.as_namespace().attrs, budget, depth);
      append_checked(out, ">", budget);
      return;
    default: append_str(out, v, budget); return;
  }
}

}  // namespace

void eval_fail(const std::string& message) { throw EvalError(message); }

void Budget::charge(std::size_t units) {
  if (units > limits_.max_work - std::min(work_, limits_.max_work)) {
    eval_fail(fmt::format("the template did more work than allowed (ChatTemplateLimits::max_work = {})",
                          limits_.max_work));
  }
  work_ += units;
}

void Budget::count_iteration() {
  if (++iterations_ > limits_.max_loop_iterations) {
    eval_fail(
        fmt::format("the template ran more loop iterations than allowed "
                    "(ChatTemplateLimits::max_loop_iterations = {})",
                    limits_.max_loop_iterations));
  }
  charge(1);
}

void Budget::check_string_size(std::size_t size) const {
  if (size > limits_.max_output_bytes) {
    eval_fail(
        fmt::format("the template produced a string longer than allowed "
                    "(ChatTemplateLimits::max_output_bytes = {})",
                    limits_.max_output_bytes));
  }
}

void Budget::enter_call() {
  if (++call_depth_ > limits_.max_call_depth) {
    eval_fail(
        fmt::format("macro calls or recursive loops nested deeper than allowed "
                    "(ChatTemplateLimits::max_call_depth = {})",
                    limits_.max_call_depth));
  }
}

const Value* Dict::find(const Value& key) const {
  if (key.is_string()) return find(std::string_view(key.as_string()));
  for (const auto& [k, v] : entries) {
    if (equals(k, key)) return &v;
  }
  return nullptr;
}

const Value* Dict::find(std::string_view key) const {
  for (const auto& [k, v] : entries) {
    if (k.is_string() && k.as_string() == key) return &v;
  }
  return nullptr;
}

Value* Scope::find_local(std::string_view name) {
  for (auto& [n, v] : vars) {
    if (n == name) return &v;
  }
  return nullptr;
}

void Scope::set(std::string_view name, Value value) {
  if (Value* existing = find_local(name)) {
    *existing = value;
  } else {
    vars.emplace_back(name, value);
  }
}

Value Heap::string(std::string s) { return Value::from_string(intern(std::move(s))); }

const std::string* Heap::intern(std::string s) {
  budget_.check_string_size(s.size());
  budget_.charge(s.size() + 1);
  return &strings_.emplace_back(std::move(s));
}

Value Heap::list(std::vector<Value> items, ListFlavor flavor) {
  budget_.charge(items.size() + 1);
  return Value::from_list(&lists_.emplace_back(List{std::move(items), flavor}));
}

Value Heap::dict(Dict d) {
  budget_.charge(2 * d.entries.size() + 1);
  return Value::from_dict(&dicts_.emplace_back(std::move(d)));
}

Value Heap::new_namespace(Dict attrs) {
  budget_.charge(2 * attrs.entries.size() + 1);
  return Value::from_namespace(&namespaces_.emplace_back(Namespace{std::move(attrs)}));
}

Value Heap::generator(std::vector<Value> items, std::string_view type_name) {
  budget_.charge(items.size() + 1);
  return Value::from_generator(&generators_.emplace_back(Generator{std::move(items), 0, type_name}));
}

Value Heap::callable(Callable c) {
  budget_.charge(1);
  return Value::from_callable(&callables_.emplace_back(c));
}

Scope* Heap::scope(Scope* parent) {
  budget_.charge(1);
  Scope& s = scopes_.emplace_back();
  s.parent = parent;
  return &s;
}

LoopState* Heap::loop_state() {
  budget_.charge(1);
  return &loops_.emplace_back();
}

std::string_view type_name(const Value& v) {
  switch (v.kind()) {
    case Kind::kUndefined: return "Undefined";
    case Kind::kNone: return "NoneType";
    case Kind::kBool: return "bool";
    case Kind::kInt: return "int";
    case Kind::kFloat: return "float";
    case Kind::kString: return "str";
    case Kind::kList:
      switch (v.as_list().flavor) {
        case ListFlavor::kList: return "list";
        case ListFlavor::kTuple: return "tuple";
        case ListFlavor::kDictKeys: return "dict_keys";
        case ListFlavor::kDictValues: return "dict_values";
        case ListFlavor::kDictItems: return "dict_items";
      }
      return "list";
    case Kind::kDict: return "dict";
    case Kind::kNamespace: return "Namespace";
    case Kind::kCallable: return v.as_callable().kind == CallableKind::kMacro ? "Macro" : "function";
    case Kind::kGenerator: return v.as_generator().type_name;
    case Kind::kLoop: return "LoopContext";
  }
  return "object";
}

std::string object_type_repr(const Value& v) {
  if (v.is_none()) return "None";
  return fmt::format("{} object", type_name(v));
}

bool truthy(const Value& v) {
  switch (v.kind()) {
    case Kind::kUndefined:
    case Kind::kNone: return false;
    case Kind::kBool:
    case Kind::kInt: return v.as_int() != 0;
    case Kind::kFloat: return v.as_float() != 0.0;
    case Kind::kString: return !v.as_string().empty();
    case Kind::kList: return !v.as_list().items.empty();
    case Kind::kDict: return !v.as_dict().entries.empty();
    default: return true;
  }
}

bool equals(const Value& a, const Value& b) { return equals_at(a, b, 0); }

bool compare_values(const Value& a, const Value& b, std::string_view op) { return compare_at(a, b, op, 0); }

void fail_undefined(const Value& v) {
  eval_fail(v.undefined_hint() != nullptr ? *v.undefined_hint() : std::string("value is undefined"));
}

void check_hashable(const Value& v) {
  if (v.is(Kind::kDict) || (v.is(Kind::kList) && v.as_list().flavor != ListFlavor::kTuple &&
                            v.as_list().flavor != ListFlavor::kDictValues)) {
    eval_fail(fmt::format("unhashable type: '{}'", type_name(v)));
  }
  if (v.is(Kind::kList) && v.as_list().flavor == ListFlavor::kTuple) {
    for (const Value& item : v.as_list().items) check_hashable(item);
  }
}

void append_str(std::string& out, const Value& v, Budget& budget) {
  switch (v.kind()) {
    case Kind::kUndefined: return;
    case Kind::kNone: append_checked(out, "None", budget); return;
    case Kind::kBool: append_checked(out, v.as_bool() ? "True" : "False", budget); return;
    case Kind::kInt: append_checked(out, fmt::format("{}", v.as_int()), budget); return;
    case Kind::kFloat: append_checked(out, format_float(v.as_float()), budget); return;
    case Kind::kString: append_checked(out, v.as_string(), budget); return;
    case Kind::kCallable:
      append_checked(out, fmt::format("<{} {}>", type_name(v), v.as_callable().name), budget);
      return;
    case Kind::kGenerator: append_checked(out, fmt::format("<{} object>", type_name(v)), budget); return;
    case Kind::kLoop: {
      const LoopState& loop = v.as_loop();
      append_checked(out, fmt::format("<LoopContext {}/{}>", loop.index0 + 1, loop.items->items.size()),
                     budget);
      return;
    }
    default: append_repr_at(out, v, budget, 0); return;
  }
}

void append_repr(std::string& out, const Value& v, Budget& budget) { append_repr_at(out, v, budget, 0); }

std::string to_str(const Value& v, Budget& budget) {
  if (v.is_string()) return v.as_string();
  std::string out;
  append_str(out, v, budget);
  return out;
}

std::string format_float(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  // Shortest round-trip digits, then Python's repr layout: positional notation for
  // exponents in [-4, 16), scientific otherwise, and always a ".0" or a fraction.
  char buffer[64];
  const auto result = std::to_chars(buffer, buffer + sizeof(buffer), d, std::chars_format::scientific);
  const std::string_view text(buffer, static_cast<std::size_t>(result.ptr - buffer));
  const std::size_t e_pos = text.find('e');
  std::string_view mantissa = text.substr(0, e_pos);
  const int exponent = std::atoi(std::string(text.substr(e_pos + 1)).c_str());
  std::string out;
  if (!mantissa.empty() && mantissa[0] == '-') {
    out += '-';
    mantissa.remove_prefix(1);
  }
  std::string digits;
  for (char c : mantissa) {
    if (c != '.') digits += c;
  }
  if (exponent >= -4 && exponent < 16) {
    if (exponent < 0) {
      out += "0.";
      out.append(static_cast<std::size_t>(-exponent - 1), '0');
      out += digits;
    } else {
      const std::size_t int_digits = static_cast<std::size_t>(exponent) + 1;
      if (digits.size() <= int_digits) {
        out += digits;
        out.append(int_digits - digits.size(), '0');
        out += ".0";
      } else {
        out += digits.substr(0, int_digits);
        out += '.';
        out += digits.substr(int_digits);
      }
    }
    return out;
  }
  out += digits[0];
  if (digits.size() > 1) {
    out += '.';
    out += digits.substr(1);
  }
  out += fmt::format("e{}{:02d}", exponent < 0 ? '-' : '+', std::abs(exponent));
  return out;
}

void append_string_repr(std::string& out, std::string_view s, Budget* budget) {
  const std::size_t before = out.size();
  if (budget != nullptr) budget->check_string_size(before + s.size() + 2);
  const bool has_single = s.find('\'') != std::string_view::npos;
  const bool has_double = s.find('"') != std::string_view::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  out += quote;
  std::size_t pos = 0;
  while (pos < s.size()) {
    // Escapes grow the text up to 4x: keep the growth within the limit as it happens.
    if (budget != nullptr && out.size() > budget->limits().max_output_bytes)
      budget->check_string_size(out.size());
    const char32_t cp = next_code_point(s, pos);
    if (cp == static_cast<char32_t>(quote) || cp == '\\') {
      out += '\\';
      out += static_cast<char>(cp);
    } else if (cp == '\t') {
      out += "\\t";
    } else if (cp == '\n') {
      out += "\\n";
    } else if (cp == '\r') {
      out += "\\r";
    } else if (cp < 0x20 || cp == 0x7F) {
      out += fmt::format("\\x{:02x}", static_cast<unsigned>(cp));
    } else if (cp < 0x7F || is_printable(cp)) {
      append_utf8(out, cp);
    } else if (cp <= 0xFF) {
      out += fmt::format("\\x{:02x}", static_cast<unsigned>(cp));
    } else if (cp <= 0xFFFF) {
      out += fmt::format("\\u{:04x}", static_cast<unsigned>(cp));
    } else {
      out += fmt::format("\\U{:08x}", static_cast<unsigned>(cp));
    }
  }
  out += quote;
  if (budget != nullptr) {
    budget->check_string_size(out.size());
    budget->charge(out.size() - before);
  }
}

}  // namespace tokenmill::jinja
