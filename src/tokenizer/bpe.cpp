#include "tokenizer/bpe.h"

#include <algorithm>

#include "core/error.h"
#include "tokenizer/utf8.h"

namespace tokenmill {
namespace {

constexpr uint64_t kEmpty = ~uint64_t{0};

uint64_t pair_key(int32_t left, int32_t right) {
  return (uint64_t{static_cast<uint32_t>(left)} << 32) | static_cast<uint32_t>(right);
}

uint64_t mix(uint64_t key) {
  key ^= key >> 33;
  key *= 0xff51afd7ed558ccdULL;
  key ^= key >> 33;
  return key;
}

bool in_model_vocab(TokenKind kind) {
  return kind == TokenKind::Normal || kind == TokenKind::Byte || kind == TokenKind::Unknown;
}

struct Symbol {
  int32_t id;
  int32_t prev;
  int32_t next;
  bool alive;
};

struct Candidate {
  uint32_t rank;
  int32_t pos;
  int32_t result;
  bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
};

}  // namespace

void BpeModel::MergeTable::reserve(size_t n) {
  size_t capacity = 16;
  while (capacity < n * 2) capacity *= 2;
  keys.assign(capacity, kEmpty);
  values.assign(capacity, Merge{0, 0});
  mask = capacity - 1;
}

void BpeModel::MergeTable::insert(int32_t left, int32_t right, Merge merge) {
  const uint64_t key = pair_key(left, right);
  for (uint64_t slot = mix(key) & mask;; slot = (slot + 1) & mask) {
    if (keys[slot] == kEmpty || keys[slot] == key) {
      keys[slot] = key;
      values[slot] = merge;
      return;
    }
  }
}

const BpeModel::Merge* BpeModel::MergeTable::find(int32_t left, int32_t right) const {
  if (keys.empty()) return nullptr;
  const uint64_t key = pair_key(left, right);
  for (uint64_t slot = mix(key) & mask;; slot = (slot + 1) & mask) {
    if (keys[slot] == key) return &values[slot];
    if (keys[slot] == kEmpty) return nullptr;
  }
}

BpeModel::BpeModel(const TokenizerSpec& spec)
    : unk_id_(spec.unk_id),
      byte_fallback_(spec.byte_fallback),
      fuse_unk_(spec.fuse_unk),
      ignore_merges_(spec.ignore_merges) {
  vocab_.reserve(spec.tokens.size());
  for (size_t id = 0; id < spec.tokens.size(); ++id) {
    if (in_model_vocab(spec.kinds[id]) && !spec.tokens[id].empty())
      vocab_.emplace(spec.tokens[id], static_cast<int32_t>(id));  // the first id wins
  }
  bmp_ids_.assign(0x10000, -1);
  for (const auto& [token, id] : vocab_) {
    char32_t cp = 0;
    if (utf8::decode(token, 0, cp) == token.size() && cp < 0x10000) bmp_ids_[cp] = id;
  }
  byte_ids_.fill(-1);
  for (int b = 0; b < 256; ++b) {
    static const char* hex = "0123456789ABCDEF";
    const std::string name{'<', '0', 'x', hex[b >> 4], hex[b & 15], '>'};
    if (auto it = vocab_.find(name); it != vocab_.end()) byte_ids_[b] = it->second;
  }
  // Adjacent character pairs inside tokens: long words are cut where no token spans.
  for (const auto& [token, id] : vocab_) {
    char32_t previous = 0;
    size_t pos = 0;
    while (pos < token.size()) {
      char32_t cp = 0;
      const size_t n = utf8::decode(token, pos, cp);
      if (n == 0) {
        previous = 0;
        pos += 1;
        continue;
      }
      if (pos > 0 && previous != 0) inner_pairs_.push_back((uint64_t{previous} << 32) | cp);
      previous = cp;
      pos += n;
    }
  }
  std::sort(inner_pairs_.begin(), inner_pairs_.end());
  inner_pairs_.erase(std::unique(inner_pairs_.begin(), inner_pairs_.end()), inner_pairs_.end());
  if (!spec.merges.empty()) {
    build_rank_merges(spec);
  } else if (!spec.scores.empty()) {
    build_score_merges(spec);
  }
}

void BpeModel::build_rank_merges(const TokenizerSpec& spec) {
  merges_.reserve(spec.merges.size());
  std::string joined;
  for (size_t rank = 0; rank < spec.merges.size(); ++rank) {
    const auto& [left, right] = spec.merges[rank];
    joined = left + right;
    const auto l = vocab_.find(left), r = vocab_.find(right), j = vocab_.find(joined);
    if (l == vocab_.end() || r == vocab_.end() || j == vocab_.end()) {
      const std::string& missing = l == vocab_.end() ? left : r == vocab_.end() ? right : joined;
      fail("{}: merge {} ({:?} + {:?}) uses {:?}, which is not in the vocabulary", spec.source, rank, left,
           right, missing);
    }
    merges_.insert(l->second, r->second, Merge{static_cast<uint32_t>(rank), j->second});
  }
}

void BpeModel::build_score_merges(const TokenizerSpec& spec) {
  // Rank = position of the token's score among the distinct scores, highest first.
  std::vector<float> distinct;
  for (size_t id = 0; id < spec.tokens.size(); ++id)
    if (spec.kinds[id] == TokenKind::Normal) distinct.push_back(spec.scores[id]);
  std::sort(distinct.begin(), distinct.end(), std::greater<>());
  distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
  merges_.reserve(spec.tokens.size() * 4);
  for (size_t id = 0; id < spec.tokens.size(); ++id) {
    if (spec.kinds[id] != TokenKind::Normal) continue;
    const std::string_view token = spec.tokens[id];
    const auto rank = static_cast<uint32_t>(
        std::lower_bound(distinct.begin(), distinct.end(), spec.scores[id], std::greater<>()) -
        distinct.begin());
    size_t pos = 0;
    while (pos < token.size()) {
      const size_t n = std::max<size_t>(utf8::maximal_subpart(token, pos), 1);
      pos += n;
      if (pos >= token.size()) break;
      const auto l = vocab_.find(token.substr(0, pos));
      const auto r = vocab_.find(token.substr(pos));
      if (l != vocab_.end() && r != vocab_.end()) {
        const Merge* existing = merges_.find(l->second, r->second);
        if (existing == nullptr || existing->rank > rank)
          merges_.insert(l->second, r->second, Merge{rank, static_cast<int32_t>(id)});
      }
    }
  }
}

std::optional<int32_t> BpeModel::find(std::string_view token) const {
  if (auto it = vocab_.find(token); it != vocab_.end()) return it->second;
  return std::nullopt;
}

int32_t BpeModel::char_id(std::string_view ch, char32_t cp) const {
  if (cp < 0x10000) return bmp_ids_[cp];
  auto it = vocab_.find(ch);
  return it == vocab_.end() ? -1 : it->second;
}

bool BpeModel::is_cut_point(char32_t left, char32_t right) const {
  return !std::binary_search(inner_pairs_.begin(), inner_pairs_.end(), (uint64_t{left} << 32) | right);
}

void BpeModel::encode_word(std::string_view word, std::vector<int32_t>& out) const {
  if (word.empty()) return;
  if (ignore_merges_) {
    if (auto it = vocab_.find(word); it != vocab_.end()) {
      out.push_back(it->second);
      return;
    }
  }
  // A long word (a whole SentencePiece text, a run of CJK characters) is cut where no merge
  // can ever join across, and each piece is merged on its own: the result is the same (a
  // merge only looks at two adjacent symbols) and the merge queues stay small. Cuts are
  // made only between characters that are tokens themselves, so unknown characters (and
  // fuse_unk) are never split.
  constexpr size_t kLongWord = 64;
  if (word.size() <= kLongWord) return merge_word(word, out);
  size_t chunk_start = 0;
  size_t pos = 0;
  char32_t previous = 0;
  bool previous_known = false;
  while (pos < word.size()) {
    char32_t cp = 0;
    size_t n = utf8::decode(word, pos, cp);
    const bool known = n != 0 && char_id(word.substr(pos, n), cp) >= 0;
    if (n == 0) n = utf8::maximal_subpart(word, pos);
    if (known && previous_known && pos > chunk_start && is_cut_point(previous, cp)) {
      merge_word(word.substr(chunk_start, pos - chunk_start), out);
      chunk_start = pos;
    }
    previous = cp;
    previous_known = known;
    pos += n;
  }
  merge_word(word.substr(chunk_start), out);
}

void BpeModel::merge_word(std::string_view word, std::vector<int32_t>& out) const {
  // Initial symbols: one per character (HF BPE::merge_word).
  thread_local std::vector<Symbol> symbols;
  symbols.clear();
  auto add = [&](int32_t id) {
    const auto index = static_cast<int32_t>(symbols.size());
    symbols.push_back({id, index - 1, index + 1, true});
  };
  int32_t pending_unk = -1;  // an unk symbol not yet added (HF defers it)
  size_t pos = 0;
  while (pos < word.size()) {
    char32_t cp = 0;
    size_t n = utf8::decode(word, pos, cp);
    const int32_t id = n == 0 ? -1 : char_id(word.substr(pos, n), cp);
    if (n == 0) n = utf8::maximal_subpart(word, pos);
    const std::string_view ch = word.substr(pos, n);
    pos += n;
    if (id >= 0) {
      if (pending_unk >= 0) add(pending_unk);
      pending_unk = -1;
      add(id);
      continue;
    }
    if (byte_fallback_ && std::all_of(ch.begin(), ch.end(), [&](char c) {
          return byte_ids_[static_cast<unsigned char>(c)] >= 0;
        })) {
      for (const char c : ch) add(byte_ids_[static_cast<unsigned char>(c)]);
      continue;
    }
    if (unk_id_) {
      if (pending_unk >= 0 && !fuse_unk_) add(pending_unk);
      pending_unk = *unk_id_;
    }
  }
  if (pending_unk >= 0) add(pending_unk);
  if (symbols.empty()) return;
  symbols.back().next = -1;

  if (symbols.size() > 1) {
    // A min-heap on (rank, position), kept in a per-thread buffer.
    thread_local std::vector<Candidate> queue;
    queue.clear();
    const auto push = [&](Candidate c) {
      queue.push_back(c);
      std::push_heap(queue.begin(), queue.end(), std::greater<>());
    };
    for (size_t i = 0; i + 1 < symbols.size(); ++i) {
      if (const Merge* m = merges_.find(symbols[i].id, symbols[i + 1].id))
        push({m->rank, static_cast<int32_t>(i), m->result});
    }
    while (!queue.empty()) {
      std::pop_heap(queue.begin(), queue.end(), std::greater<>());
      const Candidate top = queue.back();
      queue.pop_back();
      Symbol& left = symbols[top.pos];
      if (!left.alive || left.next < 0) continue;
      const Merge* current = merges_.find(left.id, symbols[left.next].id);
      if (current == nullptr || current->result != top.result) continue;  // stale entry
      Symbol& right = symbols[left.next];
      left.id = top.result;
      right.alive = false;
      left.next = right.next;
      if (left.next >= 0) symbols[left.next].prev = top.pos;
      if (left.prev >= 0) {
        if (const Merge* m = merges_.find(symbols[left.prev].id, left.id))
          push({m->rank, left.prev, m->result});
      }
      if (left.next >= 0) {
        if (const Merge* m = merges_.find(left.id, symbols[left.next].id))
          push({m->rank, top.pos, m->result});
      }
    }
  }
  for (const Symbol& s : symbols)
    if (s.alive) out.push_back(s.id);
}

}  // namespace tokenmill
