#include "worker/pipeline/resume_state.h"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

#include "worker/common/sha256.h"
#include "worker/config/quark_json.h"

namespace quantd::pipeline {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr int kFormatVersion = 1;
constexpr char kManifest[] = "resume.json";

// JSON has no infinity: an excluded layer's weight SQNR (+inf) would be
// written as null and fail the read, silently restarting the job.
json DoubleToJson(double v) {
  if (std::isfinite(v)) return v;
  return std::isnan(v) ? "nan" : (v > 0 ? "inf" : "-inf");
}

// Earlier versions wrote +inf as null.
double DoubleFromJson(const json& j) {
  if (j.is_null() || j == "inf") return std::numeric_limits<double>::infinity();
  if (j == "-inf") return -std::numeric_limits<double>::infinity();
  if (j == "nan") return std::numeric_limits<double>::quiet_NaN();
  return j.get<double>();
}

json ToJson(const BlockReport& b) {
  json experts = json::array();
  for (const auto& e : b.experts)
    experts.push_back({{"expert", e.expert},
                       {"calibration_tokens", e.calibration_tokens},
                       {"below_floor", e.below_floor},
                       {"kept_float", e.kept_float}});
  json layers = json::array();
  for (const auto& l : b.layers) {
    json sensitivity = json::array();
    for (double e : l.sensitivity_relative_mse) sensitivity.push_back(DoubleToJson(e));
    layers.push_back({{"name", l.name},
                      {"weight_format", l.weight_format},
                      {"input_format", l.input_format},
                      {"output_format", l.output_format},
                      {"weight_sqnr_db", DoubleToJson(l.weight_sqnr_db)},
                      {"excluded", l.excluded},
                      {"input_min", DoubleToJson(l.input_min)},
                      {"input_max", DoubleToJson(l.input_max)},
                      {"sensitivity_relative_mse", sensitivity}});
  }
  return {{"block", b.block},
          {"block_count", b.block_count},
          {"output_rel_mse", b.output_rel_mse ? json(*b.output_rel_mse) : json(nullptr)},
          {"seconds", b.seconds},
          {"algorithm_seconds", b.algorithm_seconds},
          {"device_peak_allocated_bytes", b.device_peak_allocated_bytes},
          {"device_peak_reserved_bytes", b.device_peak_reserved_bytes},
          {"layers", layers},
          {"experts", experts}};
}

BlockReport BlockFromJson(const json& j) {
  BlockReport b;
  b.block = j.at("block").get<int>();
  b.block_count = j.at("block_count").get<int>();
  // null when not measured; earlier versions wrote -1 for that.
  if (const json& e = j.at("output_rel_mse"); e.is_number() && e.get<double>() >= 0)
    b.output_rel_mse = e.get<double>();
  // Absent from the checkpoints of earlier versions.
  b.seconds = j.value("seconds", 0.0);
  b.algorithm_seconds = j.value("algorithm_seconds", 0.0);
  b.device_peak_allocated_bytes = j.value("device_peak_allocated_bytes", int64_t{0});
  b.device_peak_reserved_bytes = j.value("device_peak_reserved_bytes", int64_t{0});
  for (const auto& l : j.at("layers")) {
    LayerReport r;
    r.name = l.at("name").get<std::string>();
    r.weight_format = l.at("weight_format").get<std::string>();
    r.input_format = l.at("input_format").get<std::string>();
    r.output_format = l.at("output_format").get<std::string>();
    r.weight_sqnr_db = DoubleFromJson(l.at("weight_sqnr_db"));
    r.excluded = l.at("excluded").get<bool>();
    r.input_min = DoubleFromJson(l.at("input_min"));
    r.input_max = DoubleFromJson(l.at("input_max"));
    // Absent from the checkpoints of earlier versions.
    if (const auto s = l.find("sensitivity_relative_mse"); s != l.end())
      for (const json& e : *s) r.sensitivity_relative_mse.push_back(DoubleFromJson(e));
    b.layers.push_back(std::move(r));
  }
  // Absent from the checkpoints of earlier versions.
  for (const auto& e : j.value("experts", json::array())) {
    ExpertReport r;
    r.expert = e.at("expert").get<int>();
    r.calibration_tokens = e.at("calibration_tokens").get<int64_t>();
    r.below_floor = e.at("below_floor").get<bool>();
    r.kept_float = e.value("kept_float", false);
    b.experts.push_back(r);
  }
  return b;
}

}  // namespace

std::string ResumeFingerprint(const JobOptions& o) {
  std::ostringstream s;
  s << "v" << kFormatVersion << "\n"
    << (o.model_source.empty() ? o.model_dir : o.model_source) << "\n"
    << o.quantization_description << "\n"
    << config::WriteQuarkJsonForExport(o.quant_config, "fake_quantized") << "\n"
    << o.calibration.dataset_path << "|" << o.calibration.text_field << "|"
    << o.calibration.num_samples << "|" << o.calibration.seq_len << "|"
    << static_cast<int>(o.calibration.sampling) << "|" << o.calibration.seed << "|"
    << o.calibration.on_float_outputs
    // Only when not the default, so that earlier jobs' fingerprints hold.
    << (o.calibration.compute_dtype == at::kFloat ? "" : "|bf16") << "\n"
    << o.evaluation.dataset_path << "|" << o.evaluation.n_ctx << "|" << o.evaluation.metric_windows
    << "\n"
    << (o.kv_cache ? quant::DescribeSpec(*o.kv_cache) : "") << "|" << o.min_kv_scale << "\n";
  // A split's files (the path is their snapshot folder); nothing for one
  // file, so that earlier jobs' fingerprints hold.
  for (const auto& f : o.calibration.dataset_files) s << "calibration file " << f << "\n";
  for (const auto& f : o.evaluation.dataset_files) s << "evaluation file " << f << "\n";
  for (const auto& a : o.block_algorithms) s << a->name() << ",";
  s << "\n" << (o.model_transform ? "transform" : "");
  // Only when set, so that earlier jobs' fingerprints hold.
  if (!o.sensitivity.empty()) {
    s << "\nsensitivity";
    for (const auto& c : o.sensitivity) s << " " << c.name;
  }
  if (o.qat) {
    s << "\nqat " << o.qat->steps << "|" << o.qat->learning_rate << "|" << o.qat->batch_size << "|"
      << o.qat->dataset_path << "|" << static_cast<int>(o.qat->loss) << "|" << o.qat->train_biases
      << "|" << o.qat->learn_scales << "|" << o.qat->seed;
  }
  return Sha256Hex(s.str());
}

StatusOr<std::optional<ResumeState>> LoadResumeState(const std::string& scratch_dir) {
  const fs::path path = fs::path(scratch_dir) / kManifest;
  std::ifstream in(path);
  if (!in) return std::optional<ResumeState>();
  auto unreadable = [&](const std::string& why) {
    return DataLossError(path.string() + ": " + why);
  };
  try {
    json j = json::parse(in);
    if (j.at("version").get<int>() != kFormatVersion)
      return unreadable("format version " + j.at("version").dump() + ", not " +
                        std::to_string(kFormatVersion));
    ResumeState st;
    st.fingerprint = j.at("fingerprint").get<std::string>();
    st.blocks_done = j.at("blocks_done").get<int>();
    st.bytes_delta = j.at("bytes_delta").get<int64_t>();
    st.has_hidden = j.at("has_hidden").get<bool>();
    for (const auto& b : j.at("blocks")) st.blocks.push_back(BlockFromJson(b));
    if (st.blocks_done < 0 || static_cast<int>(st.blocks.size()) != st.blocks_done)
      return unreadable("blocks_done " + std::to_string(st.blocks_done) + " with " +
                        std::to_string(st.blocks.size()) + " block reports");
    return std::optional<ResumeState>(std::move(st));
  } catch (const json::exception& e) {
    return unreadable(e.what());
  }
}

std::optional<ResumeState> ReadResumeState(const std::string& scratch_dir) {
  auto st = LoadResumeState(scratch_dir);
  return st.ok() ? *st : std::nullopt;
}

Status WriteResumeState(const std::string& scratch_dir, const ResumeState& st) {
  json blocks = json::array();
  for (const auto& b : st.blocks) blocks.push_back(ToJson(b));
  json j = {{"version", kFormatVersion},     {"fingerprint", st.fingerprint},
            {"blocks_done", st.blocks_done}, {"bytes_delta", st.bytes_delta},
            {"has_hidden", st.has_hidden},   {"blocks", blocks}};
  const fs::path final_path = fs::path(scratch_dir) / kManifest;
  const fs::path tmp = fs::path(scratch_dir) / (std::string(kManifest) + ".tmp");
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << j.dump();
    out.flush();
    if (!out) return FailedPreconditionError("cannot write " + tmp.string());
  }
  std::error_code ec;
  fs::rename(tmp, final_path, ec);
  if (ec)
    return FailedPreconditionError("cannot write " + final_path.string() + ": " + ec.message());
  return OkStatus();
}

std::string HiddenFileName(int block) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "hidden_%05d", block);
  return buf;
}

}  // namespace quantd::pipeline
