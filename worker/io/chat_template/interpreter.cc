#include "worker/io/chat_template/interpreter.h"

#include <cmath>
#include <limits>

namespace quantd::io::chat_template {

Renderer::Depth::Depth(Renderer* r) : r_(r) {
  // Expressions, statements and macro calls together; 4x max_depth leaves
  // room for a legal template's expressions inside its blocks while keeping
  // the C++ stack small.
  if (++r_->depth_ > 4 * r_->limits_.max_depth)
    Fail(StatusCode::kResourceExhausted, "line " + std::to_string(r_->line_) +
                                             ": rendering nests deeper than " +
                                             std::to_string(4 * r_->limits_.max_depth) + " levels");
}

Renderer::Renderer(const ChatTemplateLimits& limits, const Dict& context) : limits_(limits) {
  for (const auto& [k, v] : context.items()) root_.vars[k] = v;
}

void Renderer::Step(uint64_t n) {
  steps_ += n;
  if (steps_ > limits_.max_steps)
    Fail(StatusCode::kResourceExhausted,
         "rendering took more than " + std::to_string(limits_.max_steps) + " steps");
  if (poller_.Due()) Fail(StatusCode::kCancelled, "");
}

void Renderer::CheckSize(size_t bytes) const {
  if (bytes > limits_.max_output_bytes)
    Fail(StatusCode::kResourceExhausted, "line " + std::to_string(line_) + ": a value of " +
                                             std::to_string(bytes) + " bytes is over the " +
                                             std::to_string(limits_.max_output_bytes) +
                                             "-byte output limit");
}

void Renderer::Error(const std::string& msg) const {
  Fail(StatusCode::kInvalidArgument, "line " + std::to_string(line_) + ": " + msg);
}

void Renderer::Emit(const std::string& s) {
  CheckSize(out_->size() + s.size());
  out_->append(s);
}

std::string Renderer::Render(const Body& body) {
  std::string out;
  out_ = &out;
  Exec(body, &root_);
  return out;
}

Renderer::Flow Renderer::Exec(const Body& body, Frame* frame) {
  for (const auto& s : body) {
    const Flow f = ExecOne(*s, frame);
    if (f != Flow::kNormal) return f;
  }
  return Flow::kNormal;
}

void Renderer::Assign(const Stmt& s, Frame* frame, Value v) {
  if (!s.attr.empty()) {
    Value target = Lookup(s.targets[0], frame);
    if (!target.is_namespace()) Error("can only assign attributes of a namespace()");
    if (v.HoldsNamespace()) Error("a namespace attribute cannot hold a namespace");
    target.ns().Set(s.attr, std::move(v));
    return;
  }
  if (s.targets.size() == 1) {
    frame->vars[s.targets[0]] = std::move(v);
    return;
  }
  std::vector<Value> items = Iterate(v);
  if (items.size() != s.targets.size())
    Error("cannot unpack " + std::to_string(items.size()) + " values into " +
          std::to_string(s.targets.size()) + " names");
  for (size_t i = 0; i < items.size(); ++i) frame->vars[s.targets[i]] = std::move(items[i]);
}

Renderer::Flow Renderer::ExecOne(const Stmt& s, Frame* frame) {
  line_ = s.line;
  Step();
  Depth depth(this);
  switch (s.kind) {
    case StmtKind::kText:
      Emit(s.text);
      return Flow::kNormal;
    case StmtKind::kOutput: {
      Value v = Eval(*s.expr, frame);
      Emit(v.Str(limits_.max_output_bytes));
      return Flow::kNormal;
    }
    case StmtKind::kIf:
      for (const auto& [cond, body] : s.branches) {
        if (!cond || Eval(*cond, frame).Truthy()) return Exec(body, frame);
      }
      return Flow::kNormal;
    case StmtKind::kFor:
      ExecFor(s, frame);
      return Flow::kNormal;
    case StmtKind::kSet:
      Assign(s, frame, Eval(*s.expr, frame));
      return Flow::kNormal;
    case StmtKind::kSetBlock: {
      std::string buf;
      std::string* saved = out_;
      out_ = &buf;
      Exec(s.body, frame);
      out_ = saved;
      Assign(s, frame, Value::String(std::move(buf)));
      return Flow::kNormal;
    }
    case StmtKind::kMacro:
      frame->vars[s.name] = Value::MakeCallable(Callable{s.name, nullptr, &s});
      return Flow::kNormal;
    case StmtKind::kBreak:
      return Flow::kBreak;
    case StmtKind::kContinue:
      return Flow::kContinue;
  }
  return Flow::kNormal;
}

void Renderer::ExecFor(const Stmt& s, Frame* frame) {
  Value iterable = Eval(*s.expr, frame);
  std::vector<Value> items = Iterate(iterable);
  Frame loop_frame;
  loop_frame.parent = frame;
  const Stmt bind = [&] {
    Stmt b;
    b.kind = StmtKind::kSet;
    b.targets = s.targets;
    return b;
  }();
  if (s.filter) {
    std::vector<Value> kept;
    for (auto& item : items) {
      Step();
      Assign(bind, &loop_frame, item);
      if (Eval(*s.filter, &loop_frame).Truthy()) kept.push_back(std::move(item));
    }
    items = std::move(kept);
  }
  const int64_t n = static_cast<int64_t>(items.size());
  for (int64_t i = 0; i < n; ++i) {
    line_ = s.line;
    Step();
    auto loop = std::make_shared<Dict>();
    loop->Set("index", Value::Int(i + 1));
    loop->Set("index0", Value::Int(i));
    loop->Set("revindex", Value::Int(n - i));
    loop->Set("revindex0", Value::Int(n - i - 1));
    loop->Set("first", Value::Bool(i == 0));
    loop->Set("last", Value::Bool(i == n - 1));
    loop->Set("length", Value::Int(n));
    loop->Set("depth", Value::Int(1));
    loop->Set("depth0", Value::Int(0));
    loop->Set("previtem", i > 0 ? items[i - 1] : Value::Undefined("there is no previous item"));
    loop->Set("nextitem", i + 1 < n ? items[i + 1] : Value::Undefined("there is no next item"));
    loop->Set("cycle", Value::MakeCallable(Callable{
                           "cycle", std::make_shared<const Value>(Value::Int(i)), nullptr}));
    // jinja2 gives every iteration fresh locals: a `set` in one iteration
    // is not seen by the next.
    Frame iteration;
    iteration.parent = frame;
    iteration.vars["loop"] = Value::MakeDict(loop);
    Assign(bind, &iteration, items[i]);
    if (Exec(s.body, &iteration) == Flow::kBreak) break;
  }
  if (n == 0) Exec(s.else_body, frame);
}

Value Renderer::Lookup(const std::string& name, Frame* frame) {
  for (Frame* f = frame; f; f = f->parent) {
    auto it = f->vars.find(name);
    if (it != f->vars.end()) return it->second;
  }
  static const char* const kGlobals[] = {"range", "namespace", "dict", "raise_exception",
                                         "strftime_now"};
  for (const char* g : kGlobals)
    if (name == g) return Value::MakeCallable(Callable{name, nullptr, nullptr});
  return Value::Undefined("'" + name + "' is undefined");
}

namespace {
enum class IntOp { kAdd, kSub, kMul };
// Python ints are unbounded; past int64 is refused rather than wrapped.
int64_t CheckedInt(IntOp op, int64_t a, int64_t b, Renderer* r) {
  int64_t v = 0;
  const bool overflow = op == IntOp::kAdd   ? __builtin_add_overflow(a, b, &v)
                        : op == IntOp::kSub ? __builtin_sub_overflow(a, b, &v)
                                            : __builtin_mul_overflow(a, b, &v);
  if (overflow) r->Error("integer overflow: the result is beyond int64");
  return v;
}

// Python's slice.indices().
void SliceIndices(int64_t len, const Value& start, const Value& stop, const Value& step, int64_t* b,
                  int64_t* e, int64_t* st, Renderer* r) {
  auto get = [&](const Value& v, int64_t dflt) -> int64_t {
    if (v.is_undefined() || v.is_none()) return dflt;
    if (!v.is_int() && !v.is_bool()) r->Error("slice indices must be integers or None");
    return v.as_int();
  };
  // Clamped as Python clamps to the ssize_t range, so -st cannot overflow.
  *st = std::max<int64_t>(get(step, 1), -std::numeric_limits<int64_t>::max());
  if (*st == 0) r->Error("slice step cannot be zero");
  const bool neg = *st < 0;
  auto adjust = [&](const Value& v, int64_t dflt) -> int64_t {
    if (v.is_undefined() || v.is_none()) return dflt;
    int64_t i = get(v, 0);
    if (i < 0) {
      i = i < -len ? (neg ? -1 : 0) : i + len;
    } else if (i >= len) {
      i = neg ? len - 1 : len;
    }
    return i;
  };
  *b = adjust(start, neg ? len - 1 : 0);
  *e = adjust(stop, neg ? -1 : len);
}
// Items in a slice from b towards e by st, without stepping past int64.
int64_t SliceCount(int64_t b, int64_t e, int64_t st) {
  if (st > 0) return e > b ? (e - b - 1) / st + 1 : 0;
  return b > e ? (b - e - 1) / -st + 1 : 0;
}
}  // namespace

Value Renderer::Eval(const Expr& e, Frame* frame) {
  line_ = e.line;
  Step();
  Depth depth(this);
  switch (e.kind) {
    case ExprKind::kLiteral:
      return e.value;
    case ExprKind::kName:
      return Lookup(e.name, frame);
    case ExprKind::kList:
    case ExprKind::kTuple: {
      Value::List items;
      for (const auto& a : e.args) items.push_back(Eval(*a, frame));
      return Value::MakeList(std::move(items), e.kind == ExprKind::kTuple);
    }
    case ExprKind::kDict: {
      auto d = std::make_shared<Dict>();
      for (const auto& [k, v] : e.pairs) {
        Value key = Eval(*k, frame);
        if (!key.is_string()) Error("only string keys are supported in dict literals");
        d->Set(key.str(), Eval(*v, frame));
      }
      return Value::MakeDict(std::move(d));
    }
    case ExprKind::kGetAttr: {
      Value obj = Eval(*e.args[0], frame);
      line_ = e.line;
      return GetAttr(obj, e.name);
    }
    case ExprKind::kGetItem: {
      Value obj = Eval(*e.args[0], frame);
      Value key = Eval(*e.args[1], frame);
      line_ = e.line;
      return GetItem(obj, key);
    }
    case ExprKind::kSlice: {
      Value obj = Eval(*e.args[0], frame);
      Value parts[3];
      for (int i = 0; i < 3; ++i)
        if (e.args[i + 1]) parts[i] = Eval(*e.args[i + 1], frame);
      line_ = e.line;
      if (obj.is_undefined())
        Fail(StatusCode::kInvalidArgument,
             "line " + std::to_string(line_) + ": " + obj.undefined_hint());
      int64_t b, en, st;
      if (obj.is_string()) {
        std::vector<uint32_t> cps = DecodeUtf8(obj.str());
        SliceIndices(cps.size(), parts[0], parts[1], parts[2], &b, &en, &st, this);
        std::vector<uint32_t> out;
        for (int64_t k = 0, n = SliceCount(b, en, st); k < n; ++k) out.push_back(cps[b + k * st]);
        Step(out.size());
        return Value::String(EncodeUtf8(out));
      }
      if (obj.is_list()) {
        const auto& l = obj.list();
        SliceIndices(l.size(), parts[0], parts[1], parts[2], &b, &en, &st, this);
        Value::List out;
        for (int64_t k = 0, n = SliceCount(b, en, st); k < n; ++k) out.push_back(l[b + k * st]);
        Step(out.size());
        return Value::MakeList(std::move(out), obj.is_tuple());
      }
      Error("'" + obj.TypeName() + "' object is not subscriptable");
    }
    case ExprKind::kCall: {
      Value f = Eval(*e.args[0], frame);
      std::vector<Value> args;
      for (size_t i = 1; i < e.args.size(); ++i) args.push_back(Eval(*e.args[i], frame));
      Kwargs kwargs;
      for (const auto& [k, v] : e.kwargs) kwargs.emplace_back(k, Eval(*v, frame));
      line_ = e.line;
      return Call(f, std::move(args), std::move(kwargs));
    }
    case ExprKind::kFilter: {
      Value v = Eval(*e.args[0], frame);
      std::vector<Value> args;
      for (size_t i = 1; i < e.args.size(); ++i) args.push_back(Eval(*e.args[i], frame));
      Kwargs kwargs;
      for (const auto& [k, val] : e.kwargs) kwargs.emplace_back(k, Eval(*val, frame));
      line_ = e.line;
      return Filter(e.name, v, std::move(args), std::move(kwargs));
    }
    case ExprKind::kTest: {
      Value v = Eval(*e.args[0], frame);
      std::vector<Value> args;
      for (size_t i = 1; i < e.args.size(); ++i) args.push_back(Eval(*e.args[i], frame));
      line_ = e.line;
      return Value::Bool(Test(e.name, v, args) != e.negated);
    }
    case ExprKind::kNot:
      return Value::Bool(!Eval(*e.args[0], frame).Truthy());
    case ExprKind::kNeg:
    case ExprKind::kPos: {
      Value v = Eval(*e.args[0], frame);
      line_ = e.line;
      if (v.is_float())
        return Value::Float(e.kind == ExprKind::kNeg ? -v.as_float() : v.as_float());
      if (v.is_int() || v.is_bool()) {
        if (e.kind == ExprKind::kPos) return Value::Int(v.as_int());
        return Value::Int(CheckedInt(IntOp::kSub, 0, v.as_int(), this));
      }
      Error("bad operand type for unary " + std::string(e.kind == ExprKind::kNeg ? "-" : "+") +
            ": '" + v.TypeName() + "'");
    }
    case ExprKind::kBinary: {
      Value a = Eval(*e.args[0], frame);
      Value b = Eval(*e.args[1], frame);
      line_ = e.line;
      return EvalBinary(e.name, a, b);
    }
    case ExprKind::kConcat: {
      std::string s;
      for (const auto& a : e.args) {
        std::string part = Eval(*a, frame).Str(limits_.max_output_bytes);
        CheckSize(s.size() + part.size());
        s += part;
      }
      return Value::String(std::move(s));
    }
    case ExprKind::kAnd: {
      Value a = Eval(*e.args[0], frame);
      return a.Truthy() ? Eval(*e.args[1], frame) : a;
    }
    case ExprKind::kOr: {
      Value a = Eval(*e.args[0], frame);
      return a.Truthy() ? a : Eval(*e.args[1], frame);
    }
    case ExprKind::kCompare: {
      Value left = Eval(*e.args[0], frame);
      for (size_t i = 0; i < e.ops.size(); ++i) {
        Value right = Eval(*e.args[i + 1], frame);
        line_ = e.line;
        if (!Compare(e.ops[i], left, right)) return Value::Bool(false);
        left = std::move(right);
      }
      return Value::Bool(true);
    }
    case ExprKind::kCond:
      if (Eval(*e.args[0], frame).Truthy()) return Eval(*e.args[1], frame);
      if (e.args[2]) return Eval(*e.args[2], frame);
      return Value::Undefined(
          "the inline if-expression evaluated to false and no else section was defined.");
  }
  return Value();
}

bool Renderer::Eq(const Value& a, const Value& b) {
  const std::function<void()> tick = [this] { Step(); };
  return Equal(a, b, &tick);
}

bool Renderer::Less(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_float() < b.as_float();
    return a.as_int() < b.as_int();
  }
  if (a.is_string() && b.is_string()) return a.str() < b.str();
  if (a.is_undefined() && b.is_undefined()) return false;  // as jinja2's sort of missing attributes
  if (a.is_list() && b.is_list() && a.is_tuple() == b.is_tuple()) {
    const auto& x = a.list();
    const auto& y = b.list();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      Step();
      if (!Eq(x[i], y[i])) return Less(x[i], y[i]);
    }
    return x.size() < y.size();
  }
  Error("'<' not supported between instances of '" + a.TypeName() + "' and '" + b.TypeName() + "'");
}

bool Renderer::Compare(const std::string& op, const Value& a, const Value& b) {
  if (op == "==") return Eq(a, b);
  if (op == "!=") return !Eq(a, b);
  if (op == "<") return Less(a, b);
  if (op == ">") return Less(b, a);
  if (op == "<=") return !Less(b, a);
  if (op == ">=") return !Less(a, b);
  // in / not in
  bool found = false;
  if (b.is_string()) {
    if (!a.is_string()) Error("'in <string>' requires string as left operand, not " + a.TypeName());
    found = b.str().find(a.str()) != std::string::npos;
  } else if (b.is_list()) {
    for (const auto& x : b.list()) {
      Step();
      if (Eq(a, x)) {
        found = true;
        break;
      }
    }
  } else if (b.is_dict()) {
    found = a.is_string() && b.dict().Find(a.str()) != nullptr;
  } else if (!b.is_undefined()) {
    Error("argument of type '" + b.TypeName() + "' is not iterable");
  }
  return op == "in" ? found : !found;
}

Value Renderer::EvalBinary(const std::string& op, const Value& a, const Value& b) {
  if (a.is_undefined() || b.is_undefined()) {
    const Value& u = a.is_undefined() ? a : b;
    Error(u.undefined_hint());
  }
  const bool ints = (a.is_int() || a.is_bool()) && (b.is_int() || b.is_bool());
  const bool nums = a.is_number() && b.is_number();
  const char o = op[0];
  if (op == "+") {
    if (ints) return Value::Int(CheckedInt(IntOp::kAdd, a.as_int(), b.as_int(), this));
    if (nums) return Value::Float(a.as_float() + b.as_float());
    if (a.is_string() && b.is_string()) {
      CheckSize(a.str().size() + b.str().size());
      Step(1 + (a.str().size() + b.str().size()) / 64);
      return Value::String(a.str() + b.str());
    }
    if (a.is_list() && b.is_list() && a.is_tuple() == b.is_tuple()) {
      Step(a.list().size() + b.list().size());
      CheckSize((a.list().size() + b.list().size()) * sizeof(Value));
      Value::List l = a.list();
      l.insert(l.end(), b.list().begin(), b.list().end());
      return Value::MakeList(std::move(l), a.is_tuple());
    }
  } else if (op == "-") {
    if (ints) return Value::Int(CheckedInt(IntOp::kSub, a.as_int(), b.as_int(), this));
    if (nums) return Value::Float(a.as_float() - b.as_float());
  } else if (op == "*") {
    if (ints) return Value::Int(CheckedInt(IntOp::kMul, a.as_int(), b.as_int(), this));
    if (nums) return Value::Float(a.as_float() * b.as_float());
    const Value* seq = (a.is_string() || a.is_list()) && (b.is_int() || b.is_bool())   ? &a
                       : (b.is_string() || b.is_list()) && (a.is_int() || a.is_bool()) ? &b
                                                                                       : nullptr;
    if (seq) {
      const int64_t n = std::max<int64_t>(0, (seq == &a ? b : a).as_int());
      const uint64_t unit =
          seq->is_string() ? seq->str().size() : seq->list().size() * sizeof(Value);
      if (unit && static_cast<uint64_t>(n) > limits_.max_output_bytes / unit + 1)
        CheckSize(std::numeric_limits<size_t>::max());
      CheckSize(unit * n);
      if (seq->is_string()) {
        Step(1 + unit * n / 64);
        std::string s;
        s.reserve(unit * n);
        for (int64_t i = 0; i < n; ++i) s += seq->str();
        return Value::String(std::move(s));
      }
      Step(seq->list().size() * n);
      Value::List l;
      for (int64_t i = 0; i < n; ++i) l.insert(l.end(), seq->list().begin(), seq->list().end());
      return Value::MakeList(std::move(l), seq->is_tuple());
    }
  } else if (op == "/") {
    if (nums) {
      if (b.as_float() == 0) Error("division by zero");
      return Value::Float(a.as_float() / b.as_float());
    }
  } else if (op == "//" || o == '%') {
    if (a.is_string() && o == '%') Error("printf-style string formatting ('%') is not supported");
    if (ints) {
      const int64_t x = a.as_int(), y = b.as_int();
      if (y == 0)
        Error(op == "//" ? "integer division or modulo by zero" : "integer modulo by zero");
      if (x == std::numeric_limits<int64_t>::min() && y == -1) {
        if (op == "//") Error("integer overflow: the result is beyond int64");
        return Value::Int(0);
      }
      int64_t q = x / y, m = x % y;
      if (m != 0 && ((m < 0) != (y < 0))) {
        --q;
        m += y;
      }
      return Value::Int(op == "//" ? q : m);
    }
    if (nums) {
      const double x = a.as_float(), y = b.as_float();
      if (y == 0) Error("float division by zero");
      if (op == "//") return Value::Float(std::floor(x / y));
      double m = std::fmod(x, y);
      if (m != 0 && ((m < 0) != (y < 0))) m += y;
      return Value::Float(m);
    }
  } else if (op == "**") {
    if (ints && b.as_int() >= 0) {
      int64_t base = a.as_int(), exp = b.as_int(), acc = 1;
      while (exp > 0) {
        Step();
        if (exp & 1) acc = CheckedInt(IntOp::kMul, acc, base, this);
        exp >>= 1;
        if (exp) base = CheckedInt(IntOp::kMul, base, base, this);
      }
      return Value::Int(acc);
    }
    if (nums) {
      if (a.as_float() == 0 && b.as_float() < 0) Error("zero cannot be raised to a negative power");
      return Value::Float(std::pow(a.as_float(), b.as_float()));
    }
  }
  Error("unsupported operand type(s) for " + op + ": '" + a.TypeName() + "' and '" + b.TypeName() +
        "'");
}

Value Renderer::CallMacro(const Stmt& m, std::vector<Value> args, Kwargs kwargs) {
  if (++macro_depth_ > limits_.max_depth)
    Fail(StatusCode::kResourceExhausted, "line " + std::to_string(line_) +
                                             ": macro calls nest deeper than " +
                                             std::to_string(limits_.max_depth));
  if (args.size() > m.targets.size())
    Error("macro '" + m.name + "' takes not more than " + std::to_string(m.targets.size()) +
          " argument(s)");
  Frame frame;
  frame.parent = &root_;
  for (size_t i = 0; i < m.targets.size(); ++i) {
    if (i < args.size()) {
      frame.vars[m.targets[i]] = std::move(args[i]);
      continue;
    }
    bool found = false;
    for (auto& [k, v] : kwargs) {
      if (k == m.targets[i]) {
        frame.vars[k] = v;
        found = true;
      }
    }
    if (!found)
      frame.vars[m.targets[i]] =
          m.defaults[i] ? Eval(*m.defaults[i], &frame)
                        : Value::Undefined("parameter '" + m.targets[i] + "' was not provided");
  }
  for (auto& [k, v] : kwargs) {
    bool known = false;
    for (const auto& t : m.targets) known = known || t == k;
    if (!known) Error("macro '" + m.name + "' takes no keyword argument '" + k + "'");
  }
  std::string buf;
  std::string* saved = out_;
  out_ = &buf;
  Exec(m.body, &frame);
  out_ = saved;
  --macro_depth_;
  return Value::String(std::move(buf));
}

}  // namespace quantd::io::chat_template
