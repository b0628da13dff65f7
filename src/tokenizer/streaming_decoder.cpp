#include "tokenizer/streaming_decoder.h"

#include "tokenizer/utf8.h"

namespace tokenmill {
namespace {

bool ends_with_replacement(const std::string& s) {
  return s.size() >= utf8::kReplacement.size() &&
         s.compare(s.size() - utf8::kReplacement.size(), utf8::kReplacement.size(), utf8::kReplacement) == 0;
}

}  // namespace

StreamingDecoder::StreamingDecoder(const Tokenizer& tokenizer, bool skip_special)
    : tokenizer_(&tokenizer), skip_special_(skip_special) {}

void StreamingDecoder::reset() {
  ids_.clear();
  prefix_index_ = 0;
  prefix_.clear();
  past_start_ = false;
}

std::string StreamingDecoder::decode_window() const {
  return past_start_ ? tokenizer_->decode_continuation(ids_, skip_special_)
                     : tokenizer_->decode(ids_, skip_special_);
}

std::string StreamingDecoder::push(int32_t id) {
  const TokenKind kind = tokenizer_->kind(id);  // range check before touching the state
  ids_.push_back(id);
  // A run of <0xNN> byte tokens is only final once it ends: HF's ByteFallback decoder turns
  // every byte of an invalid run into U+FFFD, which may change text shown so far.
  if (kind == TokenKind::Byte) return {};
  std::string text = decode_window();
  if (text.size() <= prefix_.size() || ends_with_replacement(text)) return {};
  std::string fresh;
  if (text.compare(0, prefix_.size(), prefix_) == 0) {
    fresh = text.substr(prefix_.size());
  } else {
    // The decoder rewrote text already emitted (it cannot be taken back): emit what follows
    // the common part, whole characters only, so the stream never stalls.
    size_t common = 0;
    while (common < prefix_.size() && prefix_[common] == text[common]) ++common;
    while (common > 0 && (static_cast<unsigned char>(text[common]) & 0xC0) == 0x80) --common;
    fresh = text.substr(common);
  }
  // The ids just emitted become the context for the next ones (what a token adds can depend
  // on the token before it, e.g. where a decoder joins tokens with spaces).
  ids_.erase(ids_.begin(), ids_.begin() + static_cast<std::ptrdiff_t>(prefix_index_));
  past_start_ |= prefix_index_ > 0;
  prefix_index_ = ids_.size();
  prefix_ = decode_window();
  return fresh;
}

std::string StreamingDecoder::flush() {
  std::string rest;
  if (prefix_index_ < ids_.size()) {
    const std::string text = decode_window();
    size_t common = 0;
    while (common < prefix_.size() && common < text.size() && prefix_[common] == text[common]) ++common;
    while (common > 0 && common < text.size() && (static_cast<unsigned char>(text[common]) & 0xC0) == 0x80)
      --common;
    rest = text.substr(common);
  }
  reset();
  return rest;
}

}  // namespace tokenmill
