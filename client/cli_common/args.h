// A command-line parser for the "global flags, command, command
// flags, positional args" shape, which absl flags does not model. Flags are
// `--name=value`, `--name value`, or bare `--name` for booleans; `-o` is an
// alias of `--output-format` (`--output` is submit's artifact URI). quantctl
// and quantd-quantize both parse with it, each passing the flags it takes.
#ifndef QUANTD_CLIENT_CLI_COMMON_ARGS_H_
#define QUANTD_CLIENT_CLI_COMMON_ARGS_H_

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "worker/common/status.h"

namespace quantd::cli_common {

struct ParsedArgs {
  std::string command;
  std::map<std::string, std::vector<std::string>> flags;  // repeated flags keep every value
  std::vector<std::string> positional;

  bool Has(const std::string& name) const { return flags.count(name) > 0; }
  // Last value of a flag, or `def`.
  std::string Get(const std::string& name, const std::string& def = "") const;
  std::vector<std::string> GetAll(const std::string& name) const;
  quantd::StatusOr<int> GetInt(const std::string& name, int def) const;
};

// `bool_flags` take no value. Unknown flags are an error naming them.
quantd::StatusOr<ParsedArgs> ParseArgs(const std::vector<std::string>& argv,
                                     const std::set<std::string>& known_flags,
                                     const std::set<std::string>& bool_flags);

}  // namespace quantd::cli_common

#endif  // QUANTD_CLIENT_CLI_COMMON_ARGS_H_
