// Who is calling: the tenant a request acts for, what it may do, and which
// credential it presented. The gRPC layer derives it from the bearer token
// (or makes every caller the anonymous admin when authentication is off);
// the job logic enforces it, so isolation is tested without a network.
#ifndef QUANTD_SERVER_JOBS_CALLER_H_
#define QUANTD_SERVER_JOBS_CALLER_H_

#include <string>

namespace quantd::server {

enum class Role {
  // Submit jobs and read, watch and cancel the tenant's own jobs.
  kSubmitter,
  // Everything a submitter can do, on every tenant's jobs. Not the
  // WorkerService: an admin credential cannot act as a worker.
  kAdmin,
  // Only the WorkerService: lease, heartbeat, report, complete, fail.
  kWorker,
};

// The identity of every caller when authentication is off.
inline constexpr char kAnonymousIdentity[] = "anonymous";

struct Caller {
  std::string tenant;
  Role role = Role::kSubmitter;
  // The credential behind the call: "sha256:<hex of the bearer token>", or
  // kAnonymousIdentity with authentication off. A lease is bound to the
  // identity that took it.
  std::string identity;

  // The caller when authentication is off: one anonymous tenant ("") that
  // may do everything, workers' calls included (local workers run without
  // tokens).
  static Caller Anonymous() { return Caller{"", Role::kAdmin, kAnonymousIdentity}; }

  bool IsAnonymous() const { return identity == kAnonymousIdentity; }
  bool MaySubmit() const { return role == Role::kSubmitter || role == Role::kAdmin; }
  bool MayWork() const { return role == Role::kWorker || (role == Role::kAdmin && IsAnonymous()); }
  // Whether this caller may see a job of `job_tenant`.
  bool MaySee(const std::string& job_tenant) const {
    return role == Role::kAdmin || (role == Role::kSubmitter && tenant == job_tenant);
  }
};

}  // namespace quantd::server

#endif  // QUANTD_SERVER_JOBS_CALLER_H_
