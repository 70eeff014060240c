#include "client/cli_common/args.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace quantd::cli_common {

std::string ParsedArgs::Get(const std::string& name, const std::string& def) const {
  auto it = flags.find(name);
  return it == flags.end() || it->second.empty() ? def : it->second.back();
}

std::vector<std::string> ParsedArgs::GetAll(const std::string& name) const {
  auto it = flags.find(name);
  return it == flags.end() ? std::vector<std::string>{} : it->second;
}

quantd::StatusOr<int> ParsedArgs::GetInt(const std::string& name, int def) const {
  if (!Has(name)) return def;
  int v = 0;
  if (!absl::SimpleAtoi(Get(name), &v))
    return quantd::InvalidArgumentError(
        absl::StrCat("--", name, " needs an integer, got '", Get(name), "'"));
  return v;
}

quantd::StatusOr<ParsedArgs> ParseArgs(const std::vector<std::string>& argv,
                                     const std::set<std::string>& known_flags,
                                     const std::set<std::string>& bool_flags) {
  ParsedArgs out;
  for (size_t i = 0; i < argv.size(); ++i) {
    std::string a = argv[i];
    if (a == "-o") a = "--output-format";
    if (a == "-h") a = "--help";
    if (a.size() > 2 && a.compare(0, 2, "--") == 0) {
      std::string name = a.substr(2), value;
      bool has_value = false;
      if (auto eq = name.find('='); eq != std::string::npos) {
        value = name.substr(eq + 1);
        name = name.substr(0, eq);
        has_value = true;
      }
      if (!known_flags.count(name) && !bool_flags.count(name))
        return quantd::InvalidArgumentError(absl::StrCat("unknown flag --", name));
      if (bool_flags.count(name)) {
        if (has_value && value != "true" && value != "false")
          return quantd::InvalidArgumentError(absl::StrCat("--", name, " takes true or false"));
        out.flags[name].push_back(has_value ? value : "true");
        continue;
      }
      if (!has_value) {
        if (i + 1 >= argv.size())
          return quantd::InvalidArgumentError(absl::StrCat("--", name, " needs a value"));
        value = argv[++i];
      }
      out.flags[name].push_back(value);
    } else if (out.command.empty()) {
      out.command = a;
    } else {
      out.positional.push_back(a);
    }
  }
  return out;
}

}  // namespace quantd::cli_common
