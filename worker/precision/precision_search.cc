#include "worker/precision/precision_search.h"

#include <cstddef>
#include <limits>
#include <map>
#include <utility>

namespace quantd::precision {
namespace {

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

std::string FusionGroup(const std::string& layer) {
  // Experts first: their own gate/up names would otherwise group per expert.
  if (size_t at = layer.find(".experts."); at != std::string::npos)
    return layer.substr(0, at) + ".experts";
  // The last part of the name decides: "<p>.q_proj" -> "<p>.qkv".
  const size_t dot = layer.rfind('.');
  const std::string prefix = dot == std::string::npos ? "" : layer.substr(0, dot + 1);
  const std::string last = layer.substr(prefix.size());
  if (last == "q_proj" || last == "k_proj" || last == "v_proj") return prefix + "qkv";
  if (last == "gate_proj" || last == "up_proj") return prefix + "gate_up";
  return layer;
}

PrecisionSearch::PrecisionSearch(std::vector<SearchLayer> layers) : layers_(std::move(layers)) {
  candidates_ = layers_.empty() ? 0 : static_cast<int>(layers_[0].bytes.size());
  for (SearchLayer& l : layers_)
    if (l.cost.empty()) l.cost.assign(l.bytes.begin(), l.bytes.end());
  std::map<std::string, size_t> index;
  for (size_t i = 0; i < layers_.size(); ++i) {
    auto [it, added] = index.emplace(FusionGroup(layers_[i].name), groups_.size());
    if (added) groups_.emplace_back();
    groups_[it->second].push_back(static_cast<int>(i));
  }
}

Assignment PrecisionSearch::Uniform(int c) const { return Assignment(layers_.size(), c); }

int64_t PrecisionSearch::Bytes(const Assignment& a) const {
  int64_t sum = 0;
  for (size_t i = 0; i < layers_.size(); ++i) sum += layers_[i].bytes[a[i]];
  return sum;
}

double PrecisionSearch::Cost(const Assignment& a) const {
  double sum = 0;
  for (size_t i = 0; i < layers_.size(); ++i) sum += layers_[i].cost[a[i]];
  return sum;
}

double PrecisionSearch::BitsPerWeight(const Assignment& a) const {
  int64_t weights = 0;
  for (const SearchLayer& l : layers_) weights += l.weights;
  return weights > 0 ? 8.0 * static_cast<double>(Bytes(a)) / static_cast<double>(weights) : 0.0;
}

double PrecisionSearch::Sensitivity(const Assignment& a) const {
  double sum = 0;
  for (size_t i = 0; i < layers_.size(); ++i) sum += layers_[i].sensitivity[a[i]];
  return sum;
}

int PrecisionSearch::CheapestCandidate() const {
  int best = 0;
  for (int c = 1; c < candidates_; ++c)
    if (Cost(Uniform(c)) < Cost(Uniform(best))) best = c;
  return best;
}

Assignment PrecisionSearch::CheapestWithin(double target) const {
  // Per group and candidate: cost and sensitivity summed over its layers.
  const size_t n = groups_.size();
  std::vector<std::vector<double>> cost(n, std::vector<double>(candidates_, 0.0));
  std::vector<std::vector<double>> error(n, std::vector<double>(candidates_, 0.0));
  for (size_t g = 0; g < n; ++g) {
    for (int i : groups_[g]) {
      for (int c = 0; c < candidates_; ++c) {
        cost[g][c] += layers_[i].cost[c];
        error[g][c] += layers_[i].sensitivity[c];
      }
    }
  }
  std::vector<int> choice(n, 0);
  double total = 0;
  for (size_t g = 0; g < n; ++g) {
    for (int c = 1; c < candidates_; ++c) {
      const int b = choice[g];
      if (cost[g][c] < cost[g][b] || (cost[g][c] == cost[g][b] && error[g][c] < error[g][b]))
        choice[g] = c;
    }
    total += error[g][choice[g]];
  }
  // Each move lowers the total, so the loop ends.
  while (total > target) {
    double best_gain = 0;
    size_t best_g = n;
    int best_c = -1;
    for (size_t g = 0; g < n; ++g) {
      const int now = choice[g];
      for (int c = 0; c < candidates_; ++c) {
        const double removed = error[g][now] - error[g][c];
        if (!(removed > 0)) continue;
        const double added = cost[g][c] - cost[g][now];
        const double gain = added <= 0 ? std::numeric_limits<double>::infinity() : removed / added;
        if (gain > best_gain) {
          best_gain = gain;
          best_g = g;
          best_c = c;
        }
      }
    }
    if (best_g == n) break;  // every group at its least sensitive candidate
    total += error[best_g][best_c] - error[best_g][choice[best_g]];
    choice[best_g] = best_c;
  }
  Assignment a(layers_.size(), 0);
  for (size_t g = 0; g < n; ++g)
    for (int i : groups_[g]) a[i] = choice[g];
  return a;
}

std::vector<bool> ParetoFrontier(const std::vector<std::pair<double, double>>& points) {
  std::vector<bool> on(points.size(), true);
  for (size_t i = 0; i < points.size(); ++i) {
    for (size_t j = 0; j < points.size() && on[i]; ++j) {
      const auto& [bi, ei] = points[i];
      const auto& [bj, ej] = points[j];
      if (j != i && bj <= bi && ej <= ei && (bj < bi || ej < ei)) on[i] = false;
    }
  }
  return on;
}

}  // namespace quantd::precision
