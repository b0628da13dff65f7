#include "tokenizer/jinja_filters.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <optional>

#include "tokenizer/jinja_args.h"
#include "tokenizer/jinja_eval.h"
#include "tokenizer/jinja_json.h"
#include "tokenizer/jinja_printf.h"
#include "tokenizer/jinja_unicode.h"

namespace tokenmill::jinja {
namespace {

using FilterFn = Value (*)(Interpreter&, const Value&, const CallArgs&);

// ---- helpers --------------------------------------------------------------------------

// jinja2's make_attrgetter: "a.b.0" looks up item a, then b, then index 0.
Value get_attribute_path(Interpreter& in, Value item, const Value& attribute,
                         const std::optional<Value>& fallback) {
  if (attribute.is_none() || attribute.is_undefined()) return item;
  std::vector<Value> parts;
  if (attribute.is_string()) {
    const std::string& path = attribute.as_string();
    std::size_t start = 0;
    while (true) {
      const std::size_t dot = path.find('.', start);
      const std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
      const bool digits =
          !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
      std::int64_t index = 0;
      if (digits && std::from_chars(part.data(), part.data() + part.size(), index).ec == std::errc()) {
        parts.push_back(Value::from_int(index));
      } else {
        parts.push_back(in.string(part));
      }
      if (dot == std::string::npos) break;
      start = dot + 1;
    }
  } else {
    parts.push_back(attribute);
  }
  for (const Value& part : parts) {
    item = in.getitem(item, part);
    if (fallback && item.is_undefined()) item = *fallback;
  }
  return item;
}

Value ignore_case(Interpreter& in, const Value& v) {
  return v.is_string() ? in.string(to_lower(v.as_string())) : v;
}

// jinja2's make_multi_attrgetter, the sort filter's key: a list of the (comma-separated)
// attribute paths' values, lowercased unless case_sensitive. Being a list, equal keys compare
// equal without needing an order (two None keys sort fine).
Value multi_sort_key(Interpreter& in, const Value& item, const Value& attribute, bool case_sensitive) {
  if (attribute.is_string()) {
    std::vector<Value> keys;
    std::size_t start = 0;
    const std::string& spec = attribute.as_string();
    while (true) {
      const std::size_t comma = spec.find(',', start);
      const Value part =
          in.string(spec.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
      const Value key = get_attribute_path(in, item, part, std::nullopt);
      keys.push_back(case_sensitive ? key : ignore_case(in, key));
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
    return in.heap().list(std::move(keys));
  }
  const Value key = get_attribute_path(in, item, attribute, std::nullopt);
  return in.heap().list({case_sensitive ? key : ignore_case(in, key)});
}

// jinja2's make_attrgetter with ignore_case, the key of min, max and unique.
Value sort_key(Interpreter& in, const Value& item, const Value& attribute, bool case_sensitive) {
  const Value key = get_attribute_path(in, item, attribute, std::nullopt);
  return case_sensitive ? key : ignore_case(in, key);
}

std::string str_of(Interpreter& in, const Value& v) { return in.str(v); }

bool parse_python_float(std::string_view text, double& out) {
  std::string s = strip(text, nullptr, true, true);
  std::string lowered = to_lower(s);
  std::string_view body = lowered;
  bool negative = false;
  if (!body.empty() && (body[0] == '+' || body[0] == '-')) {
    negative = body[0] == '-';
    body.remove_prefix(1);
  }
  if (body == "inf" || body == "infinity") {
    out = negative ? -HUGE_VAL : HUGE_VAL;
    return true;
  }
  if (body == "nan") {
    out = std::nan("");
    return true;
  }
  std::string digits;
  for (std::size_t i = 0; i < body.size(); ++i) {
    if (body[i] == '_') {
      const bool ok = i > 0 && i + 1 < body.size() && std::isdigit(static_cast<unsigned char>(body[i - 1])) &&
                      std::isdigit(static_cast<unsigned char>(body[i + 1]));
      if (!ok) return false;
      continue;
    }
    digits += body[i];
  }
  if (digits.empty() || digits.find_first_not_of("0123456789.e+-") != std::string::npos) return false;
  const auto result = std::from_chars(digits.data(), digits.data() + digits.size(), out);
  if (result.ec != std::errc() || result.ptr != digits.data() + digits.size()) return false;
  if (negative) out = -out;
  return true;
}

bool parse_python_int(std::string_view text, int base, std::int64_t& out) {
  std::string s = strip(text, nullptr, true, true);
  std::string_view body = s;
  bool negative = false;
  if (!body.empty() && (body[0] == '+' || body[0] == '-')) {
    negative = body[0] == '-';
    body.remove_prefix(1);
  }
  if (body.size() > 2 && body[0] == '0') {
    const char p = static_cast<char>(body[1] | 0x20);
    if ((p == 'x' && (base == 16 || base == 0)) || (p == 'o' && (base == 8 || base == 0)) ||
        (p == 'b' && (base == 2 || base == 0))) {
      base = p == 'x' ? 16 : p == 'o' ? 8 : 2;
      body.remove_prefix(2);
      if (!body.empty() && body[0] == '_') body.remove_prefix(1);
    }
  }
  if (base == 0) base = 10;
  std::string digits;
  for (std::size_t i = 0; i < body.size(); ++i) {
    if (body[i] == '_') {
      if (i == 0 || i + 1 >= body.size() || body[i + 1] == '_') return false;
      continue;
    }
    digits += body[i];
  }
  if (digits.empty()) return false;
  std::uint64_t magnitude = 0;
  const auto result = std::from_chars(digits.data(), digits.data() + digits.size(), magnitude, base);
  if (result.ec != std::errc() || result.ptr != digits.data() + digits.size()) return false;
  if (magnitude > static_cast<std::uint64_t>(INT64_MAX) + (negative ? 1 : 0)) {
    eval_fail("integer too large (template integers are 64-bit)");
  }
  out = negative ? static_cast<std::int64_t>(0 - magnitude) : static_cast<std::int64_t>(magnitude);
  return true;
}

std::int64_t float_to_int(double d) {
  if (std::isinf(d)) eval_fail("cannot convert float infinity to integer");
  if (std::fabs(d) >= 9.2e18) eval_fail("integer too large (template integers are 64-bit)");
  return static_cast<std::int64_t>(d);
}

// ---- filters ---------------------------------------------------------------------------

Value f_abs(Interpreter&, const Value& v, const CallArgs& args) {
  BoundArgs("abs", args, {});
  if (v.is_undefined()) fail_undefined(v);
  if (v.is_integral()) {
    if (v.as_int() == INT64_MIN) eval_fail("integer overflow (template integers are 64-bit)");
    return Value::from_int(std::abs(v.as_int()));
  }
  if (v.is(Kind::kFloat)) return Value::from_float(std::fabs(v.as_float()));
  eval_fail(fmt::format("bad operand type for abs(): '{}'", type_name(v)));
}

Value f_attr(Interpreter& in, const Value& v, const CallArgs& args) {
  BoundArgs a("attr", args, {"name"}, 1);
  return in.attribute_only(v, str_of(in, a.get(0)));
}

Value f_batch(Interpreter& in, const Value& v, const CallArgs& args) {
  BoundArgs a("batch", args, {"linecount", "fill_with"}, 1);
  const std::int64_t count = int_arg("batch", "linecount", a.get(0));
  if (count < 1) eval_fail("batch() linecount must be at least 1");
  const auto size = static_cast<std::size_t>(count);
  std::vector<Value> batches;
  std::vector<Value> current;
  for (const Value& item : in.iterate(v)) {
    if (current.size() == size) batches.push_back(in.heap().list(std::exchange(current, {})));
    current.push_back(item);
  }
  if (!current.empty()) {
    if (a.has(1) && !a.get(1).is_none()) {
      in.budget().charge(size - current.size());
      while (current.size() < size) current.push_back(a.get(1));
    }
    batches.push_back(in.heap().list(std::move(current)));
  }
  return in.heap().generator(std::move(batches), "generator");
}

Value f_capitalize(Interpreter& in, const Value& v, const CallArgs& args) {
  BoundArgs("capitalize", args, {});
  return in.string(capitalize(str_of(in, v)));
}

Value f_center(Interpreter& in, const Value& v, const CallArgs& args) {
  BoundArgs a("center", args, {"width"});
  const std::string s = str_of(in, v);
  const std::int64_t width = a.has(0) ? int_arg("center", "width", a.get(0)) : 80;
  const auto length = static_cast<std::int64_t>(code_point_count(s));
  if (width <= length) return in.string(s);
  in.budget().check_string_size(static_cast<std::size_t>(width));
  const std::int64_t margin = width - length;
  const std::int64_t left = margin / 2 + (margin & width & 1);
  return in.string(std::string(static_cast<std::size_t>(left), ' ') + s +
                   std::string(static_cast<std::size_t>(margin - left), ' '));
}

Value f_default(Interpreter&, const Value& v, const CallArgs& args) {
  BoundArgs a("default", args, {"default_value", "boolean"});
  if (v.is_undefined() || (a.flag(1) && !truthy(v))) {
    static const std::string kEmpty;
    return a.get_or(0, Value::from_string(&kEmpty));
  }
  return v;
}

Value f_dictsort(Interpreter& in, const Value& v, const CallArgs& args) {
  BoundArgs a("dictsort", args, {"case_sensitive", "by", "reverse"});
  if (!v.is(Kind::kDict)) eval_fail(fmt::format("'{}' object has no attribute 'items'", type_name(v)));
  std::size_t position = 0;
  if (a.has(1)) {
    const std::string by = str_of(in, a.get(1));
    if (by == "value") {
      position = 1;
    } else if (by != "key") {
      eval_fail("You can only sort by either \"key\" or \"value\"");
    }
  }
  const bool case_sensitive = a.flag(0);
  std::vector<std::pair<Value, Value>> keyed;  // (key, item)
  for (const auto& [key, value] : v.as_dict().entries) {
    const Value sort_value = position == 0 ? key : value;
    keyed.emplace_back(case_sensitive ? sort_value : ignore_case(in, sort_value),
                       in.heap().list({key, value}, ListFlavor::kTuple));
  }
  const bool reverse = a.flag(2);
  std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& x, const auto& y) {
    return reverse ? less_than(y.first, x.first) : less_than(x.first, y.first);
  });
  std::vector<Value> items;
  for (auto& entry : keyed) items.push_back(entry.second);
  return in.heap().list(std::move(items));
}

Value f_escape(Interpreter& in, const Value& v, const CallArgs& args) {
  BoundArgs("escape", args, {});
  std::string out;
  for (char c : str_of(in, v)) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return in.string(std::move(out));
}

Value f_first(Interpreter& in, const Value& v, const CallArgs& args) {
  BoundArgs("first", args, {});
  if (v.is(Kind::kGenerator)) {
    Generator& g = v.as_generator();
    if (g.pos < g.items.size()) return g.items[g.pos++];
  } else if (v.is(Kind::kList)) {
    if (!v.as_list().items.empty()) return v.as_list().items.front();
  } else if (v.is(Kind::kDict)) {
    if (!v.as_dict().entries.empty()) return v.as_dict().entries.front().first;
  } else if (v.is_string()) {
    if (!v.as_string().empty()) {
      std::size_t pos = 0;
      next_code_point(v.as_string(), pos);
      return in.string(v.as_string().substr(0, pos));
    }
  } else if (!v.is_undefined()) {
    eval_fail(fmt::format("'{}' object is not iterable", type_name(v)));
  }
  return in.heap().undefined("No first item, sequence was empty.");
}

Value f_float(Interpreter& in, const Value& v, const CallArgs& args) {
  BoundArgs a("float", args, {"default"});
  const Value fallback = a.get_or(0, Value::from_float(0.0));
  if (v.is_undefined()) fail_undefined(v);  // float(Undefined) raises; other failures give the default
  if (v.is_number()) return Value::from_float(v.to_double());
  double d = 0;
  if (v.is_string() && parse_python_float(v.as_string(), d)) return Value::from_float(d);
  (void)in;
  return fallback;
}

Value f_format(Interpreter& in, const Value& v, const CallArgs& args) {
  if (!args.positional.empty() && !args.keywords.empty()) {
    eval_fail("can't handle positional and keyword arguments at the same time");
  }
  Value format_args;
  if (!args.keywords.empty()) {
    Dict d;
    for (const auto& [key, value] : args.keywords) d.entries.emplace_back(in.string(key), value);
    format_args = in.heap().dict(std::move(d));
  } else {
    format_args = in.heap().list(args.positional, ListFlavor::kTuple);
  }
  return in.string(percent_format(str_of(in, v), format_args, in.budget()));
}

Value f_indent(Interpreter& in, const Value& v, const CallArgs& args) {
  BoundArgs a("indent", args, {"width", "first", "blank"});
  if (v.is_undefined()) fail_undefined(v);
  if (!v.is_string())
    eval_fail(fmt::format("unsupported operand type(s) for +=: '{}' and 'str'", type_name(v)));
  std::string indention = "    ";
  if (a.has(0)) {
    if (a.get(0).is_string()) {
      indention = a.get(0).as_string();
    } else {
      const std::int64_t width = int_arg("indent", "width", a.get(0));
      in.budget().check_string_size(static_cast<std::size_t>(std::max<std::int64_t>(width, 0)));
      indention = std::string(static_cast<std::size_t>(std::max<std::int64_t>(width, 0)), ' ');
    }
  }
  const std::vector<std::string> lines = splitlines(v.as_string() + "\n", false);
  std::size_t indents = 0;
  std::size_t total = 0;
  if (__builtin_mul_overflow(lines.size() + 1, indention.size(), &indents) ||
      __builtin_add_overflow(indents, v.as_string().size() + 1, &total)) {
    total = static_cast<std::size_t>(-1);
  }
  in.budget().check_string_size(total);
  in.budget().charge(total);
  std::string out;
  if (a.flag(2)) {
    for (std::size_t i = 0; i < lines.size(); ++i) {
      if (i > 0) out += "\n" + indention;
      out += lines[i];
    }
  } else {
    out = lines.empty() ? "" : lines[0];
    for (std::size_t i = 1; i < lines.size(); ++i) {
      out += "\n";
      if (!lines[i].empty()) out += indention;
      out += lines[i];
    }
  }
  if (a.flag(1)) out = indention + out;
  return in.string(std::move(out));
}

Value f_int(Interpreter&, const Value& v, const CallArgs& args) {
  BoundArgs a("int", args, {"default", "base"});
  const Value fallback = a.get_or(0, Value::from_int(0));
  const std::int64_t base = a.has(1) ? int_arg("int", "base", a.get(1)) : 10;
  if (base != 0 && (base < 2 || base > 36)) eval_fail("int() base must be >= 2 and <= 36, or 0");
  if (v.is_undefined()) fail_undefined(v);  // int(Undefined) raises; other failures give the default
  if (v.is_integral()) return Value::from_int(v.as_int());
  if (v.is(Kind::kFloat)) {
    if (std::isnan(v.as_float())) return fallback;
    return Value::from_int(float_to_int(v.as_float()));
  }
  if (v.is_string()) {
    std::int64_t i = 0;
    if (parse_python_int(v.as_string(), static_cast<int>(base), i)) return Value::from_int(i);
    double d = 0;
    if (parse_python_float(v.as_string(), d) && !std::isnan(d)) return Value::from_int(float_to_int(d));
  }
  return fallback;
}

Value f_items(Interpreter& in, const Value& v, const CallArgs& args) {
  BoundArgs("items", args, {});
  if (v.is_undefined()) return in.heap().generator({}, "generator");
  if (!v.is(Kind::kDict)) eval_fail("Can only get item pairs from a mapping.");
  std::vector<Value> pairs;
  for (const auto& [key, value] : v.as_dict().entries)
    pairs.push_back(in.heap().list({key, value}, ListFlavor::kTuple));
  return in.heap().generator(std::move(pairs), "dict_itemiterator");
}

Value f_join(Interpreter& in, const Value& v, const CallArgs& args) {
  BoundArgs a("join", args, {"d", "attribute"});
  const std::string separator = a.has(0) ? str_of(in, a.get(0)) : std::string();
  std::string out;
  bool first = true;
  for (Value item : in.iterate(v)) {
    if (a.has(1)) item = get_attribute_path(in, item, a.get(1), std::nullopt);
    if (!first) out += separator;
    first = false;
    append_str(out, item, in.budget());
  }
  return in.string(std::move(out));
}

Value f_last(Interpreter& in, const Value& v, const CallArgs& args) {
  BoundArgs("last", args, {});
  if (v.is(Kind::kList)) {
    if (!v.as_list().items.empty()) return v.as_list().items.back();
  } else if (v.is(Kind::kDict)) {
    if (!v.as_dict().entries.empty()) return v.as_dict().entries.back().first;
  } else if (v.is_string()) {
    if (!v.as_string().empty()) {
      const std::vector<std::size_t> offsets = code_point_offsets(v.as_string());
      const std::size_t begin = offsets[offsets.size() - 2];
      return in.string(v.as_string().substr(begin));
    }
  } else if (!v.is_undefined()) {
    eval_fail(fmt::format("'{}' object is not reversible", type_name(v)));
  }
  return in.heap().undefined("No last item, sequence was empty.");
}

Value f_length(Interpreter&, const Value& v, const CallArgs& args) {
  BoundArgs("length", args, {});
  switch (v.kind()) {
    case Kind::kUndefined: return Value::from_int(0);
    case Kind::kString: return Value::from_int(static_cast<std::int64_t>(code_point_count(v.as_string())));
    case Kind::kList: return Value::from_int(static_cast<std::int64_t>(v.as_list().items.size()));
    case Kind::kDict: return Value::from_int(static_cast<std::int64_t>(v.as_dict().entries.size()));
    case Kind::kLoop: return Value::from_int(static_cast<std::int64_t>(v.as_loop().items->items.size()));
    default: eval_fail(fmt::format("object of type '{}' has no len()", type_name(v)));
  }
}

Value f_list(Interpreter& in, const Value& v, const CallArgs& args) {
  BoundArgs("list", args, {});
  return in.heap().list(in.iterate(v));
}

Value f_lower(Interpreter& in, const Value& v, const CallArgs& args) {
  BoundArgs("lower", args, {});
  return in.string(to_lower(str_of(in, v)));
}

Value f_upper(Interpreter& in, const Value& v, const CallArgs& args) {
  BoundArgs("upper", args, {});
  return in.string(to_upper(str_of(in, v)));
}

Value f_map(Interpreter& in, const Value& v, const CallArgs& args) {
  if (!truthy(v)) return in.heap().generator({}, "generator");  // jinja2: `if value:` guards the loop
  const std::vector<Value> items = in.iterate(v);
  std::vector<Value> out;
  if (args.positional.empty()) {
    std::optional<Value> attribute;
    std::optional<Value> fallback;
    for (const auto& [key, value] : args.keywords) {
      if (key == "attribute") {
        attribute = value;
      } else if (key == "default") {
        fallback = value;
      } else {
        eval_fail(fmt::format("Unexpected keyword argument '{}'", key));
      }
    }
    if (!attribute) eval_fail("map requires a filter argument");
    if (fallback && fallback->is_none()) fallback.reset();
    for (const Value& item : items) out.push_back(get_attribute_path(in, item, *attribute, fallback));
  } else {
    const std::string name = str_of(in, args.positional[0]);
    CallArgs rest;
    rest.positional.assign(args.positional.begin() + 1, args.positional.end());
    rest.keywords = args.keywords;
    for (const Value& item : items) out.push_back(in.filter(name, item, rest));
  }
  return in.heap().generator(std::move(out), "generator");
}

Value min_or_max(Interpreter& in, const Value& v, const CallArgs& args, bool max) {
  BoundArgs a(max ? "max" : "min", args, {"case_sensitive", "attribute"});
  const std::vector<Value> items = in.iterate(v);
  if (items.empty()) return in.heap().undefined("No aggregated item, sequence was empty.");
  const Value attribute = a.get_or(1, Value::none());
  const bool case_sensitive = a.flag(0);
  std::size_t best = 0;
  Value best_key = sort_key(in, items[0], attribute, case_sensitive);
  for (std::size_t i = 1; i < items.size(); ++i) {
    const Value key = sort_key(in, items[i], attribute, case_sensitive);
    if (max ? less_than(best_key, key) : less_than(key, best_key)) {
      best = i;
      best_key = key;
    }
  }
  return items[best];
}

Value f_max(Interpreter& in, const Value& v, const CallArgs& args) { return min_or_max(in, v, args, true); }
Value f_min(Interpreter& in, const Value& v, const CallArgs& args) { return min_or_max(in, v, args, false); }

Value select_or_reject(Interpreter& in, const Value& v, const CallArgs& args, bool select,
                       bool by_attribute) {
  if (!truthy(v)) return in.heap().generator({}, "generator");  // jinja2: `if value:` guards the loop
  std::size_t offset = 0;
  Value attribute;
  if (by_attribute) {
    if (args.positional.empty()) eval_fail("Missing parameter for attribute name");
    attribute = args.positional[0];
    offset = 1;
  }
  std::optional<std::string> test_name;
  CallArgs test_args;
  if (args.positional.size() > offset) {
    test_name = str_of(in, args.positional[offset]);
    test_args.positional.assign(args.positional.begin() + static_cast<std::ptrdiff_t>(offset) + 1,
                                args.positional.end());
    test_args.keywords = args.keywords;
  }
  std::vector<Value> out;
  for (const Value& item : in.iterate(v)) {
    const Value subject = by_attribute ? get_attribute_path(in, item, attribute, std::nullopt) : item;
    const bool passed = test_name ? in.test(*test_name, subject, test_args) : truthy(subject);
    if (passed == select) out.push_back(item);
  }
  return in.heap().generator(std::move(out), "generator");
}

Value f_select(Interpreter& in, const Value& v, const CallArgs& args) {
  return select_or_reject(in, v, args, true, false);
}
Value f_reject(Interpreter& in, const Value& v, const CallArgs& args) {
  return select_or_reject(in, v, args, false, false);
}
Value f_selectattr(Interpreter& in, const Value& v, const CallArgs& args) {
  return select_or_reject(in, v, args, true, true);
}
Value f_rejectattr(Interpreter& in, const Value& v, const CallArgs& args) {
  return select_or_reject(in, v, args, false, true);
}

Value f_replace(Interpreter& in, const Value& v, const CallArgs& args) {
  BoundArgs a("replace", args, {"old", "new", "count"}, 2);
  const std::string s = str_of(in, v);
  const std::string old = str_of(in, a.get(0));
  const std::string replacement = str_of(in, a.get(1));
  const long long count = a.has(2) && !a.get(2).is_none() ? int_arg("replace", "count", a.get(2)) : -1;
  in.budget().charge(s.size());
  in.budget().check_string_size(replaced_size(s, old, replacement, count));
  return in.string(replace(s, old, replacement, count));
}

Value f_reverse(Interpreter& in, const Value& v, const CallArgs& args) {
  BoundArgs("reverse", args, {});
  if (v.is_string()) {
    const std::vector<std::size_t> offsets = code_point_offsets(v.as_string());
    std::string out;
    for (std::size_t i = offsets.size() - 1; i > 0; --i)
      out += v.as_string().substr(offsets[i - 1], offsets[i] - offsets[i - 1]);
    return in.string(std::move(out));
  }
  const bool reversible = v.is(Kind::kList) || v.is(Kind::kDict) || v.is_undefined();
  std::vector<Value> items = in.iterate(v);
  std::reverse(items.begin(), items.end());
  if (!reversible) return in.heap().list(std::move(items));
  return in.heap().generator(std::move(items), "list_reverseiterator");
}

Value f_round(Interpreter&, const Value& v, const CallArgs& args) {
  BoundArgs a("round", args, {"precision", "method"});
  const std::int64_t precision = a.has(0) ? int_arg("round", "precision", a.get(0)) : 0;
  std::string method = "common";
  if (a.has(1)) method = a.get(1).is_string() ? a.get(1).as_string() : "";
  if (method != "common" && method != "ceil" && method != "floor")
    eval_fail("method must be common, ceil or floor");
  if (v.is_undefined()) fail_undefined(v);
  if (!v.is_number()) eval_fail(fmt::format("type {} doesn't define __round__ method", type_name(v)));
  if (precision < -300 || precision > 300) eval_fail("round() precision out of range");
  const double scale = std::pow(10.0, static_cast<double>(precision));
  if (method != "common") {
    const double x = v.to_double() * scale;
    return Value::from_float((method == "ceil" ? std::ceil(x) : std::floor(x)) / scale);
  }
  if (v.is_integral() && precision >= 0) return Value::from_int(v.as_int());
  const double x = v.to_double();
  if (!std::isfinite(x)) return Value::from_float(x);
  if (precision == 0) return Value::from_float(std::nearbyint(x));
  if (precision > 0) {
    // Python rounds the exact binary value to `precision` decimals, as %.Nf does.
    const std::string text = fmt::format("{:.{}f}", x, precision);
    double rounded = 0;
    std::from_chars(text.data(), text.data() + text.size(), rounded);
    return Value::from_float(rounded);
  }
  return Value::from_float(std::nearbyint(x / (1 / scale)) * (1 / scale));
}

Value f_safe(Interpreter& in, const Value& v, const CallArgs& args) {
  BoundArgs("safe", args, {});
  return in.string(str_of(in, v));
}

Value f_sort(Interpreter& in, const Value& v, const CallArgs& args) {
  BoundArgs a("sort", args, {"reverse", "case_sensitive", "attribute"});
  const std::vector<Value> items = in.iterate(v);
  const Value attribute = a.get_or(2, Value::none());
  const bool case_sensitive = a.flag(1);
  std::vector<std::pair<Value, Value>> keyed;
  for (const Value& item : items)
    keyed.emplace_back(multi_sort_key(in, item, attribute, case_sensitive), item);
  const bool reverse = a.flag(0);
  std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& x, const auto& y) {
    return reverse ? less_than(y.first, x.first) : less_than(x.first, y.first);
  });
  std::vector<Value> out;
  for (auto& entry : keyed) out.push_back(entry.second);
  return in.heap().list(std::move(out));
}

Value f_string(Interpreter& in, const Value& v, const CallArgs& args) {
  BoundArgs("string", args, {});
  return v.is_string() ? v : in.string(str_of(in, v));
}

Value f_sum(Interpreter& in, const Value& v, const CallArgs& args) {
  BoundArgs a("sum", args, {"attribute", "start"});
  Value total = a.get_or(1, Value::from_int(0));
  if (total.is_string()) eval_fail("sum() can't sum strings [use ''.join(seq) instead]");
  for (const Value& item : in.iterate(v)) {
    total = in.add(total, a.has(0) ? get_attribute_path(in, item, a.get(0), std::nullopt) : item);
  }
  return total;
}

bool is_title_separator(char32_t c) {
  return c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || is_space(c);
}

Value f_title(Interpreter& in, const Value& v, const CallArgs& args) {
  BoundArgs("title", args, {});
  // jinja2 splits on runs of [-\s({[<] and capitalizes the first character of every piece.
  const std::string s = str_of(in, v);
  std::string out;
  std::size_t pos = 0;
  while (pos < s.size()) {
    const std::size_t start = pos;
    std::size_t probe = pos;
    const bool separator = is_title_separator(next_code_point(s, probe));
    std::size_t end = probe;
    while (end < s.size()) {
      std::size_t next = end;
      if (is_title_separator(next_code_point(s, next)) != separator) break;
      end = next;
    }
    out += to_upper(s.substr(start, probe - start));
    out += to_lower(s.substr(probe, end - probe));
    pos = end;
  }
  return in.string(std::move(out));
}

Value f_tojson(Interpreter& in, const Value& v, const CallArgs& args) {
  BoundArgs a("tojson", args, {"ensure_ascii", "indent", "separators", "sort_keys"});
  JsonDumpOptions options;
  options.ensure_ascii = a.flag(0);
  options.sort_keys = a.flag(3);
  if (a.has(1) && !a.get(1).is_none()) {
    const Value& indent = a.get(1);
    if (indent.is_string()) {
      options.indent = indent.as_string();
    } else if (indent.is_integral()) {
      options.indent =
          std::string(static_cast<std::size_t>(std::clamp<std::int64_t>(indent.as_int(), 0, 1000)), ' ');
    } else {
      eval_fail(fmt::format("can't multiply sequence by non-int of type '{}'", type_name(indent)));
    }
    options.item_separator = ",";
  }
  if (a.has(2) && !a.get(2).is_none()) {
    const Value& separators = a.get(2);
    if (!separators.is(Kind::kList) || separators.as_list().items.size() != 2 ||
        !separators.as_list().items[0].is_string() || !separators.as_list().items[1].is_string()) {
      eval_fail("tojson separators must be a pair of strings");
    }
    options.item_separator = separators.as_list().items[0].as_string();
    options.key_separator = separators.as_list().items[1].as_string();
  }
  return in.string(dump_json(v, options, in.budget()));
}

Value f_trim(Interpreter& in, const Value& v, const CallArgs& args) {
  BoundArgs a("trim", args, {"chars"});
  const std::string s = str_of(in, v);
  in.budget().charge(s.size());
  if (a.has(0) && !a.get(0).is_none()) {
    const std::string& chars = string_arg("trim", "chars", a.get(0));
    return in.string(strip(s, &chars, true, true));
  }
  return in.string(strip(s, nullptr, true, true));
}

Value f_unique(Interpreter& in, const Value& v, const CallArgs& args) {
  BoundArgs a("unique", args, {"case_sensitive", "attribute"});
  const Value attribute = a.get_or(1, Value::none());
  const bool case_sensitive = a.flag(0);
  std::vector<Value> seen;
  std::vector<Value> out;
  for (const Value& item : in.iterate(v)) {
    const Value key = sort_key(in, item, attribute, case_sensitive);
    check_hashable(key);
    in.budget().charge(seen.size());
    if (std::none_of(seen.begin(), seen.end(), [&](const Value& s) { return equals(s, key); })) {
      seen.push_back(key);
      out.push_back(item);
    }
  }
  return in.heap().generator(std::move(out), "generator");
}

Value f_wordcount(Interpreter& in, const Value& v, const CallArgs& args) {
  BoundArgs("wordcount", args, {});
  const std::string s = str_of(in, v);
  std::int64_t words = 0;
  bool in_word = false;
  std::size_t pos = 0;
  while (pos < s.size()) {
    const char32_t c = next_code_point(s, pos);
    const bool word_char = c == '_' || is_alpha(c) || is_digit(c) || (c >= 0x300 && c <= 0x36F);
    if (word_char && !in_word) ++words;
    in_word = word_char;
  }
  return Value::from_int(words);
}

struct FilterEntry {
  std::string_view name;
  FilterFn fn;
};

constexpr std::array kFilters = {
    FilterEntry{"abs", f_abs},
    FilterEntry{"attr", f_attr},
    FilterEntry{"batch", f_batch},
    FilterEntry{"capitalize", f_capitalize},
    FilterEntry{"center", f_center},
    FilterEntry{"count", f_length},
    FilterEntry{"d", f_default},
    FilterEntry{"default", f_default},
    FilterEntry{"dictsort", f_dictsort},
    FilterEntry{"e", f_escape},
    FilterEntry{"escape", f_escape},
    FilterEntry{"first", f_first},
    FilterEntry{"float", f_float},
    FilterEntry{"format", f_format},
    FilterEntry{"indent", f_indent},
    FilterEntry{"int", f_int},
    FilterEntry{"items", f_items},
    FilterEntry{"join", f_join},
    FilterEntry{"last", f_last},
    FilterEntry{"length", f_length},
    FilterEntry{"list", f_list},
    FilterEntry{"lower", f_lower},
    FilterEntry{"map", f_map},
    FilterEntry{"max", f_max},
    FilterEntry{"min", f_min},
    FilterEntry{"reject", f_reject},
    FilterEntry{"rejectattr", f_rejectattr},
    FilterEntry{"replace", f_replace},
    FilterEntry{"reverse", f_reverse},
    FilterEntry{"round", f_round},
    FilterEntry{"safe", f_safe},
    FilterEntry{"select", f_select},
    FilterEntry{"selectattr", f_selectattr},
    FilterEntry{"sort", f_sort},
    FilterEntry{"string", f_string},
    FilterEntry{"sum", f_sum},
    FilterEntry{"title", f_title},
    FilterEntry{"tojson", f_tojson},
    FilterEntry{"trim", f_trim},
    FilterEntry{"unique", f_unique},
    FilterEntry{"upper", f_upper},
    FilterEntry{"wordcount", f_wordcount},
};

// jinja2 builtins left out: formatting for HTML pages, randomness, grouping.
constexpr std::array<std::string_view, 12> kUnsupportedJinjaFilters = {
    "filesizeformat", "forceescape", "groupby",   "pprint", "random",   "slice",
    "striptags",      "truncate",    "urlencode", "urlize", "wordwrap", "xmlattr"};

const FilterEntry* find_filter(std::string_view name) {
  for (const FilterEntry& entry : kFilters) {
    if (entry.name == name) return &entry;
  }
  return nullptr;
}

}  // namespace

bool is_supported_filter(std::string_view name) { return find_filter(name) != nullptr; }

bool is_jinja_filter(std::string_view name) {
  return is_supported_filter(name) ||
         std::find(kUnsupportedJinjaFilters.begin(), kUnsupportedJinjaFilters.end(), name) !=
             kUnsupportedJinjaFilters.end();
}

Value apply_filter(Interpreter& in, std::string_view name, const Value& subject, const CallArgs& args) {
  const FilterEntry* entry = find_filter(name);
  if (entry == nullptr) {
    eval_fail(is_jinja_filter(name) ? fmt::format("the '{}' filter is not supported in chat templates", name)
                                    : fmt::format("no filter named '{}'", name));
  }
  return entry->fn(in, subject, args);
}

}  // namespace tokenmill::jinja
