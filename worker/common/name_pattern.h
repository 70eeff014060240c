// Module-name patterns from untrusted configs (exclude lists, layer globs,
// SmoothQuant's per-layer alphas), matched in time linear in the input.
//
// Globs follow fnmatch(3) with no flags, as before: '*' (dots and slashes
// included), '?', '[seq]', '[!seq]' / '[^seq]', ranges, [:class:], '\'
// quoting the next character; case-sensitive. The matcher is iterative: at
// most O(len(pattern) * len(name)) steps, no recursion, no allocation per
// step (glibc's fnmatch backtracks exponentially on "*a*a*a...b").
//
// Regexes ("re:<regex>" exclude entries) run on RE2: linear-time matching,
// a program bounded by kPatternRegexMaxMem, and no backreferences or
// lookaround (RE2 refuses them at compile time). Matching keeps what the
// code did with std::regex and what vLLM does with Quark's "re:" entries
// (Python's re.match): anchored at the start of the name, not at its end.
#ifndef QUANTD_WORKER_COMMON_NAME_PATTERN_H_
#define QUANTD_WORKER_COMMON_NAME_PATTERN_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "worker/common/status.h"

namespace quantd {

// Longest glob or regex accepted.
inline constexpr size_t kMaxPatternLength = 1024;
// RE2's max_mem for a pattern regex: bounds the compiled program (about
// two thirds of it) and the DFA cache (the rest; past it RE2 falls back to
// its NFA, still linear).
inline constexpr int64_t kPatternRegexMaxMem = int64_t{1} << 20;
// Most name patterns one quantization config may hold, all lists together.
inline constexpr size_t kMaxNamePatterns = 1000;

// fnmatch(pattern, name, 0) == 0, in linear time (see above).
bool GlobMatch(std::string_view pattern, std::string_view name);

// OK, or INVALID_ARGUMENT saying why `pattern` is refused as a glob (too
// long). The caller names the field.
Status CheckGlob(std::string_view pattern);

// OK, or INVALID_ARGUMENT with RE2's reason (or the length limit) when
// `regex` does not compile under the limits above.
Status CheckRegex(std::string_view regex);

// Whether `regex` matches a prefix of `name` (Python's re.match); false when
// it does not compile (CheckRegex reports that). Compiled regexes are cached
// process-wide.
bool RegexMatchesPrefix(std::string_view regex, std::string_view name);

}  // namespace quantd

#endif  // QUANTD_WORKER_COMMON_NAME_PATTERN_H_
