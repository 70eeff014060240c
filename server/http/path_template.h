// google.api.http path templates, as quantd's HTTP face uses them:
// literal segments, variables binding one request field to one or more
// segments ("{name=jobs/*}", "{id}" = "{id=*}"), and a custom verb
// (":cancel"). "**" is not supported (no quantd route needs it); Parse
// refuses it rather than matching something else.
#ifndef QUANTD_SERVER_HTTP_PATH_TEMPLATE_H_
#define QUANTD_SERVER_HTTP_PATH_TEMPLATE_H_

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "worker/common/status.h"

namespace quantd::server::http {

// One field bound by a path: its proto field path ("name") and the decoded
// value ("jobs/01h...").
struct PathBinding {
  std::string field;
  std::string value;
};

// A request path split for matching: percent-decoded segments and the
// custom verb (text after the last ':' of the last segment, decoded).
struct SplitPath {
  std::vector<std::string> segments;
  std::string verb;
};

// Splits a raw request path ("/v1/jobs/abc:cancel", no query) on '/' and
// ':' before percent-decoding, so an encoded "%2F" or "%3A" never splits.
// INVALID_ARGUMENT for a path not starting with '/', a malformed %-escape,
// or a decoded control character.
quantd::StatusOr<SplitPath> SplitRequestPath(absl::string_view raw_path);

class PathTemplate {
 public:
  // INVALID_ARGUMENT naming the problem for a template quantd cannot serve.
  static quantd::StatusOr<PathTemplate> Parse(absl::string_view text);

  // The bindings when `path` has the template's shape; nullopt when it
  // does not. A wildcard matches any one segment, so that an empty or
  // "%2F"-holding one can be refused by name: `violations` then lists each
  // such variable (the request is a 400, not a 404).
  struct Matched {
    std::vector<PathBinding> bindings;
    std::vector<FieldViolation> violations;
  };
  std::optional<Matched> Match(const SplitPath& path) const;

  const std::string& text() const { return text_; }
  const std::string& verb() const { return verb_; }
  // The fields bound by variables, in template order.
  std::vector<std::string> Fields() const;

 private:
  struct Segment {
    std::string literal;  // empty for a wildcard "*"
    bool wildcard = false;
  };
  struct Variable {
    std::string field;
    size_t first = 0;  // index into segments_
    size_t count = 0;
  };

  std::string text_;
  std::vector<Segment> segments_;
  std::vector<Variable> variables_;
  std::string verb_;
};

// Percent-decodes `in` ("%41" -> "A"); '+' stays '+' unless
// `plus_is_space` (query strings). nullopt for a malformed escape.
std::optional<std::string> PercentDecode(absl::string_view in, bool plus_is_space);

}  // namespace quantd::server::http

#endif  // QUANTD_SERVER_HTTP_PATH_TEMPLATE_H_
