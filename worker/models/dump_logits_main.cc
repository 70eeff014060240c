// The float32 logits quantd's engine computes for a model directory and a
// token sequence, as a .npy file ([tokens, vocab], little-endian float32):
// what tools/transformers_parity.py compares with Hugging Face
// Transformers' forward of the same checkpoint.
//
//   dump_logits --model DIR --ids 1,403,407 --out logits.npy [--device cuda:0]
//
// Prints one JSON line: {"tokens": T, "vocab": V, "architecture": "..."}.
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "worker/models/registry.h"

namespace quantd {
namespace {

int Usage() {
  std::cerr << "usage: dump_logits --model DIR --ids ID,ID,... --out FILE.npy [--device D]\n";
  return 2;
}

// NumPy's .npy format, version 1.0: magic, header length, a dict literal
// padded so the data starts on a 64-byte boundary.
bool WriteNpy(const std::string& path, const at::Tensor& t) {
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (" +
                       std::to_string(t.size(0)) + ", " + std::to_string(t.size(1)) + "), }";
  const size_t unpadded = 10 + header.size() + 1;
  header.append((64 - unpadded % 64) % 64, ' ');
  header += '\n';
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  const uint16_t len = static_cast<uint16_t>(header.size());
  out.write("\x93NUMPY\x01\x00", 8);
  out.put(static_cast<char>(len & 0xFF));
  out.put(static_cast<char>(len >> 8));
  out << header;
  out.write(static_cast<const char*>(t.data_ptr()), t.numel() * sizeof(float));
  return static_cast<bool>(out);
}

int Main(int argc, char** argv) {
  std::string model_dir, ids_text, out_path, device = "cpu";
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--model") {
      model_dir = argv[i + 1];
    } else if (flag == "--ids") {
      ids_text = argv[i + 1];
    } else if (flag == "--out") {
      out_path = argv[i + 1];
    } else if (flag == "--device") {
      device = argv[i + 1];
    } else {
      return Usage();
    }
  }
  if (argc % 2 == 0 || model_dir.empty() || ids_text.empty() || out_path.empty()) return Usage();
  std::vector<int64_t> ids;
  for (size_t start = 0; start <= ids_text.size();) {
    size_t end = ids_text.find(',', start);
    if (end == std::string::npos) end = ids_text.size();
    char* stop = nullptr;
    const std::string item = ids_text.substr(start, end - start);
    const long long id = std::strtoll(item.c_str(), &stop, 10);
    if (item.empty() || *stop != '\0' || id < 0) {
      std::cerr << "dump_logits: --ids needs non-negative integers separated by commas\n";
      return 2;
    }
    ids.push_back(id);
    start = end + 1;
  }
  auto model = models::OpenCausalLM(model_dir, models::ModelOptions::For(at::Device(device)));
  if (!model.ok()) {
    std::cerr << "dump_logits: " << model.status() << "\n";
    return 1;
  }
  const at::Tensor input = at::tensor(ids, at::kLong).unsqueeze(0);
  auto logits = (*model)->Forward(input);
  if (!logits.ok()) {
    std::cerr << "dump_logits: " << logits.status() << "\n";
    return 1;
  }
  const at::Tensor rows = logits->select(0, 0).to(at::kCPU, at::kFloat).contiguous();
  if (!WriteNpy(out_path, rows)) {
    std::cerr << "dump_logits: cannot write " << out_path << "\n";
    return 1;
  }
  std::printf("{\"tokens\": %lld, \"vocab\": %lld, \"architecture\": \"%s\"}\n",
              static_cast<long long>(rows.size(0)), static_cast<long long>(rows.size(1)),
              (*model)->config().architecture.c_str());
  return 0;
}

}  // namespace
}  // namespace quantd

int main(int argc, char** argv) { return quantd::Main(argc, argv); }
