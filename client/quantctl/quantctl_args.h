// quantctl's command line: the flags it takes (its own global and command
// flags, and the job flags of `submit` it shares with quantd-quantize) and
// the usage text that lists them.
#ifndef QUANTD_CLIENT_QUANTCTL_QUANTCTL_ARGS_H_
#define QUANTD_CLIENT_QUANTCTL_QUANTCTL_ARGS_H_

#include <set>
#include <string>
#include <vector>

#include "worker/common/status.h"
#include "client/cli_common/args.h"

namespace quantd::quantctl {

using cli_common::ParsedArgs;

// quantctl's flags: those taking a value, and the booleans.
const std::set<std::string>& QuantctlValueFlags();
const std::set<std::string>& QuantctlBoolFlags();

// ParseArgs with quantctl's flags.
quantd::StatusOr<ParsedArgs> ParseQuantctlArgs(const std::vector<std::string>& argv);

// `quantctl help`: every flag, the submit job flags being
// cli_common::JobSpecFlagsUsage's text.
std::string QuantctlUsage();

}  // namespace quantd::quantctl

#endif  // QUANTD_CLIENT_QUANTCTL_QUANTCTL_ARGS_H_
