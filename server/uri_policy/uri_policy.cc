#include "server/uri_policy/uri_policy.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "server/common/engine_status.h"
#include "server/common/errors.h"

namespace quantd::server {
namespace {

// The engine's status for `field`, with the field named in the message and
// in a BadRequest violation.
absl::Status ForField(absl::string_view field, const quantd::Status& status) {
  if (status.ok()) return absl::OkStatus();
  absl::Status out = FromEngineStatus(status);
  absl::Status named(out.code(), absl::StrCat(field, ": ", status.message()));
  SetReason(named, GetReason(out).empty() ? "URI_NOT_ALLOWED" : GetReason(out));
  AddViolations(named, {{std::string(field), status.message()}});
  return named;
}

}  // namespace

absl::StatusOr<UriPolicy> UriPolicy::Create(const std::vector<std::string>& roots,
                                            const std::string& data_dir) {
  auto parsed = io::UriRoots::Create(roots, data_dir + "/artifacts", "--allowed-uri-roots");
  if (!parsed.ok()) return FromEngineStatus(parsed.status());
  return UriPolicy(*std::move(parsed));
}

absl::Status UriPolicy::CheckInput(absl::string_view field, const std::string& uri,
                                   const std::string& tenant) const {
  return ForField(field, roots_.CheckInput(uri, tenant));
}

absl::Status UriPolicy::CheckOutput(absl::string_view field, const std::string& uri,
                                    const std::string& tenant) const {
  auto location = roots_.CheckOutput(uri, tenant);
  if (!location.ok()) return ForField(field, location.status());
  // What the worker would refuse when it walks there (a symlinked parent),
  // refused now rather than after the job ran.
  return ForField(field, io::CheckOutputWalk(*location));
}

absl::Status UriPolicy::CheckSpec(const v1::JobSpec& spec, const std::string& tenant) const {
  const std::pair<const char*, const std::string*> inputs[] = {
      {"spec.model_uri", &spec.model_uri()},
      {"spec.calibration.dataset_uri", &spec.calibration().dataset_uri()},
      {"spec.evaluation.dataset_uri", &spec.evaluation().dataset_uri()},
  };
  std::vector<absl::Status> problems;
  for (const auto& [field, uri] : inputs) {
    if (uri->empty()) continue;
    absl::Status s = CheckInput(field, *uri, tenant);
    if (!s.ok()) problems.push_back(std::move(s));
  }
  if (!spec.export_().output_uri().empty()) {
    absl::Status s = CheckOutput("spec.export.output_uri", spec.export_().output_uri(), tenant);
    if (!s.ok()) problems.push_back(std::move(s));
  }
  if (problems.empty()) return absl::OkStatus();
  // Refusals first: a URI outside the roots is PERMISSION_DENIED whatever
  // else is wrong; otherwise the malformed ones, then the rest.
  for (absl::StatusCode code :
       {absl::StatusCode::kPermissionDenied, absl::StatusCode::kInvalidArgument}) {
    std::vector<FieldViolation> violations;
    std::vector<std::string> messages;
    std::string reason;
    for (const absl::Status& p : problems) {
      if (p.code() != code) continue;
      for (FieldViolation& v : GetViolations(p)) violations.push_back(std::move(v));
      messages.emplace_back(p.message());
      if (reason.empty()) reason = GetReason(p);
    }
    if (violations.empty()) continue;
    absl::Status out = MakeError(code, reason, absl::StrJoin(messages, "; "));
    AddViolations(out, violations);
    return out;
  }
  return problems.front();
}

}  // namespace quantd::server
