// A small command-line parser for quantctl's "global flags, command, command
// flags, positional args" shape, which absl flags does not model. Flags are
// `--name=value`, `--name value`, or bare `--name` for booleans; `-o` is an
// alias of `--output-format` (`--output` is submit's artifact URI).
#ifndef QUANTD_CLIENT_QUANTCTL_ARGS_H_
#define QUANTD_CLIENT_QUANTCTL_ARGS_H_

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace quantd::quantctl {

struct ParsedArgs {
  std::string command;
  std::map<std::string, std::vector<std::string>> flags;  // repeated flags keep every value
  std::vector<std::string> positional;

  bool Has(const std::string& name) const { return flags.count(name) > 0; }
  // Last value of a flag, or `def`.
  std::string Get(const std::string& name, const std::string& def = "") const;
  std::vector<std::string> GetAll(const std::string& name) const;
  absl::StatusOr<int> GetInt(const std::string& name, int def) const;
};

// `bool_flags` take no value. Unknown flags are an error naming them.
absl::StatusOr<ParsedArgs> ParseArgs(const std::vector<std::string>& argv,
                                     const std::set<std::string>& known_flags,
                                     const std::set<std::string>& bool_flags);

// The job flags of `quantctl submit` and quantd-quantize (FillJobSpec in
// job_spec_flags.h reads them): those taking a value, and the booleans.
const std::set<std::string>& JobSpecValueFlags();
const std::set<std::string>& JobSpecBoolFlags();

// quantctl's own flags: those taking a value, and the booleans.
const std::set<std::string>& QuantctlValueFlags();
const std::set<std::string>& QuantctlBoolFlags();

// ParseArgs with quantctl's flags.
absl::StatusOr<ParsedArgs> ParseQuantctlArgs(const std::vector<std::string>& argv);

}  // namespace quantd::quantctl

#endif  // QUANTD_CLIENT_QUANTCTL_ARGS_H_
