#include "train/prepare.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "core/absolute_path.h"
#include "core/atomic_file.h"
#include "core/error.h"
#include "formats/token_shard.h"
#include "tokenizer/utf8.h"
#include "train/chat_sft.h"

namespace tokenmill {

namespace {

// The tokens of one input file with their loss mask (1: scored).
struct TokenStream {
  std::vector<int32_t> tokens;
  std::vector<uint8_t> scored;
};

// Appends tokens to numbered shards of one split, cutting a shard every `limit` tokens. A
// shard gets a loss-mask section only when some token in it is not scored.
class ShardWriter {
 public:
  ShardWriter(const PrepareOptions& options, std::string split, uint32_t vocab, uint32_t eod,
              std::vector<std::string>& names)
      : options_(options), split_(std::move(split)), vocab_(vocab), eod_(eod), names_(names) {}

  void append(std::span<const int32_t> tokens, std::span<const uint8_t> scored) {
    for (size_t i = 0; i < tokens.size(); ++i) {
      pending_.push_back(tokens[i]);
      pending_scored_.push_back(scored[i]);
      scored_total_ += scored[i];
      if (static_cast<int64_t>(pending_.size()) == options_.shard_tokens) flush();
    }
    total_ += static_cast<int64_t>(tokens.size());
  }
  void flush() {
    if (pending_.empty()) return;
    const std::string name = fmt::format("{}_{:03}.tmshard", split_, names_.size());
    const bool masked = std::find(pending_scored_.begin(), pending_scored_.end(), 0) != pending_scored_.end();
    write_token_shard(options_.out_dir / name, pending_, vocab_, eod_,
                      masked ? std::optional<std::span<const uint8_t>>(pending_scored_) : std::nullopt);
    names_.push_back(name);
    pending_.clear();
    pending_scored_.clear();
  }
  int64_t total() const { return total_; }
  int64_t scored_total() const { return scored_total_; }

 private:
  const PrepareOptions& options_;
  std::string split_;
  uint32_t vocab_, eod_;
  std::vector<std::string>& names_;
  std::vector<int32_t> pending_;
  std::vector<uint8_t> pending_scored_;
  int64_t total_ = 0, scored_total_ = 0;
};

// Refuses what is not text: bytes that are not UTF-8, or control characters other than
// whitespace (a NUL, ...), which binary files hold and text files do not.
void check_text(std::string_view text, const std::filesystem::path& path) {
  for (size_t pos = 0; pos < text.size();) {
    char32_t cp = 0;
    const size_t n = utf8::decode(text, pos, cp);
    if (n == 0)
      fail("{}: not UTF-8 text (byte {} is 0x{:02x}): prepare reads text files (.txt, .jsonl)", path.string(),
           pos, static_cast<unsigned char>(text[pos]));
    if (cp < 0x20 && cp != '\n' && cp != '\r' && cp != '\t' && cp != '\f' && cp != '\v')
      fail("{}: not text (control character U+{:04X} at byte {}): prepare reads text files (.txt, .jsonl)",
           path.string(), static_cast<uint32_t>(cp), pos);
    pos += n;
  }
}

std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("{}: cannot open the input file", path.string());
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) fail("{}: read failed", path.string());
  std::string out = std::move(text).str();
  check_text(out, path);
  return out;
}

// The documents of one input file, each as its tokens followed by eod; counts documents.
// Text documents are scored whole; a chat record scores its assistant turns (chat_sft.h) but
// not the eod after it (the template's end-of-turn already teaches where a reply stops).
TokenStream tokenize_input(const Tokenizer& tokenizer, const std::filesystem::path& path, int32_t eod,
                           std::optional<ChatSftEncoder>& chat, PrepareSummary& summary) {
  EncodeOptions plain;
  plain.add_special_tokens = false;
  TokenStream out;
  const auto add_document = [&](std::span<const int32_t> ids,
                                std::optional<std::span<const uint8_t>> scored) {
    out.tokens.insert(out.tokens.end(), ids.begin(), ids.end());
    if (scored) {
      out.scored.insert(out.scored.end(), scored->begin(), scored->end());
    } else {
      out.scored.insert(out.scored.end(), ids.size(), 1);
    }
    out.tokens.push_back(eod);
    out.scored.push_back(scored ? 0 : 1);
    ++summary.documents;
  };
  const std::string text = read_text(path);
  if (path.extension() != ".jsonl") {
    add_document(tokenizer.encode(text, plain), std::nullopt);
    return out;
  }
  std::istringstream lines(text);
  std::string line;
  for (int64_t number = 1; std::getline(lines, line); ++number) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = fmt::format("{}:{}", path.string(), number);
    nlohmann::json doc;
    try {
      doc = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception& e) {
      fail("{}: not valid JSON ({})", where, e.what());
    }
    const bool is_chat = doc.is_object() && doc.contains("messages");
    if (is_chat == (doc.is_object() && doc.contains("text")))
      fail(
          "{}: each line must be a JSON object with either a \"text\" string or a \"messages\" array (not "
          "both)",
          where);
    if (is_chat) {
      if (!chat) chat.emplace(ChatSftEncoder::from_tokenizer(tokenizer, where));
      const ChatDocument c = chat->encode(parse_chat_messages(doc["messages"], where), where);
      add_document(c.tokens, c.scored);
      ++summary.chat_documents;
      continue;
    }
    if (!doc["text"].is_string())
      fail("{}: \"text\" is not a string (a line needs a \"text\" string or a \"messages\" array)", where);
    add_document(tokenizer.encode(doc["text"].get_ref<const std::string&>(), plain), std::nullopt);
  }
  return out;
}

void write_meta(const PrepareOptions& options, const Tokenizer& tokenizer, uint32_t eod,
                const PrepareSummary& summary) {
  nlohmann::json inputs = nlohmann::json::array();
  for (const auto& p : options.inputs) inputs.push_back(absolute_path(p));
  const nlohmann::json meta = {
      {"format", "tokenmill.dataset/1"},
      {"tokenizer", absolute_path(tokenizer.source())},
      {"vocab_size", tokenizer.vocab_size()},
      {"eod_token", eod},
      {"documents", summary.documents},
      {"chat_documents", summary.chat_documents},
      {"loss_mask", summary.chat_documents > 0},
      {"inputs", inputs},
      {"val_fraction", options.val_fraction},
      {"train",
       {{"tokens", summary.train_tokens},
        {"scored_tokens", summary.train_scored_tokens},
        {"shards", summary.train_shards}}},
      {"val",
       {{"tokens", summary.val_tokens},
        {"scored_tokens", summary.val_scored_tokens},
        {"shards", summary.val_shards}}},
  };
  const std::string text = meta.dump(2) + "\n";
  AtomicFile file(options.out_dir / "meta.json");
  file.write(text.data(), text.size());
  file.commit();
}

}  // namespace

PrepareSummary prepare_dataset(const Tokenizer& tokenizer, const PrepareOptions& options) {
  if (options.inputs.empty()) fail("prepare: no input files (give --input FILE...)");
  if (!(options.val_fraction >= 0.0 && options.val_fraction < 1.0))
    fail("prepare: --val-fraction must be in [0, 1), got {}", options.val_fraction);
  if (options.shard_tokens < 1)
    fail("prepare: --shard-tokens must be positive, got {}", options.shard_tokens);
  const std::optional<int32_t> eos =
      options.eod_token.empty() ? tokenizer.eos_id() : tokenizer.token_to_id(options.eod_token);
  if (!eos && options.eod_token.empty())
    fail(
        "{}: the tokenizer has no eos token to separate documents; name one with --eod-token (e.g. "
        "'<|endoftext|>')",
        tokenizer.source());
  if (!eos) fail("--eod-token: '{}' is not a token of {}", options.eod_token, tokenizer.source());
  const auto vocab = static_cast<uint32_t>(tokenizer.vocab_size());
  const auto eod = static_cast<uint32_t>(*eos);
  std::error_code ec;
  std::filesystem::create_directories(options.out_dir, ec);
  if (ec) fail("{}: cannot create the output directory ({})", options.out_dir.string(), ec.message());

  PrepareSummary summary;
  ShardWriter train(options, "train", vocab, eod, summary.train_shards);
  ShardWriter val(options, "val", vocab, eod, summary.val_shards);
  std::optional<ChatSftEncoder> chat;  // made at the first "messages" record
  for (const auto& input : options.inputs) {
    const TokenStream stream = tokenize_input(tokenizer, input, *eos, chat, summary);
    const auto n = stream.tokens.size();
    const auto n_val = static_cast<size_t>(std::ceil(options.val_fraction * static_cast<double>(n)));
    const std::span<const int32_t> tokens(stream.tokens);
    const std::span<const uint8_t> scored(stream.scored);
    train.append(tokens.first(n - n_val), scored.first(n - n_val));
    val.append(tokens.last(n_val), scored.last(n_val));
  }
  train.flush();
  val.flush();
  summary.train_tokens = train.total();
  summary.val_tokens = val.total();
  summary.train_scored_tokens = train.scored_total();
  summary.val_scored_tokens = val.scored_total();
  write_meta(options, tokenizer, eod, summary);
  return summary;
}

}  // namespace tokenmill
