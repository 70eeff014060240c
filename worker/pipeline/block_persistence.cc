#include "worker/pipeline/block_persistence.h"

#include <cstdio>
#include <optional>

#include "worker/pipeline/pipeline_quantized_model.h"
#include "worker/pipeline/resume_state.h"
#include "worker/pipeline/weight_quantizer.h"

namespace quantd::pipeline {

std::string BlockFileName(int block) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "block_%05d", block);
  return buf;
}

std::string ActivationKey(const std::string& module, const char* what) {
  return "__quantd__/" + module + "." + what;
}

int64_t RecordQuantizedWeight(const std::string& module, const at::Tensor& weight,
                              const quant::QuantSpec& spec, const quant::QParams& qp,
                              bool with_weight, int64_t float_bytes, NamedTensors& out) {
  if (with_weight) out.emplace_back(module + ".weight", weight);
  if (qp.scale.defined()) out.emplace_back(WeightScaleKey(module), qp.scale);
  if (qp.zero_point.defined())
    out.emplace_back(WeightZeroPointKey(module), qp.zero_point.to(at::kFloat));
  return QuantizedStorageBytes(weight.sizes().vec(), spec) - float_bytes;
}

void AddActivationParams(const std::string& module, const ActivationParams& params,
                         NamedTensors& out) {
  for (bool output : {false, true}) {
    const auto& table = output ? params.outputs : params.inputs;
    auto it = table.find(module);
    if (it == table.end()) continue;
    out.emplace_back(ActivationKey(module, output ? "output_scale" : "input_scale"),
                     it->second.scale);
    if (it->second.zero_point.defined())
      out.emplace_back(ActivationKey(module, output ? "output_zero_point" : "input_zero_point"),
                       it->second.zero_point.to(at::kFloat));
  }
}

Status RestoreActivationParams(const io::TensorSource& scratch,
                               const std::map<std::string, LayerPlan>& plans,
                               ActivationParams& params) {
  for (const auto& [module, plan] : plans) {
    for (bool output : {false, true}) {
      const std::string key = ActivationKey(module, output ? "output_scale" : "input_scale");
      if (!scratch.Find(key)) continue;
      quant::QParams qp;
      QD_ASSIGN_OR_RETURN(qp.scale, scratch.Load(key));
      const std::string zp_key =
          ActivationKey(module, output ? "output_zero_point" : "input_zero_point");
      if (scratch.Find(zp_key)) {
        QD_ASSIGN_OR_RETURN(at::Tensor zp, scratch.Load(zp_key));
        const auto& spec = output ? plan.output : plan.input;
        const bool float_zp =
            spec && !spec->symmetric && spec->zero_point_type == quant::ZeroPointType::kFloat32;
        qp.zero_point = float_zp ? zp : zp.to(at::kInt);
      }
      (output ? params.outputs : params.inputs)[module] = qp;
    }
  }
  return OkStatus();
}

Status BlockCheckpointer::AfterBlock(int done, int n, const at::Tensor& hidden, int64_t bytes_delta,
                                     const std::vector<BlockReport>& blocks) {
  if (!pacer_.Due(done, n, CheckpointPacer::Clock::now())) return OkStatus();
  const auto start = CheckpointPacer::Clock::now();
  // resume.json may only name block files that are on disk.
  QD_RETURN_IF_ERROR(scratch_.Flush());
  QD_RETURN_IF_ERROR(Write(done, hidden, bytes_delta, blocks));
  pacer_.Record(start, CheckpointPacer::Clock::now());
  if (pacer_.interval_seconds() > 0 && done < n) {
    char buf[200];
    std::snprintf(buf, sizeof(buf),
                  "checkpoint after block %d/%d took %.1f s; the next one after %.0f s more "
                  "work",
                  done, n, pacer_.last_seconds(), pacer_.interval_seconds());
    Log(LogLevel::kInfo, buf);
  }
  return OkStatus();
}

// Saves the next block's input and then the manifest, and drops the
// previous checkpoint's input.
Status BlockCheckpointer::Write(int done, const at::Tensor& hidden, int64_t bytes_delta,
                                const std::vector<BlockReport>& blocks) {
  ResumeState st;
  st.fingerprint = fingerprint_;
  st.blocks_done = done;
  st.bytes_delta = bytes_delta;
  st.has_hidden = hidden.defined();
  st.blocks = blocks;
  if (st.has_hidden) QD_RETURN_IF_ERROR(scratch_.PutSide(HiddenFileName(done), "hidden", hidden));
  QD_RETURN_IF_ERROR(WriteResumeState(scratch_dir_, st));
  // The previous checkpoint's hidden states (paced: not always block
  // done - 1; after a resume: the one it resumed from).
  if (checkpointed_blocks_ > 0 && checkpointed_blocks_ != done) {
    scratch_.RemoveSide(HiddenFileName(checkpointed_blocks_));
  }
  checkpointed_blocks_ = done;
  return OkStatus();
}

ResumePoint BlockCheckpointer::Resume(int n, const std::map<std::string, LayerPlan>& plans) {
  StatusOr<std::optional<ResumeState>> loaded = LoadResumeState(scratch_dir_);
  if (!loaded.ok()) {
    Log(LogLevel::kWarning,
        "cannot read the checkpoint (" + loaded.status().ToString() + "); starting over");
    return {};
  }
  const std::optional<ResumeState>& st = *loaded;
  if (!st || st->blocks_done == 0) return {};
  if (st->fingerprint != fingerprint_ || st->blocks_done > n) {
    Log(LogLevel::kWarning,
        "the scratch directory holds a checkpoint of other options; "
        "starting over");
    return {};
  }
  ResumePoint r;
  Status s = [&]() -> Status {
    for (int i = 0; i < st->blocks_done; ++i) QD_RETURN_IF_ERROR(scratch_.Adopt(BlockFileName(i)));
    if (st->has_hidden) {
      QD_ASSIGN_OR_RETURN(r.hidden, scratch_.LoadSide(HiddenFileName(st->blocks_done), "hidden"));
    }
    return RestoreActivationParams(scratch_, plans, r.activation_params);
  }();
  if (!s.ok()) {
    Log(LogLevel::kWarning,
        "cannot resume from the checkpoint (" + s.ToString() + "); starting over");
    return {};
  }
  r.start = st->blocks_done;
  r.bytes_delta = st->bytes_delta;
  r.blocks = st->blocks;
  checkpointed_blocks_ = st->blocks_done;
  const std::string where =
      st->blocks_done < n
          ? "resumed at block " + std::to_string(st->blocks_done + 1) + "/" + std::to_string(n)
          : "resumed after the last block (" + std::to_string(n) + "/" + std::to_string(n) + ")";
  Log(LogLevel::kInfo, where + ": blocks 1-" + std::to_string(st->blocks_done) +
                           " restored from the checkpoint of an earlier attempt");
  return r;
}

}  // namespace quantd::pipeline
