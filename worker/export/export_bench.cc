// export_bench: export throughput of every format on a random-weight
// Llama-shaped model, against writing the same number of bytes raw (one
// fwrite stream of 64 MiB buffers, then fsync, as the safetensors writer
// syncs), measured in the same run.
//
// The model is generated first (bf16, worker/models/random_checkpoint; by
// default ~1.1B parameters: hidden 2048, FFN 5632, 22 layers, 32 heads / 4 KV
// heads, vocab 512 so stories260K's tokenizer can be embedded) and quantized
// int4 symmetric per_group(128) with fp16 scales, weights re-quantized at
// each load (bounded memory). Each format's time covers loading, quantizing
// and writing its artifact.
//
//   bazel run //worker/export:export_bench -- [--dir=/tmp/export_bench]
//       [--layers=22 --hidden=2048 --intermediate=5632 --heads=32 --kv_heads=4]
//       [--formats=hf_fake_quantized,hf_quark,gguf,onnx_qdq]
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "worker/export/exporter.h"
#include "worker/export/hf/quark_config.h"
#include "worker/export/testing/in_memory_quantized_model.h"
#include "worker/models/random_checkpoint.h"

namespace quantd::exporter {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

bool Flag(const char* arg, const char* name, std::string* value) {
  const size_t n = std::strlen(name);
  if (std::strncmp(arg, name, n) != 0 || arg[n] != '=') return false;
  *value = arg + n + 1;
  return true;
}

double Seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

// Seconds to write `bytes` to `path` raw and fsync it.
StatusOr<double> WriteRaw(const std::string& path, int64_t bytes) {
  std::vector<char> buf(size_t{64} << 20, '\x5a');
  const auto t0 = Clock::now();
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return InternalError("cannot open " + path);
  for (int64_t left = bytes; left > 0;) {
    const size_t n = static_cast<size_t>(std::min<int64_t>(left, buf.size()));
    if (std::fwrite(buf.data(), 1, n, f) != n) {
      std::fclose(f);
      return InternalError("cannot write " + path);
    }
    left -= static_cast<int64_t>(n);
  }
  std::fflush(f);
  ::fsync(::fileno(f));
  std::fclose(f);
  const double s = Seconds(t0);
  fs::remove(path);
  return s;
}

int Main(int argc, char** argv) {
  models::RandomCheckpointOptions ck;
  ck.hidden_size = 2048;
  ck.intermediate_size = 5632;
  ck.num_hidden_layers = 22;
  ck.num_attention_heads = 32;
  ck.num_key_value_heads = 4;
  ck.vocab_size = 512;
  std::string dir = "/tmp/export_bench", formats = "hf_fake_quantized,hf_quark,gguf,onnx_qdq", v;
  for (int i = 1; i < argc; ++i) {
    const char* a = argv[i];
    if (Flag(a, "--dir", &v)) {
      dir = v;
    } else if (Flag(a, "--layers", &v)) {
      ck.num_hidden_layers = std::atoll(v.c_str());
    } else if (Flag(a, "--hidden", &v)) {
      ck.hidden_size = std::atoll(v.c_str());
    } else if (Flag(a, "--intermediate", &v)) {
      ck.intermediate_size = std::atoll(v.c_str());
    } else if (Flag(a, "--heads", &v)) {
      ck.num_attention_heads = std::atoll(v.c_str());
    } else if (Flag(a, "--kv_heads", &v)) {
      ck.num_key_value_heads = std::atoll(v.c_str());
    } else if (Flag(a, "--formats", &v)) {
      formats = v;
    } else {
      std::fprintf(stderr, "export_bench: unknown flag %s\n", a);
      return 2;
    }
  }
  // The bundled tokenizer, found through the runfiles (bazel run) or the
  // source tree.
  const char* runfiles = std::getenv("RUNFILES_DIR");
  std::string tokenizer_dir = "models/stories260K";
  if (runfiles != nullptr && fs::exists(fs::path(runfiles) / "quantd" / tokenizer_dir))
    tokenizer_dir = (fs::path(runfiles) / "quantd" / tokenizer_dir).string();
  if (const char* ws = std::getenv("BUILD_WORKSPACE_DIRECTORY");
      ws != nullptr && !fs::exists(tokenizer_dir))
    tokenizer_dir = (fs::path(ws) / "models/stories260K").string();

  fs::remove_all(dir);
  const std::string model_dir = dir + "/model";
  fs::create_directories(model_dir);
  auto t0 = Clock::now();
  auto info = models::WriteRandomLlamaCheckpoint(model_dir, ck);
  if (!info.ok()) {
    std::fprintf(stderr, "export_bench: %s\n", info.status().ToString().c_str());
    return 1;
  }
  for (const char* f : {"tokenizer.model", "tokenizer_config.json", "special_tokens_map.json"})
    if (fs::exists(fs::path(tokenizer_dir) / f))
      fs::copy_file(fs::path(tokenizer_dir) / f, fs::path(model_dir) / f);
  std::printf("export_bench: random bf16 checkpoint %.2f GB (%d shards) in %.1f s\n",
              info->total_bytes / 1e9, info->shards, Seconds(t0));

  quant::QuantSpec w;
  w.dtype = quant::DataType::kInt4;
  w.qscheme = quant::QScheme::kPerGroup;
  w.group_size = 128;
  w.scale_type = quant::ScaleType::kFloat16;
  QuarkLayerSpecs g;
  g.weight = w;
  const nlohmann::json cfg = {{"quant_method", "quark"},
                              {"global_quant_config", QuarkLayerJson(g)},
                              {"exclude", {"lm_head"}}};
  testing::InMemoryQuantizeOptions qo;
  qo.model_dir = model_dir;
  qo.quant_config_json = cfg.dump();
  qo.quantize_on_load = true;
  t0 = Clock::now();
  auto model = testing::InMemoryQuantizedModel::Create(qo);
  if (!model.ok()) {
    std::fprintf(stderr, "export_bench: %s\n", model.status().ToString().c_str());
    return 1;
  }
  std::printf("export_bench: weight parameters (int4 per_group 128) in %.1f s\n", Seconds(t0));
  std::printf("%-18s %10s %9s %10s %9s %7s\n", "format", "bytes", "export_s", "export_MB/s",
              "raw_MB/s", "ratio");
  int failures = 0;
  for (size_t b = 0; b <= formats.size();) {
    size_t e = formats.find(',', b);
    if (e == std::string::npos) e = formats.size();
    const std::string name = formats.substr(b, e - b);
    b = e + 1;
    auto format = ParseExportFormat(name);
    if (!format.ok()) {
      std::fprintf(stderr, "export_bench: %s\n", format.status().ToString().c_str());
      return 2;
    }
    ExportOptions eo;
    eo.output_dir = dir + "/" + name;
    eo.overwrite = true;
    t0 = Clock::now();
    auto r = ExportModel(**model, *format, eo);
    const double export_s = Seconds(t0);
    if (!r.ok()) {
      std::printf("%-18s failed: %s\n", name.c_str(), r.status().ToString().c_str());
      ++failures;
      continue;
    }
    auto raw_s = WriteRaw(dir + "/raw.bin", r->artifact.bytes);
    if (!raw_s.ok()) {
      std::fprintf(stderr, "export_bench: %s\n", raw_s.status().ToString().c_str());
      return 1;
    }
    const double mb = r->artifact.bytes / 1e6;
    std::printf("%-18s %10lld %9.2f %10.1f %9.1f %7.3f\n", name.c_str(),
                static_cast<long long>(r->artifact.bytes), export_s, mb / export_s, mb / *raw_s,
                *raw_s / export_s);
    std::fflush(stdout);
    fs::remove_all(eo.output_dir);
  }
  fs::remove_all(dir);
  return failures == 0 ? 0 : 1;
}

}  // namespace
}  // namespace quantd::exporter

int main(int argc, char** argv) { return quantd::exporter::Main(argc, argv); }
