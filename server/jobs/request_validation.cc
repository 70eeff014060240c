#include "server/jobs/request_validation.h"

#include <algorithm>
#include <map>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/message.h"

namespace quantd::server {
namespace {

bool HasControlCharacter(absl::string_view s) {
  return std::any_of(s.begin(), s.end(), [](char c) {
    unsigned char u = static_cast<unsigned char>(c);
    return u < 0x20 || u == 0x7f;
  });
}

// "cuda:N" with N a non-negative decimal of at most 4 digits.
bool IsCudaOrdinal(absl::string_view device) {
  if (!absl::ConsumePrefix(&device, "cuda:")) return false;
  if (device.empty() || device.size() > 4) return false;
  return std::all_of(device.begin(), device.end(), [](char c) { return absl::ascii_isdigit(c); });
}

std::vector<std::string> NormalizedOrderBy(absl::string_view order_by) {
  return absl::StrSplit(absl::AsciiStrToLower(order_by), ' ', absl::SkipEmpty());
}

// A field whose content is at least this large is named when a spec is too
// large (a spec over the limit always has one: it has fewer than 16 fields).
constexpr size_t kLargeFieldBytes = 16 << 10;

// The bytes a set field holds: strings and bytes by length, messages by
// their serialized size, scalars as 8; repeated fields (and maps) summed.
size_t FieldBytes(const google::protobuf::Message& message,
                  const google::protobuf::FieldDescriptor* field) {
  using google::protobuf::FieldDescriptor;
  const google::protobuf::Reflection* r = message.GetReflection();
  auto element = [&](int i) -> size_t {
    switch (field->cpp_type()) {
      case FieldDescriptor::CPPTYPE_STRING:
        return i < 0 ? r->GetString(message, field).size()
                     : r->GetRepeatedString(message, field, i).size();
      case FieldDescriptor::CPPTYPE_MESSAGE:
        return i < 0 ? r->GetMessage(message, field).ByteSizeLong()
                     : r->GetRepeatedMessage(message, field, i).ByteSizeLong();
      default:
        return 8;
    }
  };
  if (!field->is_repeated()) return element(-1);
  size_t total = 0;
  for (int i = 0; i < r->FieldSize(message, field); ++i) total += element(i);
  return total;
}

void CollectLargeFields(const google::protobuf::Message& message, const std::string& path,
                        std::vector<FieldViolation>& out) {
  std::vector<const google::protobuf::FieldDescriptor*> fields;
  message.GetReflection()->ListFields(message, &fields);
  for (const google::protobuf::FieldDescriptor* field : fields) {
    const size_t bytes = FieldBytes(message, field);
    if (bytes < kLargeFieldBytes) continue;
    const std::string name = absl::StrCat(path, ".", field->name());
    if (!field->is_repeated() &&
        field->cpp_type() == google::protobuf::FieldDescriptor::CPPTYPE_MESSAGE) {
      const size_t before = out.size();
      CollectLargeFields(message.GetReflection()->GetMessage(message, field), name, out);
      if (out.size() > before) continue;  // a nested field was named instead
    }
    out.push_back({name, absl::StrCat(bytes, " bytes make the job spec too large")});
  }
}

}  // namespace

std::vector<FieldViolation> CheckJobSpecSize(const v1::JobSpec& spec) {
  const size_t total = spec.ByteSizeLong();
  if (total <= kMaxJobSpecBytes) return {};
  std::vector<FieldViolation> violations;
  CollectLargeFields(spec, "spec", violations);
  const std::string limit = absl::StrCat("the whole spec is ", total, " bytes, at most ",
                                         kMaxJobSpecBytes, " (256 KiB) are accepted");
  if (violations.empty()) violations.push_back({"spec", ""});
  for (FieldViolation& v : violations) {
    v.description = v.description.empty() ? limit : absl::StrCat(v.description, "; ", limit);
  }
  return violations;
}

std::string CheckLabelKey(absl::string_view key) {
  if (key.empty()) return "a label key must not be empty";
  if (key.size() > kMaxLabelKeyLength) {
    return absl::StrCat("a label key has at most ", kMaxLabelKeyLength, " characters");
  }
  if (!absl::ascii_islower(key[0]) && !absl::ascii_isdigit(key[0])) {
    return "a label key starts with a lowercase letter or a digit";
  }
  for (char c : key) {
    if (!absl::ascii_islower(c) && !absl::ascii_isdigit(c) && c != '-' && c != '_' && c != '.' &&
        c != '/') {
      return "a label key has only lowercase letters, digits, '-', '_', '.' and '/'";
    }
  }
  return "";
}

std::string CheckLabelValue(absl::string_view value) {
  if (value.size() > kMaxLabelValueLength) {
    return absl::StrCat("a label value has at most ", kMaxLabelValueLength, " bytes");
  }
  if (HasControlCharacter(value)) return "a label value must not contain control characters";
  return "";
}

std::string CheckJobDevice(absl::string_view device) {
  if (device.empty() || device == "cpu" || device == "cuda" || IsCudaOrdinal(device)) return "";
  return absl::StrCat("\"", device, "\" is not a device; use cpu, cuda, cuda:N, or leave it empty");
}

std::string CheckWorkerDevice(absl::string_view device) {
  if (device == "cpu" || device == "cuda" || IsCudaOrdinal(device)) return "";
  return absl::StrCat("\"", device, "\" is not a worker device; use cpu or cuda:N");
}

std::vector<FieldViolation> ValidateCreateJobRequest(const v1::CreateJobRequest& request) {
  std::vector<FieldViolation> violations;
  const std::string& request_id = request.request_id();
  if (request_id.size() > kMaxRequestIdLength) {
    violations.push_back({"request_id", absl::StrCat("at most ", kMaxRequestIdLength,
                                                     " characters, got ", request_id.size())});
  } else if (HasControlCharacter(request_id)) {
    violations.push_back({"request_id", "must not contain control characters"});
  }
  if (!request.has_spec()) {
    violations.push_back({"spec", "a job spec is required"});
    return violations;
  }
  const v1::JobSpec& spec = request.spec();
  if (spec.model_uri().empty()) {
    violations.push_back({"spec.model_uri",
                          "the model to quantize is required, e.g. "
                          "file:///models/llama"});
  }
  if (std::string problem = CheckJobDevice(spec.device()); !problem.empty()) {
    violations.push_back({"spec.device", problem});
  }
  if (spec.labels_size() > kMaxLabels) {
    violations.push_back(
        {"spec.labels", absl::StrCat("at most ", kMaxLabels, " labels, got ", spec.labels_size())});
  }
  // Sorted, so the violations come out in a stable order.
  std::map<std::string, std::string> labels(spec.labels().begin(), spec.labels().end());
  for (const auto& [key, value] : labels) {
    std::string field = absl::StrCat("spec.labels[\"", key, "\"]");
    if (std::string problem = CheckLabelKey(key); !problem.empty()) {
      violations.push_back({field, problem});
    }
    if (std::string problem = CheckLabelValue(value); !problem.empty()) {
      violations.push_back({field, problem});
    }
  }
  if (spec.has_max_attempts() &&
      (spec.max_attempts() < 1 || spec.max_attempts() > kMaxMaxAttempts)) {
    violations.push_back({"spec.max_attempts", absl::StrCat("between 1 and ", kMaxMaxAttempts,
                                                            ", got ", spec.max_attempts())});
  }
  return violations;
}

std::vector<FieldViolation> ValidateListJobsRequest(const v1::ListJobsRequest& request) {
  std::vector<FieldViolation> violations;
  if (request.page_size() < 0) {
    violations.push_back(
        {"page_size", absl::StrCat("must not be negative, got ", request.page_size())});
  }
  std::vector<std::string> order = NormalizedOrderBy(request.order_by());
  bool order_ok =
      order.empty() ||
      (order[0] == "create_time" &&
       (order.size() == 1 || (order.size() == 2 && (order[1] == "asc" || order[1] == "desc"))));
  if (!order_ok) {
    violations.push_back({"order_by", absl::StrCat("\"", request.order_by(),
                                                   "\" is not supported; use \"create_time desc\" "
                                                   "or \"create_time asc\"")});
  }
  for (int i = 0; i < request.states_size(); ++i) {
    v1::JobState state = request.states(i);
    if (state == v1::JOB_STATE_UNSPECIFIED || !v1::JobState_IsValid(state)) {
      violations.push_back({absl::StrCat("states[", i, "]"),
                            absl::StrCat(static_cast<int>(state), " is not a job state")});
    }
  }
  std::map<std::string, std::string> labels(request.labels().begin(), request.labels().end());
  for (const auto& [key, value] : labels) {
    if (std::string problem = CheckLabelKey(key); !problem.empty()) {
      violations.push_back({absl::StrCat("labels[\"", key, "\"]"), problem});
    }
  }
  if (!v1::JobView_IsValid(request.view())) {
    violations.push_back({"view", absl::StrCat(static_cast<int>(request.view()),
                                               " is not a view; use BASIC or FULL")});
  }
  return violations;
}

int EffectivePageSize(int requested) {
  if (requested <= 0) return kDefaultPageSize;
  return std::min(requested, kMaxPageSize);
}

bool OrderAscending(absl::string_view order_by) {
  std::vector<std::string> order = NormalizedOrderBy(order_by);
  return order.size() == 1 || (order.size() == 2 && order[1] == "asc");
}

}  // namespace quantd::server
