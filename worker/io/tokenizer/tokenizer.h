// Tokenizer: text <-> token ids, whatever the vocabulary format.
//
// Implementations: SentencePiece (tokenizer.model, via libsentencepiece),
// byte-level BPE (tokenizer.json: GPT-2, Llama-3, Qwen2 pre-tokenizers), and
// the vocabularies embedded in GGUF metadata (SPM and BPE). Callers see one
// interface, so datasets and evaluation never care where the vocab came from.
#ifndef QUANTD_WORKER_IO_TOKENIZER_TOKENIZER_H_
#define QUANTD_WORKER_IO_TOKENIZER_TOKENIZER_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace quantd::io {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // Token ids of `text`, exactly as the model's reference tokenizer gives
  // them, without BOS/EOS (a SentencePiece dummy prefix is applied when the
  // model's normalizer asks for it). Under a CancellationScope that asks to
  // stop (worker/common/cancellation.h), the BPE tokenizers return early with
  // part of the ids: a caller that may run under one checks StopRequested()
  // after Encode and discards them.
  virtual std::vector<int32_t> Encode(std::string_view text) const = 0;
  virtual std::string Decode(const std::vector<int32_t>& ids) const = 0;
  // -1 when the vocabulary has none.
  virtual int32_t bos_id() const = 0;
  virtual int32_t eos_id() const = 0;
  // Whether the model expects BOS at the start of a sequence.
  virtual bool add_bos() const = 0;
  virtual int32_t vocab_size() const = 0;
};

}  // namespace quantd::io

#endif  // QUANTD_WORKER_IO_TOKENIZER_TOKENIZER_H_
