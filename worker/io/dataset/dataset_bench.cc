// Reading a chat dataset: the Parquet reader and the chat-template
// rendering, each against parsing the same rows as JSON Lines (the
// baseline, measured in the same run).
//
//   bazel run -c opt //worker/io/dataset:dataset_bench -- --repeats=200
//
// The rows are tests/data/parquet/tinystories_chat.parquet's (96
// conversations and their text), read `repeats` times.
#include <cstdio>
#include <fstream>
#include <iterator>

#include "worker/common/bench_util.h"
#include "worker/io/dataset/chat_rows.h"
#include "worker/io/dataset/dataset.h"
#include "worker/io/dataset/parquet_reader.h"

namespace {

using quantd::bench::NowSeconds;

// A ChatML-style template, as Qwen's.
constexpr char kTemplate[] =
    "{% for m in messages %}{{ '<|im_start|>' + m['role'] + '\\n' + m['content'] + "
    "'<|im_end|>' + '\\n' }}{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\\n"
    "{% endif %}";

int Run(int64_t repeats) {
  const char* path = "tests/data/parquet/tinystories_chat.parquet";
  std::ifstream in(path, std::ios::binary);
  const std::string parquet((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto rows = quantd::ReadParquetRows(parquet, {"messages", "text"}, "bench");
  if (!rows.ok()) {
    std::fprintf(stderr, "%s\n", rows.status().message().c_str());
    return 1;
  }
  std::string jsonl;
  for (const auto& r : *rows) jsonl += r.dump() + "\n";
  quantd::io::DatasetOptions chat_field;
  chat_field.text_field = "messages";

  double t_jsonl = 0, t_parquet = 0, t_render = 0;
  size_t conversations = 0, bytes = 0;
  for (int64_t i = 0; i < repeats; ++i) {
    double t0 = NowSeconds();
    auto from_jsonl =
        quantd::io::ParseDataset(jsonl, quantd::io::DatasetFormat::kJsonl, "b.jsonl", chat_field);
    double t1 = NowSeconds();
    auto from_parquet = quantd::io::ParseDataset(parquet, quantd::io::DatasetFormat::kParquet,
                                                 "b.parquet", chat_field);
    double t2 = NowSeconds();
    if (!from_jsonl.ok() || !from_parquet.ok() ||
        from_jsonl->chat_rows != from_parquet->chat_rows) {
      std::fprintf(stderr, "the two formats disagree\n");
      return 1;
    }
    quantd::Status rendered = quantd::io::RenderChatRows(*from_parquet, {kTemplate, "", ""});
    double t3 = NowSeconds();
    if (!rendered.ok()) {
      std::fprintf(stderr, "%s\n", rendered.message().c_str());
      return 1;
    }
    t_jsonl += t1 - t0;
    t_parquet += t2 - t1;
    t_render += t3 - t2;
    conversations += from_parquet->text_rows.size();
    for (const auto& t : from_parquet->text_rows) bytes += t.size();
  }
  std::printf("%zu conversations (%zu rendered bytes), %lld repeats\n", conversations, bytes,
              static_cast<long long>(repeats));
  std::printf("jsonl parse (baseline): %8.3f ms/repeat\n", 1e3 * t_jsonl / repeats);
  std::printf("parquet read:           %8.3f ms/repeat  ratio %.3f\n", 1e3 * t_parquet / repeats,
              t_parquet / t_jsonl);
  std::printf("chat template render:   %8.3f ms/repeat  ratio %.3f\n", 1e3 * t_render / repeats,
              t_render / t_jsonl);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  int64_t repeats = 200;
  for (int i = 1; i < argc; ++i) {
    if (!quantd::bench::IntFlag(argv[i], "--repeats", &repeats) || repeats <= 0) {
      std::fprintf(stderr, "usage: dataset_bench [--repeats=N]\n");
      return 2;
    }
  }
  return Run(repeats);
}
