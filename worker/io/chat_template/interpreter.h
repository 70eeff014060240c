// Walks the syntax tree; builtins.cc holds the filters, tests, methods and
// globals. Internal to chat_template.
#ifndef QUANTD_WORKER_IO_CHAT_TEMPLATE_INTERPRETER_H_
#define QUANTD_WORKER_IO_CHAT_TEMPLATE_INTERPRETER_H_

#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "worker/common/cancellation.h"
#include "worker/io/chat_template/ast.h"
#include "worker/io/chat_template/chat_template.h"

namespace quantd::io::chat_template {

using Kwargs = std::vector<std::pair<std::string, Value>>;

class Renderer {
 public:
  Renderer(const ChatTemplateLimits& limits, const Dict& context);
  std::string Render(const Body& body);

  // Budget checks, for builtins too.
  void Step(uint64_t n = 1);
  void CheckSize(size_t bytes) const;
  [[noreturn]] void Error(const std::string& msg) const;  // INVALID_ARGUMENT at the current line

  Value GetAttr(const Value& obj, const std::string& name);
  Value GetItem(const Value& obj, const Value& key);
  std::vector<Value> Iterate(const Value& v);
  Value Call(const Value& f, std::vector<Value> args, Kwargs kwargs);
  Value Filter(const std::string& name, const Value& v, std::vector<Value> args, Kwargs kwargs);
  bool Test(const std::string& name, const Value& v, const std::vector<Value>& args);
  // Python <, for sort and comparisons; type errors fail.
  bool Less(const Value& a, const Value& b);
  // Python ==, one step per element compared.
  bool Eq(const Value& a, const Value& b);

 private:
  enum class Flow { kNormal, kBreak, kContinue };
  struct Frame {
    std::unordered_map<std::string, Value> vars;
    Frame* parent = nullptr;
  };
  struct Depth {
    Depth(Renderer* r);
    ~Depth() { --r_->depth_; }
    Renderer* r_;
  };

  Flow Exec(const Body& body, Frame* frame);
  Flow ExecOne(const Stmt& s, Frame* frame);
  void ExecFor(const Stmt& s, Frame* frame);
  void Assign(const Stmt& s, Frame* frame, Value v);
  Value Eval(const Expr& e, Frame* frame);
  Value EvalBinary(const std::string& op, const Value& a, const Value& b);
  bool Compare(const std::string& op, const Value& a, const Value& b);
  Value Lookup(const std::string& name, Frame* frame);
  Value CallMacro(const Stmt& m, std::vector<Value> args, Kwargs kwargs);
  Value CallMethod(const std::string& name, const Value& self, std::vector<Value>& args,
                   Kwargs& kwargs);
  Value CallGlobal(const std::string& name, std::vector<Value>& args, Kwargs& kwargs);
  void Emit(const std::string& s);

  const ChatTemplateLimits limits_;
  Frame root_;
  std::string* out_ = nullptr;
  uint64_t steps_ = 0;
  int depth_ = 0;
  int macro_depth_ = 0;
  int line_ = 0;
  CancellationPoller poller_{4096};
};

}  // namespace quantd::io::chat_template

#endif  // QUANTD_WORKER_IO_CHAT_TEMPLATE_INTERPRETER_H_
