#include "server/common/repeated_flags.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "worker/common/status.h"

namespace quantd::server {

quantd::StatusOr<std::vector<std::string>> TakeRepeatedFlag(std::vector<std::string>& args,
                                                            absl::string_view name) {
  std::string dashed = absl::StrCat("--", name);
  std::string underscored = dashed;
  std::replace(underscored.begin() + 2, underscored.end(), '-', '_');
  std::vector<std::string> values;
  std::vector<std::string> kept;
  size_t i = 0;
  if (!args.empty()) kept.push_back(args[i++]);  // the program
  for (; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--") {
      kept.insert(kept.end(), args.begin() + i, args.end());
      break;
    }
    bool matched = false;
    for (const std::string& spelling : {dashed, underscored}) {
      if (arg == spelling) {
        if (i + 1 >= args.size()) {
          return quantd::InvalidArgumentError(absl::StrCat(dashed, " needs a value"));
        }
        values.push_back(args[++i]);
        matched = true;
        break;
      }
      if (absl::StartsWith(arg, spelling + "=")) {
        values.push_back(arg.substr(spelling.size() + 1));
        matched = true;
        break;
      }
    }
    if (!matched) kept.push_back(arg);
  }
  args = std::move(kept);
  return values;
}

}  // namespace quantd::server
