// The values a chat template computes with, modelled on the Python objects
// jinja2 hands around (docs/chat_templates.md): printing and comparing them
// follows Python so that output matches jinja2 byte for byte.
#ifndef QUANTD_WORKER_IO_CHAT_TEMPLATE_VALUE_H_
#define QUANTD_WORKER_IO_CHAT_TEMPLATE_VALUE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "worker/common/status.h"

namespace quantd::io::chat_template {

struct Stmt;
class Value;

// Insertion-ordered string-keyed mapping (Python dict with str keys).
class Dict {
 public:
  const Value* Find(const std::string& key) const;
  void Set(const std::string& key, Value v);
  const std::vector<std::pair<std::string, Value>>& items() const { return items_; }
  size_t size() const { return items_.size(); }

 private:
  std::vector<std::pair<std::string, Value>> items_;
  std::unordered_map<std::string, size_t> index_;
};

// A global function, bound method or macro.
struct Callable {
  std::string name;                   // "range", "strip", ...; the macro's name
  std::shared_ptr<const Value> self;  // receiver of a bound method, or null
  const Stmt* macro = nullptr;
};

class Value {
 public:
  enum class Type {
    kUndefined,
    kNone,
    kBool,
    kInt,
    kFloat,
    kString,
    kList,
    kDict,
    kNamespace,
    kCallable
  };
  using List = std::vector<Value>;

  Value() = default;  // undefined
  static Value Undefined(std::string hint = "") {
    Value v;
    if (!hint.empty()) v.str_ = std::make_shared<const std::string>(std::move(hint));
    return v;
  }
  static Value None() { return Value(Type::kNone); }
  static Value Bool(bool b) {
    Value v(Type::kBool);
    v.int_ = b;
    return v;
  }
  static Value Int(int64_t i) {
    Value v(Type::kInt);
    v.int_ = i;
    return v;
  }
  static Value Float(double f) {
    Value v(Type::kFloat);
    v.float_ = f;
    return v;
  }
  static Value String(std::string s) {
    Value v(Type::kString);
    v.str_ = std::make_shared<const std::string>(std::move(s));
    return v;
  }
  // Containers nest at most kMaxNesting deep, so that printing, comparing
  // and tojson recurse a bounded depth (RESOURCE_EXHAUSTED past it).
  static constexpr int kMaxNesting = 256;
  static Value MakeList(List items, bool tuple = false);
  static Value MakeDict(std::shared_ptr<const Dict> d);
  static Value MakeNamespace(std::shared_ptr<Dict> d) {
    Value v(Type::kNamespace);
    v.ns_ = std::move(d);
    return v;
  }
  static Value MakeCallable(Callable c) {
    Value v(Type::kCallable);
    v.callable_ = std::make_shared<const Callable>(std::move(c));
    return v;
  }
  // Objects keep the JSON's iteration order: sorted keys for
  // nlohmann::json, the document's order for nlohmann::ordered_json.
  static Value FromJson(const nlohmann::json& j);
  static Value FromJson(const nlohmann::ordered_json& j);

  Type type() const { return type_; }
  bool is_undefined() const { return type_ == Type::kUndefined; }
  bool is_none() const { return type_ == Type::kNone; }
  bool is_bool() const { return type_ == Type::kBool; }
  bool is_int() const { return type_ == Type::kInt; }
  bool is_float() const { return type_ == Type::kFloat; }
  // Python's numbers.Number: bool, int and float.
  bool is_number() const { return is_bool() || is_int() || is_float(); }
  bool is_string() const { return type_ == Type::kString; }
  bool is_list() const { return type_ == Type::kList; }
  bool is_tuple() const { return is_list() && tuple_; }
  bool is_dict() const { return type_ == Type::kDict; }
  bool is_namespace() const { return type_ == Type::kNamespace; }
  bool is_callable() const { return type_ == Type::kCallable; }

  bool as_bool() const { return int_ != 0; }
  int64_t as_int() const { return int_; }  // also bools
  double as_float() const { return is_float() ? float_ : static_cast<double>(int_); }
  const std::string& str() const { return *str_; }
  const List& list() const { return *list_; }
  const Dict& dict() const { return *dict_; }
  Dict& ns() const { return *ns_; }
  const Callable& callable() const { return *callable_; }
  // Name of the missing variable or attribute, for error messages.
  std::string undefined_hint() const { return str_ ? *str_ : std::string(); }

  bool Truthy() const;
  // Python's str(): what {{ value }} prints ("" for undefined). Fails with
  // RESOURCE_EXHAUSTED past `max` bytes, before building more.
  std::string Str(size_t max = SIZE_MAX) const;
  // Python's repr(), used inside printed lists and dicts.
  std::string Repr(size_t max = SIZE_MAX) const;
  // True when a namespace is inside (namespaces may not hold one: cycles).
  bool HoldsNamespace() const;
  // Python type name for error messages ("str", "list", "dict", ...).
  std::string TypeName() const;

 private:
  explicit Value(Type t) : type_(t) {}
  void AppendRepr(std::string* out, size_t max) const;
  Type type_ = Type::kUndefined;
  bool tuple_ = false;
  uint16_t nesting_ = 0;
  int64_t int_ = 0;
  double float_ = 0;
  std::shared_ptr<const std::string> str_;
  std::shared_ptr<const List> list_;
  std::shared_ptr<const Dict> dict_;
  std::shared_ptr<Dict> ns_;
  std::shared_ptr<const Callable> callable_;
};

// Python ==, with 1 == 1.0 == True and element-wise containers; `tick`
// (if given) is called once per element compared, to charge steps.
bool Equal(const Value& a, const Value& b, const std::function<void()>* tick = nullptr);
// Python float repr: shortest round-trip digits, "1.0", "1e+16", "inf".
std::string FormatFloat(double f);
// Python repr of a str: single quotes unless it holds ' and no ".
std::string ReprString(const std::string& s);

// UTF-8 helpers: templates index, slice and measure strings in code points.
std::vector<uint32_t> DecodeUtf8(const std::string& s);
void AppendUtf8(uint32_t cp, std::string* out);
std::string EncodeUtf8(const std::vector<uint32_t>& cps);
bool IsPySpace(uint32_t cp);

// What evaluation throws; ChatTemplate turns it into a Status. An
// exception keeps each evaluation rule to one line, and never escapes the
// library (chat_template.cc catches it).
struct TemplateError {
  StatusCode code;
  std::string message;
};
[[noreturn]] void Fail(StatusCode code, std::string message);
[[noreturn]] inline void TypeFail(std::string message) {
  Fail(StatusCode::kInvalidArgument, std::move(message));
}

}  // namespace quantd::io::chat_template

#endif  // QUANTD_WORKER_IO_CHAT_TEMPLATE_VALUE_H_
