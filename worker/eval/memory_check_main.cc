// blockwise_memory_check: runs a calibration-style pass and an evaluation
// over a checkpoint block by block, and reports peak resident memory.
//
//   blockwise_memory_check --model=DIR [--as_limit_mb=N] [--samples=4]
//       [--seq_len=128] [--eval_windows=2] [--n_ctx=128] [--dtype=f32|bf16]
//
// The calibration pass embeds `samples` random sequences, then for each
// block: loads it, observes every linear input (per-channel absmax, and the
// q/k/v input Hessian X^T X as GPTQ accumulates it), runs all samples
// through it and drops it. The evaluation is EvaluatePerplexity over
// `eval_windows` random windows. --as_limit_mb sets RLIMIT_AS first, so the
// run fails if it ever needs more address space than that. Prints one JSON
// line with the checkpoint size, the limit and the peak RSS (see
// docs/memory.md).
#include <dirent.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "worker/common/peak_rss.h"
#include "worker/eval/perplexity.h"
#include "worker/models/registry.h"

namespace {

bool Flag(const char* arg, const char* name, std::string* value) {
  const size_t n = std::strlen(name);
  if (std::strncmp(arg, name, n) != 0 || arg[n] != '=') return false;
  *value = arg + n + 1;
  return true;
}

uint64_t CheckpointBytes(const std::string& dir) {
  uint64_t total = 0;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return 0;
  while (dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name.size() > 12 && name.compare(name.size() - 12, 12, ".safetensors") == 0) {
      struct stat st;
      if (::stat((dir + "/" + name).c_str(), &st) == 0) total += st.st_size;
    }
  }
  ::closedir(d);
  return total;
}

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

int Fail(const quantd::Status& s) {
  std::fprintf(stderr, "%s\n", s.ToString().c_str());
  std::printf("{\"ok\": false, \"peak_rss_bytes\": %llu}\n",
              static_cast<unsigned long long>(quantd::PeakRssBytes()));
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace quantd;
  std::string model_dir, v;
  uint64_t as_limit_mb = 0;
  int64_t samples = 4, seq_len = 128, eval_windows = 2, n_ctx = 128;
  models::ModelOptions options;
  for (int i = 1; i < argc; ++i) {
    const char* a = argv[i];
    if (Flag(a, "--model", &v)) {
      model_dir = v;
    } else if (Flag(a, "--as_limit_mb", &v)) {
      as_limit_mb = std::strtoull(v.c_str(), nullptr, 10);
    } else if (Flag(a, "--samples", &v)) {
      samples = std::atoll(v.c_str());
    } else if (Flag(a, "--seq_len", &v)) {
      seq_len = std::atoll(v.c_str());
    } else if (Flag(a, "--eval_windows", &v)) {
      eval_windows = std::atoll(v.c_str());
    } else if (Flag(a, "--n_ctx", &v)) {
      n_ctx = std::atoll(v.c_str());
    } else if (Flag(a, "--dtype", &v)) {
      options.dtype = v == "bf16" ? at::kBFloat16 : at::kFloat;
    } else {
      std::fprintf(stderr, "unknown argument %s\n", a);
      return 2;
    }
  }
  if (model_dir.empty() || samples < 1 || seq_len < 2 || eval_windows < 1 || n_ctx < 2) {
    std::fprintf(stderr, "--model is required; sizes must be positive\n");
    return 2;
  }
  if (as_limit_mb > 0) {
    rlimit lim;
    lim.rlim_cur = lim.rlim_max = as_limit_mb << 20;
    if (::setrlimit(RLIMIT_AS, &lim) != 0) {
      std::perror("setrlimit(RLIMIT_AS)");
      return 2;
    }
  }

  auto model = models::OpenCausalLM(model_dir, options);
  if (!model.ok()) return Fail(model.status());
  const models::CausalLM& lm = **model;
  const int64_t vocab = lm.config().vocab_size;
  at::manual_seed(0);

  // Calibration-style pass.
  const auto t0 = std::chrono::steady_clock::now();
  auto hidden = lm.Embed(at::randint(vocab, {samples, seq_len}, at::kLong));
  if (!hidden.ok()) return Fail(hidden.status());
  at::Tensor h = *hidden;
  double absmax_sum = 0;
  for (int64_t i = 0; i < lm.num_blocks(); ++i) {
    auto block = lm.LoadBlock(i);
    if (!block.ok()) return Fail(block.status());
    std::vector<at::Tensor> absmax((*block)->linears().size());
    at::Tensor hessian;
    int idx = 0;
    for (models::Linear* l : (*block)->linears()) {
      const int slot = idx++;
      const bool first = slot == 0;
      l->AddInputHook([&absmax, &hessian, slot, first](const models::Linear&, const at::Tensor& x) {
        at::Tensor flat = x.reshape({-1, x.size(-1)}).to(at::kFloat);
        at::Tensor m = flat.abs().amax(0);
        absmax[slot] = absmax[slot].defined() ? at::maximum(absmax[slot], m) : m;
        if (first) {
          at::Tensor xtx = flat.t().matmul(flat);
          hessian = hessian.defined() ? hessian + xtx : xtx;
        }
        return x;
      });
    }
    auto out = (*block)->Forward(h);
    if (!out.ok()) return Fail(out.status());
    h = *out;
    for (const auto& m : absmax) absmax_sum += m.sum().item<double>();
  }
  const double calib_s = Seconds(t0);
  h = at::Tensor();

  // Evaluation.
  const auto t1 = std::chrono::steady_clock::now();
  std::vector<int32_t> ids(static_cast<size_t>(eval_windows * (n_ctx - 1)));
  at::Tensor r = at::randint(2, vocab, {static_cast<int64_t>(ids.size())}, at::kInt);
  std::memcpy(ids.data(), r.data_ptr<int32_t>(), ids.size() * 4);
  auto windows = eval::MakeEvalWindows(ids, lm.config().bos_token_id, {n_ctx, eval_windows});
  if (!windows.ok()) return Fail(windows.status());
  eval::EvalOptions eo;
  eo.dataset = "random ids";
  eo.batch_size = eval_windows;
  auto ppl = eval::EvaluatePerplexity(eval::FromCausalLM(lm), *windows, eo);
  if (!ppl.ok()) return Fail(ppl.status());
  const double eval_s = Seconds(t1);

  std::printf(
      "{\"ok\": true, \"checkpoint_bytes\": %llu, \"as_limit_bytes\": %llu, "
      "\"peak_rss_bytes\": %llu, \"blocks\": %lld, \"calibration_tokens\": %lld, "
      "\"calibration_seconds\": %.2f, \"eval_tokens\": %lld, \"eval_seconds\": %.2f, "
      "\"eval_ppl\": %.3f, \"absmax_sum\": %.3f}\n",
      static_cast<unsigned long long>(CheckpointBytes(model_dir)),
      static_cast<unsigned long long>(as_limit_mb << 20),
      static_cast<unsigned long long>(quantd::PeakRssBytes()), static_cast<long long>(lm.num_blocks()),
      static_cast<long long>(samples * seq_len), calib_s, static_cast<long long>(ppl->tokens),
      eval_s, ppl->ppl, absmax_sum);
  return 0;
}
