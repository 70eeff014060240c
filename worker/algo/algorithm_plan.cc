#include "worker/algo/algorithm_plan.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <utility>

namespace quantd::algo {
namespace {

using config::AutoSmoothQuantOptions;
using config::AwqOptions;
using config::GptqOptions;
using config::SmoothQuantOptions;

// Collects violations; the first message becomes the status message.
class Violations {
 public:
  void Add(const std::string& field, const std::string& description) {
    if (first_.empty()) first_ = field + ": " + description;
    list_.emplace_back(field, description);
  }
  bool empty() const { return list_.empty(); }
  Status ToStatus() const {
    // The count first, apart from the message (see job_spec_check.cc).
    std::string msg = list_.size() > 1
                          ? std::to_string(list_.size()) + " violations; the first: " + first_
                          : first_;
    Status s(StatusCode::kInvalidArgument, msg, "INVALID_JOB_SPEC");
    for (const auto& [f, d] : list_) s.AddViolation(f, d);
    return s;
  }

 private:
  std::string first_;
  std::vector<std::pair<std::string, std::string>> list_;
};

// A number as a JSON writer spells it (shortest round trip, "1.0" for 1),
// the spelling these messages have always used.
std::string JsonNumber(double x) {
  char buf[32];
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof(buf), "%.*g", precision, x);
    if (std::strtod(buf, nullptr) == x) break;
  }
  std::string s = buf;
  if (std::isfinite(x) && s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

// The option checks of one algorithm; `field` is "<prefix>[i]".
void CheckOptions(const config::AlgorithmConfig& a, const std::string& field, Violations& v) {
  const std::string options = field + ".options.";
  if (const auto* g = std::get_if<GptqOptions>(&a.options)) {
    // The reference toolkit's open range; the config's own check lets 1 by.
    if (!(std::isfinite(g->damp_percent) && g->damp_percent > 0 && g->damp_percent < 1)) {
      v.Add(options + "damp_percent", "must be in (0, 1), got " + JsonNumber(g->damp_percent));
    }
  } else if (const auto* w = std::get_if<AwqOptions>(&a.options)) {
    // At least two values of α to choose between.
    if (w->grid < 2) {
      v.Add(options + "grid_size", "must be at least 2, got " + std::to_string(w->grid));
    }
  } else if (const auto* as = std::get_if<AutoSmoothQuantOptions>(&a.options)) {
    if (as->alpha_min > as->alpha_max) v.Add(options + "alpha_min", "must not exceed alpha_max");
  }
}

}  // namespace

StatusOr<AlgorithmPlan> PlanAlgorithms(const std::vector<config::AlgorithmConfig>& algorithms,
                                       const std::string& prefix) {
  Violations v;
  std::vector<PlannedAlgorithm> planned;
  std::map<AlgorithmKind, size_t> seen;
  for (size_t i = 0; i < algorithms.size(); ++i) {
    const config::AlgorithmConfig& a = algorithms[i];
    const std::string field = prefix + "[" + std::to_string(i) + "]";
    if (auto it = seen.find(a.kind()); it != seen.end()) {
      v.Add(field + ".name", std::string(config::AlgorithmKindName(a.kind())) +
                                 " is already algorithms[" + std::to_string(it->second) + "]");
      continue;
    }
    seen[a.kind()] = i;
    CheckOptions(a, field, v);
    planned.push_back({i, a.options});
  }
  if (seen.count(AlgorithmKind::kSmoothQuant) && seen.count(AlgorithmKind::kAutoSmoothQuant)) {
    const size_t later =
        std::max(seen[AlgorithmKind::kSmoothQuant], seen[AlgorithmKind::kAutoSmoothQuant]);
    v.Add(prefix + "[" + std::to_string(later) + "].name",
          "smoothquant and autosmoothquant both smooth the same layers; choose one");
  }
  if (!v.empty()) return v.ToStatus();

  AlgorithmPlan plan;
  const bool has_gptq = seen.count(AlgorithmKind::kGptq) > 0;
  for (PlannedAlgorithm& p : planned) {
    if (auto* s = std::get_if<SmoothQuantOptions>(&p.options)) {
      std::map<std::string, double> by_glob;
      for (const auto& [glob, alpha] : s->alpha_overrides) by_glob[glob] = alpha;
      s->alpha_overrides.assign(by_glob.begin(), by_glob.end());
    }
    if (auto* w = std::get_if<AwqOptions>(&p.options); w && has_gptq) w->quantize_weights = false;
    if (p.kind() == AlgorithmKind::kRotation) {
      plan.rotation = p;
    } else if (p.kind() != AlgorithmKind::kGptq) {
      plan.block_algorithms.push_back(p);
    }
  }
  for (PlannedAlgorithm& p : planned)
    if (p.kind() == AlgorithmKind::kGptq) plan.block_algorithms.push_back(p);
  return plan;
}

}  // namespace quantd::algo
