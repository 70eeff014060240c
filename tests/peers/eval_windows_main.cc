// The evaluation windows a quantd job scores for a model and a text (the
// job's own steps: LoadDataset, TextTokens, MakeEvalWindows), as a JSON array
// of token-id arrays, for peer checks that score the same windows in another
// runtime.
//
//   eval_windows MODEL_DIR TEXT N_CTX MAX_WINDOWS > windows.json
#include <cstdlib>
#include <iostream>
#include <nlohmann/json.hpp>

#include "worker/eval/eval_windows.h"
#include "worker/io/dataset/dataset.h"
#include "worker/io/tokenizer/load_tokenizer.h"

namespace quantd {
namespace {

int Main(int argc, char** argv) {
  if (argc != 5) {
    std::cerr << "usage: eval_windows MODEL_DIR TEXT N_CTX MAX_WINDOWS\n";
    return 2;
  }
  auto tokenizer = io::LoadTokenizerFromDir(argv[1]);
  if (!tokenizer.ok()) {
    std::cerr << tokenizer.status() << "\n";
    return 1;
  }
  auto data = io::LoadDataset(argv[2], io::DatasetOptions{});
  if (!data.ok()) {
    std::cerr << data.status() << "\n";
    return 1;
  }
  auto ids = data->TextTokens(**tokenizer);
  if (!ids.ok()) {
    std::cerr << ids.status() << "\n";
    return 1;
  }
  eval::WindowOptions options;
  options.n_ctx = std::atoi(argv[3]);
  options.max_windows = std::atoi(argv[4]);
  auto windows = eval::MakeEvalWindows(*ids, (*tokenizer)->bos_id(), options);
  if (!windows.ok()) {
    std::cerr << windows.status() << "\n";
    return 1;
  }
  nlohmann::json out = nlohmann::json::array();
  for (const auto& w : windows->windows) out.push_back(w);
  std::cout << out.dump() << "\n";
  return 0;
}

}  // namespace
}  // namespace quantd

int main(int argc, char** argv) { return quantd::Main(argc, argv); }
