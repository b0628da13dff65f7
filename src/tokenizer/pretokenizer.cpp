#include "tokenizer/pretokenizer.h"

#include <algorithm>
#include <utility>

#include "tokenizer/byte_level.h"

namespace tokenmill {

const char* const kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

namespace {

using Kind = PreTokenizerSpec::Kind;

// Rust's char::is_ascii_punctuation or a Unicode punctuation category (HF Punctuation).
const char* const kPunctuationPattern = R"([\p{P}!-/:-@\[-`{-~])";

struct Segment {
  size_t begin, end;
  bool is_match;
};

// Splits [begin, end) of `in.text` by `regex` and appends the pieces to `out` (spans into
// in.text), following `behavior` as HF's NormalizedString::split does.
void split_span(const Pieces& in, const Pieces::Span& span, const Regex& regex, SplitBehavior behavior,
                bool invert, std::vector<Segment>& segments, std::vector<RegexMatch>& matches,
                std::vector<Pieces::Span>& out) {
  const std::string_view text = in.view(span);
  matches.clear();
  regex.find_all(text, matches);
  segments.clear();
  size_t last = 0;
  for (const RegexMatch& m : matches) {
    if (m.begin > last) segments.push_back({last, m.begin, invert});
    segments.push_back({m.begin, m.end, !invert});
    last = m.end;
  }
  if (last < text.size()) segments.push_back({last, text.size(), invert});

  std::vector<Segment> merged;
  merged.reserve(segments.size());
  bool previous_match = false;
  switch (behavior) {
    case SplitBehavior::Isolated: merged = segments; break;
    case SplitBehavior::Removed:
      for (const Segment& s : segments)
        if (!s.is_match) merged.push_back(s);
      break;
    case SplitBehavior::MergedWithPrevious:
      for (const Segment& s : segments) {
        if (s.is_match && !previous_match && !merged.empty()) {
          merged.back().end = s.end;
        } else {
          merged.push_back(s);
        }
        previous_match = s.is_match;
      }
      break;
    case SplitBehavior::MergedWithNext:
      for (size_t i = segments.size(); i-- > 0;) {
        const Segment& s = segments[i];
        if (s.is_match && !previous_match && !merged.empty()) {
          merged.back().begin = s.begin;
        } else {
          merged.push_back(s);
        }
        previous_match = s.is_match;
      }
      std::reverse(merged.begin(), merged.end());
      break;
    case SplitBehavior::Contiguous:
      for (const Segment& s : segments) {
        if (s.is_match == previous_match && !merged.empty()) {
          merged.back().end = s.end;
        } else {
          merged.push_back(s);
        }
        previous_match = s.is_match;
      }
      break;
  }
  for (const Segment& s : merged) {
    if (s.end > s.begin)
      out.push_back({span.begin + s.begin, span.begin + s.end, span.at_origin && s.begin == 0});
  }
}

bool starts_with(std::string_view s, std::string_view prefix) { return s.substr(0, prefix.size()) == prefix; }

}  // namespace

PreTokenizer::PreTokenizer(const std::vector<PreTokenizerSpec>& steps) {
  for (const PreTokenizerSpec& spec : steps) {
    Step step{spec, {}};
    switch (spec.kind) {
      case Kind::Split: step.regex.emplace_back(spec.pattern, "pre_tokenizer Split"); break;
      case Kind::Digits:
        step.regex.emplace_back(R"(\p{N})", "pre_tokenizer Digits");
        step.spec.behavior = spec.individual_digits ? SplitBehavior::Isolated : SplitBehavior::Contiguous;
        step.spec.invert = false;
        break;
      case Kind::Punctuation:
        step.regex.emplace_back(kPunctuationPattern, "pre_tokenizer Punctuation");
        step.spec.invert = false;
        break;
      case Kind::ByteLevel:
        if (spec.use_regex) step.regex.emplace_back(kGpt2Pattern, "pre_tokenizer ByteLevel");
        break;
      case Kind::Metaspace: break;
    }
    steps_.push_back(std::move(step));
  }
}

void PreTokenizer::split(std::string_view text, bool at_origin, Pieces& out, Pieces& scratch) const {
  out.text.assign(text);
  out.spans.clear();
  if (!text.empty()) out.spans.push_back({0, text.size(), at_origin});
  for (const Step& step : steps_) {
    std::swap(out, scratch);
    apply(step, scratch, out);
  }
}

void PreTokenizer::apply(const Step& step, const Pieces& in, Pieces& out) const {
  out.spans.clear();
  std::vector<Segment> segments;
  std::vector<RegexMatch> matches;
  switch (step.spec.kind) {
    case Kind::Split:
    case Kind::Digits:
    case Kind::Punctuation:
      out.text = in.text;
      for (const Pieces::Span& span : in.spans)
        split_span(in, span, step.regex.front(), step.spec.behavior, step.spec.invert, segments, matches,
                   out.spans);
      return;
    case Kind::ByteLevel: {
      // Optionally prefix a space, optionally split with the GPT-2 regex, then map bytes.
      Pieces staged;
      const Pieces* source = &in;
      if (step.spec.add_prefix_space) {
        for (const Pieces::Span& span : in.spans) {
          const size_t begin = staged.text.size();
          if (in.text[span.begin] != ' ') staged.text.push_back(' ');
          staged.text.append(in.view(span));
          staged.spans.push_back({begin, staged.text.size(), span.at_origin});
        }
        source = &staged;
      }
      std::vector<Pieces::Span> words;
      if (step.spec.use_regex) {
        for (const Pieces::Span& span : source->spans)
          split_span(*source, span, step.regex.front(), SplitBehavior::Isolated, false, segments, matches,
                     words);
      } else {
        words = source->spans;
      }
      out.text.clear();
      out.text.reserve(source->text.size() * 2);
      for (const Pieces::Span& w : words) {
        const size_t begin = out.text.size();
        byte_level::encode(source->view(w), out.text);
        out.spans.push_back({begin, out.text.size(), w.at_origin});
      }
      return;
    }
    case Kind::Metaspace: {
      const std::string& rep = step.spec.replacement;
      Pieces staged;
      for (const Pieces::Span& span : in.spans) {
        std::string piece;
        for (const char c : in.view(span)) {
          if (c == ' ') {
            piece += rep;
          } else {
            piece.push_back(c);
          }
        }
        const bool prepend = !starts_with(piece, rep) &&
                             (step.spec.prepend_scheme == PrependScheme::Always ||
                              (step.spec.prepend_scheme == PrependScheme::First && span.at_origin));
        const size_t begin = staged.text.size();
        if (prepend) staged.text += rep;
        staged.text += piece;
        staged.spans.push_back({begin, staged.text.size(), span.at_origin});
      }
      out.text = std::move(staged.text);
      if (!step.spec.split) {
        out.spans = std::move(staged.spans);
        return;
      }
      // Split before each replacement character (MergedWithNext).
      for (const Pieces::Span& span : staged.spans) {
        size_t start = span.begin;
        size_t pos = span.begin;
        while (pos < span.end) {
          if (pos > start && out.text.compare(pos, rep.size(), rep) == 0) {
            out.spans.push_back({start, pos, span.at_origin && start == span.begin});
            start = pos;
          }
          pos += rep.empty() ? 1 : (out.text.compare(pos, rep.size(), rep) == 0 ? rep.size() : 1);
        }
        if (pos > start) out.spans.push_back({start, span.end, span.at_origin && start == span.begin});
      }
      return;
    }
  }
}

}  // namespace tokenmill
