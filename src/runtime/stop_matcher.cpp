#include "runtime/stop_matcher.h"

#include <algorithm>
#include <utility>

namespace tokenmill {

namespace {

// Length of the longest suffix of `text` that is a proper prefix of one of `stops`.
size_t held_back_length(std::string_view text, const std::vector<std::string>& stops) {
  size_t longest = 0;
  for (const std::string& stop : stops) {
    for (size_t n = std::min(text.size(), stop.size() - 1); n > longest; --n) {
      if (text.substr(text.size() - n) == std::string_view(stop).substr(0, n)) {
        longest = n;
        break;
      }
    }
  }
  return longest;
}

}  // namespace

StopMatcher::StopMatcher(std::vector<std::string> stops) : stops_(std::move(stops)) {
  std::erase_if(stops_, [](const std::string& s) { return s.empty(); });
}

std::string StopMatcher::push(std::string_view text) {
  if (stopped_) return {};
  pending_ += text;
  // The held-back text contains no whole stop string, so the first occurrence of each stop
  // string is also where it was first completed; take the one that ends first.
  size_t match_begin = std::string::npos, match_end = std::string::npos;
  for (const std::string& stop : stops_) {
    const size_t at = pending_.find(stop);
    if (at == std::string::npos) continue;
    const size_t end = at + stop.size();
    if (end < match_end || (end == match_end && at < match_begin)) {
      match_begin = at;
      match_end = end;
    }
  }
  if (match_begin != std::string::npos) {
    stopped_ = true;
    std::string released = pending_.substr(0, match_begin);
    pending_.clear();
    return released;
  }
  const size_t release = pending_.size() - held_back_length(pending_, stops_);
  std::string released = pending_.substr(0, release);
  pending_.erase(0, release);
  return released;
}

std::string StopMatcher::flush() {
  std::string rest;
  rest.swap(pending_);
  return rest;
}

}  // namespace tokenmill
