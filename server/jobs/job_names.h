// Job resource names ("jobs/{id}") and the ids in them. Ids sort by creation
// time (a ULID: 48-bit milliseconds + 80 random bits, Crockford base32,
// lowercase), so names created later sort later even across frontends, and
// two frontends never mint the same id.
#ifndef QUANTD_SERVER_JOBS_JOB_NAMES_H_
#define QUANTD_SERVER_JOBS_JOB_NAMES_H_

#include <cstdint>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/random/random.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "worker/common/status.h"

namespace quantd::server {

inline constexpr absl::string_view kJobNamePrefix = "jobs/";

class JobIdGenerator {
 public:
  // A new 26-character id. Ids from one generator strictly increase, even
  // within one millisecond or when `now` goes backwards.
  std::string NewId(absl::Time now);

 private:
  absl::Mutex mu_;
  absl::BitGen bitgen_ ABSL_GUARDED_BY(mu_);
  uint64_t last_millis_ ABSL_GUARDED_BY(mu_) = 0;
  uint16_t last_random_hi_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t last_random_lo_ ABSL_GUARDED_BY(mu_) = 0;
};

// Checks that `name` is "jobs/{id}" with a well-formed id; INVALID_ARGUMENT
// with a BadRequest naming `field` otherwise. Says nothing about whether
// the job exists.
quantd::Status CheckJobName(absl::string_view name, absl::string_view field);

}  // namespace quantd::server

#endif  // QUANTD_SERVER_JOBS_JOB_NAMES_H_
