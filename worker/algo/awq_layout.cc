#include "worker/algo/awq_layout.h"

#include <algorithm>

namespace quantd::algo {
namespace {

std::string Relative(const std::string& name, const std::string& prefix) {
  return name.compare(0, prefix.size(), prefix) == 0 ? name.substr(prefix.size()) : name;
}

// "model.layers.3." -> "model.layers".
std::string DecoderLayers(const std::string& block_prefix) {
  std::string p = block_prefix;
  if (!p.empty() && p.back() == '.') p.pop_back();
  const size_t dot = p.rfind('.');
  return dot == std::string::npos ? std::string() : p.substr(0, dot);
}

std::string Join(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : ", ") + n;
  return "[" + out + "]";
}

std::vector<std::string> RelativeLinears(const models::LinearGroup& g, const std::string& prefix) {
  std::vector<std::string> out;
  for (const std::string& l : g.linears) out.push_back(Relative(l, prefix));
  return out;
}

// "[self_attn.q_proj, ...] after input_layernorm; [self_attn.o_proj] (no
// op absorbs its scale); ..."
std::string DescribeGroups(const models::BlockLayout& block) {
  std::string out;
  for (const models::LinearGroup& g : block.groups) {
    out += (out.empty() ? "" : "; ") + Join(RelativeLinears(g, block.prefix)) +
           (g.prev_op.empty() ? " (no op absorbs its scale)"
                              : " after " + Relative(g.prev_op, block.prefix));
  }
  return out;
}

}  // namespace

StatusOr<std::vector<bool>> AwqGroupSelection(const AwqOptions& options,
                                              const models::BlockLayout& block,
                                              const std::string& field) {
  std::vector<bool> chosen(block.groups.size(), options.scaling_layers.empty());
  std::vector<int> named_by(block.groups.size(), -1);
  std::vector<FieldViolation> bad;
  const std::string decoder_layers = DecoderLayers(block.prefix);
  if (!options.model_decoder_layers.empty() && options.model_decoder_layers != decoder_layers) {
    bad.push_back({field + ".model_decoder_layers",
                   "'" + options.model_decoder_layers + "' is not this model's decoder layer list '" +
                       decoder_layers + "' (the config was written for another architecture?)"});
  }
  for (size_t i = 0; i < options.scaling_layers.size(); ++i) {
    const AwqScalingGroup& e = options.scaling_layers[i];
    const std::string at = field + ".scaling_layers[" + std::to_string(i) + "]";
    std::vector<std::string> want = e.layers;
    std::sort(want.begin(), want.end());
    int found = -1;
    for (size_t g = 0; g < block.groups.size() && found < 0; ++g) {
      std::vector<std::string> have = RelativeLinears(block.groups[g], block.prefix);
      std::sort(have.begin(), have.end());
      if (have == want) found = static_cast<int>(g);
    }
    if (found < 0) {
      bad.push_back({at + ".layers", Join(e.layers) +
                                         " is not a group of this model's decoder layer (AWQ "
                                         "scales whole groups: the linears that read one input); "
                                         "its groups: " +
                                         DescribeGroups(block)});
      continue;
    }
    const models::LinearGroup& g = block.groups[found];
    const std::vector<std::string> names = RelativeLinears(g, block.prefix);
    if (named_by[found] >= 0) {
      bad.push_back({at + ".layers", Join(e.layers) + " is already scaling_layers[" +
                                         std::to_string(named_by[found]) + "]"});
      continue;
    }
    named_by[found] = static_cast<int>(i);
    bool ok = true;
    if (g.prev_op.empty()) {
      ok = false;
      bad.push_back({at + ".prev_op",
                     "'" + e.prev_op + "' cannot absorb the input scale of " + Join(names) +
                         " in this model (a non-linear op sits between them, or their widths "
                         "differ, as for v_proj -> o_proj under grouped-query attention); "
                         "leave this entry out"});
    } else if (Relative(g.prev_op, block.prefix) != e.prev_op) {
      ok = false;
      bad.push_back({at + ".prev_op", "'" + e.prev_op + "' does not feed " + Join(names) +
                                          "; in this model their input comes from '" +
                                          Relative(g.prev_op, block.prefix) + "'"});
    }
    if (!e.module2inspect.empty()) {
      // What AwqAlgorithm compares (awq.h): the attention or MLP output for
      // a group of several linears, the linear's own output otherwise.
      std::string expected = names[0];
      if (names.size() > 1) {
        const size_t dot = names[0].rfind('.');
        expected = dot == std::string::npos ? std::string() : names[0].substr(0, dot);
      }
      if (e.module2inspect != expected) {
        ok = false;
        bad.push_back({at + ".module2inspect",
                       "quantd's AWQ compares the output of '" + expected + "' for " +
                           Join(names) + "; '" + e.module2inspect + "' is not supported"});
      }
    }
    if (ok) chosen[found] = true;
  }
  if (bad.empty()) return chosen;
  std::string msg = bad.size() > 1 ? std::to_string(bad.size()) + " violations; the first: " : "";
  msg += bad[0].field + ": " + bad[0].description;
  Status s = InvalidArgumentError(msg).WithReason("INVALID_JOB_SPEC");
  for (FieldViolation& v : bad) s.AddViolation(std::move(v.field), std::move(v.description));
  return s;
}

}  // namespace quantd::algo
