#include "worker/eval/blockwise_model.h"

namespace quantd::eval {

BlockwiseModel FromCausalLM(const models::CausalLM& model) {
  BlockwiseModel m;
  m.num_blocks = model.num_blocks();
  m.embed = [&model](const at::Tensor& ids) { return model.Embed(ids); };
  m.load_block = [&model](int64_t i) { return model.LoadBlock(i); };
  m.load_head = [&model]() { return model.LoadHead(); };
  return m;
}

}  // namespace quantd::eval
