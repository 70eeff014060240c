// quantd's binaries document their flags with dashes (--data-dir) while
// Abseil names them with underscores (data_dir). DashedFlagArgv rewrites the
// flag names, never their values, so both spellings work.
#ifndef QUANTD_WORKER_COMMON_DASHED_FLAGS_H_
#define QUANTD_WORKER_COMMON_DASHED_FLAGS_H_

#include <algorithm>
#include <string>
#include <vector>

namespace quantd {

class DashedFlagArgv {
 public:
  DashedFlagArgv(int argc, char** argv) : storage_(argv, argv + argc) {
    bool after_double_dash = false;
    for (size_t i = 1; i < storage_.size(); ++i) {
      std::string& arg = storage_[i];
      if (arg == "--") after_double_dash = true;
      if (after_double_dash || arg.size() < 3 || arg.compare(0, 2, "--") != 0) continue;
      const size_t end = std::min(arg.find('='), arg.size());
      std::replace(arg.begin() + 2, arg.begin() + end, '-', '_');
    }
    for (std::string& arg : storage_) pointers_.push_back(arg.data());
    pointers_.push_back(nullptr);
  }
  int argc() const { return static_cast<int>(storage_.size()); }
  char** argv() { return pointers_.data(); }

 private:
  std::vector<std::string> storage_;
  std::vector<char*> pointers_;
};

}  // namespace quantd

#endif  // QUANTD_WORKER_COMMON_DASHED_FLAGS_H_
