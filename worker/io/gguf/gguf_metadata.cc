#include <cmath>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "worker/io/gguf/gguf_file.h"

// GgufValue and GgufFile's typed metadata access: value type names, text and
// JSON rendering, the Get* accessors and their type errors (the byte-level
// parser is gguf_file.cc).
namespace quantd::gguf {
namespace {


nlohmann::json JsonValue(const GgufValue& v) {
  using nlohmann::json;
  switch (v.type) {
    case GgufValueType::kUint8:
    case GgufValueType::kUint16:
    case GgufValueType::kUint32:
    case GgufValueType::kUint64:
      return v.u;
    case GgufValueType::kInt8:
    case GgufValueType::kInt16:
    case GgufValueType::kInt32:
    case GgufValueType::kInt64:
      return v.i;
    case GgufValueType::kFloat32:
    case GgufValueType::kFloat64:
      return std::isfinite(v.f) ? json(v.f) : json(std::to_string(v.f));
    case GgufValueType::kBool:
      return v.b;
    case GgufValueType::kString:
      return v.s;
    case GgufValueType::kArray: {
      json a = json::array();
      for (uint64_t x : v.au) a.push_back(x);
      for (int64_t x : v.ai) a.push_back(x);
      for (double x : v.af) a.push_back(std::isfinite(x) ? json(x) : json(std::to_string(x)));
      for (uint8_t x : v.ab) a.push_back(x != 0);
      for (const auto& x : v.as) a.push_back(x);
      for (const auto& x : v.array) a.push_back(JsonValue(x));
      return a;
    }
  }
  return nullptr;
}

std::string FloatText(double f, GgufValueType type) {
  std::ostringstream ss;
  ss.precision(type == GgufValueType::kFloat32 ? 9 : 17);
  ss << f;
  return ss.str();
}

Status TypeError(const GgufFile& f, std::string_view key, const char* want, const GgufValue& v) {
  std::string got = GgufValueTypeName(v.type);
  if (v.is_array()) got = std::string("array of ") + GgufValueTypeName(v.elem_type);
  return InvalidArgumentError(f.where() + ": metadata " + std::string(key) + " is " + got +
                              ", expected " + want);
}

bool IsUnsigned(GgufValueType t) {
  return t == GgufValueType::kUint8 || t == GgufValueType::kUint16 || t == GgufValueType::kUint32 ||
         t == GgufValueType::kUint64;
}
bool IsSigned(GgufValueType t) {
  return t == GgufValueType::kInt8 || t == GgufValueType::kInt16 || t == GgufValueType::kInt32 ||
         t == GgufValueType::kInt64;
}
bool IsFloat(GgufValueType t) {
  return t == GgufValueType::kFloat32 || t == GgufValueType::kFloat64;
}

}  // namespace

const char* GgufValueTypeName(GgufValueType type) {
  switch (type) {
    case GgufValueType::kUint8:
      return "uint8";
    case GgufValueType::kInt8:
      return "int8";
    case GgufValueType::kUint16:
      return "uint16";
    case GgufValueType::kInt16:
      return "int16";
    case GgufValueType::kUint32:
      return "uint32";
    case GgufValueType::kInt32:
      return "int32";
    case GgufValueType::kFloat32:
      return "float32";
    case GgufValueType::kBool:
      return "bool";
    case GgufValueType::kString:
      return "string";
    case GgufValueType::kArray:
      return "array";
    case GgufValueType::kUint64:
      return "uint64";
    case GgufValueType::kInt64:
      return "int64";
    case GgufValueType::kFloat64:
      return "float64";
  }
  return "unknown";
}

size_t GgufValue::array_size() const {
  if (!is_array()) return 0;
  return au.size() + ai.size() + af.size() + ab.size() + as.size() + array.size();
}

std::string GgufValue::ToText(size_t max_array) const {
  switch (type) {
    case GgufValueType::kString:
      return s;
    case GgufValueType::kFloat32:
    case GgufValueType::kFloat64:
      return FloatText(f, type);
    case GgufValueType::kArray:
      if (array_size() > max_array) {
        return "[" + std::to_string(array_size()) + " " + GgufValueTypeName(elem_type) + " values]";
      }
      return JsonValue(*this).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    default:
      return JsonValue(*this).dump();
  }
}

GgufValue GgufValue::Uint32(uint32_t v) {
  GgufValue x;
  x.type = GgufValueType::kUint32;
  x.u = v;
  return x;
}
GgufValue GgufValue::Int32(int32_t v) {
  GgufValue x;
  x.type = GgufValueType::kInt32;
  x.i = v;
  return x;
}
GgufValue GgufValue::Uint64(uint64_t v) {
  GgufValue x;
  x.type = GgufValueType::kUint64;
  x.u = v;
  return x;
}
GgufValue GgufValue::Float32(float v) {
  GgufValue x;
  x.type = GgufValueType::kFloat32;
  x.f = v;
  return x;
}
GgufValue GgufValue::Bool(bool v) {
  GgufValue x;
  x.type = GgufValueType::kBool;
  x.b = v;
  return x;
}
GgufValue GgufValue::String(std::string v) {
  GgufValue x;
  x.type = GgufValueType::kString;
  x.s = std::move(v);
  return x;
}
GgufValue GgufValue::StringArray(std::vector<std::string> v) {
  GgufValue x;
  x.type = GgufValueType::kArray;
  x.elem_type = GgufValueType::kString;
  x.as = std::move(v);
  return x;
}
GgufValue GgufValue::Float32Array(std::vector<float> v) {
  GgufValue x;
  x.type = GgufValueType::kArray;
  x.elem_type = GgufValueType::kFloat32;
  x.af.assign(v.begin(), v.end());
  return x;
}
GgufValue GgufValue::Int32Array(std::vector<int32_t> v) {
  GgufValue x;
  x.type = GgufValueType::kArray;
  x.elem_type = GgufValueType::kInt32;
  x.ai.assign(v.begin(), v.end());
  return x;
}

int64_t GgufTensorInfo::n_elements() const {
  int64_t n = 1;
  for (int64_t d : ne) n *= d;
  return n;
}

std::vector<int64_t> GgufTensorInfo::torch_shape() const {
  return std::vector<int64_t>(ne.rbegin(), ne.rend());
}

const GgufValue* GgufFile::Find(std::string_view key) const {
  for (const auto& [k, v] : metadata) {
    if (k == key) return &v;
  }
  return nullptr;
}

const GgufTensorInfo* GgufFile::FindTensor(std::string_view name) const {
  for (const auto& t : tensors) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

StatusOr<std::string> GgufFile::GetString(std::string_view key) const {
  const GgufValue* v = Find(key);
  if (!v) return NotFoundError(where() + ": metadata " + std::string(key) + " is missing");
  if (v->type != GgufValueType::kString) return TypeError(*this, key, "string", *v);
  return v->s;
}

StatusOr<int64_t> GgufFile::GetInt(std::string_view key) const {
  const GgufValue* v = Find(key);
  if (!v) return NotFoundError(where() + ": metadata " + std::string(key) + " is missing");
  if (IsSigned(v->type)) return v->i;
  if (IsUnsigned(v->type)) {
    if (v->u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return InvalidArgumentError(where() + ": metadata " + std::string(key) + " value " +
                                  std::to_string(v->u) + " is out of range");
    }
    return static_cast<int64_t>(v->u);
  }
  return TypeError(*this, key, "an integer", *v);
}

StatusOr<double> GgufFile::GetFloat(std::string_view key) const {
  const GgufValue* v = Find(key);
  if (!v) return NotFoundError(where() + ": metadata " + std::string(key) + " is missing");
  if (IsFloat(v->type)) return v->f;
  if (IsSigned(v->type)) return static_cast<double>(v->i);
  if (IsUnsigned(v->type)) return static_cast<double>(v->u);
  return TypeError(*this, key, "a number", *v);
}

StatusOr<bool> GgufFile::GetBool(std::string_view key) const {
  const GgufValue* v = Find(key);
  if (!v) return NotFoundError(where() + ": metadata " + std::string(key) + " is missing");
  if (v->type != GgufValueType::kBool) return TypeError(*this, key, "bool", *v);
  return v->b;
}

StatusOr<std::vector<std::string>> GgufFile::GetStringArray(std::string_view key) const {
  const GgufValue* v = Find(key);
  if (!v) return NotFoundError(where() + ": metadata " + std::string(key) + " is missing");
  if (!v->is_array() || v->elem_type != GgufValueType::kString) {
    return TypeError(*this, key, "array of string", *v);
  }
  return v->as;
}

StatusOr<std::vector<double>> GgufFile::GetFloatArray(std::string_view key) const {
  const GgufValue* v = Find(key);
  if (!v) return NotFoundError(where() + ": metadata " + std::string(key) + " is missing");
  if (!v->is_array() || v->elem_type == GgufValueType::kString ||
      v->elem_type == GgufValueType::kArray || v->elem_type == GgufValueType::kBool) {
    return TypeError(*this, key, "array of numbers", *v);
  }
  if (IsFloat(v->elem_type)) return v->af;
  std::vector<double> out;
  for (uint64_t x : v->au) out.push_back(static_cast<double>(x));
  for (int64_t x : v->ai) out.push_back(static_cast<double>(x));
  return out;
}

StatusOr<std::vector<int64_t>> GgufFile::GetIntArray(std::string_view key) const {
  const GgufValue* v = Find(key);
  if (!v) return NotFoundError(where() + ": metadata " + std::string(key) + " is missing");
  if (!v->is_array() || !(IsSigned(v->elem_type) || IsUnsigned(v->elem_type))) {
    return TypeError(*this, key, "array of integers", *v);
  }
  if (IsSigned(v->elem_type)) return v->ai;
  std::vector<int64_t> out;
  out.reserve(v->au.size());
  for (uint64_t x : v->au) {
    if (x > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return InvalidArgumentError(where() + ": metadata " + std::string(key) +
                                  " has an out-of-range element");
    }
    out.push_back(static_cast<int64_t>(x));
  }
  return out;
}

StatusOr<int64_t> GgufFile::GetIntOr(std::string_view key, int64_t fallback) const {
  if (!Find(key)) return fallback;
  return GetInt(key);
}
StatusOr<double> GgufFile::GetFloatOr(std::string_view key, double fallback) const {
  if (!Find(key)) return fallback;
  return GetFloat(key);
}
StatusOr<bool> GgufFile::GetBoolOr(std::string_view key, bool fallback) const {
  if (!Find(key)) return fallback;
  return GetBool(key);
}

}  // namespace quantd::gguf
