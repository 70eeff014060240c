#include "worker/io/chat_template/parser.h"

#include <cerrno>
#include <cstdlib>
#include <limits>
#include <set>

namespace quantd::io::chat_template {
namespace {

enum class Tok {
  kData,
  kBlockBegin,
  kBlockEnd,
  kVarBegin,
  kVarEnd,
  kName,
  kString,
  kInt,
  kFloat,
  kOp,
  kEof
};

struct Token {
  Tok type;
  std::string text;  // data, name, operator, unescaped string
  size_t pos = 0;
  int64_t ival = 0;
  double fval = 0;
};

bool IsWs(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}
bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsNameStart(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool IsNameChar(char c) { return IsNameStart(c) || IsDigit(c); }

// Newlines normalised as jinja2's lexer does, minus one trailing newline.
std::string Normalize(std::string_view in) {
  std::string s;
  s.reserve(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] == '\r') {
      s += '\n';
      if (i + 1 < in.size() && in[i + 1] == '\n') ++i;
    } else {
      s += in[i];
    }
  }
  if (!s.empty() && s.back() == '\n') s.pop_back();
  return s;
}

class Lexer {
 public:
  explicit Lexer(const std::string& src) : src_(src) {}

  std::vector<Token> Run() {
    size_t pos = 0;
    bool line_starting = true;
    const size_t n = src_.size();
    while (pos < n) {
      size_t q = pos;
      while (true) {
        q = src_.find('{', q);
        if (q == std::string::npos || q + 1 >= n) {
          q = std::string::npos;
          break;
        }
        const char c = src_[q + 1];
        if (c == '{' || c == '%' || c == '#') break;
        ++q;
      }
      if (q == std::string::npos) {
        Emit(Tok::kData, src_.substr(pos), pos);
        break;
      }
      const char kind = src_[q + 1];
      std::string text = src_.substr(pos, q - pos);
      size_t p = q + 2;
      const char sign = p < n && (src_[p] == '-' || src_[p] == '+') ? src_[p] : 0;
      if (sign) ++p;
      StripBefore(&text, sign, kind != '{', line_starting);
      Emit(Tok::kData, text, pos);
      if (kind == '%' && IsRaw(p, &p)) {
        pos = Raw(p, &line_starting);
      } else if (kind == '#') {
        pos = Comment(q, p, &line_starting);
      } else {
        pos = Tag(q, p, kind == '%', &line_starting);
      }
    }
    tokens_.push_back(Token{Tok::kEof, "", n});
    return std::move(tokens_);
  }

  [[noreturn]] void Error(size_t pos, const std::string& msg) const;

 private:
  void Emit(Tok t, std::string text, size_t pos) {
    if (t == Tok::kData && text.empty()) return;
    tokens_.push_back(Token{t, std::move(text), pos});
  }

  // jinja2's OptionalLStrip: `-` strips all whitespace before the tag;
  // lstrip_blocks strips spaces and tabs between a line start and a
  // block or comment tag unless the tag says `+`.
  static void StripBefore(std::string* text, char sign, bool block_or_comment, bool line_starting) {
    if (sign == '-') {
      size_t e = text->size();
      while (e > 0 && IsWs((*text)[e - 1])) --e;
      text->resize(e);
    } else if (sign != '+' && block_or_comment) {
      const size_t nl = text->rfind('\n');
      const size_t l_pos = nl == std::string::npos ? 0 : nl + 1;
      if (l_pos > 0 || line_starting) {
        bool all_ws = l_pos < text->size();
        for (size_t i = l_pos; i < text->size(); ++i) all_ws = all_ws && IsWs((*text)[i]);
        if (all_ws) text->resize(l_pos);
      }
    }
  }

  size_t SkipWs(size_t p) const {
    while (p < src_.size() && IsWs(src_[p])) ++p;
    return p;
  }

  // `raw\s*(-%}\s*|%})` after `{%[-+]?\s*`; *end is past it.
  bool IsRaw(size_t p, size_t* end) const {
    p = SkipWs(p);
    if (src_.compare(p, 3, "raw") != 0) return false;
    p = SkipWs(p + 3);
    if (src_.compare(p, 3, "-%}") == 0) {
      *end = SkipWs(p + 3);
      return true;
    }
    if (src_.compare(p, 2, "%}") == 0) {
      *end = p + 2;
      return true;
    }
    return false;
  }

  size_t Raw(size_t p, bool* line_starting) {
    *line_starting = p > 0 && src_[p - 1] == '\n';
    for (size_t q = src_.find("{%", p); q != std::string::npos; q = src_.find("{%", q + 1)) {
      size_t r = q + 2;
      const char sign = r < src_.size() && (src_[r] == '-' || src_[r] == '+') ? src_[r] : 0;
      if (sign) ++r;
      r = SkipWs(r);
      if (src_.compare(r, 6, "endraw") != 0) continue;
      r = SkipWs(r + 6);
      size_t end;
      if (src_.compare(r, 3, "+%}") == 0) {
        end = r + 3;
      } else if (src_.compare(r, 3, "-%}") == 0) {
        end = SkipWs(r + 3);
      } else if (src_.compare(r, 2, "%}") == 0) {
        end = r + 2;
        if (end < src_.size() && src_[end] == '\n') ++end;
      } else {
        continue;
      }
      std::string text = src_.substr(p, q - p);
      StripBefore(&text, sign, true, *line_starting);
      Emit(Tok::kData, text, p);
      *line_starting = src_[end - 1] == '\n';
      return end;
    }
    Error(p, "Missing end of raw directive");
  }

  size_t Comment(size_t start, size_t p, bool* line_starting) {
    const size_t j = src_.find("#}", p);
    if (j == std::string::npos) Error(start, "Missing end of comment tag");
    size_t end = j + 2;
    if (j > p && src_[j - 1] == '-') {
      end = SkipWs(end);
    } else if (!(j > p && src_[j - 1] == '+')) {
      if (end < src_.size() && src_[end] == '\n') ++end;
    }
    *line_starting = src_[end - 1] == '\n';
    return end;
  }

  size_t Tag(size_t start, size_t p, bool block, bool* line_starting) {
    Emit(block ? Tok::kBlockBegin : Tok::kVarBegin, "", start);
    std::string brackets;
    const size_t n = src_.size();
    while (true) {
      p = SkipWs(p);
      if (p >= n) Error(start, "unexpected end of template, expected end of tag");
      if (brackets.empty()) {
        size_t end = 0;
        if (block) {
          if (src_.compare(p, 3, "+%}") == 0) {
            end = p + 3;
          } else if (src_.compare(p, 3, "-%}") == 0) {
            end = SkipWs(p + 3);
          } else if (src_.compare(p, 2, "%}") == 0) {
            end = p + 2;
            if (end < n && src_[end] == '\n') ++end;
          }
        } else {
          if (src_.compare(p, 3, "-}}") == 0)
            end = SkipWs(p + 3);
          else if (src_.compare(p, 2, "}}") == 0)
            end = p + 2;
        }
        if (end) {
          Emit(block ? Tok::kBlockEnd : Tok::kVarEnd, "", p);
          *line_starting = src_[end - 1] == '\n';
          return end;
        }
      }
      p = Lex(p, &brackets);
    }
  }

  size_t Lex(size_t p, std::string* brackets) {
    const size_t n = src_.size();
    const char c = src_[p];
    if (IsDigit(c)) return Number(p);
    if (IsNameStart(c)) {
      size_t e = p;
      while (e < n && IsNameChar(src_[e])) ++e;
      tokens_.push_back(Token{Tok::kName, src_.substr(p, e - p), p});
      return e;
    }
    if (c == '\'' || c == '"') return String(p);
    static const char* const kOps[] = {"//", "**", "==", "!=", ">=", "<=", "+", "-", "/",
                                       "*",  "%",  "~",  "[",  "]",  "(",  ")", "{", "}",
                                       ">",  "<",  "=",  ".",  ":",  "|",  ",", ";"};
    for (const char* op : kOps) {
      const size_t len = std::char_traits<char>::length(op);
      if (src_.compare(p, len, op) != 0) continue;
      if (len == 1 && (c == '(' || c == '[' || c == '{')) {
        brackets->push_back(c == '(' ? ')' : c == '[' ? ']' : '}');
      } else if (len == 1 && (c == ')' || c == ']' || c == '}')) {
        if (brackets->empty()) Error(p, std::string("unexpected '") + c + "'");
        if (brackets->back() != c)
          Error(p, std::string("unexpected '") + c + "', expected '" + brackets->back() + "'");
        brackets->pop_back();
      }
      tokens_.push_back(Token{Tok::kOp, op, p});
      return p + len;
    }
    Error(p, std::string("unexpected char '") + c + "'");
  }

  size_t Number(size_t p) {
    const size_t n = src_.size();
    auto digits = [&](size_t q) {
      while (q < n && (IsDigit(src_[q]) || (src_[q] == '_' && q + 1 < n && IsDigit(src_[q + 1]))))
        ++q;
      return q;
    };
    size_t e = digits(p);
    bool is_float = false;
    if (e + 1 < n && src_[e] == '.' && IsDigit(src_[e + 1])) {
      is_float = true;
      e = digits(e + 1);
    }
    if (e < n && (src_[e] == 'e' || src_[e] == 'E')) {
      size_t q = e + 1;
      if (q < n && (src_[q] == '+' || src_[q] == '-')) ++q;
      if (q < n && IsDigit(src_[q])) {
        is_float = true;
        e = digits(q);
      }
    }
    std::string text;
    for (size_t i = p; i < e; ++i)
      if (src_[i] != '_') text += src_[i];
    Token t{is_float ? Tok::kFloat : Tok::kInt, text, p};
    errno = 0;
    if (is_float) {
      t.fval = std::strtod(text.c_str(), nullptr);
    } else {
      t.ival = std::strtoll(text.c_str(), nullptr, 10);
      if (errno == ERANGE) Error(p, "integer literal " + text + " is beyond int64");
    }
    tokens_.push_back(std::move(t));
    return e;
  }

  // Python string literal with the escapes jinja2 decodes.
  size_t String(size_t p) {
    const char q = src_[p];
    std::string out;
    size_t i = p + 1;
    const size_t n = src_.size();
    auto hex = [&](size_t start, int count) -> uint32_t {
      uint32_t v = 0;
      for (int k = 0; k < count; ++k) {
        const char h = start + k < n ? src_[start + k] : 0;
        int d = IsDigit(h)               ? h - '0'
                : (h >= 'a' && h <= 'f') ? h - 'a' + 10
                : (h >= 'A' && h <= 'F') ? h - 'A' + 10
                                         : -1;
        if (d < 0) Error(p, "bad escape in string literal");
        v = v * 16 + d;
      }
      return v;
    };
    while (true) {
      if (i >= n) Error(p, "unterminated string literal");
      const char c = src_[i];
      if (c == q) break;
      if (c != '\\') {
        out += c;
        ++i;
        continue;
      }
      if (i + 1 >= n) Error(p, "unterminated string literal");
      const char e = src_[i + 1];
      i += 2;
      switch (e) {
        case 'n':
          out += '\n';
          break;
        case 't':
          out += '\t';
          break;
        case 'r':
          out += '\r';
          break;
        case '\\':
          out += '\\';
          break;
        case '\'':
          out += '\'';
          break;
        case '"':
          out += '"';
          break;
        case 'a':
          out += '\a';
          break;
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'v':
          out += '\v';
          break;
        case '\n':
          break;
        case 'x':
          AppendUtf8(hex(i, 2), &out);
          i += 2;
          break;
        case 'u':
          AppendUtf8(hex(i, 4), &out);
          i += 4;
          break;
        case 'U': {
          const uint32_t cp = hex(i, 8);
          if (cp > 0x10FFFF) Error(p, "bad escape in string literal");
          AppendUtf8(cp, &out);
          i += 8;
          break;
        }
        default:
          if (e >= '0' && e <= '7') {
            uint32_t v = e - '0';
            for (int k = 0; k < 2 && i < n && src_[i] >= '0' && src_[i] <= '7'; ++k)
              v = v * 8 + (src_[i++] - '0');
            AppendUtf8(v, &out);
          } else {
            out += '\\';
            out += e;
          }
      }
    }
    tokens_.push_back(Token{Tok::kString, out, p});
    return i + 1;
  }

  const std::string& src_;
  std::vector<Token> tokens_;
};

void LineCol(const std::string& src, size_t pos, int* line, int* col) {
  *line = 1;
  *col = 1;
  for (size_t i = 0; i < pos && i < src.size(); ++i) {
    if (src[i] == '\n') {
      ++*line;
      *col = 1;
    } else {
      ++*col;
    }
  }
}

[[noreturn]] void ErrorAt(const std::string& src, size_t pos, const std::string& msg) {
  int line, col;
  LineCol(src, pos, &line, &col);
  Fail(StatusCode::kInvalidArgument,
       "line " + std::to_string(line) + ":" + std::to_string(col) + ": " + msg);
}

void Lexer::Error(size_t pos, const std::string& msg) const { ErrorAt(src_, pos, msg); }

class Parser {
 public:
  Parser(const std::string& src, std::vector<Token> tokens, int max_depth)
      : src_(src), toks_(std::move(tokens)), max_depth_(max_depth) {}

  Body Run() {
    std::string end;
    Body b = ParseBody({}, &end);
    return b;
  }

 private:
  struct DepthGuard {
    DepthGuard(Parser* p, size_t pos) : p_(p) {
      if (++p_->depth_ > p_->max_depth_)
        Fail(StatusCode::kResourceExhausted, Where(pos) + "template nests deeper than " +
                                                 std::to_string(p_->max_depth_) + " levels");
    }
    ~DepthGuard() { --p_->depth_; }
    std::string Where(size_t pos) {
      int line, col;
      LineCol(p_->src_, pos, &line, &col);
      return "line " + std::to_string(line) + ":" + std::to_string(col) + ": ";
    }
    Parser* p_;
  };

  const Token& Cur() const { return toks_[pos_]; }
  const Token& Peek(int k = 1) const { return toks_[std::min(pos_ + k, toks_.size() - 1)]; }
  void Next() {
    if (pos_ + 1 < toks_.size()) ++pos_;
  }
  bool IsOp(const char* op) const { return Cur().type == Tok::kOp && Cur().text == op; }
  bool IsName(const char* name) const { return Cur().type == Tok::kName && Cur().text == name; }
  bool SkipOp(const char* op) {
    if (!IsOp(op)) return false;
    Next();
    return true;
  }
  bool SkipName(const char* name) {
    if (!IsName(name)) return false;
    Next();
    return true;
  }
  [[noreturn]] void Error(const std::string& msg) const { ErrorAt(src_, Cur().pos, msg); }
  std::string Describe() const {
    switch (Cur().type) {
      case Tok::kEof:
        return "end of template";
      case Tok::kBlockEnd:
        return "end of statement block";
      case Tok::kVarEnd:
        return "end of print statement";
      case Tok::kData:
        return "template data";
      default:
        return "'" + Cur().text + "'";
    }
  }
  void ExpectOp(const char* op) {
    if (!SkipOp(op)) Error(std::string("expected '") + op + "', got " + Describe());
  }
  std::string ExpectName() {
    if (Cur().type != Tok::kName) Error("expected a name, got " + Describe());
    std::string s = Cur().text;
    Next();
    return s;
  }
  void ExpectBlockEnd() {
    if (Cur().type != Tok::kBlockEnd) Error("expected end of statement block, got " + Describe());
    Next();
  }

  std::unique_ptr<Stmt> NewStmt(StmtKind k, size_t pos) {
    auto s = std::make_unique<Stmt>();
    s->kind = k;
    LineCol(src_, pos, &s->line, &s->col);
    return s;
  }
  ExprPtr NewExpr(ExprKind k, size_t pos) {
    auto e = std::make_unique<Expr>();
    e->kind = k;
    LineCol(src_, pos, &e->line, &e->col);
    return e;
  }

  // Parses statements until `{% <one of ends> ...`; leaves the tag name
  // consumed and its name in *end.
  Body ParseBody(const std::set<std::string>& ends, std::string* end) {
    Body body;
    while (true) {
      const Token& t = Cur();
      if (t.type == Tok::kEof) {
        if (!ends.empty()) Error("unexpected end of template, expected '" + *ends.rbegin() + "'");
        return body;
      }
      if (t.type == Tok::kData) {
        auto s = NewStmt(StmtKind::kText, t.pos);
        s->text = t.text;
        body.push_back(std::move(s));
        Next();
        continue;
      }
      if (t.type == Tok::kVarBegin) {
        auto s = NewStmt(StmtKind::kOutput, t.pos);
        Next();
        s->expr = ParseExpr();
        if (Cur().type != Tok::kVarEnd) Error("expected end of print statement, got " + Describe());
        Next();
        body.push_back(std::move(s));
        continue;
      }
      if (t.type != Tok::kBlockBegin) Error("unexpected " + Describe());
      Next();
      if (Cur().type != Tok::kName) Error("tag name expected");
      const std::string name = Cur().text;
      if (ends.count(name)) {
        Next();
        *end = name;
        return body;
      }
      body.push_back(ParseStatement(name));
    }
  }

  std::unique_ptr<Stmt> ParseStatement(const std::string& name) {
    const size_t pos = Cur().pos;
    DepthGuard guard(this, pos);
    static const std::set<std::string> kRefused = {"include", "import",     "from",   "extends",
                                                   "block",   "call",       "filter", "with",
                                                   "do",      "autoescape", "trans"};
    if (kRefused.count(name)) Error("unsupported tag '" + name + "'");
    Next();
    if (name == "if") return ParseIf(pos);
    if (name == "for") return ParseFor(pos);
    if (name == "set") return ParseSet(pos);
    if (name == "macro") return ParseMacro(pos);
    if (name == "generation") {
      // transformers' AssistantTracker block: renders its body as is.
      auto s = NewStmt(StmtKind::kIf, pos);
      ExpectBlockEnd();
      std::string end;
      s->branches.emplace_back(nullptr, ParseBody({"endgeneration"}, &end));
      ExpectBlockEnd();
      return s;
    }
    if (name == "break" || name == "continue") {
      if (loops_ == 0) ErrorAt(src_, pos, "'" + name + "' outside of a loop");
      ExpectBlockEnd();
      return NewStmt(name == "break" ? StmtKind::kBreak : StmtKind::kContinue, pos);
    }
    ErrorAt(src_, pos, "unknown tag '" + name + "'");
  }

  std::unique_ptr<Stmt> ParseIf(size_t pos) {
    auto s = NewStmt(StmtKind::kIf, pos);
    ExprPtr cond = ParseExpr();
    while (true) {
      ExpectBlockEnd();
      std::string end;
      Body b = ParseBody({"elif", "else", "endif"}, &end);
      s->branches.emplace_back(std::move(cond), std::move(b));
      if (end == "endif") break;
      if (end == "else") {
        ExpectBlockEnd();
        Body eb = ParseBody({"endif"}, &end);
        s->branches.emplace_back(nullptr, std::move(eb));
        break;
      }
      cond = ParseExpr();
    }
    ExpectBlockEnd();
    return s;
  }

  void ParseTargets(std::vector<std::string>* targets) {
    const bool paren = SkipOp("(");
    targets->push_back(ExpectName());
    while (SkipOp(",")) {
      if (Cur().type != Tok::kName) break;
      targets->push_back(ExpectName());
    }
    if (paren) ExpectOp(")");
  }

  std::unique_ptr<Stmt> ParseFor(size_t pos) {
    auto s = NewStmt(StmtKind::kFor, pos);
    ParseTargets(&s->targets);
    if (!SkipName("in")) Error("expected 'in', got " + Describe());
    s->expr = ParseOr();
    if (SkipName("if")) s->filter = ParseExpr();
    if (IsName("recursive")) Error("recursive loops are not supported");
    ExpectBlockEnd();
    ++loops_;
    std::string end;
    s->body = ParseBody({"else", "endfor"}, &end);
    --loops_;
    if (end == "else") {
      ExpectBlockEnd();
      s->else_body = ParseBody({"endfor"}, &end);
    }
    ExpectBlockEnd();
    return s;
  }

  std::unique_ptr<Stmt> ParseSet(size_t pos) {
    auto s = NewStmt(StmtKind::kSet, pos);
    ParseTargets(&s->targets);
    if (s->targets.size() == 1 && SkipOp(".")) s->attr = ExpectName();
    if (Cur().type == Tok::kBlockEnd) {
      if (s->targets.size() != 1) Error("a block set takes one name");
      s->kind = StmtKind::kSetBlock;
      Next();
      std::string end;
      const int loops = loops_;
      loops_ = 0;
      s->body = ParseBody({"endset"}, &end);
      loops_ = loops;
      ExpectBlockEnd();
      return s;
    }
    ExpectOp("=");
    s->expr = ParseTupleOrExpr();
    ExpectBlockEnd();
    return s;
  }

  std::unique_ptr<Stmt> ParseMacro(size_t pos) {
    auto s = NewStmt(StmtKind::kMacro, pos);
    s->name = ExpectName();
    ExpectOp("(");
    while (!IsOp(")")) {
      s->targets.push_back(ExpectName());
      s->defaults.push_back(SkipOp("=") ? ParseExpr() : nullptr);
      if (!SkipOp(",")) break;
    }
    ExpectOp(")");
    ExpectBlockEnd();
    std::string end;
    const int loops = loops_;
    loops_ = 0;
    s->body = ParseBody({"endmacro"}, &end);
    loops_ = loops;
    if (Cur().type == Tok::kName) Next();  // {% endmacro name %}
    ExpectBlockEnd();
    return s;
  }

  // `a, b` at statement level is a tuple.
  ExprPtr ParseTupleOrExpr() {
    const size_t pos = Cur().pos;
    ExprPtr e = ParseExpr();
    if (!IsOp(",")) return e;
    auto t = NewExpr(ExprKind::kTuple, pos);
    t->args.push_back(std::move(e));
    while (SkipOp(",")) {
      if (Cur().type == Tok::kBlockEnd) break;
      t->args.push_back(ParseExpr());
    }
    return t;
  }

  ExprPtr ParseExpr() {
    DepthGuard guard(this, Cur().pos);
    const size_t pos = Cur().pos;
    ExprPtr e = ParseOr();
    while (SkipName("if")) {
      auto c = NewExpr(ExprKind::kCond, pos);
      c->args.push_back(ParseOr());
      c->args.push_back(std::move(e));
      c->args.push_back(SkipName("else") ? ParseExpr() : nullptr);
      e = std::move(c);
    }
    return e;
  }

  ExprPtr Binary(ExprKind k, size_t pos, ExprPtr l, ExprPtr r, std::string op = "") {
    auto e = NewExpr(k, pos);
    e->name = std::move(op);
    e->args.push_back(std::move(l));
    e->args.push_back(std::move(r));
    return e;
  }

  ExprPtr ParseOr() {
    const size_t pos = Cur().pos;
    ExprPtr e = ParseAnd();
    while (SkipName("or")) e = Binary(ExprKind::kOr, pos, std::move(e), ParseAnd());
    return e;
  }
  ExprPtr ParseAnd() {
    const size_t pos = Cur().pos;
    ExprPtr e = ParseNot();
    while (SkipName("and")) e = Binary(ExprKind::kAnd, pos, std::move(e), ParseNot());
    return e;
  }
  ExprPtr ParseNot() {
    const size_t pos = Cur().pos;
    if (SkipName("not")) {
      DepthGuard guard(this, pos);
      auto e = NewExpr(ExprKind::kNot, pos);
      e->args.push_back(ParseNot());
      return e;
    }
    return ParseCompare();
  }
  ExprPtr ParseCompare() {
    const size_t pos = Cur().pos;
    ExprPtr first = ParseMath1();
    ExprPtr cmp;
    while (true) {
      std::string op;
      if (Cur().type == Tok::kOp &&
          (Cur().text == "==" || Cur().text == "!=" || Cur().text == "<" || Cur().text == ">" ||
           Cur().text == "<=" || Cur().text == ">=")) {
        op = Cur().text;
        Next();
      } else if (IsName("in")) {
        op = "in";
        Next();
      } else if (IsName("not") && Peek().type == Tok::kName && Peek().text == "in") {
        op = "notin";
        Next();
        Next();
      } else {
        break;
      }
      if (!cmp) {
        cmp = NewExpr(ExprKind::kCompare, pos);
        cmp->args.push_back(std::move(first));
      }
      cmp->ops.push_back(op);
      cmp->args.push_back(ParseMath1());
    }
    return cmp ? std::move(cmp) : std::move(first);
  }
  ExprPtr ParseMath1() {
    const size_t pos = Cur().pos;
    ExprPtr e = ParseConcat();
    while (IsOp("+") || IsOp("-")) {
      std::string op = Cur().text;
      Next();
      e = Binary(ExprKind::kBinary, pos, std::move(e), ParseConcat(), op);
    }
    return e;
  }
  ExprPtr ParseConcat() {
    const size_t pos = Cur().pos;
    ExprPtr e = ParseMath2();
    if (!IsOp("~")) return e;
    auto c = NewExpr(ExprKind::kConcat, pos);
    c->args.push_back(std::move(e));
    while (SkipOp("~")) c->args.push_back(ParseMath2());
    return c;
  }
  ExprPtr ParseMath2() {
    const size_t pos = Cur().pos;
    ExprPtr e = ParsePow();
    while (IsOp("*") || IsOp("/") || IsOp("//") || IsOp("%")) {
      std::string op = Cur().text;
      Next();
      e = Binary(ExprKind::kBinary, pos, std::move(e), ParsePow(), op);
    }
    return e;
  }
  ExprPtr ParsePow() {
    const size_t pos = Cur().pos;
    ExprPtr e = ParseUnary(true);
    while (SkipOp("**")) e = Binary(ExprKind::kBinary, pos, std::move(e), ParseUnary(true), "**");
    return e;
  }
  ExprPtr ParseUnary(bool with_filter) {
    const size_t pos = Cur().pos;
    DepthGuard guard(this, pos);
    ExprPtr e;
    if (IsOp("-") || IsOp("+")) {
      e = NewExpr(IsOp("-") ? ExprKind::kNeg : ExprKind::kPos, pos);
      Next();
      e->args.push_back(ParseUnary(false));
    } else {
      e = ParsePrimary();
    }
    e = ParsePostfix(std::move(e));
    if (with_filter) e = ParseFilterExpr(std::move(e));
    return e;
  }

  ExprPtr Literal(Value v, size_t pos) {
    auto e = NewExpr(ExprKind::kLiteral, pos);
    e->value = std::move(v);
    return e;
  }

  ExprPtr ParsePrimary() {
    const Token& t = Cur();
    const size_t pos = t.pos;
    switch (t.type) {
      case Tok::kName: {
        const std::string& n = t.text;
        ExprPtr e;
        if (n == "true" || n == "True")
          e = Literal(Value::Bool(true), pos);
        else if (n == "false" || n == "False")
          e = Literal(Value::Bool(false), pos);
        else if (n == "none" || n == "None")
          e = Literal(Value::None(), pos);
        else {
          e = NewExpr(ExprKind::kName, pos);
          e->name = n;
        }
        Next();
        return e;
      }
      case Tok::kString: {
        std::string s;
        while (Cur().type == Tok::kString) {
          s += Cur().text;
          Next();
        }
        return Literal(Value::String(std::move(s)), pos);
      }
      case Tok::kInt: {
        auto e = Literal(Value::Int(t.ival), pos);
        Next();
        return e;
      }
      case Tok::kFloat: {
        auto e = Literal(Value::Float(t.fval), pos);
        Next();
        return e;
      }
      default:
        break;
    }
    if (SkipOp("(")) {
      if (SkipOp(")")) return NewExpr(ExprKind::kTuple, pos);
      ExprPtr e = ParseExpr();
      if (IsOp(",")) {
        auto tup = NewExpr(ExprKind::kTuple, pos);
        tup->args.push_back(std::move(e));
        while (SkipOp(",")) {
          if (IsOp(")")) break;
          tup->args.push_back(ParseExpr());
        }
        e = std::move(tup);
      }
      ExpectOp(")");
      return e;
    }
    if (SkipOp("[")) {
      auto e = NewExpr(ExprKind::kList, pos);
      while (!IsOp("]")) {
        e->args.push_back(ParseExpr());
        if (!SkipOp(",")) break;
      }
      ExpectOp("]");
      return e;
    }
    if (SkipOp("{")) {
      auto e = NewExpr(ExprKind::kDict, pos);
      while (!IsOp("}")) {
        ExprPtr k = ParseExpr();
        ExpectOp(":");
        e->pairs.emplace_back(std::move(k), ParseExpr());
        if (!SkipOp(",")) break;
      }
      ExpectOp("}");
      return e;
    }
    Error("unexpected " + Describe());
  }

  ExprPtr ParsePostfix(ExprPtr e) {
    while (true) {
      const size_t pos = Cur().pos;
      if (SkipOp(".")) {
        if (Cur().type == Tok::kName) {
          auto a = NewExpr(ExprKind::kGetAttr, pos);
          a->name = Cur().text;
          Next();
          a->args.push_back(std::move(e));
          e = std::move(a);
        } else if (Cur().type == Tok::kInt) {
          auto a = NewExpr(ExprKind::kGetItem, pos);
          a->args.push_back(std::move(e));
          a->args.push_back(Literal(Value::Int(Cur().ival), pos));
          Next();
          e = std::move(a);
        } else {
          Error("expected name or number after '.'");
        }
      } else if (SkipOp("[")) {
        DepthGuard guard(this, pos);
        ExprPtr parts[3];
        bool slice = false;
        for (int i = 0; i < 3; ++i) {
          if (!IsOp(":") && !IsOp("]")) parts[i] = ParseExpr();
          if (i < 2 && SkipOp(":")) {
            slice = true;
            continue;
          }
          break;
        }
        ExpectOp("]");
        auto a = NewExpr(slice ? ExprKind::kSlice : ExprKind::kGetItem, pos);
        a->args.push_back(std::move(e));
        if (!slice && !parts[0]) Error("expected an index");
        for (int i = 0; i < (slice ? 3 : 1); ++i) a->args.push_back(std::move(parts[i]));
        e = std::move(a);
      } else if (IsOp("(")) {
        e = ParseCall(std::move(e));
      } else {
        return e;
      }
    }
  }

  ExprPtr ParseCall(ExprPtr callee) {
    const size_t pos = Cur().pos;
    DepthGuard guard(this, pos);
    auto c = NewExpr(ExprKind::kCall, pos);
    c->args.push_back(std::move(callee));
    ParseArgs(c.get());
    return c;
  }

  // `( positional..., name=value... )`
  void ParseArgs(Expr* e) {
    ExpectOp("(");
    while (!IsOp(")")) {
      if (IsOp("*") || IsOp("**")) Error("*args and **kwargs are not supported");
      if (Cur().type == Tok::kName && Peek().type == Tok::kOp && Peek().text == "=") {
        std::string k = Cur().text;
        Next();
        Next();
        e->kwargs.emplace_back(std::move(k), ParseExpr());
      } else {
        if (!e->kwargs.empty()) Error("positional argument after keyword argument");
        e->args.push_back(ParseExpr());
      }
      if (!SkipOp(",")) break;
    }
    ExpectOp(")");
  }

  ExprPtr ParseFilterExpr(ExprPtr e) {
    while (true) {
      const size_t pos = Cur().pos;
      if (SkipOp("|")) {
        auto f = NewExpr(ExprKind::kFilter, pos);
        f->name = ExpectName();
        if (!IsKnownFilter(f->name)) ErrorAt(src_, pos, "No filter named '" + f->name + "'.");
        f->args.push_back(std::move(e));
        if (IsOp("(")) ParseArgs(f.get());
        e = std::move(f);
      } else if (IsName("is")) {
        Next();
        auto t = NewExpr(ExprKind::kTest, pos);
        t->negated = SkipName("not");
        t->name = ExpectName();
        // `is none` etc. parse their names as literals.
        if (!IsKnownTest(t->name)) ErrorAt(src_, pos, "No test named '" + t->name + "'.");
        t->args.push_back(std::move(e));
        if (IsOp("(")) {
          ParseArgs(t.get());
        } else if ((Cur().type == Tok::kName || Cur().type == Tok::kString ||
                    Cur().type == Tok::kInt || Cur().type == Tok::kFloat || IsOp("[") ||
                    IsOp("{")) &&
                   !IsName("else") && !IsName("or") && !IsName("and")) {
          if (IsName("is")) Error("You cannot chain multiple tests with is");
          DepthGuard guard(this, pos);
          t->args.push_back(ParsePostfix(ParsePrimary()));
        }
        e = std::move(t);
      } else if (IsOp("(")) {
        e = ParseCall(std::move(e));
      } else {
        return e;
      }
    }
  }

  const std::string& src_;
  std::vector<Token> toks_;
  size_t pos_ = 0;
  int depth_ = 0;
  int max_depth_;
  int loops_ = 0;
};

}  // namespace

Body ParseTemplate(std::string_view source, int max_depth) {
  const std::string src = Normalize(source);
  Lexer lexer(src);
  Parser parser(src, lexer.Run(), max_depth);
  return parser.Run();
}

}  // namespace quantd::io::chat_template
