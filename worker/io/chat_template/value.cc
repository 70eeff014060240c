#include "worker/io/chat_template/value.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>

#include "worker/io/tokenizer/byte_level.h"

namespace quantd::io::chat_template {

void Fail(StatusCode code, std::string message) { throw TemplateError{code, std::move(message)}; }

const Value* Dict::Find(const std::string& key) const {
  auto it = index_.find(key);
  return it == index_.end() ? nullptr : &items_[it->second].second;
}

void Dict::Set(const std::string& key, Value v) {
  auto it = index_.find(key);
  if (it != index_.end()) {
    items_[it->second].second = std::move(v);
    return;
  }
  index_.emplace(key, items_.size());
  items_.emplace_back(key, std::move(v));
}

namespace {
template <typename Json>
Value FromJsonImpl(const Json& j) {
  switch (j.type()) {
    case Json::value_t::null:
      return Value::None();
    case Json::value_t::boolean:
      return Value::Bool(j.template get<bool>());
    case Json::value_t::number_integer:
      return Value::Int(j.template get<int64_t>());
    case Json::value_t::number_unsigned: {
      const uint64_t u = j.template get<uint64_t>();
      if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        TypeFail("context integer " + std::to_string(u) + " is beyond int64");
      return Value::Int(static_cast<int64_t>(u));
    }
    case Json::value_t::number_float:
      return Value::Float(j.template get<double>());
    case Json::value_t::string:
      return Value::String(j.template get<std::string>());
    case Json::value_t::array: {
      Value::List items;
      items.reserve(j.size());
      for (const auto& e : j) items.push_back(FromJsonImpl(e));
      return Value::MakeList(std::move(items));
    }
    case Json::value_t::object: {
      auto d = std::make_shared<Dict>();
      for (auto it = j.begin(); it != j.end(); ++it) d->Set(it.key(), FromJsonImpl(it.value()));
      return Value::MakeDict(std::move(d));
    }
    default:
      TypeFail("unsupported JSON value in the context");
  }
}
}  // namespace

Value Value::FromJson(const nlohmann::json& j) { return FromJsonImpl(j); }
Value Value::FromJson(const nlohmann::ordered_json& j) { return FromJsonImpl(j); }

Value Value::MakeList(List items, bool tuple) {
  Value v(Type::kList);
  int depth = 0;
  for (const auto& x : items) depth = std::max<int>(depth, x.nesting_);
  if (depth + 1 > kMaxNesting)
    Fail(StatusCode::kResourceExhausted,
         "values nest deeper than " + std::to_string(kMaxNesting) + " levels");
  v.nesting_ = depth + 1;
  v.list_ = std::make_shared<const List>(std::move(items));
  v.tuple_ = tuple;
  return v;
}

Value Value::MakeDict(std::shared_ptr<const Dict> d) {
  Value v(Type::kDict);
  int depth = 0;
  for (const auto& [k, x] : d->items()) depth = std::max<int>(depth, x.nesting_);
  if (depth + 1 > kMaxNesting)
    Fail(StatusCode::kResourceExhausted,
         "values nest deeper than " + std::to_string(kMaxNesting) + " levels");
  v.nesting_ = depth + 1;
  v.dict_ = std::move(d);
  return v;
}

bool Value::HoldsNamespace() const {
  if (is_namespace()) return true;
  if (is_list())
    for (const auto& x : *list_)
      if (x.HoldsNamespace()) return true;
  if (is_dict())
    for (const auto& [k, x] : dict_->items())
      if (x.HoldsNamespace()) return true;
  return false;
}

bool Value::Truthy() const {
  switch (type_) {
    case Type::kUndefined:
    case Type::kNone:
      return false;
    case Type::kBool:
    case Type::kInt:
      return int_ != 0;
    case Type::kFloat:
      return float_ != 0;
    case Type::kString:
      return !str_->empty();
    case Type::kList:
      return !list_->empty();
    case Type::kDict:
      return dict_->size() != 0;
    default:
      return true;
  }
}

std::string FormatFloat(double f) {
  if (std::isnan(f)) return "nan";
  if (std::isinf(f)) return f < 0 ? "-inf" : "inf";
  char buf[40];
  for (int p = 1; p <= 17; ++p) {
    std::snprintf(buf, sizeof(buf), "%.*e", p - 1, f);
    if (std::strtod(buf, nullptr) == f) break;
  }
  // buf is [-]d[.ddd]e[+-]XX
  std::string s(buf);
  std::string out = std::signbit(f) ? "-" : "";
  const size_t e = s.find('e');
  std::string digits;
  for (size_t i = 0; i < e; ++i)
    if (s[i] >= '0' && s[i] <= '9') digits += s[i];
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
  const int exp = std::atoi(s.c_str() + e + 1);
  if (exp >= -4 && exp < 16) {
    if (exp >= 0) {
      std::string ip = digits.substr(0, std::min<size_t>(digits.size(), exp + 1));
      while (static_cast<int>(ip.size()) < exp + 1) ip += '0';
      std::string fp = digits.size() > static_cast<size_t>(exp + 1) ? digits.substr(exp + 1) : "0";
      out += ip + "." + fp;
    } else {
      out += "0." + std::string(-exp - 1, '0') + digits;
    }
  } else {
    out += digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    char eb[16];
    std::snprintf(eb, sizeof(eb), "e%c%02d", exp < 0 ? '-' : '+', std::abs(exp));
    out += eb;
  }
  return out;
}

std::vector<uint32_t> DecodeUtf8(const std::string& s) {
  std::vector<uint32_t> out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    const unsigned char c = s[i];
    int n = 0;
    uint32_t cp = 0;
    if (c < 0x80) {
      out.push_back(c);
      ++i;
      continue;
    } else if ((c & 0xE0) == 0xC0) {
      n = 1, cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      n = 2, cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      n = 3, cp = c & 0x07;
    }
    bool ok = n > 0;
    for (int k = 1; ok && k <= n; ++k) {
      if (i + k >= s.size() || (static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80)
        ok = false;
      else
        cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
    }
    if (ok) {
      out.push_back(cp);
      i += n + 1;
    } else {
      out.push_back(0xDC00 + c);  // surrogateescape: round-trips the raw byte
      ++i;
    }
  }
  return out;
}

void AppendUtf8(uint32_t cp, std::string* out) {
  // Python's surrogateescape: U+DC80..U+DCFF stand for the raw bytes.
  if (cp >= 0xDC80 && cp <= 0xDCFF) {
    out->push_back(static_cast<char>(cp - 0xDC00));
    return;
  }
  io::AppendUtf8(static_cast<char32_t>(cp), out);
}

std::string EncodeUtf8(const std::vector<uint32_t>& cps) {
  std::string out;
  out.reserve(cps.size());
  for (uint32_t cp : cps) AppendUtf8(cp, &out);
  return out;
}

bool IsPySpace(uint32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20) || cp == 0x85 || cp == 0xA0 ||
         cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 ||
         cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

namespace {
// Python's str.isprintable(), for the code points chat data meets.
bool IsPrintable(uint32_t cp) {
  if (cp < 0x20 || cp == 0x7F) return false;
  if (cp >= 0x80 && cp <= 0xA0) return false;
  if (cp == 0xAD) return false;
  if (cp >= 0xDC80 && cp <= 0xDCFF) return false;
  if (cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200F) || (cp >= 0x2028 && cp <= 0x202F) ||
      (cp >= 0x205F && cp <= 0x2064) || cp == 0x3000 || cp == 0xFEFF)
    return false;
  return true;
}
}  // namespace

std::string ReprString(const std::string& s) {
  const bool dq = s.find('\'') != std::string::npos && s.find('"') == std::string::npos;
  const char q = dq ? '"' : '\'';
  std::string out(1, q);
  for (uint32_t cp : DecodeUtf8(s)) {
    if (cp == '\\')
      out += "\\\\";
    else if (cp == static_cast<uint32_t>(q))
      out += std::string("\\") + q;
    else if (cp == '\n')
      out += "\\n";
    else if (cp == '\r')
      out += "\\r";
    else if (cp == '\t')
      out += "\\t";
    else if (IsPrintable(cp))
      AppendUtf8(cp, &out);
    else {
      char buf[16];
      if (cp >= 0xDC80 && cp <= 0xDCFF)
        std::snprintf(buf, sizeof(buf), "\\udc%02x", cp - 0xDC00);
      else if (cp < 0x100)
        std::snprintf(buf, sizeof(buf), "\\x%02x", cp);
      else if (cp < 0x10000)
        std::snprintf(buf, sizeof(buf), "\\u%04x", cp);
      else
        std::snprintf(buf, sizeof(buf), "\\U%08x", cp);
      out += buf;
    }
  }
  out += q;
  return out;
}

std::string Value::Str(size_t max) const {
  if (is_undefined()) return "";
  if (is_string()) return *str_;
  return Repr(max);
}

std::string Value::Repr(size_t max) const {
  std::string out;
  AppendRepr(&out, max);
  return out;
}

void Value::AppendRepr(std::string* out, size_t max) const {
  if (out->size() > max)
    Fail(StatusCode::kResourceExhausted,
         "a printed value is over the " + std::to_string(max) + "-byte output limit");
  switch (type_) {
    case Type::kUndefined:
      *out += "Undefined";
      return;
    case Type::kNone:
      *out += "None";
      return;
    case Type::kBool:
      *out += int_ ? "True" : "False";
      return;
    case Type::kInt:
      *out += std::to_string(int_);
      return;
    case Type::kFloat:
      *out += FormatFloat(float_);
      return;
    case Type::kString:
      *out += ReprString(*str_);
      return;
    case Type::kList: {
      *out += tuple_ ? "(" : "[";
      for (size_t i = 0; i < list_->size(); ++i) {
        if (i) *out += ", ";
        (*list_)[i].AppendRepr(out, max);
      }
      if (tuple_ && list_->size() == 1) *out += ",";
      *out += tuple_ ? ")" : "]";
      return;
    }
    case Type::kDict:
    case Type::kNamespace: {
      const Dict& d = is_dict() ? *dict_ : *ns_;
      *out += is_dict() ? "{" : "<Namespace {";
      bool first = true;
      for (const auto& [k, v] : d.items()) {
        if (!first) *out += ", ";
        first = false;
        *out += ReprString(k) + ": ";
        v.AppendRepr(out, max);
      }
      *out += is_dict() ? "}" : "}>";
      return;
    }
    case Type::kCallable:
      *out += "<function " + callable_->name + ">";
      return;
  }
}

std::string Value::TypeName() const {
  switch (type_) {
    case Type::kUndefined:
      return "Undefined";
    case Type::kNone:
      return "NoneType";
    case Type::kBool:
      return "bool";
    case Type::kInt:
      return "int";
    case Type::kFloat:
      return "float";
    case Type::kString:
      return "str";
    case Type::kList:
      return tuple_ ? "tuple" : "list";
    case Type::kDict:
      return "dict";
    case Type::kNamespace:
      return "Namespace";
    case Type::kCallable:
      return "function";
  }
  return "object";
}

bool Equal(const Value& a, const Value& b, const std::function<void()>* tick) {
  if (tick) (*tick)();
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_float() == b.as_float();
    return a.as_int() == b.as_int();
  }
  if (a.type() != b.type()) return false;
  switch (a.type()) {
    case Value::Type::kUndefined:
    case Value::Type::kNone:
      return true;
    case Value::Type::kString:
      return a.str() == b.str();
    case Value::Type::kList: {
      if (a.is_tuple() != b.is_tuple() || a.list().size() != b.list().size()) return false;
      for (size_t i = 0; i < a.list().size(); ++i)
        if (!Equal(a.list()[i], b.list()[i], tick)) return false;
      return true;
    }
    case Value::Type::kDict: {
      if (a.dict().size() != b.dict().size()) return false;
      for (const auto& [k, v] : a.dict().items()) {
        const Value* o = b.dict().Find(k);
        if (!o || !Equal(v, *o, tick)) return false;
      }
      return true;
    }
    case Value::Type::kNamespace:
      return &a.ns() == &b.ns();
    default:
      return false;
  }
}

}  // namespace quantd::io::chat_template
