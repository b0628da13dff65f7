#include "tokenizer/jinja_printf.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <optional>

#include "tokenizer/jinja_unicode.h"

namespace tokenmill::jinja {
namespace {

struct Spec {
  bool left = false;
  bool zero = false;
  bool plus = false;
  bool space = false;
  bool alternate = false;
  int width = -1;
  int precision = -1;
};

std::string padded(const Spec& spec, std::string sign, const std::string& body, bool numeric) {
  const std::size_t length = sign.size() + code_point_count(body);
  if (spec.width < 0 || static_cast<std::size_t>(spec.width) <= length) return sign + body;
  const std::size_t fill = static_cast<std::size_t>(spec.width) - length;
  if (spec.left) return sign + body + std::string(fill, ' ');
  if (spec.zero && numeric) return sign + std::string(fill, '0') + body;
  return std::string(fill, ' ') + sign + body;
}

std::string sign_of(const Spec& spec, bool negative) {
  if (negative) return "-";
  if (spec.plus) return "+";
  if (spec.space) return " ";
  return "";
}

std::int64_t integer_of(const Value& v, char conversion) {
  if (v.is_integral()) return v.as_int();
  if (v.is(Kind::kFloat) && (conversion == 'd' || conversion == 'i' || conversion == 'u')) {
    const double d = v.as_float();
    if (!std::isfinite(d) || std::fabs(d) >= 9.2e18) eval_fail("cannot convert float to a 64-bit integer");
    return static_cast<std::int64_t>(d);
  }
  eval_fail(fmt::format(
      "%{} format: {} is required, not {}", conversion,
      conversion == 'd' || conversion == 'i' || conversion == 'u' ? "a real number" : "an integer",
      type_name(v)));
}

std::string convert(char conversion, const Spec& spec, const Value& v, Budget& budget) {
  switch (conversion) {
    case 's':
    case 'r':
    case 'a': {
      std::string text;
      if (conversion == 's') {
        text = to_str(v, budget);
      } else {
        append_repr(text, v, budget);
      }
      if (spec.precision >= 0) {
        const std::vector<std::size_t> offsets = code_point_offsets(text);
        if (static_cast<std::size_t>(spec.precision) + 1 < offsets.size())
          text.resize(offsets[spec.precision]);
      }
      return padded(spec, "", text, false);
    }
    case 'd':
    case 'i':
    case 'u': {
      const std::int64_t n = integer_of(v, conversion);
      const std::uint64_t magnitude =
          n < 0 ? 0 - static_cast<std::uint64_t>(n) : static_cast<std::uint64_t>(n);
      std::string digits = fmt::format("{}", magnitude);
      if (spec.precision > 0 && digits.size() < static_cast<std::size_t>(spec.precision)) {
        digits.insert(0, static_cast<std::size_t>(spec.precision) - digits.size(), '0');
      }
      return padded(spec, sign_of(spec, n < 0), digits, true);
    }
    case 'x':
    case 'X':
    case 'o': {
      const std::int64_t n = integer_of(v, conversion);
      const std::uint64_t magnitude =
          n < 0 ? 0 - static_cast<std::uint64_t>(n) : static_cast<std::uint64_t>(n);
      std::string digits = conversion == 'o'   ? fmt::format("{:o}", magnitude)
                           : conversion == 'x' ? fmt::format("{:x}", magnitude)
                                               : fmt::format("{:X}", magnitude);
      std::string sign = sign_of(spec, n < 0);
      if (spec.alternate) sign += conversion == 'o' ? "0o" : conversion == 'x' ? "0x" : "0X";
      return padded(spec, sign, digits, true);
    }
    case 'e':
    case 'E':
    case 'f':
    case 'F':
    case 'g':
    case 'G': {
      if (!v.is_number()) eval_fail(fmt::format("must be real number, not {}", type_name(v)));
      const double d = v.to_double();
      const int precision = spec.precision < 0 ? 6 : spec.precision;
      const double magnitude = std::fabs(d);
      std::string body;
      if (std::isnan(d)) {
        body = "nan";
      } else if (std::isinf(d)) {
        body = "inf";
      } else if (conversion == 'e' || conversion == 'E') {
        body = fmt::format("{:.{}e}", magnitude, precision);
      } else if (conversion == 'f' || conversion == 'F') {
        body = fmt::format("{:.{}f}", magnitude, precision);
      } else {
        body = spec.alternate ? fmt::format("{:#.{}g}", magnitude, precision == 0 ? 1 : precision)
                              : fmt::format("{:.{}g}", magnitude, precision == 0 ? 1 : precision);
      }
      if (conversion == 'E' || conversion == 'F' || conversion == 'G') body = to_upper(body);
      return padded(spec, sign_of(spec, std::signbit(d) && !std::isnan(d)), body, std::isfinite(d));
    }
    case 'c': {
      std::string text;
      if (v.is_string() && code_point_count(v.as_string()) == 1) {
        text = v.as_string();
      } else if (v.is_integral() && v.as_int() >= 0 && v.as_int() <= 0x10FFFF) {
        append_utf8(text, static_cast<char32_t>(v.as_int()));
      } else {
        eval_fail("%c requires an int in range(0x110000) or a single character");
      }
      return padded(spec, "", text, false);
    }
    default: eval_fail(fmt::format("unsupported format character '{}'", conversion));
  }
}

}  // namespace

std::string percent_format(std::string_view format, const Value& args, Budget& budget) {
  const bool is_tuple = args.is(Kind::kList) && args.as_list().flavor == ListFlavor::kTuple;
  // Python treats any subscriptable non-tuple, non-str argument as a mapping: it may then go
  // unused without "not all arguments converted".
  const bool is_mapping = args.is(Kind::kDict) || args.is_undefined() ||
                          (args.is(Kind::kList) && args.as_list().flavor == ListFlavor::kList);
  std::vector<Value> positional;
  if (is_tuple) {
    positional = args.as_list().items;
  } else {
    positional.push_back(args);
  }
  std::size_t next_arg = 0;
  bool used_mapping = false;
  const auto take = [&]() -> Value {
    if (next_arg >= positional.size()) eval_fail("not enough arguments for format string");
    return positional[next_arg++];
  };
  std::string out;
  std::size_t i = 0;
  while (i < format.size()) {
    const char c = format[i++];
    if (c != '%') {
      out += c;
      continue;
    }
    if (i >= format.size()) eval_fail("incomplete format");
    std::optional<Value> keyed;
    if (format[i] == '(') {
      if (!args.is(Kind::kDict)) eval_fail("format requires a mapping");
      const std::size_t close = format.find(')', i);
      if (close == std::string_view::npos) eval_fail("incomplete format key");
      const Value* v = args.as_dict().find(format.substr(i + 1, close - i - 1));
      if (v == nullptr) eval_fail(fmt::format("KeyError: '{}'", format.substr(i + 1, close - i - 1)));
      keyed = *v;
      used_mapping = true;
      i = close + 1;
    }
    Spec spec;
    for (; i < format.size(); ++i) {
      const char f = format[i];
      if (f == '-') {
        spec.left = true;
      } else if (f == '0') {
        spec.zero = true;
      } else if (f == '+') {
        spec.plus = true;
      } else if (f == ' ') {
        spec.space = true;
      } else if (f == '#') {
        spec.alternate = true;
      } else {
        break;
      }
    }
    const auto number = [&](int& slot) {
      if (i < format.size() && format[i] == '*') {
        const Value v = take();
        if (!v.is_integral()) eval_fail("* wants int");
        slot = static_cast<int>(std::clamp<std::int64_t>(v.as_int(), -1000000, 1000000));
        ++i;
        return;
      }
      if (i < format.size() && format[i] >= '0' && format[i] <= '9') {
        slot = 0;
        while (i < format.size() && format[i] >= '0' && format[i] <= '9') {
          slot = std::min(slot * 10 + (format[i++] - '0'), 1000000);
        }
      }
    };
    number(spec.width);
    if (spec.width < -1) {
      spec.left = true;
      spec.width = -spec.width;
    }
    if (i < format.size() && format[i] == '.') {
      ++i;
      spec.precision = 0;
      number(spec.precision);
    }
    while (i < format.size() && (format[i] == 'h' || format[i] == 'l' || format[i] == 'L')) ++i;
    if (i >= format.size()) eval_fail("incomplete format");
    const char conversion = format[i++];
    if (conversion == '%') {
      out += '%';
      continue;
    }
    const Value v = keyed ? *keyed : take();
    const std::string piece = convert(conversion, spec, v, budget);
    budget.check_string_size(out.size() + piece.size());
    budget.charge(piece.size());
    out += piece;
  }
  if (!used_mapping && !is_mapping && next_arg < positional.size()) {
    eval_fail("not all arguments converted during string formatting");
  }
  return out;
}

}  // namespace tokenmill::jinja
