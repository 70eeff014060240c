#include "server/jobs/job_names.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "server/common/errors.h"
#include "worker/common/status.h"

namespace quantd::server {
namespace {

constexpr char kCrockford[] = "0123456789abcdefghjkmnpqrstvwxyz";
constexpr size_t kMaxIdLength = 64;

}  // namespace

std::string JobIdGenerator::NewId(absl::Time now) {
  uint64_t millis = static_cast<uint64_t>(absl::ToUnixMillis(now)) & ((uint64_t{1} << 48) - 1);
  uint16_t hi;
  uint64_t lo;
  {
    absl::MutexLock lock(&mu_);
    if (millis <= last_millis_) {
      // Same (or an earlier) millisecond: keep the last timestamp and count
      // up the random part, so ids stay strictly increasing.
      millis = last_millis_;
      lo = last_random_lo_ + 1;
      hi = static_cast<uint16_t>(last_random_hi_ + (lo == 0 ? 1 : 0));
    } else {
      hi = absl::Uniform<uint16_t>(bitgen_);
      lo = absl::Uniform<uint64_t>(bitgen_);  // the whole range of uint64_t
    }
    last_millis_ = millis;
    last_random_hi_ = hi;
    last_random_lo_ = lo;
  }
  // 128 bits: 48 time + 16 + 64 random, written as 26 base32 digits
  // (the first digit carries the top 3 bits).
  unsigned __int128 value = (static_cast<unsigned __int128>(millis) << 80) |
                            (static_cast<unsigned __int128>(hi) << 64) | lo;
  std::string id(26, '0');
  for (int i = 25; i >= 0; --i) {
    id[i] = kCrockford[static_cast<int>(value & 31)];
    value >>= 5;
  }
  return id;
}

quantd::Status CheckJobName(absl::string_view name, absl::string_view field) {
  std::string problem;
  if (name.empty()) {
    problem = "a job name is required, of the form jobs/{id}";
  } else if (!absl::StartsWith(name, kJobNamePrefix)) {
    problem = absl::StrCat("\"", name, "\" is not a job name; expected jobs/{id}");
  } else {
    absl::string_view id = name.substr(kJobNamePrefix.size());
    bool well_formed = !id.empty() && id.size() <= kMaxIdLength;
    for (char c : id) {
      if (!absl::ascii_isdigit(c) && !absl::ascii_islower(c) && c != '-') well_formed = false;
    }
    if (!well_formed) {
      problem = absl::StrCat("\"", name,
                             "\" is not a job name; the id after jobs/ has 1 to 64 lowercase "
                             "letters, digits or '-'");
    }
  }
  if (problem.empty()) return quantd::OkStatus();
  return InvalidRequestError({{std::string(field), problem}});
}

}  // namespace quantd::server
