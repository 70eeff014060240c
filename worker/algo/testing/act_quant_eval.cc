#include "worker/algo/testing/act_quant_eval.h"

#include <mutex>

#include "worker/algo/activation_quant.h"
#include "worker/algo/block_hooks.h"
#include "worker/algo/testing/stories_job.h"
#include "worker/eval/blockwise_model.h"
#include "worker/eval/eval_windows.h"
#include "worker/eval/perplexity.h"
#include "worker/io/dataset/calibration.h"
#include "worker/io/dataset/dataset.h"
#include "worker/io/tokenizer/load_tokenizer.h"
#include "worker/models/registry.h"
#include "worker/quant/fake_quant.h"

namespace quantd::algo::testing {
namespace {

class CollectingObserver : public pipeline::JobObserver {
 public:
  void OnLog(pipeline::LogLevel level, const std::string& message) override {
    std::lock_guard<std::mutex> lock(mu);
    (level == pipeline::LogLevel::kInfo ? infos : warnings).push_back(message);
  }
  std::mutex mu;
  std::vector<std::string> infos;
  std::vector<std::string> warnings;
};

at::Tensor IdsTensor(const std::vector<std::vector<int32_t>>& rows) {
  at::Tensor ids = at::empty(
      {static_cast<int64_t>(rows.size()), static_cast<int64_t>(rows[0].size())}, at::kLong);
  auto a = ids.accessor<int64_t, 2>();
  for (size_t i = 0; i < rows.size(); ++i)
    for (size_t j = 0; j < rows[i].size(); ++j) a[i][j] = rows[i][j];
  return ids;
}

// Weights the plan quantizes, rounded to nearest, except those an algorithm
// already quantized.
Status RoundRemainingWeights(models::DecoderBlock& block, const pipeline::LayerPlanner& planner,
                             const std::map<std::string, quant::QParams>& done) {
  for (models::Linear* l : block.linears()) {
    if (done.count(l->name())) continue;
    pipeline::LayerPlan plan = planner(l->name(), l->info().type);
    if (!plan.weight) continue;
    QD_ASSIGN_OR_RETURN(quant::QParams qp, quant::ComputeQParams(l->weight(), *plan.weight));
    QD_ASSIGN_OR_RETURN(l->weight(), quant::FakeQuantize(l->weight(), *plan.weight, qp));
  }
  return OkStatus();
}

}  // namespace

StatusOr<ActQuantEvalResult> ActQuantPerplexity(const ActQuantEvalOptions& o) {
  QD_ASSIGN_OR_RETURN(std::unique_ptr<models::CausalLM> model, models::OpenCausalLM(kStoriesDir));
  QD_ASSIGN_OR_RETURN(std::unique_ptr<io::Tokenizer> tok, io::LoadTokenizerFromDir(kStoriesDir));

  std::string calib_path = o.calibration_path;
  if (calib_path.empty()) {
    QD_ASSIGN_OR_RETURN(calib_path, TinyStoriesCalibrationText());
  }
  QD_ASSIGN_OR_RETURN(io::Dataset calib_data, io::LoadDataset(calib_path));
  QD_ASSIGN_OR_RETURN(std::vector<int32_t> stream, calib_data.TokenStream(*tok));
  io::CalibrationOptions copt;
  copt.method = io::SamplingMethod::kRandomWindows;
  copt.num_samples = o.num_samples;
  copt.seq_len = o.seq_len;
  copt.seed = o.seed;
  QD_ASSIGN_OR_RETURN(io::CalibrationSet calib, io::SampleCalibration(stream, copt));

  QD_ASSIGN_OR_RETURN(io::Dataset eval_data, io::LoadDataset(kEvalText));
  QD_ASSIGN_OR_RETURN(std::vector<int32_t> eval_ids, eval_data.TextTokens(*tok));
  eval::WindowOptions wopt;
  wopt.n_ctx = o.n_ctx;
  wopt.max_windows = o.eval_windows;
  QD_ASSIGN_OR_RETURN(eval::EvalWindows windows,
                      eval::MakeEvalWindows(eval_ids, tok->bos_id(), wopt));

  auto observer = std::make_shared<CollectingObserver>();
  // State carried from block to block while evaluation walks the model.
  struct State {
    at::Tensor calib_hidden;
    std::unique_ptr<ScopedHooks> hooks;
  };
  auto state = std::make_shared<State>();
  const models::CausalLM* m = model.get();

  eval::BlockwiseModel bm;
  bm.num_blocks = m->num_blocks();
  bm.embed = [&, m, state](const at::Tensor& ids) -> StatusOr<at::Tensor> {
    QD_ASSIGN_OR_RETURN(auto emb, m->LoadEmbedding());
    if (o.transform) QD_RETURN_IF_ERROR(o.transform->TransformEmbedding(*emb));
    if (!state->calib_hidden.defined()) {
      QD_ASSIGN_OR_RETURN(state->calib_hidden, emb->Forward(IdsTensor(calib.samples)));
    }
    return emb->Forward(ids);
  };
  bm.load_block = [&, m, state](int64_t i) -> StatusOr<std::unique_ptr<models::DecoderBlock>> {
    QD_ASSIGN_OR_RETURN(auto block, m->LoadBlock(i));
    if (o.transform) QD_RETURN_IF_ERROR(o.transform->TransformBlock(*block));
    state->hooks = std::make_unique<ScopedHooks>();
    if (o.quantize) {
      pipeline::BlockAlgorithmContext ctx{*m, *block, state->calib_hidden, o.planner, *observer, {},
                                          {}, {}};
      for (const auto& a : o.algorithms) {
        Status s = a->Apply(ctx);
        if (!s.ok()) return s.Prepend(std::string(a->name()) + ": ");
      }
      QD_RETURN_IF_ERROR(RoundRemainingWeights(*block, o.planner, ctx.quantized_weights));
    }
    if (o.transform) QD_RETURN_IF_ERROR(o.transform->InstallOnline(*block));
    if (o.quantize) {
      QD_ASSIGN_OR_RETURN(BlockInputQuantizers q,
                          BlockInputQuantizers::Calibrate(*block, state->calib_hidden, o.planner));
      QD_RETURN_IF_ERROR(q.Install(*block, *state->hooks));
    }
    QD_ASSIGN_OR_RETURN(state->calib_hidden, block->Forward(state->calib_hidden));
    return block;
  };
  bm.load_head = [&, m]() -> StatusOr<std::unique_ptr<models::HeadStage>> {
    QD_ASSIGN_OR_RETURN(auto head, m->LoadHead());
    if (o.transform) QD_RETURN_IF_ERROR(o.transform->TransformHead(*head));
    return head;
  };
  eval::EvalOptions eopt;
  QD_ASSIGN_OR_RETURN(eval::PerplexityResult r, eval::EvaluatePerplexity(bm, windows, eopt));
  ActQuantEvalResult out;
  out.ppl = r.ppl;
  out.infos = observer->infos;
  out.warnings = observer->warnings;
  return out;
}

}  // namespace quantd::algo::testing
