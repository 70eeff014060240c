// Filters, tests, methods and globals, following jinja2 3.1's sandboxed
// environment as transformers configures it (docs/chat_templates.md).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <set>

#include "worker/io/chat_template/interpreter.h"
#include "worker/io/chat_template/parser.h"

namespace quantd::io::chat_template {
namespace {

const std::set<std::string>& Filters() {
  static const auto* const kSet = new std::set<std::string>{
      "abs",        "capitalize", "count",    "d",       "default", "dictsort", "e",
      "escape",     "first",      "float",    "indent",  "int",     "items",    "join",
      "last",       "length",     "list",     "lower",   "map",     "max",      "min",
      "reject",     "rejectattr", "replace",  "reverse", "round",   "safe",     "select",
      "selectattr", "sort",       "string",   "sum",     "title",   "tojson",   "trim",
      "unique",     "upper",      "wordcount"};
  return *kSet;
}
const std::set<std::string>& Tests() {
  static const auto* const kSet = new std::set<std::string>{
      "boolean",     "defined",  "divisibleby", "eq",   "equalto",   "even",     "false",
      "float",       "ge",       "gt",          "in",   "integer",   "iterable", "le",
      "lower",       "lt",       "mapping",     "ne",   "none",      "number",   "odd",
      "sameas",      "sequence", "string",      "true", "undefined", "upper",    "callable",
      "greaterthan", "lessthan", "=="};
  return *kSet;
}

const Value* Kwarg(const Kwargs& kw, const char* name) {
  for (const auto& [k, v] : kw)
    if (k == name) return &v;
  return nullptr;
}

// Positional argument i, else keyword `name`, else `dflt`.
Value Arg(const std::vector<Value>& args, const Kwargs& kw, size_t i, const char* name,
          Value dflt = Value()) {
  if (i < args.size()) return args[i];
  if (const Value* v = Kwarg(kw, name)) return *v;
  return dflt;
}

bool IsAsciiUpper(uint32_t c) { return c >= 'A' && c <= 'Z'; }
bool IsAsciiLower(uint32_t c) { return c >= 'a' && c <= 'z'; }
uint32_t Upper(uint32_t c) { return IsAsciiLower(c) ? c - 32 : c; }
uint32_t Lower(uint32_t c) { return IsAsciiUpper(c) ? c + 32 : c; }
bool IsAlnum(uint32_t c) {
  return IsAsciiUpper(c) || IsAsciiLower(c) || (c >= '0' && c <= '9') || c > 0x7F;
}

std::string MapCase(const std::string& s, uint32_t (*f)(uint32_t)) {
  std::vector<uint32_t> cps = DecodeUtf8(s);
  for (auto& c : cps) c = f(c);
  return EncodeUtf8(cps);
}

// str.strip/lstrip/rstrip; chars null means whitespace.
std::string Strip(const std::string& s, const Value& chars, bool left, bool right) {
  std::vector<uint32_t> cps = DecodeUtf8(s);
  std::vector<uint32_t> set;
  const bool ws = chars.is_undefined() || chars.is_none();
  if (!ws) set = DecodeUtf8(chars.str());
  auto strip = [&](uint32_t c) {
    return ws ? IsPySpace(c) : std::find(set.begin(), set.end(), c) != set.end();
  };
  size_t b = 0, e = cps.size();
  if (left)
    while (b < e && strip(cps[b])) ++b;
  if (right)
    while (e > b && strip(cps[e - 1])) --e;
  return EncodeUtf8(std::vector<uint32_t>(cps.begin() + b, cps.begin() + e));
}

std::string Replace(const std::string& s, const std::string& from, const std::string& to,
                    int64_t count, Renderer* r) {
  std::string out;
  if (from.empty()) {
    std::vector<uint32_t> cps = DecodeUtf8(s);
    int64_t done = 0;
    for (size_t i = 0; i <= cps.size(); ++i) {
      if (count < 0 || done < count) {
        out += to;
        ++done;
      }
      if (i < cps.size()) AppendUtf8(cps[i], &out);
      r->CheckSize(out.size());
    }
    return out;
  }
  size_t pos = 0;
  int64_t done = 0;
  while (count < 0 || done < count) {
    const size_t f = s.find(from, pos);
    if (f == std::string::npos) break;
    out.append(s, pos, f - pos);
    out += to;
    r->CheckSize(out.size());
    pos = f + from.size();
    ++done;
  }
  out.append(s, pos, std::string::npos);
  r->CheckSize(out.size());
  return out;
}

Value Split(const std::string& s, const Value& sep, int64_t maxsplit) {
  Value::List out;
  if (sep.is_undefined() || sep.is_none()) {
    std::vector<uint32_t> cps = DecodeUtf8(s);
    size_t i = 0;
    while (true) {
      while (i < cps.size() && IsPySpace(cps[i])) ++i;
      if (i >= cps.size()) break;
      if (maxsplit >= 0 && static_cast<int64_t>(out.size()) == maxsplit) {
        out.push_back(Value::String(EncodeUtf8({cps.begin() + i, cps.end()})));
        break;
      }
      size_t j = i;
      while (j < cps.size() && !IsPySpace(cps[j])) ++j;
      out.push_back(Value::String(EncodeUtf8({cps.begin() + i, cps.begin() + j})));
      i = j;
    }
    return Value::MakeList(std::move(out));
  }
  const std::string& d = sep.str();
  if (d.empty()) TypeFail("empty separator");
  size_t pos = 0;
  while (maxsplit < 0 || static_cast<int64_t>(out.size()) < maxsplit) {
    const size_t f = s.find(d, pos);
    if (f == std::string::npos) break;
    out.push_back(Value::String(s.substr(pos, f - pos)));
    pos = f + d.size();
  }
  out.push_back(Value::String(s.substr(pos)));
  return Value::MakeList(std::move(out));
}

// transformers' tojson: json.dumps(x, ensure_ascii=False, indent=None,
// separators=None, sort_keys=False), arguments in that order.
struct JsonOptions {
  bool ascii = false;
  bool has_indent = false;
  std::string unit;  // one level of indentation
  std::string item_sep = ", ";
  std::string key_sep = ": ";
  bool sort_keys = false;
};

void JsonString(const std::string& s, const JsonOptions& o, std::string* out) {
  *out += '"';
  for (uint32_t c : DecodeUtf8(s)) {
    switch (c) {
      case '"':
        *out += "\\\"";
        break;
      case '\\':
        *out += "\\\\";
        break;
      case '\n':
        *out += "\\n";
        break;
      case '\r':
        *out += "\\r";
        break;
      case '\t':
        *out += "\\t";
        break;
      case '\b':
        *out += "\\b";
        break;
      case '\f':
        *out += "\\f";
        break;
      default: {
        char buf[16];
        if (c < 0x20 || (o.ascii && c >= 0x7F && c < 0x10000)) {
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          *out += buf;
        } else if (o.ascii && c >= 0x10000) {
          const uint32_t v = c - 0x10000;
          std::snprintf(buf, sizeof(buf), "\\u%04x\\u%04x", 0xD800 + (v >> 10),
                        0xDC00 + (v & 0x3FF));
          *out += buf;
        } else {
          AppendUtf8(c, out);
        }
      }
    }
  }
  *out += '"';
}

void ToJson(const Value& v, const JsonOptions& o, int level, std::string* out, Renderer* r) {
  r->Step();
  r->CheckSize(out->size() + o.unit.size() * (level + 1));
  auto repeat = [&](int n) {
    std::string s = "\n";
    for (int k = 0; k < n; ++k) s += o.unit;
    return s;
  };
  const std::string nl = o.has_indent ? repeat(level + 1) : "";
  const std::string nl_end = o.has_indent ? repeat(level) : "";
  const std::string& item_sep = o.item_sep;
  switch (v.type()) {
    case Value::Type::kNone:
      *out += "null";
      return;
    case Value::Type::kBool:
      *out += v.as_bool() ? "true" : "false";
      return;
    case Value::Type::kInt:
      *out += std::to_string(v.as_int());
      return;
    case Value::Type::kFloat: {
      const double f = v.as_float();
      *out += std::isnan(f)   ? "NaN"
              : std::isinf(f) ? (f < 0 ? "-Infinity" : "Infinity")
                              : FormatFloat(f);
      return;
    }
    case Value::Type::kString:
      JsonString(v.str(), o, out);
      return;
    case Value::Type::kList: {
      if (v.list().empty()) {
        *out += "[]";
        return;
      }
      *out += "[";
      for (size_t i = 0; i < v.list().size(); ++i) {
        *out += i ? item_sep + nl : nl;
        ToJson(v.list()[i], o, level + 1, out, r);
      }
      *out += nl_end + "]";
      return;
    }
    case Value::Type::kDict: {
      if (v.dict().size() == 0) {
        *out += "{}";
        return;
      }
      std::vector<const std::pair<std::string, Value>*> items;
      for (const auto& kv : v.dict().items()) items.push_back(&kv);
      if (o.sort_keys)
        std::sort(items.begin(), items.end(), [](auto* a, auto* b) { return a->first < b->first; });
      *out += "{";
      for (size_t i = 0; i < items.size(); ++i) {
        *out += i ? item_sep + nl : nl;
        JsonString(items[i]->first, o, out);
        *out += o.key_sep;
        ToJson(items[i]->second, o, level + 1, out, r);
      }
      *out += nl_end + "}";
      return;
    }
    default:
      r->Error("Object of type " + v.TypeName() + " is not JSON serializable");
  }
}

std::string Escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&#34;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

// Python's float(str) for the forms numbers take (no hex, which strtod reads).
bool ParsePyFloat(const std::string& t, double* out) {
  if (t.empty()) return false;
  std::string low = MapCase(t, Lower);
  const size_t skip = low[0] == '+' || low[0] == '-' ? 1 : 0;
  const std::string word = low.substr(skip);
  if (word != "inf" && word != "infinity" && word != "nan") {
    for (char c : low)
      if (!((c >= '0' && c <= '9') || c == '+' || c == '-' || c == '.' || c == 'e')) return false;
  }
  char* end = nullptr;
  *out = std::strtod(t.c_str(), &end);
  return *end == 0;
}

int64_t ToInt(const Value& v, Renderer* r) {
  if (!v.is_int() && !v.is_bool()) r->Error("an integer is required, got " + v.TypeName());
  return v.as_int();
}

}  // namespace

bool IsKnownFilter(const std::string& name) { return Filters().count(name) > 0; }
bool IsKnownTest(const std::string& name) { return Tests().count(name) > 0; }

Value Renderer::GetAttr(const Value& obj, const std::string& name) {
  static const std::set<std::string> kStrMethods = {
      "strip", "lstrip", "rstrip",     "split",   "startswith", "endswith", "upper",
      "lower", "title",  "capitalize", "replace", "find",       "count",    "join"};
  static const std::set<std::string> kDictMethods = {"items", "keys", "values", "get"};
  static const std::set<std::string> kUnsafe = {
      "append",  "extend", "insert",     "pop",     "remove",      "clear",      "sort",
      "reverse", "update", "setdefault", "popitem", "__setitem__", "__delitem__"};
  // The sandbox hides underscore attributes (__class__, ...) as undefined.
  if (!name.empty() && name[0] == '_')
    return Value::Undefined("access to attribute '" + name + "' is unsafe.");
  if (obj.is_undefined()) Error(obj.undefined_hint());
  auto bound = [&](const std::string& n) {
    return Value::MakeCallable(Callable{n, std::make_shared<const Value>(obj), nullptr});
  };
  if (obj.is_string() && kStrMethods.count(name)) return bound(name);
  if (obj.is_dict() && kDictMethods.count(name)) return bound(name);
  // Mutating methods print as undefined and fail when called, as the
  // ImmutableSandboxedEnvironment makes them.
  if ((obj.is_dict() || obj.is_list()) && kUnsafe.count(name))
    return Value::Undefined("access to attribute '" + name + "' of '" + obj.TypeName() +
                            "' object is unsafe.");
  if (obj.is_dict()) {
    if (const Value* v = obj.dict().Find(name)) return *v;
  } else if (obj.is_namespace()) {
    if (const Value* v = obj.ns().Find(name)) return *v;
  }
  return Value::Undefined("'" + obj.TypeName() + " object' has no attribute '" + name + "'");
}

Value Renderer::GetItem(const Value& obj, const Value& key) {
  if (obj.is_undefined()) Error(obj.undefined_hint());
  if (obj.is_dict() && key.is_string()) {
    if (const Value* v = obj.dict().Find(key.str())) return *v;
    return Value::Undefined("'dict object' has no attribute '" + key.str() + "'");
  }
  if ((obj.is_list() || obj.is_string()) && (key.is_int() || key.is_bool())) {
    int64_t i = key.as_int();
    if (obj.is_list()) {
      const int64_t n = obj.list().size();
      if (i < 0) i += n;
      if (i < 0 || i >= n)
        return Value::Undefined("'" + obj.TypeName() + " object' has no element " +
                                std::to_string(key.as_int()));
      return obj.list()[i];
    }
    std::vector<uint32_t> cps = DecodeUtf8(obj.str());
    const int64_t n = cps.size();
    if (i < 0) i += n;
    if (i < 0 || i >= n)
      return Value::Undefined("'" + obj.TypeName() + " object' has no element " +
                              std::to_string(key.as_int()));
    std::string s;
    AppendUtf8(cps[i], &s);
    return Value::String(s);
  }
  if (key.is_string()) return GetAttr(obj, key.str());
  return Value::Undefined("'" + obj.TypeName() + " object' has no element " + key.Repr());
}

std::vector<Value> Renderer::Iterate(const Value& v) {
  std::vector<Value> out;
  if (v.is_undefined()) return out;
  if (v.is_list()) {
    Step(v.list().size());
    return v.list();
  }
  if (v.is_dict()) {
    for (const auto& kv : v.dict().items()) out.push_back(Value::String(kv.first));
    Step(out.size());
    return out;
  }
  if (v.is_string()) {
    CheckSize(v.str().size() * sizeof(Value));  // one Value per character
    for (uint32_t c : DecodeUtf8(v.str())) {
      std::string s;
      AppendUtf8(c, &s);
      out.push_back(Value::String(std::move(s)));
    }
    Step(out.size());
    return out;
  }
  Error("'" + v.TypeName() + "' object is not iterable");
}

Value Renderer::Call(const Value& f, std::vector<Value> args, Kwargs kwargs) {
  if (f.is_undefined()) Error(f.undefined_hint());
  if (!f.is_callable()) Error("'" + f.TypeName() + "' object is not callable");
  const Callable& c = f.callable();
  if (c.macro) return CallMacro(*c.macro, std::move(args), std::move(kwargs));
  if (c.self) return CallMethod(c.name, *c.self, args, kwargs);
  return CallGlobal(c.name, args, kwargs);
}

Value Renderer::CallGlobal(const std::string& name, std::vector<Value>& args, Kwargs& kwargs) {
  if (name == "raise_exception") {
    Fail(StatusCode::kInvalidArgument,
         "template raised an exception: " +
             Arg(args, kwargs, 0, "message").Str(limits_.max_output_bytes));
  }
  if (name == "strftime_now") {
    Value fmt = Arg(args, kwargs, 0, "format");
    if (!fmt.is_string()) Error("strftime_now() takes a format string");
    std::time_t t = std::time(nullptr);
    std::tm tm;
    localtime_r(&t, &tm);
    char buf[512];
    const size_t n = std::strftime(buf, sizeof(buf), fmt.str().c_str(), &tm);
    if (n == 0 && !fmt.str().empty()) Error("strftime_now() format is empty or too long");
    return Value::String(std::string(buf, n));
  }
  if (name == "range") {
    if (args.empty() || args.size() > 3) Error("range expected 1 to 3 arguments");
    int64_t start = 0, stop, step = 1;
    if (args.size() == 1) {
      stop = ToInt(args[0], this);
    } else {
      start = ToInt(args[0], this);
      stop = ToInt(args[1], this);
      if (args.size() == 3) step = ToInt(args[2], this);
    }
    if (step == 0) Error("range() arg 3 must not be zero");
    // jinja2's sandbox refuses ranges over MAX_RANGE (100000) items too.
    const long double n = step > 0 ? std::ceil((static_cast<long double>(stop) - start) / step)
                                   : std::ceil((static_cast<long double>(start) - stop) / -step);
    if (n > 100000)
      Fail(StatusCode::kResourceExhausted,
           "line " + std::to_string(line_) + ": range() of more than 100000 items");
    Value::List l;
    for (int64_t i = 0; i < static_cast<int64_t>(n); ++i) l.push_back(Value::Int(start + i * step));
    Step(l.size());
    return Value::MakeList(std::move(l));
  }
  if (name == "namespace" || name == "dict") {
    auto d = std::make_shared<Dict>();
    if (!args.empty()) {
      if (args.size() > 1 || !args[0].is_dict()) Error(name + "() takes a dict and keywords");
      for (const auto& [k, v] : args[0].dict().items()) d->Set(k, v);
    }
    for (auto& [k, v] : kwargs) d->Set(k, v);
    return name == "dict" ? Value::MakeDict(d) : Value::MakeNamespace(d);
  }
  Error("'" + name + "' is not callable");
}

Value Renderer::CallMethod(const std::string& name, const Value& self, std::vector<Value>& args,
                           Kwargs& kwargs) {
  if (name == "cycle" && self.is_int()) {  // loop.cycle(a, b, ...)
    if (args.empty()) Error("no items for cycling given");
    return args[self.as_int() % args.size()];
  }
  if (self.is_dict()) {
    const Dict& d = self.dict();
    if (name == "get") {
      const Value key = Arg(args, kwargs, 0, "key");
      const Value* v = key.is_string() ? d.Find(key.str()) : nullptr;
      return v ? *v : Arg(args, kwargs, 1, "default", Value::None());
    }
    Value::List out;
    for (const auto& [k, v] : d.items()) {
      if (name == "items")
        out.push_back(Value::MakeList({Value::String(k), v}, true));
      else if (name == "keys")
        out.push_back(Value::String(k));
      else
        out.push_back(v);
    }
    Step(out.size());
    return Value::MakeList(std::move(out));
  }
  const std::string& s = self.str();
  Step(1 + s.size() / 64);
  if (name == "strip" || name == "lstrip" || name == "rstrip")
    return Value::String(
        Strip(s, Arg(args, kwargs, 0, "chars"), name != "rstrip", name != "lstrip"));
  if (name == "upper") return Value::String(MapCase(s, Upper));
  if (name == "lower") return Value::String(MapCase(s, Lower));
  if (name == "split") {
    Value sep = Arg(args, kwargs, 0, "sep");
    if (!sep.is_undefined() && !sep.is_none() && !sep.is_string())
      Error("split() separator must be a string");
    return Split(s, sep, ToInt(Arg(args, kwargs, 1, "maxsplit", Value::Int(-1)), this));
  }
  if (name == "startswith" || name == "endswith") {
    Value p = Arg(args, kwargs, 0, "prefix");
    std::vector<Value> options = p.is_tuple() ? p.list() : std::vector<Value>{p};
    for (const auto& o : options) {
      if (!o.is_string()) Error(name + " first arg must be str or a tuple of str");
      const std::string& x = o.str();
      if (x.size() > s.size()) continue;
      if (name == "startswith" ? s.compare(0, x.size(), x) == 0
                               : s.compare(s.size() - x.size(), x.size(), x) == 0)
        return Value::Bool(true);
    }
    return Value::Bool(false);
  }
  if (name == "replace") {
    Value a = Arg(args, kwargs, 0, "old"), b = Arg(args, kwargs, 1, "new");
    if (!a.is_string() || !b.is_string()) Error("replace() arguments must be str");
    return Value::String(Replace(s, a.str(), b.str(),
                                 ToInt(Arg(args, kwargs, 2, "count", Value::Int(-1)), this), this));
  }
  if (name == "title" || name == "capitalize") return Filter(name, self, {}, {});
  if (name == "join") {
    std::string out;
    bool first = true;
    for (const auto& x : Iterate(Arg(args, kwargs, 0, "iterable"))) {
      if (!x.is_string()) Error("sequence item: expected str instance, " + x.TypeName() + " found");
      if (!first) out += s;
      first = false;
      out += x.str();
      CheckSize(out.size());
    }
    return Value::String(std::move(out));
  }
  if (name == "find" || name == "count") {
    Value a = Arg(args, kwargs, 0, "sub");
    if (!a.is_string()) Error(name + "() argument must be str");
    if (name == "find") {
      const size_t f = s.find(a.str());
      if (f == std::string::npos) return Value::Int(-1);
      return Value::Int(DecodeUtf8(s.substr(0, f)).size());
    }
    if (a.str().empty()) return Value::Int(DecodeUtf8(s).size() + 1);
    int64_t n = 0;
    for (size_t f = s.find(a.str()); f != std::string::npos;
         f = s.find(a.str(), f + a.str().size()))
      ++n;
    return Value::Int(n);
  }
  Error("unsupported method '" + name + "'");
}

bool Renderer::Test(const std::string& name, const Value& v, const std::vector<Value>& args) {
  auto arg = [&]() -> const Value& {
    if (args.empty()) Error("test '" + name + "' takes an argument");
    return args[0];
  };
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "none") return v.is_none();
  if (name == "string") return v.is_string();
  if (name == "number") return v.is_number();
  if (name == "integer") return v.is_int();
  if (name == "float") return v.is_float();
  if (name == "boolean") return v.is_bool();
  if (name == "true") return v.is_bool() && v.as_bool();
  if (name == "false") return v.is_bool() && !v.as_bool();
  if (name == "mapping") return v.is_dict();
  if (name == "iterable") return v.is_string() || v.is_list() || v.is_dict() || v.is_undefined();
  if (name == "sequence") return v.is_string() || v.is_list() || v.is_dict() || v.is_undefined();
  if (name == "callable") return v.is_callable();
  if (name == "lower") return v.is_string() && MapCase(v.str(), Lower) == v.str();
  if (name == "upper") return v.is_string() && MapCase(v.str(), Upper) == v.str();
  if (name == "even" || name == "odd") {
    const int64_t i = ToInt(v, this);
    return ((i % 2) != 0) == (name == "odd");
  }
  if (name == "divisibleby") {
    const int64_t d = ToInt(arg(), this);
    if (d == 0) Error("integer division or modulo by zero");
    return d == -1 || ToInt(v, this) % d == 0;
  }
  if (name == "eq" || name == "equalto" || name == "==") return Eq(v, arg());
  if (name == "ne") return !Eq(v, arg());
  if (name == "sameas") return Eq(v, arg()) && (v.is_none() || v.is_bool());
  if (name == "lt" || name == "lessthan") return Less(v, arg());
  if (name == "gt" || name == "greaterthan") return Less(arg(), v);
  if (name == "le") return !Less(arg(), v);
  if (name == "ge") return !Less(v, arg());
  if (name == "in") return Compare("in", v, arg());
  Error("No test named '" + name + "'.");
}

Value Renderer::Filter(const std::string& name, const Value& v, std::vector<Value> args,
                       Kwargs kwargs) {
  auto need_str = [&]() -> std::string {
    if (v.is_undefined() && name != "string") return "";
    return v.Str(limits_.max_output_bytes);
  };
  auto need_list = [&]() { return Iterate(v); };
  if (name == "default" || name == "d") {
    const bool boolean = Arg(args, kwargs, 1, "boolean", Value::Bool(false)).Truthy();
    if (v.is_undefined() || (boolean && !v.Truthy()))
      return Arg(args, kwargs, 0, "default_value", Value::String(""));
    return v;
  }
  if (name == "safe" || name == "string") {
    if (v.is_undefined() && name == "safe") return Value::String("");
    return Value::String(v.Str(limits_.max_output_bytes));
  }
  if (name == "escape" || name == "e")
    return Value::String(Escape(v.Str(limits_.max_output_bytes)));
  if (name == "trim")
    return Value::String(Strip(need_str(), Arg(args, kwargs, 0, "chars"), true, true));
  if (name == "upper") return Value::String(MapCase(need_str(), Upper));
  if (name == "lower") return Value::String(MapCase(need_str(), Lower));
  if (name == "capitalize") {
    std::vector<uint32_t> cps = DecodeUtf8(need_str());
    for (size_t i = 0; i < cps.size(); ++i) cps[i] = i == 0 ? Upper(cps[i]) : Lower(cps[i]);
    return Value::String(EncodeUtf8(cps));
  }
  if (name == "title") {
    // jinja2 splits words at runs of -, whitespace and ({[<.
    std::vector<uint32_t> cps = DecodeUtf8(need_str());
    bool start = true;
    for (auto& c : cps) {
      const bool sep = c == '-' || IsPySpace(c) || c == '(' || c == '{' || c == '[' || c == '<';
      if (sep) {
        start = true;
        continue;
      }
      c = start ? Upper(c) : Lower(c);
      start = false;
    }
    return Value::String(EncodeUtf8(cps));
  }
  if (name == "length" || name == "count") {
    if (v.is_string()) return Value::Int(DecodeUtf8(v.str()).size());
    if (v.is_list()) return Value::Int(v.list().size());
    if (v.is_dict()) return Value::Int(v.dict().size());
    if (v.is_undefined()) return Value::Int(0);
    Error("object of type '" + v.TypeName() + "' has no len()");
  }
  if (name == "wordcount") {
    int64_t n = 0;
    bool in = false;
    for (uint32_t c : DecodeUtf8(need_str())) {
      const bool w = IsAlnum(c) || c == '_';
      if (w && !in) ++n;
      in = w;
    }
    return Value::Int(n);
  }
  if (name == "replace") {
    Value a = Arg(args, kwargs, 0, "old"), b = Arg(args, kwargs, 1, "new");
    return Value::String(Replace(need_str(), a.Str(limits_.max_output_bytes),
                                 b.Str(limits_.max_output_bytes),
                                 ToInt(Arg(args, kwargs, 2, "count", Value::Int(-1)), this), this));
  }
  if (name == "indent") {
    Value w = Arg(args, kwargs, 0, "width", Value::Int(4));
    const std::string ind =
        w.is_string() ? w.str() : std::string(std::max<int64_t>(0, ToInt(w, this)), ' ');
    CheckSize(ind.size());
    const bool first = Arg(args, kwargs, 1, "first", Value::Bool(false)).Truthy();
    const bool blank = Arg(args, kwargs, 2, "blank", Value::Bool(false)).Truthy();
    std::vector<std::string> lines;
    const std::string s = need_str() + "\n";  // as jinja2, so that "x\n" keeps its newline
    size_t p = 0;
    while (p < s.size()) {
      size_t e = s.find_first_of("\r\n", p);
      if (e == std::string::npos) e = s.size();
      lines.push_back(s.substr(p, e - p));
      p = e;
      if (p < s.size() && s[p] == '\r' && p + 1 < s.size() && s[p + 1] == '\n') ++p;
      if (p < s.size()) ++p;
    }
    std::string rv = lines[0];
    for (size_t i = 1; i < lines.size(); ++i) {
      rv += "\n";
      if (blank || !lines[i].empty()) rv += ind;
      rv += lines[i];
      CheckSize(rv.size());
    }
    if (first) rv = ind + rv;
    return Value::String(rv);
  }
  if (name == "tojson") {
    JsonOptions o;
    o.ascii = Arg(args, kwargs, 0, "ensure_ascii", Value::Bool(false)).Truthy();
    const Value ind = Arg(args, kwargs, 1, "indent", Value::None());
    if (!ind.is_none() && !ind.is_undefined()) {
      o.has_indent = true;
      o.item_sep = ",";
      o.unit = ind.is_string() ? ind.str()
                               : std::string(std::clamp<int64_t>(ToInt(ind, this), 0, 1024), ' ');
    }
    const Value sep = Arg(args, kwargs, 2, "separators", Value::None());
    if (!sep.is_none() && !sep.is_undefined()) {
      if (!sep.is_list() || sep.list().size() != 2 || !sep.list()[0].is_string() ||
          !sep.list()[1].is_string())
        Error("tojson separators must be an (item_separator, key_separator) pair");
      o.item_sep = sep.list()[0].str();
      o.key_sep = sep.list()[1].str();
    }
    o.sort_keys = Arg(args, kwargs, 3, "sort_keys", Value::Bool(false)).Truthy();
    std::string out;
    ToJson(v, o, 0, &out, this);
    CheckSize(out.size());
    return Value::String(std::move(out));
  }
  if (name == "int") {
    const Value dflt = Arg(args, kwargs, 0, "default", Value::Int(0));
    if (v.is_int() || v.is_bool()) return Value::Int(v.as_int());
    if (v.is_float()) {
      if (!std::isfinite(v.as_float()) || std::fabs(v.as_float()) >= 9.2e18) return dflt;
      return Value::Int(static_cast<int64_t>(v.as_float()));
    }
    if (v.is_string()) {
      std::string t = Strip(v.str(), Value(), true, true);
      char* end = nullptr;
      errno = 0;
      const long long i = std::strtoll(t.c_str(), &end, 10);
      if (!t.empty() && *end == 0 && errno == 0) return Value::Int(i);
      double f;
      if (ParsePyFloat(t, &f) && std::isfinite(f) && std::fabs(f) < 9.2e18)
        return Value::Int(static_cast<int64_t>(f));
    }
    return dflt;
  }
  if (name == "float") {
    const Value dflt = Arg(args, kwargs, 0, "default", Value::Float(0));
    if (v.is_number()) return Value::Float(v.as_float());
    if (v.is_string()) {
      std::string t = Strip(v.str(), Value(), true, true);
      double f;
      if (ParsePyFloat(t, &f)) return Value::Float(f);
    }
    return dflt;
  }
  if (name == "abs") {
    if (v.is_float()) return Value::Float(std::fabs(v.as_float()));
    const int64_t i = ToInt(v, this);
    if (i == std::numeric_limits<int64_t>::min())
      Error("integer overflow: the result is beyond int64");
    return Value::Int(i < 0 ? -i : i);
  }
  if (name == "round") {
    const int64_t prec = ToInt(Arg(args, kwargs, 0, "precision", Value::Int(0)), this);
    const std::string method =
        Arg(args, kwargs, 1, "method", Value::String("common")).Str(limits_.max_output_bytes);
    if (!v.is_number()) Error("round() needs a number");
    if (method == "common") {
      if (!v.is_float()) return Value::Int(v.as_int());
      if (prec < 0 || prec > 300) Error("round() precision out of range");
      char buf[400];
      std::snprintf(buf, sizeof(buf), "%.*f", static_cast<int>(prec), v.as_float());
      return Value::Float(std::strtod(buf, nullptr));
    }
    const double m = std::pow(10.0, prec);
    const double x = v.as_float() * m;
    if (method == "floor") return Value::Float(std::floor(x) / m);
    if (method == "ceil") return Value::Float(std::ceil(x) / m);
    Error("method must be common, ceil or floor");
  }
  if (name == "first" || name == "last") {
    if (v.is_list()) {
      if (v.list().empty()) return Value::Undefined("No first item, sequence was empty.");
      return name == "first" ? v.list().front() : v.list().back();
    }
    std::vector<Value> items = need_list();
    if (items.empty()) return Value::Undefined("No " + name + " item, sequence was empty.");
    return name == "first" ? items.front() : items.back();
  }
  if (name == "list") return Value::MakeList(need_list());
  if (name == "items") {
    if (v.is_undefined()) return Value::MakeList({});
    if (!v.is_dict()) Error("items filter needs a mapping");
    std::vector<Value> a;
    Kwargs k;
    return CallMethod("items", v, a, k);
  }
  if (name == "reverse") {
    if (v.is_string()) {
      std::vector<uint32_t> cps = DecodeUtf8(v.str());
      std::reverse(cps.begin(), cps.end());
      return Value::String(EncodeUtf8(cps));
    }
    std::vector<Value> items = need_list();
    std::reverse(items.begin(), items.end());
    return Value::MakeList(std::move(items));
  }
  // Attribute paths as jinja2's make_attrgetter: "a.b" and "0".
  auto attr_of = [&](const Value& item, const Value& attr) {
    if (!attr.is_string()) return GetItem(item, attr);
    Value cur = item;
    size_t p = 0;
    const std::string& path = attr.str();
    while (true) {
      const size_t dot = path.find('.', p);
      std::string part = path.substr(p, dot == std::string::npos ? std::string::npos : dot - p);
      const bool digits =
          !part.empty() && std::all_of(part.begin(), part.end(), ::isdigit) && part.size() < 18;
      cur = digits ? GetItem(cur, Value::Int(std::stoll(part))) : GetItem(cur, Value::String(part));
      if (dot == std::string::npos) return cur;
      p = dot + 1;
    }
  };
  // Case-folded key for sort/unique/dictsort unless case_sensitive.
  auto key_of = [&](const Value& x, bool cs) {
    return !cs && x.is_string() ? Value::String(MapCase(x.str(), Lower)) : x;
  };
  if (name == "join") {
    const std::string sep =
        Arg(args, kwargs, 0, "d", Value::String("")).Str(limits_.max_output_bytes);
    const Value attr = Arg(args, kwargs, 1, "attribute", Value());
    std::string out;
    bool first = true;
    for (const auto& x : need_list()) {
      if (!first) out += sep;
      first = false;
      out += (attr.is_undefined() ? x : attr_of(x, attr)).Str(limits_.max_output_bytes);
      CheckSize(out.size());
    }
    return Value::String(std::move(out));
  }
  if (name == "map") {
    std::vector<Value> out;
    const Value* attr = Kwarg(kwargs, "attribute");
    for (const auto& x : need_list()) {
      Step();
      if (attr) {
        Value r = attr_of(x, *attr);
        const Value* d = Kwarg(kwargs, "default");
        out.push_back(r.is_undefined() && d ? *d : r);
      } else {
        if (args.empty() || !args[0].is_string()) Error("map() needs a filter name or attribute=");
        const std::string f = args[0].str();
        if (!IsKnownFilter(f)) Error("No filter named '" + f + "'.");
        out.push_back(Filter(f, x, std::vector<Value>(args.begin() + 1, args.end()), {}));
      }
    }
    return Value::MakeList(std::move(out));
  }
  if (name == "select" || name == "reject" || name == "selectattr" || name == "rejectattr") {
    const bool by_attr = name.size() > 6;
    const bool want = name[0] == 's';
    size_t ti = by_attr ? 1 : 0;
    std::vector<Value> out;
    for (const auto& x : need_list()) {
      Step();
      Value subject = by_attr ? attr_of(x, Arg(args, kwargs, 0, "attribute")) : x;
      bool ok;
      if (args.size() > ti) {
        const std::string t = args[ti].Str(limits_.max_output_bytes);
        if (!IsKnownTest(t)) Error("No test named '" + t + "'.");
        ok = Test(t, subject, std::vector<Value>(args.begin() + ti + 1, args.end()));
      } else {
        ok = subject.Truthy();
      }
      if (ok == want) out.push_back(x);
    }
    return Value::MakeList(std::move(out));
  }
  if (name == "sort" || name == "unique" || name == "max" || name == "min") {
    const bool cs = Kwarg(kwargs, "case_sensitive")     ? Kwarg(kwargs, "case_sensitive")->Truthy()
                    : name == "sort" && args.size() > 1 ? args[1].Truthy()
                                                        : false;
    const bool rev = name == "sort" && Arg(args, kwargs, 0, "reverse", Value::Bool(false)).Truthy();
    const Value* attr = Kwarg(kwargs, "attribute");
    std::vector<Value> items = need_list();
    Step(items.size() * 8);
    auto key = [&](const Value& x) { return key_of(attr ? attr_of(x, *attr) : x, cs); };
    if (name == "unique") {
      std::vector<Value> out, seen;
      for (const auto& x : items) {
        Value k = key(x);
        bool dup = false;
        for (const auto& s : seen) {
          Step();
          dup = dup || Eq(s, k);
        }
        if (!dup) {
          seen.push_back(k);
          out.push_back(x);
        }
      }
      return Value::MakeList(std::move(out));
    }
    if (name == "max" || name == "min") {
      if (items.empty()) return Value::Undefined("No aggregated item, sequence was empty.");
      Value best = items[0];
      for (const auto& x : items)
        if (name == "max" ? Less(key(best), key(x)) : Less(key(x), key(best))) best = x;
      return best;
    }
    std::stable_sort(items.begin(), items.end(), [&](const Value& a, const Value& b) {
      return rev ? Less(key(b), key(a)) : Less(key(a), key(b));
    });
    return Value::MakeList(std::move(items));
  }
  if (name == "dictsort") {
    if (!v.is_dict()) Error("dictsort needs a mapping");
    const bool cs = Arg(args, kwargs, 0, "case_sensitive", Value::Bool(false)).Truthy();
    const bool by_value =
        Arg(args, kwargs, 1, "by", Value::String("key")).Str(limits_.max_output_bytes) == "value";
    const bool rev = Arg(args, kwargs, 2, "reverse", Value::Bool(false)).Truthy();
    std::vector<Value> a;
    Kwargs k;
    std::vector<Value> items = CallMethod("items", v, a, k).list();
    std::stable_sort(items.begin(), items.end(), [&](const Value& x, const Value& y) {
      const Value& kx = key_of(x.list()[by_value], cs);
      const Value& ky = key_of(y.list()[by_value], cs);
      return rev ? Less(ky, kx) : Less(kx, ky);
    });
    return Value::MakeList(std::move(items));
  }
  if (name == "sum") {
    Value total = Arg(args, kwargs, 1, "start", Value::Int(0));
    const Value* attr = Kwarg(kwargs, "attribute");
    for (const auto& x : need_list()) total = EvalBinary("+", total, attr ? attr_of(x, *attr) : x);
    return total;
  }
  Error("No filter named '" + name + "'.");
}

}  // namespace quantd::io::chat_template
