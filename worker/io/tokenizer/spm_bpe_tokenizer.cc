#include "worker/io/tokenizer/spm_bpe_tokenizer.h"

#include <cstdio>
#include <queue>
#include <unordered_map>

#include "worker/common/cancellation.h"
#include "worker/io/tokenizer/byte_level.h"

namespace quantd::io {
namespace {

constexpr std::string_view kSpace = "\xE2\x96\x81";  // U+2581 LOWER ONE EIGHTH BLOCK

}  // namespace

StatusOr<std::unique_ptr<SpmBpeTokenizer>> SpmBpeTokenizer::Create(SpmVocab vocab,
                                                                   const SpmBpeOptions& options) {
  const size_t n = vocab.pieces.size();
  if (vocab.scores.size() != n || vocab.types.size() != n) {
    return InvalidArgumentError("SentencePiece vocabulary has " + std::to_string(n) +
                                " pieces but " + std::to_string(vocab.scores.size()) +
                                " scores and " + std::to_string(vocab.types.size()) + " types");
  }
  std::unique_ptr<SpmBpeTokenizer> t(new SpmBpeTokenizer());
  t->options_ = options;
  auto check_id = [&](const char* what, int32_t id) -> Status {
    if (id < -1 || id >= static_cast<int32_t>(n)) {
      return InvalidArgumentError(std::string(what) + " " + std::to_string(id) +
                                  " is outside the vocabulary of " + std::to_string(n));
    }
    return OkStatus();
  };
  QD_RETURN_IF_ERROR(check_id("unk id", options.unk_id));
  QD_RETURN_IF_ERROR(check_id("bos id", options.bos_id));
  QD_RETURN_IF_ERROR(check_id("eos id", options.eos_id));
  t->piece_to_id_.reserve(n);
  for (size_t id = 0; id < n; ++id) t->piece_to_id_.emplace(vocab.pieces[id], id);
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    auto it = t->piece_to_id_.find(name);
    if (it == t->piece_to_id_.end())
      it = t->piece_to_id_.find(std::string(1, static_cast<char>(b)));
    t->byte_ids_[b] = it == t->piece_to_id_.end() ? options.unk_id : it->second;
  }
  t->vocab_ = std::move(vocab);
  return t;
}

int32_t SpmBpeTokenizer::PieceToId(std::string_view piece) const {
  auto it = piece_to_id_.find(std::string(piece));
  return it == piece_to_id_.end() ? -1 : it->second;
}

int32_t SpmBpeTokenizer::ByteToId(unsigned char byte) const { return byte_ids_[byte]; }

std::vector<int32_t> SpmBpeTokenizer::Encode(std::string_view raw) const {
  std::vector<int32_t> out;
  if (raw.empty()) return out;
  std::string text;
  text.reserve(raw.size() + 8);
  if (options_.add_dummy_prefix) text += kSpace;
  for (char c : raw) {
    if (c == ' ') {
      text += kSpace;
    } else {
      text.push_back(c);
    }
  }

  struct Symbol {
    size_t start, len;
    int prev, next;
  };
  std::vector<Symbol> sym;
  for (size_t pos = 0; pos < text.size();) {
    const size_t len = std::min<size_t>(Utf8SequenceLength(text[pos]), text.size() - pos);
    const int idx = static_cast<int>(sym.size());
    sym.push_back({pos, len, idx - 1, idx + 1});
    pos += len;
  }
  sym.back().next = -1;

  struct Bigram {
    float score;
    int left, right;
    size_t size;
  };
  auto lower = [](const Bigram& a, const Bigram& b) {
    return a.score < b.score || (a.score == b.score && a.left > b.left);
  };
  std::priority_queue<Bigram, std::vector<Bigram>, decltype(lower)> queue(lower);
  // Which two symbols formed each merged text, to split a symbol back when
  // it has no piece of its own (llama.cpp's resegment).
  std::unordered_map<std::string, std::pair<int, int>> rev_merge;
  auto view = [&](size_t start, size_t len) { return std::string_view(text).substr(start, len); };
  auto add = [&](int left, int right) {
    if (left < 0 || right < 0) return;
    const std::string_view s = view(sym[left].start, sym[left].len + sym[right].len);
    const int32_t id = PieceToId(s);
    if (id < 0) return;
    queue.push({vocab_.scores[id], left, right, s.size()});
    rev_merge[std::string(s)] = {left, right};
  };
  for (size_t i = 1; i < sym.size(); ++i) add(static_cast<int>(i) - 1, static_cast<int>(i));
  // The whole text merges in one queue: a job's cancel stops the merging
  // (nothing is returned; see Tokenizer::Encode).
  CancellationPoller poller(4096);
  while (!queue.empty()) {
    if (poller.Due()) return {};
    const Bigram b = queue.top();
    queue.pop();
    Symbol& l = sym[b.left];
    Symbol& r = sym[b.right];
    if (l.len == 0 || r.len == 0 || l.len + r.len != b.size) continue;
    l.len += r.len;
    r.len = 0;
    l.next = r.next;
    if (r.next >= 0) sym[r.next].prev = b.left;
    add(l.prev, b.left);
    add(b.left, l.next);
  }

  // Emits a symbol's piece, or splits it into the symbols that made it, or
  // falls back to byte pieces.
  auto resegment = [&](auto&& self, size_t start, size_t len) -> void {
    const std::string_view s = view(start, len);
    const int32_t id = PieceToId(s);
    if (id >= 0) {
      out.push_back(id);
      return;
    }
    auto it = rev_merge.find(std::string(s));
    if (it == rev_merge.end()) {
      for (unsigned char c : s) out.push_back(ByteToId(c));
      return;
    }
    // The right part starts where the right symbol started (starts never move).
    const size_t left_len = sym[it->second.second].start - start;
    self(self, start, left_len);
    self(self, start + left_len, len - left_len);
  };
  for (int i = 0; i >= 0; i = sym[i].next) resegment(resegment, sym[i].start, sym[i].len);
  return out;
}

std::string SpmBpeTokenizer::Decode(const std::vector<int32_t>& ids) const {
  std::string text;
  for (int32_t id : ids) {
    if (id < 0 || id >= vocab_size()) continue;
    const auto type = static_cast<SpmPieceType>(vocab_.types[id]);
    if (type == SpmPieceType::kControl || type == SpmPieceType::kUnknown) continue;
    const std::string& piece = vocab_.pieces[id];
    unsigned int byte;
    if (type == SpmPieceType::kByte && piece.size() == 6 &&
        std::sscanf(piece.c_str(), "<0x%02X>", &byte) == 1) {
      text.push_back(static_cast<char>(byte));
      continue;
    }
    for (size_t pos = 0; pos < piece.size();) {
      if (piece.compare(pos, kSpace.size(), kSpace) == 0) {
        text.push_back(' ');
        pos += kSpace.size();
      } else {
        text.push_back(piece[pos++]);
      }
    }
  }
  if (options_.add_dummy_prefix && !text.empty() && text[0] == ' ') text.erase(0, 1);
  return text;
}

}  // namespace quantd::io
