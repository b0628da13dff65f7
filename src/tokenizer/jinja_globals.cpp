#include "tokenizer/jinja_globals.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <vector>

#include "tokenizer/jinja_args.h"
#include "tokenizer/jinja_eval.h"

namespace tokenmill::jinja {
namespace {

// Bounds the output of range() as jinja2's sandbox does.
constexpr std::int64_t kMaxRange = 100000;

Dict dict_from_args(Interpreter& in, std::string_view function, const CallArgs& args) {
  if (args.positional.size() > 1) {
    eval_fail(fmt::format("{} expected at most 1 argument, got {}", function, args.positional.size()));
  }
  Dict d;
  const auto put = [&](const Value& key, const Value& value) {
    check_hashable(key);
    for (auto& [k, v] : d.entries) {
      if (equals(k, key)) {
        v = value;
        return;
      }
    }
    d.entries.emplace_back(key, value);
  };
  if (!args.positional.empty()) {
    const Value& source = args.positional[0];
    if (source.is(Kind::kDict)) {
      for (const auto& [key, value] : source.as_dict().entries) put(key, value);
    } else {
      for (const Value& pair : in.iterate(source)) {
        const std::vector<Value> kv = in.iterate(pair);
        if (kv.size() != 2)
          eval_fail("dictionary update sequence element has the wrong length; 2 is required");
        put(kv[0], kv[1]);
      }
    }
  }
  for (const auto& [key, value] : args.keywords) put(in.string(key), value);
  return d;
}

std::string strftime_now(Interpreter& in, const std::string& format) {
  if (format.find('\0') != std::string::npos) eval_fail("embedded null character");
  std::tm tm{};
  long microseconds = 0;
  if (in.now()) {
    tm = *in.now();
    tm.tm_isdst = 0;
    const std::time_t t = timegm(&tm);  // normalizes the fields and fills weekday / yearday
    (void)t;
  } else {
    const auto now = std::chrono::system_clock::now();
    const std::time_t t = std::chrono::system_clock::to_time_t(now);
    localtime_r(&t, &tm);
    microseconds = static_cast<long>(
        std::chrono::duration_cast<std::chrono::microseconds>(now.time_since_epoch()).count() % 1000000);
  }
  // datetime.strftime handles %f, %z and %Z itself (a naive datetime has no zone).
  std::string c_format;
  for (std::size_t i = 0; i < format.size(); ++i) {
    if (format[i] != '%' || i + 1 >= format.size()) {
      c_format += format[i];
      continue;
    }
    const char d = format[++i];
    if (d == 'f') {
      c_format += fmt::format("{:06d}", microseconds);
    } else if (d != 'z' && d != 'Z') {
      c_format += '%';
      c_format += d;
    }
  }
  if (c_format.empty()) return "";
  std::vector<char> buffer(std::max<std::size_t>(64, c_format.size() * 8));
  while (true) {
    const std::size_t n = std::strftime(buffer.data(), buffer.size(), c_format.c_str(), &tm);
    if (n > 0) return std::string(buffer.data(), n);
    if (buffer.size() > (std::size_t{1} << 20)) return "";
    buffer.resize(buffer.size() * 4);
  }
}

Value range_of(Interpreter& in, const CallArgs& args) {
  if (!args.keywords.empty()) eval_fail("range() takes no keyword arguments");
  if (args.positional.empty() || args.positional.size() > 3) {
    eval_fail(fmt::format("range expected 1 to 3 arguments, got {}", args.positional.size()));
  }
  std::int64_t start = 0;
  std::int64_t stop = 0;
  std::int64_t step = 1;
  const auto arg = [&](std::size_t i) { return int_arg("range", "start/stop/step", args.positional[i]); };
  if (args.positional.size() == 1) {
    stop = arg(0);
  } else {
    start = arg(0);
    stop = arg(1);
    if (args.positional.size() == 3) step = arg(2);
  }
  if (step == 0) eval_fail("range() arg 3 must not be zero");
  std::vector<Value> items;
  for (std::int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
    if (static_cast<std::int64_t>(items.size()) >= kMaxRange) {
      eval_fail(
          fmt::format("Range too big. The sandbox blocks ranges larger than MAX_RANGE ({}).", kMaxRange));
    }
    items.push_back(Value::from_int(i));
    if ((step > 0 && i > INT64_MAX - step) || (step < 0 && i < INT64_MIN - step)) break;
  }
  return in.heap().list(std::move(items));
}

}  // namespace

Value call_global(Interpreter& in, std::string_view name, const CallArgs& args) {
  if (name == "raise_exception") {
    BoundArgs a("raise_exception", args, {"message"}, 1);
    EvalError error(in.str(a.get(0)));
    error.raised_by_template = true;
    throw error;
  }
  if (name == "strftime_now") {
    BoundArgs a("strftime_now", args, {"format"}, 1);
    return in.string(strftime_now(in, string_arg("strftime_now", "format", a.get(0))));
  }
  if (name == "namespace") {
    Dict attrs = dict_from_args(in, "namespace", args);
    for (const auto& entry : attrs.entries) {
      if (entry.first.is_string() && !entry.first.as_string().empty() && entry.first.as_string()[0] == '_') {
        eval_fail(fmt::format(
            "Chat templates cannot store underscore-prefixed attributes on a namespace, but got '{}'",
            entry.first.as_string()));
      }
    }
    return in.heap().new_namespace(std::move(attrs));
  }
  if (name == "dict") return in.heap().dict(dict_from_args(in, "dict", args));
  if (name == "range") return range_of(in, args);
  eval_fail(fmt::format("unknown global function '{}'", name));
}

void install_globals(Heap& heap, Scope& globals) {
  for (std::string_view name : {"raise_exception", "strftime_now", "namespace", "dict", "range"}) {
    Callable fn;
    fn.kind = CallableKind::kGlobal;
    fn.name = name;
    globals.set(name, heap.callable(fn));
  }
}

}  // namespace tokenmill::jinja
