// The syntax tree parser.cc builds and interpreter.cc walks.
#ifndef QUANTD_WORKER_IO_CHAT_TEMPLATE_AST_H_
#define QUANTD_WORKER_IO_CHAT_TEMPLATE_AST_H_

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "worker/io/chat_template/value.h"

namespace quantd::io::chat_template {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

enum class ExprKind {
  kLiteral,  // value
  kName,     // name
  kList,     // args
  kTuple,    // args
  kDict,     // kwargs-like pairs in `pairs`
  kGetAttr,  // args[0] . name
  kGetItem,  // args[0] [ args[1] ]
  kSlice,    // args[0] [ args[1] : args[2] : args[3] ] (null parts allowed)
  kCall,     // args[0] ( args[1..], kwargs )
  kFilter,   // name; args[0] is the operand, args[1..] and kwargs the arguments
  kTest,     // name; args[0] operand, args[1..]; negated
  kNot,      // args[0]
  kNeg,      // args[0]
  kPos,      // args[0]
  kBinary,   // name is the operator: + - * / // % **
  kConcat,   // ~ over args
  kAnd,      // args[0] and args[1]
  kOr,       // args[0] or args[1]
  kCompare,  // args[0] ops[0] args[1] ops[1] args[2] ...
  kCond,     // args[1] if args[0] else args[2] (args[2] may be null)
};

struct Expr {
  ExprKind kind;
  int line = 0;
  int col = 0;
  Value value;
  std::string name;
  bool negated = false;
  std::vector<ExprPtr> args;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  std::vector<std::pair<ExprPtr, ExprPtr>> pairs;
  std::vector<std::string> ops;
};

struct Stmt;
using Body = std::vector<std::unique_ptr<Stmt>>;

enum class StmtKind { kText, kOutput, kIf, kFor, kSet, kSetBlock, kMacro, kBreak, kContinue };

struct Stmt {
  StmtKind kind;
  int line = 0;
  int col = 0;
  std::string text;                                // kText
  ExprPtr expr;                                    // kOutput, kSet value, kFor iterable
  std::vector<std::pair<ExprPtr, Body>> branches;  // kIf: (condition or null for else, body)
  std::vector<std::string> targets;                // kFor / kSet names; kMacro parameters
  std::string attr;                                // kSet / kSetBlock: ns.attr target
  ExprPtr filter;                                  // kFor: `if` condition
  Body body;                                       // kFor, kSetBlock, kMacro
  Body else_body;                                  // kFor
  std::string name;                                // kMacro
  std::vector<ExprPtr> defaults;                   // kMacro, aligned with targets (null: none)
};

}  // namespace quantd::io::chat_template

#endif  // QUANTD_WORKER_IO_CHAT_TEMPLATE_AST_H_
