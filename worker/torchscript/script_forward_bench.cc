// What the activation hooks cost a TorchScript model's forward: the model as
// loaded (the baseline), the same forward with the hooks passing tensors
// through (float mode), and with static int8 weights and activations
// (quantized mode), on the digits CNN's test images, measured in one run.
//
//   bazel run -c opt //worker/torchscript:script_forward_bench -- --reps=200 --batch=32
#include <cstdio>
#include <string>
#include <vector>

#include "worker/common/bench_util.h"
#include "worker/torchscript/script_model.h"
#include "worker/torchscript/script_quantizer.h"
#include "worker/torchscript/tensor_dataset.h"

namespace {

using quantd::torchscript::ScriptModel;
using quantd::torchscript::ScriptQuantizer;

template <typename F>
double Time(int64_t reps, F&& f) {
  f();  // warm-up: LibTorch compiles the graph on the first run
  const double start = quantd::bench::NowSeconds();
  for (int64_t i = 0; i < reps; ++i) f();
  return (quantd::bench::NowSeconds() - start) / reps;
}

}  // namespace

int main(int argc, char** argv) {
  int64_t reps = 200, batch = 32;
  for (int i = 1; i < argc; ++i) {
    quantd::bench::IntFlag(argv[i], "--reps", &reps);
    quantd::bench::IntFlag(argv[i], "--batch", &batch);
  }
  const std::string dir = "models/digits_cnn/";
  auto plain = ScriptModel::Load(dir + "model.pt");
  auto hooked = ScriptModel::Load(dir + "model.pt");
  auto data = quantd::torchscript::LoadTensorDataset(dir + "test.safetensors", 1);
  if (!plain.ok() || !hooked.ok() || !data.ok()) {
    std::fprintf(stderr, "run from the repository root (bazel run does): %s\n",
                 (!data.ok() ? data.status() : plain.status()).ToString().c_str());
    return 1;
  }
  quantd::quant::QuantSpec w, a;
  w.dtype = a.dtype = quantd::quant::DataType::kInt8;
  w.qscheme = quantd::quant::QScheme::kPerChannel;
  auto q = ScriptQuantizer::Create(*hooked, [&](const std::string&, const std::string&) {
    quantd::pipeline::LayerPlan p;
    p.weight = w;
    p.input = a;
    return p;
  });
  if (!q.ok()) {
    std::fprintf(stderr, "%s\n", q.status().ToString().c_str());
    return 1;
  }
  const auto inputs = data->Batch(0, batch);
  (void)(*q)->Forward(ScriptQuantizer::Mode::kObserve, data->Batch(0, data->size()));
  (void)(*q)->FinishCalibration();
  const double base = Time(reps, [&] { (void)plain->Forward(inputs); });
  const double pass =
      Time(reps, [&] { (void)(*q)->Forward(ScriptQuantizer::Mode::kFloat, inputs); });
  const double quant =
      Time(reps, [&] { (void)(*q)->Forward(ScriptQuantizer::Mode::kQuantized, inputs); });
  std::printf("digits_cnn forward, batch %lld, %lld reps\n", static_cast<long long>(batch),
              static_cast<long long>(reps));
  std::printf("  as loaded (baseline)      %8.1f us\n", 1e6 * base);
  std::printf("  hooks passing through     %8.1f us  %.2fx baseline\n", 1e6 * pass, pass / base);
  std::printf("  static int8 (fake quant)  %8.1f us  %.2fx baseline\n", 1e6 * quant, quant / base);
  return 0;
}
