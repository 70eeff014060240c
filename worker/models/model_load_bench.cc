// model_load_bench: loading a checkpoint block by block, against reading the
// same bytes with `cat`, measured in the same run on a warm page cache.
//
//   bazel run //worker/models:model_load_bench -- [--layers=2] [--dir=/tmp/x]
//       [--hidden=4096] [--intermediate=11008] [--vocab=32000]
//
// Writes a random BF16 Llama-shaped checkpoint (7B shapes by default) unless
// --dir already holds one, reads it once to warm the page cache, then times:
//   cat:      cat <shards> > /dev/null
//   stored:   every tensor through SafetensorsSource::LoadStored (BF16 as is)
//   float32:  every tensor through Load(name, kFloat) (BF16 -> F32)
//   blocks:   CausalLM embedding, every LoadBlock, head (F32), each dropped
// and prints each time and its ratio to cat.
#include <sys/stat.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "worker/common/bench_util.h"
#include "worker/io/safetensors/safetensors_source.h"
#include "worker/models/random_checkpoint.h"
#include "worker/models/registry.h"

int main(int argc, char** argv) {
  using namespace quantd;
  models::RandomCheckpointOptions o;
  o.num_hidden_layers = 2;
  std::string dir = "/tmp/quantd_model_load_bench";
  for (int i = 1; i < argc; ++i) {
    const char* a = argv[i];
    if (std::strncmp(a, "--dir=", 6) == 0) {
      dir = a + 6;
    } else if (!quantd::bench::IntFlag(a, "--layers", &o.num_hidden_layers) &&
               !quantd::bench::IntFlag(a, "--hidden", &o.hidden_size) &&
               !quantd::bench::IntFlag(a, "--intermediate", &o.intermediate_size) &&
               !quantd::bench::IntFlag(a, "--vocab", &o.vocab_size)) {
      std::fprintf(stderr, "unknown argument %s\n", a);
      return 2;
    }
  }
  struct stat st;
  if (::stat((dir + "/config.json").c_str(), &st) != 0) {
    auto info = models::WriteRandomLlamaCheckpoint(dir, o);
    if (!info.ok()) {
      std::fprintf(stderr, "%s\n", info.status().ToString().c_str());
      return 1;
    }
  }
  auto src = io::SafetensorsSource::Open(dir);
  if (!src.ok()) {
    std::fprintf(stderr, "%s\n", src.status().ToString().c_str());
    return 1;
  }
  std::string files;
  uint64_t bytes = 0;
  for (const auto& f : (*src)->Files()) {
    files += " '" + f + "'";
    if (::stat(f.c_str(), &st) == 0) bytes += st.st_size;
  }
  const std::string cat = "cat" + files + " > /dev/null";
  if (std::system(cat.c_str()) != 0) return 1;  // warm the page cache

  double t0 = bench::NowSeconds();
  if (std::system(cat.c_str()) != 0) return 1;
  const double cat_s = bench::NowSeconds() - t0;

  t0 = bench::NowSeconds();
  for (const auto& name : (*src)->Names()) {
    if (!(*src)->LoadStored(name).ok()) return 1;
  }
  const double stored_s = bench::NowSeconds() - t0;

  t0 = bench::NowSeconds();
  for (const auto& name : (*src)->Names()) {
    if (!(*src)->Load(name, at::kFloat).ok()) return 1;
  }
  const double f32_s = bench::NowSeconds() - t0;

  auto model = models::OpenCausalLM(dir);
  if (!model.ok()) {
    std::fprintf(stderr, "%s\n", model.status().ToString().c_str());
    return 1;
  }
  t0 = bench::NowSeconds();
  if (!(*model)->LoadEmbedding().ok()) return 1;
  for (int64_t i = 0; i < (*model)->num_blocks(); ++i) {
    if (!(*model)->LoadBlock(i).ok()) return 1;
  }
  if (!(*model)->LoadHead().ok()) return 1;
  const double blocks_s = bench::NowSeconds() - t0;

  std::printf("checkpoint %s: %.2f GiB in %zu shard(s)\n", dir.c_str(), bytes / 1073741824.0,
              (*src)->Files().size());
  std::printf("cat > /dev/null:        %7.3f s  %6.2f GB/s  ratio 1.00\n", cat_s,
              bytes / cat_s / 1e9);
  std::printf("LoadStored (bf16):      %7.3f s  %6.2f GB/s  ratio %.2f\n", stored_s,
              bytes / stored_s / 1e9, stored_s / cat_s);
  std::printf("Load as float32:        %7.3f s  %6.2f GB/s  ratio %.2f\n", f32_s,
              bytes / f32_s / 1e9, f32_s / cat_s);
  std::printf("CausalLM blocks (f32):  %7.3f s  %6.2f GB/s  ratio %.2f\n", blocks_s,
              bytes / blocks_s / 1e9, blocks_s / cat_s);
  return 0;
}
