#include "tokenizer/jinja_str_methods.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>

#include "tokenizer/jinja_args.h"
#include "tokenizer/jinja_eval.h"
#include "tokenizer/jinja_unicode.h"

namespace tokenmill::jinja {
namespace {

constexpr std::array<std::string_view, 37> kStrMethods = {
    "capitalize",   "casefold",     "center",  "count",      "endswith",   "find",    "format",
    "index",        "isalnum",      "isalpha", "isdecimal",  "isdigit",    "islower", "isnumeric",
    "isspace",      "isupper",      "join",    "ljust",      "lower",      "lstrip",  "partition",
    "removeprefix", "removesuffix", "replace", "rfind",      "rindex",     "rjust",   "rpartition",
    "rsplit",       "rstrip",       "split",   "splitlines", "startswith", "strip",   "swapcase",
    "title",        "upper"};

// Python's start/end arguments of find, count, startswith... as code point indices.
struct Span {
  std::vector<std::size_t> offsets;  // code point -> byte offset
  std::int64_t begin = 0;
  std::int64_t end = 0;
};

Span span_of(const std::string& s, const BoundArgs& a, std::size_t start_index) {
  Span span;
  span.offsets = code_point_offsets(s);
  const auto length = static_cast<std::int64_t>(span.offsets.size()) - 1;
  const auto bound = [&](std::size_t i, std::int64_t fallback) {
    if (!a.has(i) || a.get(i).is_none()) return fallback;
    std::int64_t v = int_arg("str method", "start/end", a.get(i));
    if (v < 0) v = std::max<std::int64_t>(v + length, 0);
    return std::min(v, length);
  };
  span.begin = bound(start_index, 0);
  span.end = bound(start_index + 1, length);
  if (a.has(start_index) && !a.get(start_index).is_none() && int_arg("", "", a.get(start_index)) > length) {
    span.begin = length + 1;  // Python: start past the end never matches
  }
  return span;
}

std::int64_t index_of_byte(const std::vector<std::size_t>& offsets, std::size_t byte) {
  return std::lower_bound(offsets.begin(), offsets.end(), byte) - offsets.begin();
}

// Python str.find / rfind over [begin, end) in code points; -1 when absent.
std::int64_t find_in(const std::string& s, const std::string& sub, const Span& span, bool reverse) {
  if (span.begin > span.end) return -1;
  const std::size_t lo = span.offsets[static_cast<std::size_t>(span.begin)];
  const std::size_t hi = span.offsets[static_cast<std::size_t>(span.end)];
  const std::string_view window = std::string_view(s).substr(lo, hi - lo);
  const std::size_t hit = reverse ? window.rfind(sub) : window.find(sub);
  if (hit == std::string_view::npos) return -1;
  return index_of_byte(span.offsets, lo + hit);
}

std::vector<std::string> split_whitespace(const std::string& s, std::int64_t maxsplit, bool from_right) {
  const std::vector<char32_t> cps = decode_utf8(s);
  std::vector<std::string> parts;
  const auto n = static_cast<std::int64_t>(cps.size());
  std::int64_t splits = 0;
  if (!from_right) {
    std::int64_t i = 0;
    while (true) {
      while (i < n && is_space(cps[i])) ++i;
      if (i >= n) break;
      if (maxsplit >= 0 && splits >= maxsplit) {  // the rest, trailing whitespace included
        parts.push_back(encode_utf8(std::vector<char32_t>(cps.begin() + i, cps.end())));
        break;
      }
      std::int64_t j = i;
      while (j < n && !is_space(cps[j])) ++j;
      parts.push_back(encode_utf8(std::vector<char32_t>(cps.begin() + i, cps.begin() + j)));
      ++splits;
      i = j;
    }
    return parts;
  }
  std::int64_t i = n;
  while (true) {
    while (i > 0 && is_space(cps[i - 1])) --i;
    if (i <= 0) break;
    if (maxsplit >= 0 && splits >= maxsplit) {  // the rest, leading whitespace included
      parts.push_back(encode_utf8(std::vector<char32_t>(cps.begin(), cps.begin() + i)));
      break;
    }
    std::int64_t j = i;
    while (j > 0 && !is_space(cps[j - 1])) --j;
    parts.push_back(encode_utf8(std::vector<char32_t>(cps.begin() + j, cps.begin() + i)));
    ++splits;
    i = j;
  }
  std::reverse(parts.begin(), parts.end());
  return parts;
}

std::vector<std::string> split_on(const std::string& s, const std::string& sep, std::int64_t maxsplit,
                                  bool from_right) {
  if (sep.empty()) eval_fail("empty separator");
  std::vector<std::string> parts;
  std::int64_t splits = 0;
  if (!from_right) {
    std::size_t pos = 0;
    while (maxsplit < 0 || splits < maxsplit) {
      const std::size_t hit = s.find(sep, pos);
      if (hit == std::string::npos) break;
      parts.push_back(s.substr(pos, hit - pos));
      pos = hit + sep.size();
      ++splits;
    }
    parts.push_back(s.substr(pos));
    return parts;
  }
  std::size_t end = s.size();
  while (maxsplit < 0 || splits < maxsplit) {
    if (end < sep.size()) break;
    const std::size_t hit = s.rfind(sep, end - sep.size());
    if (hit == std::string::npos) break;
    parts.push_back(s.substr(hit + sep.size(), end - hit - sep.size()));
    end = hit;
    ++splits;
  }
  parts.push_back(s.substr(0, end));
  std::reverse(parts.begin(), parts.end());
  return parts;
}

Value string_list(Interpreter& in, const std::vector<std::string>& parts,
                  ListFlavor flavor = ListFlavor::kList) {
  std::vector<Value> items;
  for (const std::string& part : parts) items.push_back(in.string(part));
  return in.heap().list(std::move(items), flavor);
}

bool all_code_points(const std::string& s, bool (*predicate)(char32_t)) {
  if (s.empty()) return false;
  std::size_t pos = 0;
  while (pos < s.size()) {
    if (!predicate(next_code_point(s, pos))) return false;
  }
  return true;
}

bool cased_all(const std::string& s, bool (*predicate)(char32_t)) {
  bool any = false;
  std::size_t pos = 0;
  while (pos < s.size()) {
    const char32_t c = next_code_point(s, pos);
    if (!is_cased(c)) continue;
    if (!predicate(c)) return false;
    any = true;
  }
  return any;
}

Value justify(Interpreter& in, const std::string& s, const BoundArgs& a, std::string_view method) {
  const std::int64_t width = int_arg(method, "width", a.get(0));
  std::string fill = " ";
  if (a.has(1)) {
    fill = string_arg(method, "fillchar", a.get(1));
    if (code_point_count(fill) != 1) eval_fail("The fill character must be exactly one character long");
  }
  const auto length = static_cast<std::int64_t>(code_point_count(s));
  if (width <= length) return in.string(s);
  in.budget().check_string_size(static_cast<std::size_t>(width) * fill.size());
  const std::int64_t margin = width - length;
  std::int64_t left = 0;
  if (method == "center") {
    left = margin / 2 + (margin & width & 1);
  } else if (method == "rjust") {
    left = margin;
  }
  std::string out;
  for (std::int64_t i = 0; i < left; ++i) out += fill;
  out += s;
  for (std::int64_t i = left; i < margin; ++i) out += fill;
  return in.string(std::move(out));
}

// str.format with positional ({}, {0}) and keyword ({name}) fields, !r/!s conversions and
// no format specs.
Value str_format(Interpreter& in, const std::string& format, const CallArgs& args) {
  std::string out;
  std::size_t auto_index = 0;
  std::size_t i = 0;
  while (i < format.size()) {
    const char c = format[i];
    if (c == '}') {
      if (i + 1 < format.size() && format[i + 1] == '}') {
        out += '}';
        i += 2;
        continue;
      }
      eval_fail("Single '}' encountered in format string");
    }
    if (c != '{') {
      out += c;
      ++i;
      continue;
    }
    if (i + 1 < format.size() && format[i + 1] == '{') {
      out += '{';
      i += 2;
      continue;
    }
    const std::size_t close = format.find('}', i);
    if (close == std::string::npos) eval_fail("Single '{' encountered in format string");
    std::string field = format.substr(i + 1, close - i - 1);
    i = close + 1;
    char conversion = 's';
    if (const std::size_t bang = field.find('!'); bang != std::string::npos) {
      if (bang + 2 != field.size()) eval_fail("str.format: unsupported conversion");
      conversion = field[bang + 1];
      field.resize(bang);
    }
    if (field.find_first_of(":.[") != std::string::npos)
      eval_fail("str.format: format specs and field lookups are not supported");
    Value v;
    if (field.empty() ||
        std::all_of(field.begin(), field.end(), [](char d) { return d >= '0' && d <= '9'; })) {
      const std::size_t index = field.empty() ? auto_index++ : static_cast<std::size_t>(std::stoul(field));
      if (index >= args.positional.size()) eval_fail(fmt::format("Replacement index {} out of range", index));
      v = args.positional[index];
    } else {
      const auto it = std::find_if(args.keywords.begin(), args.keywords.end(),
                                   [&](const auto& kw) { return kw.first == field; });
      if (it == args.keywords.end()) eval_fail(fmt::format("KeyError: '{}'", field));
      v = it->second;
    }
    if (conversion == 'r' || conversion == 'a') {
      append_repr(out, v, in.budget());
    } else if (conversion == 's') {
      append_str(out, v, in.budget());
    } else {
      eval_fail("str.format: unknown conversion");
    }
  }
  return in.string(std::move(out));
}

}  // namespace

Value call_str_method(Interpreter& in, const std::string& s, std::string_view name, const CallArgs& args) {
  in.budget().charge(s.size());
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    BoundArgs a(name, args, {"chars"});
    const bool left = name != "rstrip";
    const bool right = name != "lstrip";
    if (a.has(0) && !a.get(0).is_none()) {
      const std::string& chars = string_arg(name, "chars", a.get(0));
      return in.string(strip(s, &chars, left, right));
    }
    return in.string(strip(s, nullptr, left, right));
  }
  if (name == "split" || name == "rsplit") {
    BoundArgs a(name, args, {"sep", "maxsplit"});
    const std::int64_t maxsplit = a.has(1) ? int_arg(name, "maxsplit", a.get(1)) : -1;
    if (!a.has(0) || a.get(0).is_none())
      return string_list(in, split_whitespace(s, maxsplit, name == "rsplit"));
    return string_list(in, split_on(s, string_arg(name, "sep", a.get(0)), maxsplit, name == "rsplit"));
  }
  if (name == "splitlines") {
    BoundArgs a(name, args, {"keepends"});
    return string_list(in, splitlines(s, a.flag(0)));
  }
  if (name == "startswith" || name == "endswith") {
    BoundArgs a(name, args, {"prefix", "start", "end"}, 1);
    const Span span = span_of(s, a, 1);
    std::vector<std::string> candidates;
    const Value& p = a.get(0);
    if (p.is_string()) {
      candidates.push_back(p.as_string());
    } else if (p.is(Kind::kList) && p.as_list().flavor == ListFlavor::kTuple) {
      for (const Value& item : p.as_list().items) candidates.push_back(string_arg(name, "prefix", item));
    } else {
      eval_fail(fmt::format("{} first arg must be str or a tuple of str, not {}", name, type_name(p)));
    }
    if (span.begin > span.end) return Value::from_bool(false);
    const std::size_t lo = span.offsets[static_cast<std::size_t>(span.begin)];
    const std::size_t hi = span.offsets[static_cast<std::size_t>(span.end)];
    const std::string_view window = std::string_view(s).substr(lo, hi - lo);
    for (const std::string& c : candidates) {
      if (name == "startswith" ? window.substr(0, c.size()) == c
                               : window.size() >= c.size() && window.substr(window.size() - c.size()) == c) {
        return Value::from_bool(true);
      }
    }
    return Value::from_bool(false);
  }
  if (name == "replace") {
    BoundArgs a(name, args, {"old", "new", "count"}, 2);
    const std::string& old = string_arg(name, "old", a.get(0));
    const std::string& replacement = string_arg(name, "new", a.get(1));
    const long long count = a.has(2) ? int_arg(name, "count", a.get(2)) : -1;
    in.budget().check_string_size(replaced_size(s, old, replacement, count));
    return in.string(replace(s, old, replacement, count));
  }
  if (name == "upper" || name == "lower" || name == "casefold" || name == "title" || name == "capitalize" ||
      name == "swapcase") {
    BoundArgs(name, args, {});
    if (name == "upper") return in.string(to_upper(s));
    if (name == "lower" || name == "casefold") return in.string(to_lower(s));
    if (name == "title") return in.string(to_title(s));
    if (name == "capitalize") return in.string(capitalize(s));
    std::string out;
    std::size_t pos = 0;
    while (pos < s.size()) {
      const std::size_t begin = pos;
      const char32_t c = next_code_point(s, pos);
      const std::string one = s.substr(begin, pos - begin);
      out += is_upper(c) ? to_lower(one) : is_lower(c) ? to_upper(one) : one;
    }
    return in.string(std::move(out));
  }
  if (name == "find" || name == "rfind" || name == "index" || name == "rindex" || name == "count") {
    BoundArgs a(name, args, {"sub", "start", "end"}, 1);
    const std::string& sub = string_arg(name, "sub", a.get(0));
    const Span span = span_of(s, a, 1);
    if (name == "count") {
      if (span.begin > span.end) return Value::from_int(0);
      if (sub.empty()) return Value::from_int(span.end - span.begin + 1);
      const std::size_t lo = span.offsets[static_cast<std::size_t>(span.begin)];
      const std::size_t hi = span.offsets[static_cast<std::size_t>(span.end)];
      const std::string_view window = std::string_view(s).substr(lo, hi - lo);
      std::int64_t count = 0;
      for (std::size_t pos = window.find(sub); pos != std::string_view::npos;
           pos = window.find(sub, pos + sub.size())) {
        ++count;
      }
      return Value::from_int(count);
    }
    const std::int64_t found = find_in(s, sub, span, name == "rfind" || name == "rindex");
    if (found < 0 && (name == "index" || name == "rindex")) eval_fail("substring not found");
    return Value::from_int(found);
  }
  if (name == "join") {
    BoundArgs a(name, args, {"iterable"}, 1);
    std::string out;
    std::size_t index = 0;
    for (const Value& item : in.iterate(a.get(0))) {
      if (!item.is_string()) {
        eval_fail(fmt::format("sequence item {}: expected str instance, {} found", index, type_name(item)));
      }
      if (index++ > 0) out += s;
      in.budget().check_string_size(out.size() + item.as_string().size());
      out += item.as_string();
    }
    return in.string(std::move(out));
  }
  if (name == "isdigit" || name == "isdecimal" || name == "isnumeric") {
    BoundArgs(name, args, {});
    return Value::from_bool(all_code_points(s, is_digit));
  }
  if (name == "isalpha") return BoundArgs(name, args, {}), Value::from_bool(all_code_points(s, is_alpha));
  if (name == "isalnum") {
    BoundArgs(name, args, {});
    return Value::from_bool(all_code_points(s, [](char32_t c) { return is_alpha(c) || is_digit(c); }));
  }
  if (name == "isspace") return BoundArgs(name, args, {}), Value::from_bool(all_code_points(s, is_space));
  if (name == "isupper") return BoundArgs(name, args, {}), Value::from_bool(cased_all(s, is_upper));
  if (name == "islower") return BoundArgs(name, args, {}), Value::from_bool(cased_all(s, is_lower));
  if (name == "center" || name == "ljust" || name == "rjust") {
    BoundArgs a(name, args, {"width", "fillchar"}, 1);
    return justify(in, s, a, name);
  }
  if (name == "partition" || name == "rpartition") {
    BoundArgs a(name, args, {"sep"}, 1);
    const std::string& sep = string_arg(name, "sep", a.get(0));
    if (sep.empty()) eval_fail("empty separator");
    const std::size_t hit = name == "partition" ? s.find(sep) : s.rfind(sep);
    if (hit == std::string::npos) {
      return string_list(
          in, name == "partition" ? std::vector<std::string>{s, "", ""} : std::vector<std::string>{"", "", s},
          ListFlavor::kTuple);
    }
    return string_list(in, {s.substr(0, hit), sep, s.substr(hit + sep.size())}, ListFlavor::kTuple);
  }
  if (name == "removeprefix" || name == "removesuffix") {
    BoundArgs a(name, args, {"fix"}, 1);
    const std::string& fix = string_arg(name, "fix", a.get(0));
    if (name == "removeprefix" && s.compare(0, fix.size(), fix) == 0) return in.string(s.substr(fix.size()));
    if (name == "removesuffix" && !fix.empty() && s.size() >= fix.size() &&
        s.compare(s.size() - fix.size(), fix.size(), fix) == 0) {
      return in.string(s.substr(0, s.size() - fix.size()));
    }
    return in.string(s);
  }
  if (name == "format") return str_format(in, s, args);
  eval_fail(fmt::format("str.{}() is not supported", name));
}

std::optional<std::string_view> str_method_name(std::string_view name) {
  for (std::string_view n : kStrMethods) {
    if (n == name) return n;
  }
  return std::nullopt;
}

}  // namespace tokenmill::jinja
