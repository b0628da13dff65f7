#include "tokenizer/jinja_json.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "tokenizer/jinja_unicode.h"

namespace tokenmill::jinja {
namespace {

constexpr int kMaxDepth = 200;

class JsonWriter {
 public:
  JsonWriter(const JsonDumpOptions& options, Budget& budget) : options_(options), budget_(budget) {}

  void write(const Value& v, int level) {
    if (level > kMaxDepth) eval_fail(fmt::format("value nested more than {} levels deep", kMaxDepth));
    switch (v.kind()) {
      case Kind::kNone: put("null"); return;
      case Kind::kBool: put(v.as_bool() ? "true" : "false"); return;
      case Kind::kInt: put(fmt::format("{}", v.as_int())); return;
      case Kind::kFloat: put(float_text(v.as_float())); return;
      case Kind::kString: write_string(v.as_string()); return;
      case Kind::kList:
        if (v.as_list().flavor == ListFlavor::kList || v.as_list().flavor == ListFlavor::kTuple) {
          write_array(v.as_list().items, level);
          return;
        }
        break;
      case Kind::kDict: write_object(v.as_dict(), level); return;
      default: break;
    }
    eval_fail(fmt::format("Object of type {} is not JSON serializable", type_name(v)));
  }

  std::string take() { return std::move(out_); }

 private:
  static std::string float_text(double d) {
    if (std::isnan(d)) return "NaN";
    if (std::isinf(d)) return d > 0 ? "Infinity" : "-Infinity";
    return format_float(d);
  }

  void put(std::string_view s) {
    budget_.check_string_size(out_.size() + s.size());
    budget_.charge(s.size());
    out_.append(s);
  }

  void write_string(std::string_view s) {
    const std::size_t before = out_.size();
    budget_.check_string_size(before + s.size() + 2);
    out_ += '"';
    std::size_t pos = 0;
    while (pos < s.size()) {
      // Escapes grow the text up to 6x: keep the growth within the limit as it happens.
      if (out_.size() > budget_.limits().max_output_bytes) budget_.check_string_size(out_.size());
      const char32_t cp = next_code_point(s, pos);
      switch (cp) {
        case '"': out_ += "\\\""; break;
        case '\\': out_ += "\\\\"; break;
        case '\n': out_ += "\\n"; break;
        case '\r': out_ += "\\r"; break;
        case '\t': out_ += "\\t"; break;
        case '\b': out_ += "\\b"; break;
        case '\f': out_ += "\\f"; break;
        default:
          if (cp < 0x20) {
            out_ += fmt::format("\\u{:04x}", static_cast<unsigned>(cp));
          } else if (cp < 0x80 || !options_.ensure_ascii) {
            append_utf8(out_, cp);
          } else if (cp <= 0xFFFF) {
            out_ += fmt::format("\\u{:04x}", static_cast<unsigned>(cp));
          } else {
            const char32_t v = cp - 0x10000;
            out_ += fmt::format("\\u{:04x}\\u{:04x}", static_cast<unsigned>(0xD800 + (v >> 10)),
                                static_cast<unsigned>(0xDC00 + (v & 0x3FF)));
          }
      }
    }
    out_ += '"';
    budget_.check_string_size(out_.size());
    budget_.charge(out_.size() - before);
  }

  // A newline and `depth` indents, when indenting.
  void newline(int depth) {
    put("\n");
    for (int i = 0; i < depth; ++i) put(*options_.indent);
  }

  // Between two items of a container at `level`.
  void separate(int level) {
    put(options_.item_separator);
    if (options_.indent) newline(level + 1);
  }

  void open(int level) {
    if (options_.indent) newline(level + 1);
  }

  void close(int level) {
    if (options_.indent) newline(level);
  }

  void write_array(const std::vector<Value>& items, int level) {
    if (items.empty()) {
      put("[]");
      return;
    }
    put("[");
    open(level);
    for (std::size_t i = 0; i < items.size(); ++i) {
      if (i > 0) separate(level);
      write(items[i], level + 1);
    }
    close(level);
    put("]");
  }

  static std::string key_text(const Value& key) {
    switch (key.kind()) {
      case Kind::kString: return key.as_string();
      case Kind::kNone: return "null";
      case Kind::kBool: return key.as_bool() ? "true" : "false";
      case Kind::kInt: return fmt::format("{}", key.as_int());
      case Kind::kFloat: return float_text(key.as_float());
      default: eval_fail(fmt::format("keys must be str, int, float, bool or None, not {}", type_name(key)));
    }
  }

  void write_object(const Dict& d, int level) {
    if (d.entries.empty()) {
      put("{}");
      return;
    }
    std::vector<const std::pair<Value, Value>*> entries;
    entries.reserve(d.entries.size());
    for (const auto& entry : d.entries) entries.push_back(&entry);
    if (options_.sort_keys) {
      std::stable_sort(entries.begin(), entries.end(),
                       [](const auto* a, const auto* b) { return less_than(a->first, b->first); });
    }
    put("{");
    open(level);
    for (std::size_t i = 0; i < entries.size(); ++i) {
      if (i > 0) separate(level);
      write_string(key_text(entries[i]->first));
      put(options_.key_separator);
      write(entries[i]->second, level + 1);
    }
    close(level);
    put("}");
  }

  const JsonDumpOptions& options_;
  Budget& budget_;
  std::string out_;
};

template <class Json>
Value convert(const Json& json, Heap& heap, int depth) {
  if (depth > kMaxDepth) eval_fail(fmt::format("JSON input nested more than {} levels deep", kMaxDepth));
  switch (json.type()) {
    case nlohmann::json::value_t::null: return Value::none();
    case nlohmann::json::value_t::boolean: return Value::from_bool(json.template get<bool>());
    case nlohmann::json::value_t::number_integer: return Value::from_int(json.template get<std::int64_t>());
    case nlohmann::json::value_t::number_unsigned: {
      const auto u = json.template get<std::uint64_t>();
      if (u > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
        eval_fail(fmt::format("integer {} in the JSON input is too large (the limit is 2^63-1)", u));
      }
      return Value::from_int(static_cast<std::int64_t>(u));
    }
    case nlohmann::json::value_t::number_float: return Value::from_float(json.template get<double>());
    case nlohmann::json::value_t::string: return heap.string(json.template get<std::string>());
    case nlohmann::json::value_t::array: {
      std::vector<Value> items;
      items.reserve(json.size());
      for (const auto& item : json) items.push_back(convert(item, heap, depth + 1));
      return heap.list(std::move(items));
    }
    case nlohmann::json::value_t::object: {
      Dict d;
      d.entries.reserve(json.size());
      for (const auto& [key, item] : json.items()) {
        d.entries.emplace_back(heap.string(key), convert(item, heap, depth + 1));
      }
      return heap.dict(std::move(d));
    }
    default: eval_fail("the JSON input holds a binary or discarded value, which templates cannot use");
  }
}

}  // namespace

std::string dump_json(const Value& v, const JsonDumpOptions& options, Budget& budget) {
  JsonWriter writer(options, budget);
  writer.write(v, 0);
  return writer.take();
}

Value value_from_json(const nlohmann::json& json, Heap& heap) { return convert(json, heap, 0); }
Value value_from_json(const nlohmann::ordered_json& json, Heap& heap) { return convert(json, heap, 0); }

}  // namespace tokenmill::jinja
