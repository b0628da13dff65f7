// A compiled PCRE2 pattern (UTF + Unicode properties, JIT when available) for the
// pre-tokenizers' split rules. Thread-safe: one Regex may be used from many threads.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace tokenmill {

struct RegexMatch {
  size_t begin;
  size_t end;
};

class Regex {
 public:
  // Compiles `pattern`. Throws Error naming `what` (e.g. "pre_tokenizer Split") and the
  // position of the problem if it does not compile.
  Regex(std::string_view pattern, std::string_view what);

  // Escapes `literal` so that it matches itself.
  static std::string escape(std::string_view literal);

  // Appends the non-empty, non-overlapping matches in `text` (valid UTF-8), left to right.
  void find_all(std::string_view text, std::vector<RegexMatch>& out) const;

  const std::string& pattern() const { return pattern_; }

 private:
  struct Code;
  std::string pattern_;
  std::shared_ptr<const Code> code_;
};

}  // namespace tokenmill
