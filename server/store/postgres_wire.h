// Statement parameters and results in the formats PostgresJobStore uses
// with libpq: parameters as text (bytea binary), results binary, and text[]
// literals. Split from postgres_job_store.cc to keep that file about the
// store.
#ifndef QUANTD_SERVER_STORE_POSTGRES_WIRE_H_
#define QUANTD_SERVER_STORE_POSTGRES_WIRE_H_

#include <endian.h>
#include <postgresql/libpq-fe.h>

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"

namespace quantd::server::postgres {

// Statement parameters: text, except bytea, which goes binary.
class Params {
 public:
  Params& Text(absl::string_view v) { return Add(std::string(v), 0); }
  Params& Int(int64_t v) { return Add(absl::StrCat(v), 0); }
  Params& Bytes(std::string v) { return Add(std::move(v), 1); }
  Params& Null() {
    values_.emplace_back();
    formats_.push_back(0);
    null_.push_back(true);
    return *this;
  }
  Params& OptText(const std::optional<std::string>& v) { return v ? Text(*v) : Null(); }
  Params& OptInt(std::optional<int64_t> v) { return v ? Int(*v) : Null(); }

  int size() const { return static_cast<int>(values_.size()); }
  // Pointers into this object; valid while it lives unchanged.
  std::vector<const char*> values() const {
    std::vector<const char*> out;
    for (size_t i = 0; i < values_.size(); ++i)
      out.push_back(null_[i] ? nullptr : values_[i].data());
    return out;
  }
  std::vector<int> lengths() const {
    std::vector<int> out;
    for (const auto& v : values_) out.push_back(static_cast<int>(v.size()));
    return out;
  }
  const std::vector<int>& formats() const { return formats_; }

 private:
  Params& Add(std::string v, int format) {
    values_.push_back(std::move(v));
    formats_.push_back(format);
    null_.push_back(false);
    return *this;
  }
  std::vector<std::string> values_;
  std::vector<int> formats_;
  std::vector<bool> null_;
};

// A result in binary format: BIGINT columns are 8 big-endian bytes.
class Result {
 public:
  explicit Result(PGresult* r) : r_(r) {}
  Result(Result&& o) noexcept : r_(std::exchange(o.r_, nullptr)) {}
  Result(const Result&) = delete;
  ~Result() {
    if (r_ != nullptr) PQclear(r_);
  }
  int rows() const { return PQntuples(r_); }
  PGresult* raw() const { return r_; }
  bool IsNull(int row, int col) const { return PQgetisnull(r_, row, col) != 0; }
  absl::string_view Bytes(int row, int col) const {
    return absl::string_view(PQgetvalue(r_, row, col), PQgetlength(r_, row, col));
  }
  int64_t Int(int row, int col) const {
    uint64_t be = 0;
    std::memcpy(&be, PQgetvalue(r_, row, col), sizeof(be));
    return static_cast<int64_t>(be64toh(be));
  }

 private:
  PGresult* r_;
};

// A PostgreSQL text[] literal.
inline std::string TextArray(const std::vector<std::string>& items) {
  std::vector<std::string> quoted;
  for (const std::string& item : items) {
    std::string q = "\"";
    for (char c : item) {
      if (c == '"' || c == '\\') q.push_back('\\');
      q.push_back(c);
    }
    q.push_back('"');
    quoted.push_back(std::move(q));
  }
  return absl::StrCat("{", absl::StrJoin(quoted, ","), "}");
}

}  // namespace quantd::server::postgres

#endif  // QUANTD_SERVER_STORE_POSTGRES_WIRE_H_
