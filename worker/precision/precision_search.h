// The choice of a format per layer for accuracy-targeted quantization
// (spec.auto_precision; docs/auto_precision.md), apart from running jobs:
// layers grouped by what a consumer fuses, each group's cost and measured
// sensitivity per candidate, and the cheapest assignment whose summed
// sensitivity stays within a target. Torch-free.
#ifndef QUANTD_WORKER_PRECISION_PRECISION_SEARCH_H_
#define QUANTD_WORKER_PRECISION_PRECISION_SEARCH_H_

#include <cstdint>
#include <string>
#include <vector>

namespace quantd::precision {

// The layers that must share a format because a serving runtime fuses
// them: "<p>.qkv" for <p>.q_proj / k_proj / v_proj, "<p>.gate_up" for
// <p>.gate_proj / up_proj (a shared expert's too), "<p>.experts" for every
// expert linear of one block (Mixtral's w1 / w2 / w3 included); any other
// layer is its own group (its name).
std::string FusionGroup(const std::string& layer);

// One searched layer: per candidate (in the spec's order) the bytes its
// weight takes, what the search minimizes (the user's cost table, else
// the bytes) and the sensitivity measured for it (0 for "float").
struct SearchLayer {
  std::string name;
  std::vector<int64_t> bytes;
  std::vector<double> cost;  // empty: the bytes
  std::vector<double> sensitivity;
  int64_t weights = 0;  // elements of the weight
};

// A candidate index per layer, in the layers' order.
using Assignment = std::vector<int>;

class PrecisionSearch {
 public:
  // Every layer holds one entry per candidate.
  explicit PrecisionSearch(std::vector<SearchLayer> layers);

  const std::vector<SearchLayer>& layers() const { return layers_; }
  // Every layer in candidate `c`.
  Assignment Uniform(int c) const;
  // The candidate whose uniform assignment costs least.
  int CheapestCandidate() const;
  int64_t Bytes(const Assignment& a) const;
  double Cost(const Assignment& a) const;
  double BitsPerWeight(const Assignment& a) const;
  double Sensitivity(const Assignment& a) const;
  // The cheapest assignment found with Sensitivity <= `target`: each group
  // starts at its cheapest candidate, then the move that removes the most
  // sensitivity per unit of cost added is taken until the target holds
  // (greedy on the grouped costs). When no assignment reaches it, the least sensitive
  // one.
  Assignment CheapestWithin(double target) const;

 private:
  std::vector<SearchLayer> layers_;
  int candidates_ = 0;
  // Layer indices per fusion group, in first-seen order.
  std::vector<std::vector<int>> groups_;
};

// Which of the points (bytes, error) are on the Pareto frontier: no other
// point is at most as large and at most as wrong, and better in one.
std::vector<bool> ParetoFrontier(const std::vector<std::pair<double, double>>& points);

}  // namespace quantd::precision

#endif  // QUANTD_WORKER_PRECISION_PRECISION_SEARCH_H_
