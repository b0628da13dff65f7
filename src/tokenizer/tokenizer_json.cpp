#include "tokenizer/tokenizer_json.h"

#include <algorithm>
#include <fstream>
#include <limits>
#include <sstream>

#include <spdlog/spdlog.h>

#include "core/error.h"
#include "core/json_file.h"
#include "tokenizer/regex.h"

namespace tokenmill {
namespace {

using json = nlohmann::json;

// Field access with errors that say which file and which field.
struct Reader {
  const std::string& source;

  [[noreturn]] void bad(const std::string& where, std::string_view what) const {
    fail("{}: {}: {}", source, where, what);
  }
  const json* find(const json& obj, const char* key) const {
    auto it = obj.find(key);
    return it == obj.end() || it->is_null() ? nullptr : &*it;
  }
  const json& need(const json& obj, const char* key, const std::string& where) const {
    if (!obj.is_object()) bad(where, "expected an object");
    const json* v = find(obj, key);
    if (v == nullptr) bad(where, fmt::format("missing field \"{}\"", key));
    return *v;
  }
  std::string string(const json& v, const std::string& where) const {
    if (!v.is_string()) bad(where, "expected a string");
    return v.get<std::string>();
  }
  std::string need_string(const json& obj, const char* key, const std::string& where) const {
    return string(need(obj, key, where), where + "." + key);
  }
  bool flag(const json& obj, const char* key, bool fallback, const std::string& where) const {
    const json* v = obj.is_object() ? find(obj, key) : nullptr;
    if (v == nullptr) return fallback;
    if (!v->is_boolean()) bad(where + "." + key, "expected true or false");
    return v->get<bool>();
  }
  int32_t id(const json& v, const std::string& where) const {
    if (!v.is_number_integer()) bad(where, "expected an integer token id");
    const auto value = v.get<int64_t>();
    if (value < 0 || value >= std::numeric_limits<int32_t>::max())
      bad(where, fmt::format("token id {} is out of range", value));
    return static_cast<int32_t>(value);
  }
  size_t count(const json& obj, const char* key, const std::string& where) const {
    const json* v = find(obj, key);
    if (v == nullptr) return 0;
    if (!v->is_number_unsigned() || v->get<uint64_t>() > 1000000)
      bad(where + "." + key, "expected a small non-negative integer");
    return v->get<size_t>();
  }
  // {"String": s} (a literal, escaped) or {"Regex": r}.
  std::string pattern(const json& obj, const std::string& where) const {
    const json& p = need(obj, "pattern", where);
    if (p.is_object() && p.contains("String"))
      return Regex::escape(string(p["String"], where + ".pattern.String"));
    if (p.is_object() && p.contains("Regex")) return string(p["Regex"], where + ".pattern.Regex");
    bad(where + ".pattern", "expected {\"String\": ...} or {\"Regex\": ...}");
  }
  std::string type(const json& obj, const std::string& where) const {
    return need_string(obj, "type", where);
  }
  [[noreturn]] void unsupported(const std::string& where, const std::string& type) const {
    bad(where, fmt::format("type \"{}\" is not supported by tokenmill", type));
  }
};

SplitBehavior parse_behavior(const Reader& r, const json& obj, const std::string& where,
                             SplitBehavior fallback) {
  const json* v = r.find(obj, "behavior");
  if (v == nullptr) return fallback;
  const std::string b = r.string(*v, where + ".behavior");
  if (b == "Removed") return SplitBehavior::Removed;
  if (b == "Isolated") return SplitBehavior::Isolated;
  if (b == "MergedWithPrevious") return SplitBehavior::MergedWithPrevious;
  if (b == "MergedWithNext") return SplitBehavior::MergedWithNext;
  if (b == "Contiguous") return SplitBehavior::Contiguous;
  r.bad(where + ".behavior", fmt::format("unknown split behavior \"{}\"", b));
}

// Metaspace's prepend_scheme, or the older add_prefix_space flag.
PrependScheme parse_prepend_scheme(const Reader& r, const json& obj, const std::string& where) {
  if (const json* v = r.find(obj, "prepend_scheme")) {
    const std::string s = r.string(*v, where + ".prepend_scheme");
    if (s == "always") return PrependScheme::Always;
    if (s == "first") return PrependScheme::First;
    if (s == "never") return PrependScheme::Never;
    r.bad(where + ".prepend_scheme", fmt::format("unknown prepend scheme \"{}\"", s));
  }
  return r.flag(obj, "add_prefix_space", true, where) ? PrependScheme::Always : PrependScheme::Never;
}

std::string metaspace_replacement(const Reader& r, const json& obj, const std::string& where) {
  const json* v = r.find(obj, "replacement");
  if (v == nullptr) return "\xE2\x96\x81";
  std::string rep = r.string(*v, where + ".replacement");
  if (rep.empty()) r.bad(where + ".replacement", "must not be empty");
  return rep;
}

void parse_normalizer(const Reader& r, const json& node, const std::string& where,
                      std::vector<NormalizerSpec>& out) {
  using Kind = NormalizerSpec::Kind;
  const std::string type = r.type(node, where);
  NormalizerSpec spec;
  if (type == "Sequence") {
    const json& list = r.need(node, "normalizers", where);
    if (!list.is_array()) r.bad(where + ".normalizers", "expected an array");
    for (size_t i = 0; i < list.size(); ++i)
      parse_normalizer(r, list[i], fmt::format("{}.normalizers[{}]", where, i), out);
    return;
  }
  if (type == "Prepend") {
    spec.kind = Kind::Prepend;
    spec.content = r.need_string(node, "prepend", where);
  } else if (type == "Replace") {
    spec.kind = Kind::Replace;
    spec.pattern = r.pattern(node, where);
    spec.content = r.need_string(node, "content", where);
  } else if (type == "NFC") {
    spec.kind = Kind::Nfc;
  } else if (type == "NFD") {
    spec.kind = Kind::Nfd;
  } else if (type == "NFKC") {
    spec.kind = Kind::Nfkc;
  } else if (type == "NFKD") {
    spec.kind = Kind::Nfkd;
  } else if (type == "Lowercase") {
    spec.kind = Kind::Lowercase;
  } else if (type == "Strip") {
    spec.kind = Kind::Strip;
    spec.strip_left = r.flag(node, "strip_left", false, where);
    spec.strip_right = r.flag(node, "strip_right", false, where);
  } else {
    r.unsupported(where, type);
  }
  out.push_back(std::move(spec));
}

void parse_pre_tokenizer(const Reader& r, const json& node, const std::string& where,
                         std::vector<PreTokenizerSpec>& out) {
  using Kind = PreTokenizerSpec::Kind;
  const std::string type = r.type(node, where);
  PreTokenizerSpec spec;
  if (type == "Sequence") {
    const json& list = r.need(node, "pretokenizers", where);
    if (!list.is_array()) r.bad(where + ".pretokenizers", "expected an array");
    for (size_t i = 0; i < list.size(); ++i)
      parse_pre_tokenizer(r, list[i], fmt::format("{}.pretokenizers[{}]", where, i), out);
    return;
  }
  if (type == "ByteLevel") {
    spec.kind = Kind::ByteLevel;
    spec.add_prefix_space = r.flag(node, "add_prefix_space", true, where);
    spec.use_regex = r.flag(node, "use_regex", true, where);
  } else if (type == "Split") {
    spec.kind = Kind::Split;
    spec.pattern = r.pattern(node, where);
    spec.behavior = parse_behavior(r, node, where, SplitBehavior::Isolated);
    if (!r.find(node, "behavior")) r.bad(where, "missing field \"behavior\"");
    spec.invert = r.flag(node, "invert", false, where);
  } else if (type == "Metaspace") {
    spec.kind = Kind::Metaspace;
    spec.replacement = metaspace_replacement(r, node, where);
    spec.prepend_scheme = parse_prepend_scheme(r, node, where);
    spec.split = r.flag(node, "split", true, where);
  } else if (type == "Digits") {
    spec.kind = Kind::Digits;
    spec.individual_digits = r.flag(node, "individual_digits", false, where);
  } else if (type == "Punctuation") {
    spec.kind = Kind::Punctuation;
    spec.behavior = parse_behavior(r, node, where, SplitBehavior::Isolated);
  } else if (type == "Whitespace") {
    spec.kind = Kind::Split;
    spec.pattern = R"(\w+|[^\w\s]+)";
    spec.behavior = SplitBehavior::Removed;
    spec.invert = true;
  } else if (type == "WhitespaceSplit") {
    spec.kind = Kind::Split;
    spec.pattern = R"(\s+)";
    spec.behavior = SplitBehavior::Removed;
  } else {
    r.unsupported(where, type);
  }
  out.push_back(std::move(spec));
}

void parse_decoder(const Reader& r, const json& node, const std::string& where,
                   std::vector<DecoderSpec>& out) {
  using Kind = DecoderSpec::Kind;
  const std::string type = r.type(node, where);
  DecoderSpec spec;
  if (type == "Sequence") {
    const json& list = r.need(node, "decoders", where);
    if (!list.is_array()) r.bad(where + ".decoders", "expected an array");
    for (size_t i = 0; i < list.size(); ++i)
      parse_decoder(r, list[i], fmt::format("{}.decoders[{}]", where, i), out);
    return;
  }
  if (type == "ByteLevel") {
    spec.kind = Kind::ByteLevel;
  } else if (type == "Metaspace") {
    spec.kind = Kind::Metaspace;
    spec.replacement = metaspace_replacement(r, node, where);
    spec.prepend_scheme = parse_prepend_scheme(r, node, where);
  } else if (type == "Replace") {
    spec.kind = Kind::Replace;
    const json& p = r.need(node, "pattern", where);
    if (!p.is_object() || !p.contains("String"))
      r.bad(where + ".pattern", "only {\"String\": ...} patterns are supported in the Replace decoder");
    spec.pattern = r.string(p["String"], where + ".pattern.String");
    spec.content = r.need_string(node, "content", where);
  } else if (type == "ByteFallback") {
    spec.kind = Kind::ByteFallback;
  } else if (type == "Fuse") {
    spec.kind = Kind::Fuse;
  } else if (type == "Strip") {
    spec.kind = Kind::Strip;
    spec.content = r.need_string(node, "content", where);
    spec.start = r.count(node, "start", where);
    spec.stop = r.count(node, "stop", where);
  } else {
    r.unsupported(where, type);
  }
  out.push_back(std::move(spec));
}

// The ids of `name` in a TemplateProcessing special_tokens table.
std::vector<int32_t> template_token_ids(const Reader& r, const json& table, const std::string& name,
                                        const std::string& where) {
  const json& entry = r.need(table, name.c_str(), where + ".special_tokens");
  const json& ids = r.need(entry, "ids", where + ".special_tokens." + name);
  if (!ids.is_array()) r.bad(where + ".special_tokens." + name + ".ids", "expected an array");
  std::vector<int32_t> out;
  for (const json& id : ids) out.push_back(r.id(id, where + ".special_tokens." + name + ".ids"));
  return out;
}

void parse_post_processor(const Reader& r, const json& node, const std::string& where, TokenizerSpec& spec) {
  const std::string type = r.type(node, where);
  auto pair_id = [&](const char* key) {
    const json& p = r.need(node, key, where);
    if (!p.is_array() || p.size() != 2) r.bad(where + "." + key, "expected [token, id]");
    return r.id(p[1], where + "." + key + "[1]");
  };
  if (type == "Sequence") {
    const json& list = r.need(node, "processors", where);
    if (!list.is_array()) r.bad(where + ".processors", "expected an array");
    for (size_t i = 0; i < list.size(); ++i)
      parse_post_processor(r, list[i], fmt::format("{}.processors[{}]", where, i), spec);
  } else if (type == "ByteLevel") {
    // Offsets only: adds no tokens.
  } else if (type == "RobertaProcessing" || type == "BertProcessing") {
    spec.prefix_ids.push_back(pair_id("cls"));
    spec.suffix_ids.push_back(pair_id("sep"));
  } else if (type == "TemplateProcessing") {
    const json& single = r.need(node, "single", where);
    if (!single.is_array()) r.bad(where + ".single", "expected an array");
    const json& table = r.need(node, "special_tokens", where);
    bool seen_sequence = false;
    for (size_t i = 0; i < single.size(); ++i) {
      const std::string item_where = fmt::format("{}.single[{}]", where, i);
      const json& item = single[i];
      if (item.is_object() && item.contains("Sequence")) {
        const std::string id = r.need_string(item["Sequence"], "id", item_where + ".Sequence");
        if (id != "A" || seen_sequence)
          r.bad(item_where, "the single-sequence template must hold sequence A once");
        seen_sequence = true;
      } else if (item.is_object() && item.contains("SpecialToken")) {
        const std::string name = r.need_string(item["SpecialToken"], "id", item_where + ".SpecialToken");
        auto ids = template_token_ids(r, table, name, where);
        auto& target = seen_sequence ? spec.suffix_ids : spec.prefix_ids;
        target.insert(target.end(), ids.begin(), ids.end());
      } else {
        r.bad(item_where, "expected {\"Sequence\": ...} or {\"SpecialToken\": ...}");
      }
    }
    if (!seen_sequence) r.bad(where + ".single", "the template has no sequence A");
  } else {
    r.unsupported(where, type);
  }
}

bool is_byte_token(std::string_view t) {
  auto hex = [](char c) {
    return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'F') || (c >= 'a' && c <= 'f');
  };
  return t.size() == 6 && t.substr(0, 3) == "<0x" && hex(t[3]) && hex(t[4]) && t[5] == '>';
}

void parse_model(const Reader& r, const json& model, TokenizerSpec& spec) {
  const std::string where = "model";
  if (!model.is_object()) r.bad(where, "expected an object");
  const json* type = r.find(model, "type");
  if (type != nullptr && r.string(*type, "model.type") != "BPE")
    r.bad("model.type",
          fmt::format("model \"{}\" is not supported by tokenmill (only BPE)", type->get<std::string>()));
  if (const json* dropout = r.find(model, "dropout");
      dropout != nullptr && !(dropout->is_number() && dropout->get<double>() == 0.0))
    r.bad("model.dropout", "BPE dropout is not supported (it makes encoding random)");
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    if (const json* v = r.find(model, key);
        v != nullptr && !(v->is_string() && v->get<std::string>().empty()))
      r.bad(std::string("model.") + key, "is not supported by tokenmill");
  }
  const json& vocab = r.need(model, "vocab", where);
  if (!vocab.is_object()) r.bad("model.vocab", "expected an object mapping tokens to ids");
  for (const auto& [token, id_json] : vocab.items()) {
    const int32_t id = r.id(id_json, "model.vocab[\"" + token + "\"]");
    if (static_cast<size_t>(id) >= spec.tokens.size()) {
      if (static_cast<size_t>(id) > vocab.size() * 4 + 1024)
        r.bad("model.vocab",
              fmt::format("token id {} is far beyond the vocabulary size {}", id, vocab.size()));
      spec.tokens.resize(static_cast<size_t>(id) + 1);
      spec.kinds.resize(static_cast<size_t>(id) + 1, TokenKind::Unused);
    }
    if (spec.kinds[static_cast<size_t>(id)] != TokenKind::Unused)
      r.bad("model.vocab", fmt::format("id {} is given to two tokens", id));
    spec.tokens[static_cast<size_t>(id)] = token;
    spec.kinds[static_cast<size_t>(id)] = is_byte_token(token) ? TokenKind::Byte : TokenKind::Normal;
  }
  if (const json* merges = r.find(model, "merges")) {
    if (!merges->is_array()) r.bad("model.merges", "expected an array");
    spec.merges.reserve(merges->size());
    for (size_t i = 0; i < merges->size(); ++i) {
      const json& m = (*merges)[i];
      const std::string mw = fmt::format("model.merges[{}]", i);
      if (m.is_string()) {
        const std::string s = m.get<std::string>();
        const size_t space = s.find(' ');
        if (space == std::string::npos || s.find(' ', space + 1) != std::string::npos)
          r.bad(mw, "expected \"left right\" (two tokens separated by one space)");
        spec.merges.emplace_back(s.substr(0, space), s.substr(space + 1));
      } else if (m.is_array() && m.size() == 2) {
        spec.merges.emplace_back(r.string(m[0], mw + "[0]"), r.string(m[1], mw + "[1]"));
      } else {
        r.bad(mw, "expected \"left right\" or [left, right]");
      }
    }
  }
  spec.byte_fallback = r.flag(model, "byte_fallback", false, where);
  spec.fuse_unk = r.flag(model, "fuse_unk", false, where);
  spec.ignore_merges = r.flag(model, "ignore_merges", false, where);
  if (const json* unk = r.find(model, "unk_token")) {
    const std::string name = r.string(*unk, "model.unk_token");
    for (size_t id = 0; id < spec.tokens.size(); ++id) {
      if (spec.kinds[id] != TokenKind::Unused && spec.tokens[id] == name) {
        spec.unk_id = static_cast<int32_t>(id);
        spec.kinds[id] = TokenKind::Unknown;
        break;
      }
    }
  }
}

void parse_added_tokens(const Reader& r, const json& list, TokenizerSpec& spec) {
  if (!list.is_array()) r.bad("added_tokens", "expected an array");
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string where = fmt::format("added_tokens[{}]", i);
    const json& t = list[i];
    AddedTokenSpec added;
    added.id = r.id(r.need(t, "id", where), where + ".id");
    added.content = r.need_string(t, "content", where);
    if (added.content.empty()) r.bad(where + ".content", "must not be empty");
    added.special = r.flag(t, "special", false, where);
    added.lstrip = r.flag(t, "lstrip", false, where);
    added.rstrip = r.flag(t, "rstrip", false, where);
    added.single_word = r.flag(t, "single_word", false, where);
    added.normalized = r.flag(t, "normalized", !added.special, where);
    const auto id = static_cast<size_t>(added.id);
    if (id >= spec.tokens.size()) {
      if (id > spec.tokens.size() + list.size() * 4 + 1024)
        r.bad(where + ".id",
              fmt::format("id {} is far beyond the vocabulary size {}", id, spec.tokens.size()));
      spec.tokens.resize(id + 1);
      spec.kinds.resize(id + 1, TokenKind::Unused);
    }
    spec.tokens[id] = added.content;
    spec.kinds[id] = added.special ? TokenKind::Control : TokenKind::UserDefined;
    spec.added_tokens.push_back(std::move(added));
  }
}

std::optional<int32_t> find_token(const TokenizerSpec& spec, const std::string& name) {
  if (name.empty()) return std::nullopt;
  for (size_t id = 0; id < spec.tokens.size(); ++id)
    if (spec.kinds[id] != TokenKind::Unused && spec.tokens[id] == name) return static_cast<int32_t>(id);
  return std::nullopt;
}

// tokenizer_config.json token fields: "text", {"content": "text", ...} or null.
std::optional<std::string> config_token(const Reader& r, const json& config, const char* key) {
  const json* v = r.find(config, key);
  if (v == nullptr) return std::nullopt;
  if (v->is_string()) return v->get<std::string>();
  if (v->is_object() && v->contains("content"))
    return r.string((*v)["content"], std::string(key) + ".content");
  r.bad(key, "expected a string or {\"content\": ...}");
}

void finish_eos_ids(TokenizerSpec& spec) {
  if (spec.eos_id && std::find(spec.eos_ids.begin(), spec.eos_ids.end(), *spec.eos_id) == spec.eos_ids.end())
    spec.eos_ids.insert(spec.eos_ids.begin(), *spec.eos_id);
}

std::string read_text_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("{}: cannot open for reading", path.string());
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

TokenizerSpec parse_tokenizer_json(const json& doc, std::string source) {
  TokenizerSpec spec;
  spec.source = std::move(source);
  const Reader r{spec.source};
  if (!doc.is_object()) r.bad("top level", "expected a JSON object (is this a tokenizer.json file?)");
  parse_model(r, r.need(doc, "model", "top level"), spec);
  if (const json* added = r.find(doc, "added_tokens")) parse_added_tokens(r, *added, spec);
  if (const json* n = r.find(doc, "normalizer")) parse_normalizer(r, *n, "normalizer", spec.normalizers);
  if (const json* p = r.find(doc, "pre_tokenizer"))
    parse_pre_tokenizer(r, *p, "pre_tokenizer", spec.pre_tokenizers);
  if (const json* p = r.find(doc, "post_processor")) parse_post_processor(r, *p, "post_processor", spec);
  if (const json* d = r.find(doc, "decoder")) {
    parse_decoder(r, *d, "decoder", spec.decoders);
  } else {
    spec.decoder_joins_with_space = true;
  }
  if (spec.tokens.empty()) r.bad("model.vocab", "the vocabulary is empty");
  for (const std::vector<int32_t>* ids : {&spec.prefix_ids, &spec.suffix_ids})
    for (const int32_t id : *ids)
      if (id < 0 || static_cast<size_t>(id) >= spec.tokens.size())
        r.bad("post_processor",
              fmt::format("token id {} is outside the vocabulary (size {})", id, spec.tokens.size()));
  // Without tokenizer_config.json, the template's first and last tokens are the best guess.
  if (!spec.prefix_ids.empty()) spec.bos_id = spec.prefix_ids.front();
  if (!spec.suffix_ids.empty()) spec.eos_id = spec.suffix_ids.back();
  if (spec.bos_id) spec.bos_token = spec.tokens[static_cast<size_t>(*spec.bos_id)];
  if (spec.eos_id) spec.eos_token = spec.tokens[static_cast<size_t>(*spec.eos_id)];
  finish_eos_ids(spec);
  return spec;
}

TokenizerSpec parse_tokenizer_json_text(std::string_view text, std::string source) {
  json doc;
  try {
    doc = json::parse(text);
  } catch (const json::exception& e) {  // a syntax error, or a number out of range (1e999)
    fail("{}: invalid JSON ({})", source, e.what());
  }
  return parse_tokenizer_json(doc, std::move(source));
}

TokenizerSpec read_tokenizer_json(const std::filesystem::path& path) {
  return parse_tokenizer_json(read_json_file(path), path.string());
}

void apply_tokenizer_config(const json& config, const std::string& source, TokenizerSpec& spec) {
  const Reader r{source};
  if (!config.is_object()) r.bad("top level", "expected a JSON object");
  auto resolve = [&](const char* key, std::optional<int32_t>& id, std::string* name) {
    const auto token = config_token(r, config, key);
    if (!token) return;
    const auto found = find_token(spec, *token);
    if (!found) r.bad(key, fmt::format("token \"{}\" is not in the vocabulary", *token));
    id = found;
    if (name != nullptr) *name = *token;
  };
  resolve("bos_token", spec.bos_id, &spec.bos_token);
  resolve("eos_token", spec.eos_id, &spec.eos_token);
  resolve("pad_token", spec.pad_id, nullptr);
  resolve("unk_token", spec.unk_id, nullptr);

  // add_bos_token / add_eos_token decide whether the bos/eos ids frame the text.
  auto apply_flag = [&](const char* key, const std::optional<int32_t>& id, std::vector<int32_t>& ids,
                        bool front) {
    const json* v = r.find(config, key);
    if (v == nullptr || !id) return;
    if (!v->is_boolean()) r.bad(key, "expected true or false");
    const bool wanted = v->get<bool>();
    const bool present = std::find(ids.begin(), ids.end(), *id) != ids.end();
    if (wanted && !present) ids.insert(front ? ids.begin() : ids.end(), *id);
    if (!wanted && present) ids.erase(std::remove(ids.begin(), ids.end(), *id), ids.end());
  };
  apply_flag("add_bos_token", spec.bos_id, spec.prefix_ids, true);
  apply_flag("add_eos_token", spec.eos_id, spec.suffix_ids, false);

  if (const json* t = r.find(config, "chat_template")) {
    if (t->is_string()) {
      spec.chat_template = t->get<std::string>();
    } else if (t->is_array()) {
      for (const json& entry : *t) {
        const std::string name = r.need_string(entry, "name", "chat_template[]");
        if (name == "default" || spec.chat_template.empty())
          spec.chat_template = r.need_string(entry, "template", "chat_template[]");
      }
    } else {
      r.bad("chat_template", "expected a string or a list of {name, template}");
    }
  }
  spec.eos_ids.clear();
  finish_eos_ids(spec);
}

TokenizerSpec read_model_dir_tokenizer(const std::filesystem::path& dir) {
  const auto tokenizer_json = dir / "tokenizer.json";
  std::error_code ec;
  if (!std::filesystem::exists(tokenizer_json, ec))
    fail(
        "{}: no tokenizer.json in this directory (tokenmill reads Hugging Face tokenizer.json files; "
        "convert a tokenizer.model with transformers first)",
        dir.string());
  TokenizerSpec spec = read_tokenizer_json(tokenizer_json);
  if (const auto config = dir / "tokenizer_config.json"; std::filesystem::exists(config, ec))
    apply_tokenizer_config(read_json_file(config), config.string(), spec);
  if (const auto jinja = dir / "chat_template.jinja"; std::filesystem::exists(jinja, ec))
    spec.chat_template = read_text_file(jinja);
  if (const auto gen = dir / "generation_config.json"; std::filesystem::exists(gen, ec)) {
    const json doc = read_json_file(gen);
    const Reader r{spec.source};
    if (const json* eos = doc.is_object() ? r.find(doc, "eos_token_id") : nullptr) {
      const std::string where = gen.string() + ": eos_token_id";
      std::vector<int32_t> ids;
      if (eos->is_array()) {
        for (const json& id : *eos) ids.push_back(r.id(id, where));
      } else {
        ids.push_back(r.id(*eos, where));
      }
      for (const int32_t id : ids) {
        if (static_cast<size_t>(id) >= spec.tokens.size()) {  // a token it can never decode: ends nothing
          spdlog::warn("{}: ignoring eos_token_id {}: it is outside the tokenizer's vocabulary of {} tokens",
                       gen.string(), id, spec.tokens.size());
          continue;
        }
        if (std::find(spec.eos_ids.begin(), spec.eos_ids.end(), id) == spec.eos_ids.end())
          spec.eos_ids.push_back(id);
      }
      if (!spec.eos_id && !spec.eos_ids.empty()) {
        spec.eos_id = spec.eos_ids.front();
        spec.eos_token = spec.tokens[static_cast<size_t>(*spec.eos_id)];
      }
    }
  }
  return spec;
}

}  // namespace tokenmill
