// llama.cpp's own quantizer as the reference for quantd's GGUF recipes: runs
// llama_model_quantize (node-llama-cpp's prebuilt libllama, loaded with
// dlopen) on an F32 GGUF of a model with a llama_ftype, then compares that
// file with quantd's export of the same recipe tensor by tensor: the same
// names, the same ggml type for each, and the same bytes.
//
//   llama_quantize_check LIB_DIR F32.gguf FTYPE QUANTD.gguf OUT.gguf [IMATRIX.gguf]
//
// With IMATRIX.gguf (quantd's imatrix file) llama.cpp quantizes with it,
// each weight's importance computed as llama-quantize computes it from the
// file (in_sum2 / counts).
//
// Prints one line per type ("Q5_0: 28 tensors identical") and every
// difference; exits 0 only when the files hold identical tensors.
//
// The two structs below mirror the C ABI of the bundled llama.h / gguf.h
// (node-llama-cpp 3.21.1's llama.cpp: llama_model_quantize_params,
// gguf_init_params); only their layout matters here.
#include <dlfcn.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <string>
#include <vector>

namespace {

struct QuantizeParams {
  int32_t nthread;
  int32_t ftype;
  int32_t output_tensor_type;
  int32_t token_embedding_type;
  bool allow_requantize;
  bool quantize_output_tensor;
  bool only_copy;
  bool pure;
  bool keep_split;
  bool dry_run;
  const void* imatrix;
  const void* kv_overrides;
  const void* tt_overrides;
  const int32_t* prune_layers;
  size_t max_buf_size;
};

struct ImatrixData {
  const char* name;
  const float* data;
  size_t size;
};

struct GgufInitParams {
  bool no_alloc;
  void* ctx;
};

struct Ggml {
  void* (*init_from_file)(const char*, GgufInitParams);
  void (*free)(void*);
  int64_t (*n_tensors)(const void*);
  const char* (*tensor_name)(const void*, int64_t);
  int32_t (*tensor_type)(const void*, int64_t);
  size_t (*tensor_offset)(const void*, int64_t);
  size_t (*tensor_size)(const void*, int64_t);
  size_t (*data_offset)(const void*);
  const char* (*type_name)(int32_t);
};

template <typename F>
bool Bind(void* lib, const char* name, F* out) {
  *out = reinterpret_cast<F>(dlsym(lib, name));
  if (*out == nullptr) std::fprintf(stderr, "missing symbol %s: %s\n", name, dlerror());
  return *out != nullptr;
}

struct Tensor {
  int32_t type;
  std::vector<char> bytes;
};

bool ReadTensors(const Ggml& g, const std::string& path, std::map<std::string, Tensor>* out) {
  void* ctx = g.init_from_file(path.c_str(), GgufInitParams{true, nullptr});
  if (ctx == nullptr) {
    std::fprintf(stderr, "ggml cannot read %s\n", path.c_str());
    return false;
  }
  std::ifstream in(path, std::ios::binary);
  const size_t base = g.data_offset(ctx);
  for (int64_t i = 0; i < g.n_tensors(ctx); ++i) {
    Tensor t;
    t.type = g.tensor_type(ctx, i);
    t.bytes.resize(g.tensor_size(ctx, i));
    in.seekg(static_cast<std::streamoff>(base + g.tensor_offset(ctx, i)));
    in.read(t.bytes.data(), static_cast<std::streamsize>(t.bytes.size()));
    (*out)[g.tensor_name(ctx, i)] = std::move(t);
  }
  g.free(ctx);
  return static_cast<bool>(in);
}

int Main(int argc, char** argv) {
  if (argc != 6 && argc != 7) {
    std::fprintf(stderr,
                 "usage: llama_quantize_check LIB_DIR F32.gguf FTYPE QUANTD.gguf OUT.gguf "
                 "[IMATRIX.gguf]\n");
    return 2;
  }
  const std::string dir = argv[1];
  void* base = dlopen((dir + "/libggml-base.so").c_str(), RTLD_NOW | RTLD_GLOBAL);
  void* ggml =
      base ? dlopen((dir + "/libggml.v0.4.0.so").c_str(), RTLD_NOW | RTLD_GLOBAL) : nullptr;
  void* llama =
      ggml ? dlopen((dir + "/libllama.v0.4.0.so").c_str(), RTLD_NOW | RTLD_GLOBAL) : nullptr;
  if (llama == nullptr) {
    std::fprintf(stderr, "dlopen: %s\n", dlerror());
    return 1;
  }
  Ggml g;
  void (*backend_init)() = nullptr;
  QuantizeParams (*default_params)() = nullptr;
  uint32_t (*quantize)(const char*, const char*, const QuantizeParams*) = nullptr;
  if (!Bind(base, "gguf_init_from_file", &g.init_from_file) || !Bind(base, "gguf_free", &g.free) ||
      !Bind(base, "gguf_get_n_tensors", &g.n_tensors) ||
      !Bind(base, "gguf_get_tensor_name", &g.tensor_name) ||
      !Bind(base, "gguf_get_tensor_type", &g.tensor_type) ||
      !Bind(base, "gguf_get_tensor_offset", &g.tensor_offset) ||
      !Bind(base, "gguf_get_tensor_size", &g.tensor_size) ||
      !Bind(base, "gguf_get_data_offset", &g.data_offset) ||
      !Bind(base, "ggml_type_name", &g.type_name) ||
      !Bind(llama, "llama_backend_init", &backend_init) ||
      !Bind(llama, "llama_model_quantize_default_params", &default_params) ||
      !Bind(llama, "llama_model_quantize", &quantize)) {
    return 1;
  }
  backend_init();
  QuantizeParams params = default_params();
  params.ftype = std::atoi(argv[3]);
  params.nthread = 1;
  // common/imatrix-loader.cpp's reading: weights = in_sum2 / counts.
  std::map<std::string, std::vector<float>> importance;
  std::vector<ImatrixData> imatrix;
  if (argc == 7) {
    std::map<std::string, Tensor> file;
    if (!ReadTensors(g, argv[6], &file)) return 1;
    const std::string suffix = ".in_sum2";
    for (const auto& [name, t] : file) {
      if (name.size() <= suffix.size() ||
          name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0)
        continue;
      const std::string weight = name.substr(0, name.size() - suffix.size());
      auto counts = file.find(weight + ".counts");
      if (counts == file.end() || counts->second.bytes.size() != sizeof(float)) {
        std::fprintf(stderr, "%s has no counts\n", weight.c_str());
        return 1;
      }
      float count = 0;
      std::memcpy(&count, counts->second.bytes.data(), sizeof(float));
      std::vector<float> sums(t.bytes.size() / sizeof(float));
      std::memcpy(sums.data(), t.bytes.data(), t.bytes.size());
      for (float& v : sums) v = v / count;
      importance[weight] = std::move(sums);
    }
    for (const auto& [name, values] : importance)
      imatrix.push_back({name.c_str(), values.data(), values.size()});
    imatrix.push_back({nullptr, nullptr, 0});
    params.imatrix = imatrix.data();
    std::printf("imatrix: %zu weights\n", importance.size());
  }
  if (quantize(argv[2], argv[5], &params) != 0) {
    std::fprintf(stderr, "llama_model_quantize failed\n");
    return 1;
  }
  std::map<std::string, Tensor> want, got;
  if (!ReadTensors(g, argv[5], &want) || !ReadTensors(g, argv[4], &got)) return 1;
  int bad = 0;
  std::map<std::string, int> same;
  for (const auto& [name, w] : want) {
    auto it = got.find(name);
    if (it == got.end()) {
      std::printf("DIFF %s: missing from quantd's file\n", name.c_str());
      ++bad;
      continue;
    }
    if (it->second.type != w.type) {
      std::printf("DIFF %s: llama.cpp %s, quantd %s\n", name.c_str(), g.type_name(w.type),
                  g.type_name(it->second.type));
      ++bad;
      continue;
    }
    if (it->second.bytes != w.bytes) {
      size_t first = 0;
      while (first < w.bytes.size() && first < it->second.bytes.size() &&
             w.bytes[first] == it->second.bytes[first])
        ++first;
      std::printf("DIFF %s (%s): bytes differ from offset %zu of %zu\n", name.c_str(),
                  g.type_name(w.type), first, w.bytes.size());
      ++bad;
      continue;
    }
    ++same[g.type_name(w.type)];
  }
  for (const auto& [name, t] : got) {
    if (!want.count(name)) {
      std::printf("DIFF %s: not in llama.cpp's file\n", name.c_str());
      ++bad;
    }
  }
  for (const auto& [type, n] : same) std::printf("%s: %d tensors identical\n", type.c_str(), n);
  std::printf("%s: %zu tensors, %d differ\n", bad == 0 ? "IDENTICAL" : "DIFFERENT", want.size(),
              bad);
  return bad == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) { return Main(argc, argv); }
