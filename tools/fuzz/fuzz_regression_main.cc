// A deterministic, bounded mutation run of a libFuzzer entry point, so every
// `bazel test` exercises the fuzz targets with plain gcc: each corpus file is
// run as is, truncated at several lengths, and then mutated (byte flips,
// inserted and deleted runs, splices of two corpus files, boundary integers
// written over 8-byte fields) for a fixed number of iterations from a fixed
// seed. Coverage-guided runs use the same entry point under libFuzzer.
//
//   fuzz_regression ITERATIONS CORPUS_FILE...
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

void Run(const std::string& input) {
  LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(input.data()), input.size());
}

std::string Mutate(const std::vector<std::string>& corpus, std::mt19937_64& rng) {
  std::string s = corpus[rng() % corpus.size()];
  const int edits = 1 + static_cast<int>(rng() % 4);
  for (int e = 0; e < edits; ++e) {
    const size_t pos = s.empty() ? 0 : rng() % s.size();
    switch (rng() % 6) {
      case 0:  // flip a byte
        if (!s.empty()) s[pos] = static_cast<char>(s[pos] ^ (1 << (rng() % 8)));
        break;
      case 1:  // random byte
        if (!s.empty()) s[pos] = static_cast<char>(rng());
        break;
      case 2: {  // boundary integer over a field
        static const uint64_t kValues[] = {0,      1,          0x7F,       0xFF,
                                           0xFFFF, 0x7FFFFFFF, 0xFFFFFFFF, 0x100000000ull,
                                           ~0ull,  ~0ull >> 1, 1ull << 40};
        const uint64_t v = kValues[rng() % (sizeof(kValues) / sizeof(kValues[0]))];
        const size_t width = (rng() % 2) ? 8 : 4;
        if (s.size() >= width) {
          std::memcpy(&s[std::min(pos, s.size() - width)], &v, width);
        }
        break;
      }
      case 3:  // delete a run
        s.erase(pos, rng() % 16);
        break;
      case 4:  // duplicate a run
        s.insert(pos, s.substr(pos, rng() % 16));
        break;
      case 5: {  // splice with another corpus file
        const std::string& other = corpus[rng() % corpus.size()];
        const size_t from = other.empty() ? 0 : rng() % other.size();
        s = s.substr(0, pos) + other.substr(from);
        break;
      }
    }
  }
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::cerr << "usage: fuzz_regression ITERATIONS CORPUS_FILE...\n";
    return 2;
  }
  const long iterations = std::stol(argv[1]);
  std::vector<std::string> corpus;
  for (int i = 2; i < argc; ++i) {
    std::ifstream in(argv[i], std::ios::binary);
    if (!in) {
      std::cerr << "cannot read " << argv[i] << "\n";
      return 2;
    }
    std::ostringstream ss;
    ss << in.rdbuf();
    corpus.push_back(ss.str());
  }
  long runs = 0;
  for (const auto& c : corpus) {
    Run(c);
    ++runs;
    for (size_t n = 0; n < c.size(); n += 1 + c.size() / 64) {
      Run(c.substr(0, n));
      ++runs;
    }
  }
  std::mt19937_64 rng(0x9e3779b97f4a7c15ull);
  for (long i = 0; i < iterations; ++i) {
    Run(Mutate(corpus, rng));
    ++runs;
  }
  std::cout << "fuzz_regression: " << runs << " inputs, no crash\n";
  return 0;
}
