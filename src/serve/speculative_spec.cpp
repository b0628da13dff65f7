#include "serve/speculative_spec.h"

#include <charconv>

#include "core/error.h"

namespace tokenmill {

namespace {

constexpr int64_t kMaxGuesses = 16;

// N of ":N", when `text` is 1..kMaxGuesses in decimal; 0 otherwise.
int64_t guess_count(std::string_view text) {
  int64_t n = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), n);
  return error == std::errc() && end == text.data() + text.size() && n >= 1 && n <= kMaxGuesses ? n : 0;
}

[[noreturn]] void refuse(std::string_view spec) {
  fail(
      "--speculative {}: expected ngram, ngram:N, draft:MODEL or draft:MODEL:N (N from 1 to {}: tokens "
      "guessed "
      "per step)",
      spec, kMaxGuesses);
}

}  // namespace

SpeculativeSpec parse_speculative(std::string_view spec) {
  SpeculativeSpec out;
  if (spec == "ngram") return out;
  if (spec.starts_with("ngram:")) {
    out.max_tokens = guess_count(spec.substr(6));
    if (out.max_tokens == 0) refuse(spec);
    return out;
  }
  if (!spec.starts_with("draft:")) refuse(spec);
  std::string_view model = spec.substr(6);
  // A trailing ":N" is the count when N is a number; a path may hold ':' too.
  if (const size_t colon = model.rfind(':'); colon != std::string_view::npos) {
    const std::string_view tail = model.substr(colon + 1);
    if (!tail.empty() && tail.find_first_not_of("0123456789") == std::string_view::npos) {
      out.max_tokens = guess_count(tail);
      if (out.max_tokens == 0) refuse(spec);
      model = model.substr(0, colon);
    }
  }
  if (model.empty()) refuse(spec);
  out.draft_model = model;
  return out;
}

}  // namespace tokenmill
