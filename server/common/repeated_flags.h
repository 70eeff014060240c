// Repeatable command-line flags that collect one value per occurrence
// (--worker-arg=--allowed-roots=/a,/b --worker-arg=--threads=4), which
// Abseil flags cannot express: a list flag splits at commas and a repeated
// flag keeps only its last value. TakeRepeatedFlag removes every occurrence
// from argv before Abseil parses the rest.
#ifndef QUANTD_SERVER_COMMON_REPEATED_FLAGS_H_
#define QUANTD_SERVER_COMMON_REPEATED_FLAGS_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "worker/common/status.h"

namespace quantd::server {

// Removes every occurrence of --<name>=VALUE and --<name> VALUE from `args`
// (args[0] is the program and stays; nothing after "--" is looked at) and
// returns the values in order, each exactly as given (commas included).
// `name` is written with dashes; the underscore spelling matches too.
// INVALID_ARGUMENT when the last argument is the flag without a value.
quantd::StatusOr<std::vector<std::string>> TakeRepeatedFlag(std::vector<std::string>& args,
                                                            absl::string_view name);

}  // namespace quantd::server

#endif  // QUANTD_SERVER_COMMON_REPEATED_FLAGS_H_
