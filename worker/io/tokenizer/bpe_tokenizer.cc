#include "worker/io/tokenizer/bpe_tokenizer.h"

#include <algorithm>
#include <queue>

#include "worker/common/cancellation.h"
#include "worker/io/tokenizer/byte_level.h"

namespace quantd::io {

StatusOr<std::unique_ptr<BpeTokenizer>> BpeTokenizer::Create(BpeVocab vocab,
                                                             const BpeOptions& options) {
  std::unique_ptr<BpeTokenizer> t(new BpeTokenizer());
  t->options_ = options;
  QD_ASSIGN_OR_RETURN(t->pretokenizer_, RegexPreTokenizer::Create(options.pretokenizer_pattern));
  const int32_t n = static_cast<int32_t>(vocab.tokens.size());
  t->token_to_id_.reserve(vocab.tokens.size());
  for (int32_t id = 0; id < n; ++id) {
    // Later duplicates are unreachable by text; the first id wins, as in
    // llama.cpp. (Some vocabularies pad with repeated placeholder tokens.)
    t->token_to_id_.emplace(vocab.tokens[id], id);
  }
  t->merge_rank_.reserve(vocab.merges.size());
  for (size_t rank = 0; rank < vocab.merges.size(); ++rank) {
    const std::string& m = vocab.merges[rank];
    const size_t space = m.find(' ', 1);
    if (space == std::string::npos || space + 1 >= m.size()) {
      return InvalidArgumentError("BPE merge " + std::to_string(rank) + " '" + m +
                                  "' is not two space-separated tokens");
    }
    t->merge_rank_.emplace(m, static_cast<int>(rank));
  }
  auto check_id = [&](const char* what, int32_t id) -> Status {
    if (id < -1 || id >= n) {
      return InvalidArgumentError(std::string(what) + " " + std::to_string(id) +
                                  " is outside the vocabulary of " + std::to_string(n));
    }
    return OkStatus();
  };
  QD_RETURN_IF_ERROR(check_id("bos id", options.bos_id));
  QD_RETURN_IF_ERROR(check_id("eos id", options.eos_id));
  t->is_control_.assign(n, false);
  for (int32_t id : vocab.control_tokens) {
    QD_RETURN_IF_ERROR(check_id("control token", id));
    if (id >= 0) t->is_control_[id] = true;
  }
  for (const BpeAddedToken& added : vocab.added_tokens) {
    QD_RETURN_IF_ERROR(check_id("added token", added.id));
    if (added.id >= 0 && !vocab.tokens[added.id].empty()) {
      t->added_.emplace_back(vocab.tokens[added.id], added);
    }
  }
  // Longest first, so "<|end|>" is not cut by a shorter added token prefix.
  std::stable_sort(t->added_.begin(), t->added_.end(),
                   [](const auto& a, const auto& b) { return a.first.size() > b.first.size(); });
  t->vocab_ = std::move(vocab);
  return t;
}

int32_t BpeTokenizer::TokenToId(std::string_view token) const {
  auto it = token_to_id_.find(std::string(token));
  return it == token_to_id_.end() ? -1 : it->second;
}

int BpeTokenizer::MergeRank(std::string_view left, std::string_view right) const {
  std::string key;
  key.reserve(left.size() + right.size() + 1);
  key.append(left).push_back(' ');
  key.append(right);
  auto it = merge_rank_.find(key);
  return it == merge_rank_.end() ? -1 : it->second;
}

void BpeTokenizer::EncodeWord(std::string_view word_bytes, std::vector<int32_t>* out) const {
  const std::string word = BytesToByteLevel(word_bytes);
  if (options_.ignore_merges) {
    const int32_t whole = TokenToId(word);
    if (whole >= 0) {
      out->push_back(whole);
      return;
    }
  }
  // Symbols are the word's characters in a doubly linked list; candidate
  // merges wait in a queue ordered by (rank, left position) and are dropped
  // when either side has changed since they were queued.
  struct Symbol {
    size_t start, len;
    int prev, next;
  };
  std::vector<Symbol> sym;
  for (size_t pos = 0; pos < word.size();) {
    const size_t start = pos;
    NextCodePoint(word, &pos);
    const int idx = static_cast<int>(sym.size());
    sym.push_back({start, pos - start, idx - 1, idx + 1});
  }
  if (sym.empty()) return;
  sym.back().next = -1;
  struct Bigram {
    int rank, left, right;
    size_t size;
  };
  auto later = [](const Bigram& a, const Bigram& b) {
    return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);
  };
  std::priority_queue<Bigram, std::vector<Bigram>, decltype(later)> queue(later);
  auto text = [&](int i) { return std::string_view(word).substr(sym[i].start, sym[i].len); };
  auto add = [&](int left, int right) {
    if (left < 0 || right < 0) return;
    const int rank = MergeRank(text(left), text(right));
    if (rank >= 0) queue.push({rank, left, right, sym[left].len + sym[right].len});
  };
  for (size_t i = 1; i < sym.size(); ++i) add(static_cast<int>(i) - 1, static_cast<int>(i));
  while (!queue.empty()) {
    const Bigram b = queue.top();
    queue.pop();
    Symbol& l = sym[b.left];
    Symbol& r = sym[b.right];
    if (l.len == 0 || r.len == 0 || l.next != b.right || l.len + r.len != b.size) continue;
    l.len += r.len;
    r.len = 0;
    l.next = r.next;
    if (r.next >= 0) sym[r.next].prev = b.left;
    add(l.prev, b.left);
    add(b.left, l.next);
  }
  for (int i = 0; i >= 0; i = sym[i].next) {
    const int32_t id = TokenToId(text(i));
    if (id >= 0) {
      out->push_back(id);
      continue;
    }
    // No token for the symbol: fall back to its characters, skipping any the
    // vocabulary lacks (llama.cpp's behaviour).
    const std::string_view s = text(i);
    for (size_t pos = 0; pos < s.size();) {
      const size_t start = pos;
      NextCodePoint(s, &pos);
      const int32_t c = TokenToId(s.substr(start, pos - start));
      if (c >= 0) out->push_back(c);
    }
  }
}

std::vector<int32_t> BpeTokenizer::Encode(std::string_view text) const {
  std::vector<int32_t> out;
  // A dataset of gigabytes is one text: a job's cancel stops between words
  // (the ids so far are returned; see Tokenizer::Encode).
  CancellationPoller poller;
  bool stopped = false;
  auto encode_plain = [&](std::string_view plain) {
    if (plain.empty() || stopped) return;
    std::string normalized;
    if (options_.normalizer) {
      normalized = options_.normalizer(plain);
      plain = normalized;
    }
    std::string prefixed;
    if (options_.add_prefix_space && plain[0] != ' ') {
      prefixed = " " + std::string(plain);
      plain = prefixed;
    }
    for (std::string_view word : pretokenizer_->Split(plain)) {
      if (poller.Due()) {
        stopped = true;
        return;
      }
      EncodeWord(word, &out);
    }
  };
  auto is_space = [](char c) { return c == ' ' || (c >= '\t' && c <= '\r'); };
  size_t pos = 0, plain_start = 0;
  while (pos < text.size() && !added_.empty() && !stopped) {
    const BpeAddedToken* matched = nullptr;
    size_t matched_len = 0;
    for (const auto& [content, added] : added_) {
      if (text.compare(pos, content.size(), content) == 0) {
        matched = &added;
        matched_len = content.size();
        break;
      }
    }
    if (!matched) {
      ++pos;
      continue;
    }
    size_t plain_end = pos;
    if (matched->lstrip) {
      while (plain_end > plain_start && is_space(text[plain_end - 1])) --plain_end;
    }
    encode_plain(text.substr(plain_start, plain_end - plain_start));
    out.push_back(matched->id);
    pos += matched_len;
    if (matched->rstrip) {
      while (pos < text.size() && is_space(text[pos])) ++pos;
    }
    plain_start = pos;
  }
  encode_plain(text.substr(plain_start));
  return out;
}

std::string BpeTokenizer::Decode(const std::vector<int32_t>& ids) const {
  std::string text;
  for (int32_t id : ids) {
    if (id < 0 || id >= vocab_size() || is_control_[id]) continue;
    text += vocab_.tokens[id];
  }
  return ByteLevelToBytes(text);
}

}  // namespace quantd::io
