// StreamingDecoder: detokenizes ids one at a time (for streaming generation) and hands back
// only text that is final: complete UTF-8, never a broken multi-byte sequence.
//
// It follows HF tokenizers' DecodeStream: it keeps a short window of recent ids, decodes
// the window, and emits what the window's text adds to the text already emitted. A text
// that still ends in U+FFFD (an incomplete character, e.g. half of an emoji split over two
// byte tokens) is held back until a later id completes it, and so is a run of <0xNN> byte
// tokens until it ends. So the concatenation of all push() results and flush() equals
// Tokenizer::decode of all the ids (same skip_special). Once the window has moved past the
// stream's first ids it is decoded as a continuation (Tokenizer::decode_continuation), so
// rules for the start of a text (Strip, Metaspace) apply only where the text starts.
// Should a decoder ever rewrite text
// already emitted, the stream goes on with the text after the common part instead of
// stalling (HF's DecodeStream raises an error there).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace tokenmill {

class StreamingDecoder {
 public:
  // `tokenizer` must outlive the decoder.
  explicit StreamingDecoder(const Tokenizer& tokenizer, bool skip_special = false);

  // Adds one id; returns the newly final text (often empty). Throws Error if `id` is out
  // of range (the decoder's state is then unchanged).
  std::string push(int32_t id);
  // Returns whatever is still held back (an incomplete character shows as U+FFFD) and
  // resets the decoder for a new stream.
  std::string flush();
  void reset();

 private:
  const Tokenizer* tokenizer_;
  bool skip_special_;
  std::vector<int32_t> ids_;  // the window: context ids, then ids not yet fully emitted
  size_t prefix_index_ = 0;   // ids_[0, prefix_index_) is context already emitted
  std::string prefix_;        // decode(ids_[0, prefix_index_)) as of the last emission
  bool past_start_ = false;   // whether ids_ no longer begins with the stream's first id

  std::string decode_window() const;
};

}  // namespace tokenmill
