#include "tokenizer/jinja_methods.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <optional>

#include "tokenizer/jinja_args.h"
#include "tokenizer/jinja_eval.h"
#include "tokenizer/jinja_globals.h"
#include "tokenizer/jinja_str_methods.h"
#include "tokenizer/jinja_unicode.h"

namespace tokenmill::jinja {
namespace {

constexpr std::array<std::string_view, 5> kDictMethods = {"copy", "get", "items", "keys", "values"};
constexpr std::array<std::string_view, 5> kDictMutators = {"clear", "pop", "popitem", "setdefault", "update"};
constexpr std::array<std::string_view, 3> kListMethods = {"copy", "count", "index"};
constexpr std::array<std::string_view, 8> kListMutators = {"append", "clear",  "extend",  "insert",
                                                           "pop",    "remove", "reverse", "sort"};
constexpr std::array<std::string_view, 2> kTupleMethods = {"count", "index"};

template <std::size_t N>
std::optional<std::string_view> find_name(const std::array<std::string_view, N>& names,
                                          std::string_view name) {
  for (std::string_view n : names) {
    if (n == name) return n;
  }
  return std::nullopt;
}

Value bound_method(Interpreter& in, const Value& self, std::string_view name) {
  Callable method;
  method.kind = CallableKind::kMethod;
  method.name = name;
  method.self = self;
  return in.heap().callable(method);
}

Value unsafe(Interpreter& in, const Value& obj, std::string_view name) {
  return in.heap().undefined(
      fmt::format("access to attribute '{}' of '{}' object is unsafe.", name, type_name(obj)));
}

std::optional<Value> loop_attribute(Interpreter& in, const Value& obj, std::string_view name) {
  LoopState& loop = obj.as_loop();
  const auto length = static_cast<std::int64_t>(loop.items->items.size());
  const auto index0 = static_cast<std::int64_t>(loop.index0);
  if (name == "index") return Value::from_int(index0 + 1);
  if (name == "index0") return Value::from_int(index0);
  if (name == "revindex") return Value::from_int(length - index0);
  if (name == "revindex0") return Value::from_int(length - index0 - 1);
  if (name == "first") return Value::from_bool(index0 == 0);
  if (name == "last") return Value::from_bool(index0 == length - 1);
  if (name == "length") return Value::from_int(length);
  if (name == "depth") return Value::from_int(static_cast<std::int64_t>(loop.depth0) + 1);
  if (name == "depth0") return Value::from_int(static_cast<std::int64_t>(loop.depth0));
  if (name == "previtem") {
    if (index0 > 0) return loop.items->items[loop.index0 - 1];
    return in.heap().undefined("there is no previous item");
  }
  if (name == "nextitem") {
    if (index0 + 1 < length) return loop.items->items[loop.index0 + 1];
    return in.heap().undefined("there is no next item");
  }
  if (name == "cycle" || name == "changed") {
    Callable method;
    method.kind = name == "cycle" ? CallableKind::kLoopCycle : CallableKind::kLoopChanged;
    method.name = name == "cycle" ? "cycle" : "changed";
    method.loop = &loop;
    return in.heap().callable(method);
  }
  return std::nullopt;
}

// ---- dict and list methods --------------------------------------------------------------

Value call_dict_method(Interpreter& in, const Dict& d, std::string_view name, const CallArgs& args) {
  in.budget().charge(d.entries.size());
  if (name == "get") {
    BoundArgs a(name, args, {"key", "default"}, 1);
    check_hashable(a.get(0));
    const Value* v = d.find(a.get(0));
    return v != nullptr ? *v : a.get_or(1, Value::none());
  }
  BoundArgs(name, args, {});
  if (name == "copy") return in.heap().dict(d);
  std::vector<Value> items;
  for (const auto& [key, value] : d.entries) {
    if (name == "keys") {
      items.push_back(key);
    } else if (name == "values") {
      items.push_back(value);
    } else {
      items.push_back(in.heap().list({key, value}, ListFlavor::kTuple));
    }
  }
  const ListFlavor flavor = name == "keys"     ? ListFlavor::kDictKeys
                            : name == "values" ? ListFlavor::kDictValues
                                               : ListFlavor::kDictItems;
  return in.heap().list(std::move(items), flavor);
}

Value call_list_method(Interpreter& in, const List& l, std::string_view name, const CallArgs& args) {
  in.budget().charge(l.items.size());
  if (name == "copy") {
    BoundArgs(name, args, {});
    return in.heap().list(l.items, l.flavor);
  }
  if (name == "count") {
    BoundArgs a(name, args, {"value"}, 1);
    return Value::from_int(
        std::count_if(l.items.begin(), l.items.end(), [&](const Value& v) { return equals(v, a.get(0)); }));
  }
  BoundArgs a(name, args, {"value", "start", "stop"}, 1);
  const auto size = static_cast<std::int64_t>(l.items.size());
  const auto bound = [&](std::size_t i, std::int64_t fallback) {
    if (!a.has(i)) return fallback;
    std::int64_t v = int_arg("index", "start/stop", a.get(i));
    if (v < 0) v = std::max<std::int64_t>(v + size, 0);
    return std::min(v, size);
  };
  for (std::int64_t i = bound(1, 0); i < bound(2, size); ++i) {
    if (equals(l.items[static_cast<std::size_t>(i)], a.get(0))) return Value::from_int(i);
  }
  eval_fail(
      fmt::format("{} is not in {}", in.str(a.get(0)), l.flavor == ListFlavor::kTuple ? "tuple" : "list"));
}

}  // namespace

std::optional<Value> builtin_attribute(Interpreter& in, const Value& obj, std::string_view name) {
  switch (obj.kind()) {
    case Kind::kString:
      if (auto method = str_method_name(name)) return bound_method(in, obj, *method);
      return std::nullopt;
    case Kind::kDict:
      if (auto method = find_name(kDictMethods, name)) return bound_method(in, obj, *method);
      if (find_name(kDictMutators, name)) return unsafe(in, obj, name);
      return std::nullopt;
    case Kind::kList:
      if (obj.as_list().flavor == ListFlavor::kList) {
        if (auto method = find_name(kListMethods, name)) return bound_method(in, obj, *method);
        if (find_name(kListMutators, name)) return unsafe(in, obj, name);
      } else if (obj.as_list().flavor == ListFlavor::kTuple) {
        if (auto method = find_name(kTupleMethods, name)) return bound_method(in, obj, *method);
      }
      return std::nullopt;
    case Kind::kNamespace:
      if (const Value* v = obj.as_namespace().attrs.find(name)) return *v;
      return std::nullopt;
    case Kind::kLoop: return loop_attribute(in, obj, name);
    default: return std::nullopt;
  }
}

Value call_builtin(Interpreter& in, const Callable& fn, const CallArgs& args) {
  switch (fn.kind) {
    case CallableKind::kGlobal: return call_global(in, fn.name, args);
    case CallableKind::kMethod:
      if (fn.self.is_string()) return call_str_method(in, fn.self.as_string(), fn.name, args);
      if (fn.self.is(Kind::kDict)) return call_dict_method(in, fn.self.as_dict(), fn.name, args);
      if (fn.self.is(Kind::kList)) return call_list_method(in, fn.self.as_list(), fn.name, args);
      break;
    case CallableKind::kLoopCycle: {
      if (args.positional.empty()) eval_fail("no items for cycling given");
      return args.positional[fn.loop->index0 % args.positional.size()];
    }
    case CallableKind::kLoopChanged: {
      const Value current = in.heap().list(args.positional, ListFlavor::kTuple);
      if (fn.loop->has_changed && equals(fn.loop->last_changed, current)) return Value::from_bool(false);
      fn.loop->has_changed = true;
      fn.loop->last_changed = current;
      return Value::from_bool(true);
    }
    default: break;
  }
  eval_fail(fmt::format("'{}' cannot be called", fn.name));
}

}  // namespace tokenmill::jinja
