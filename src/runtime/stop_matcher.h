// StopMatcher: finds stop strings in streamed text, even when one spans several tokens.
//
// Text arrives in pieces (each token's newly final text). Text that could still be the
// start of a stop string is held back; everything before it is released. When a stop
// string appears, the text before it is released, the stop string and anything after it
// are dropped, and stopped() becomes true (OpenAI semantics: the stop string is not part of
// the output). Matching is on bytes. The first stop string to be completed wins, as if the
// text were read byte by byte (so the result does not depend on how the text is cut into
// pieces); of several completed at the same byte, the longest (earliest starting) wins.
// When the pieces and stop strings are whole UTF-8 characters, so is every released text.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace tokenmill {

class StopMatcher {
 public:
  // Empty stop strings are ignored.
  explicit StopMatcher(std::vector<std::string> stops = {});

  // Appends `text`; returns the text now safe to emit (possibly empty). After a match,
  // further pushes return "".
  std::string push(std::string_view text);
  // The text still held back (generation ended for another reason); "" after a match.
  std::string flush();
  bool stopped() const { return stopped_; }

 private:
  std::vector<std::string> stops_;
  std::string pending_;
  bool stopped_ = false;
};

}  // namespace tokenmill
