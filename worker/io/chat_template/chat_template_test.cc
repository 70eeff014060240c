#include "worker/io/chat_template/chat_template.h"

#include <gtest/gtest.h>

#include "worker/common/cancellation.h"

namespace quantd::io {
namespace {

using nlohmann::json;

StatusOr<std::string> Render(const std::string& source, const json& context = json::object(),
                             const ChatTemplateLimits& limits = {}) {
  auto t = ChatTemplate::Parse(source, limits);
  if (!t.ok()) return t.status();
  return t->Render(context);
}

std::string Ok(const std::string& source, const json& context = json::object()) {
  auto r = Render(source, context);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *r : "";
}

Status Err(const std::string& source, const json& context = json::object(),
           const ChatTemplateLimits& limits = {}) {
  auto r = Render(source, context, limits);
  EXPECT_FALSE(r.ok()) << "rendered: " << *r;
  return r.ok() ? OkStatus() : r.status();
}

const json kChat = {{"bos_token", "<s>"},
                    {"add_generation_prompt", true},
                    {"messages",
                     {{{"role", "system"}, {"content", "Be brief."}},
                      {{"role", "user"}, {"content", "Hi"}},
                      {{"role", "assistant"}, {"content", "Hello."}}}}};

TEST(ChatTemplateTest, RendersChatMl) {
  const std::string t =
      "{{ bos_token }}{% for m in messages %}\n"
      "<|im_start|>{{ m.role }}\n{{ m['content'] }}<|im_end|>\n"
      "{% endfor %}\n"
      "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}\n";
  EXPECT_EQ(Ok(t, kChat),
            "<s><|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
            "<|im_start|>assistant\nHello.<|im_end|>\n<|im_start|>assistant\n");
}

TEST(ChatTemplateTest, TrimBlocksAndLstripBlocks) {
  EXPECT_EQ(Ok("a\n  {% if true %}\n  b\n  {% endif %}\nc"), "a\n  b\nc");
  EXPECT_EQ(Ok("a  {%- if true -%}  b  {%- endif %}"), "ab");
  EXPECT_EQ(Ok("x  {%+ if true %}y{% endif %}"), "x  y");
  EXPECT_EQ(Ok("  {{ 1 }}\n  {# c #}\nz\n"), "  1\nz");  // one trailing newline dropped
  EXPECT_EQ(Ok("{% raw %}{{ x }}{% endraw %}"), "{{ x }}");
}

TEST(ChatTemplateTest, PrintsLikePython) {
  EXPECT_EQ(Ok("{{ [1, 'a', none, true, 2.0, {'k': (1,)}] }}"),
            "[1, 'a', None, True, 2.0, {'k': (1,)}]");
  EXPECT_EQ(Ok("{{ 1e16 }} {{ 0.0001 }} {{ 1/3 }} {{ 10 // 3 }} {{ -7 % 3 }}"),
            "1e+16 0.0001 0.3333333333333333 3 2");
  EXPECT_EQ(Ok("{{ {'a': [1, 2]} | tojson }}|{{ 'é\"' | tojson }}"), "{\"a\": [1, 2]}|\"é\\\"\"");
}

TEST(ChatTemplateTest, OrderedContextKeepsKeyOrder) {
  auto t = ChatTemplate::Parse("{{ tool | tojson }}{% for k in tool %}{{ k }}{% endfor %}");
  ASSERT_TRUE(t.ok());
  const char* doc = R"({"tool": {"name": "f", "description": "d", "arguments": {}}})";
  EXPECT_EQ(*t->Render(nlohmann::ordered_json::parse(doc)),
            R"({"name": "f", "description": "d", "arguments": {}}namedescriptionarguments)");
  EXPECT_EQ(*t->Render(json::parse(doc)),
            R"({"arguments": {}, "description": "d", "name": "f"}argumentsdescriptionname)");
}

TEST(ChatTemplateTest, LoopsNamespacesMacros) {
  EXPECT_EQ(Ok("{% set ns = namespace(n=0) %}{% for x in range(10) if x is odd %}"
               "{% if x > 6 %}{% break %}{% endif %}{% set ns.n = ns.n + x %}"
               "{{ loop.index }}{% endfor %}={{ ns.n }}"),
            "123=9");
  EXPECT_EQ(Ok("{% macro m(a, b='B') %}{{ a }}{{ b }}{% endmacro %}{{ m(1) }}{{ m(2, b=3) }}"),
            "1B23");
  EXPECT_EQ(Ok("{% for k, v in {'b': 1, 'a': 2} | dictsort %}{{ k }}{{ v }}{% else %}none"
               "{% endfor %}{% for x in [] %}{% else %}empty{% endfor %}"),
            "a2b1empty");
  EXPECT_EQ(Ok("{% for m in messages[::-1] %}{{ m.role[0] }}{% endfor %}", kChat), "aus");
}

TEST(ChatTemplateTest, UndefinedLikeJinja2) {
  EXPECT_EQ(Ok("[{{ nothing }}]{{ nothing is defined }}{% for x in nothing %}x{% endfor %}"
               "{{ nothing | length }}{{ {'a': 1}.b is undefined }}"),
            "[]False0True");
  const Status s = Err("{{ nothing.attr }}");
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("'nothing' is undefined"), std::string::npos) << s;
}

TEST(ChatTemplateTest, RaiseExceptionCarriesMessage) {
  const Status s =
      Err("{% if messages[0].role != 'user' %}{{ raise_exception('roles must alternate') }}"
          "{% endif %}",
          kChat);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("roles must alternate"), std::string::npos) << s;
}

TEST(ChatTemplateTest, SyntaxErrorsNameLineAndColumn) {
  Status s = ChatTemplate::Parse("ok\n{% if x %}\n{{ 1 + }}\n{% endif %}").status();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("line 3:8"), std::string::npos) << s;
  s = ChatTemplate::Parse("{% for x in y %}").status();
  EXPECT_NE(s.message().find("expected 'endfor'"), std::string::npos) << s;
  s = ChatTemplate::Parse("{{ x | nosuchfilter }}").status();
  EXPECT_NE(s.message().find("No filter named 'nosuchfilter'"), std::string::npos) << s;
}

TEST(ChatTemplateTest, RefusesFileAccessAndUnsupportedTags) {
  for (const char* t : {"{% include 'x' %}", "{% import 'x' as y %}", "{% extends 'x' %}",
                        "{% block b %}{% endblock %}", "{% from 'x' import y %}"}) {
    const Status s = ChatTemplate::Parse(t).status();
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << t;
    EXPECT_NE(s.message().find("unsupported tag"), std::string::npos) << s;
  }
}

TEST(ChatTemplateTest, RefusesWhatItDoesNotImplement) {
  // jinja2 has these; the engine refuses them rather than render differently.
  EXPECT_EQ(ChatTemplate::Parse("{{ 'x' | center }}").status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(ChatTemplate::Parse("{% for x in y recursive %}{% endfor %}").status().code(),
            StatusCode::kInvalidArgument);
  const Status s = Err("{{ '%s' % 1 }}");
  EXPECT_NE(s.message().find("not supported"), std::string::npos) << s;
}

TEST(ChatTemplateTest, SandboxRefusesMutation) {
  EXPECT_EQ(Ok("[{{ messages.append }}][{{ messages.__class__ }}]", kChat), "[][]");
  const Status s = Err("{% set l = [1] %}{{ l.append(2) }}");
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("unsafe"), std::string::npos) << s;
}

TEST(ChatTemplateTest, TypeErrorsNameTheLine) {
  const Status s = Err("a\nb\n{{ 1 + 'x' }}");
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("line 3"), std::string::npos) << s;
}

TEST(ChatTemplateTest, IntegerOverflowIsRefused) {
  for (const char* t : {"{{ 9223372036854775807 + 1 }}", "{{ 2 ** 63 }}",
                        "{{ -(-9223372036854775807 - 1) }}", "{{ 3037000500 * 3037000500 }}"}) {
    EXPECT_EQ(Err(t).code(), StatusCode::kInvalidArgument) << t;
  }
  EXPECT_EQ(ChatTemplate::Parse("{{ 99999999999999999999 }}").status().code(),
            StatusCode::kInvalidArgument);
}

TEST(ChatTemplateTest, TemplateSizeLimit) {
  ChatTemplateLimits l;
  l.max_template_bytes = 10;
  EXPECT_EQ(ChatTemplate::Parse("01234567890", l).status().code(), StatusCode::kResourceExhausted);
}

TEST(ChatTemplateTest, StepLimit) {
  ChatTemplateLimits l;
  l.max_steps = 100000;
  const Status s =
      Err("{% for a in range(1000) %}{% for b in range(1000) %}{% endfor %}{% endfor %}",
          json::object(), l);
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted) << s;
}

TEST(ChatTemplateTest, DepthLimits) {
  const Status parse =
      ChatTemplate::Parse("{{ " + std::string(200, '(') + "1" + std::string(200, ')') + " }}")
          .status();
  EXPECT_EQ(parse.code(), StatusCode::kResourceExhausted) << parse;
  std::string blocks;
  for (int i = 0; i < 100; ++i) blocks += "{% if true %}";
  for (int i = 0; i < 100; ++i) blocks += "{% endif %}";
  EXPECT_EQ(ChatTemplate::Parse(blocks).status().code(), StatusCode::kResourceExhausted);
  const Status rec = Err("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}");
  EXPECT_EQ(rec.code(), StatusCode::kResourceExhausted) << rec;
}

TEST(ChatTemplateTest, OutputLimitAndHugeValuesRefusedBeforeAllocating) {
  ChatTemplateLimits l;
  l.max_output_bytes = 1000;
  EXPECT_EQ(Err("{% for i in range(2000) %}x{% endfor %}", json::object(), l).code(),
            StatusCode::kResourceExhausted);
  EXPECT_EQ(Err("{{ 'a' * 10**9 }}").code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(Err("{{ [1, 2] * 10**12 }}").code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(Err("{{ range(10**9) | length }}").code(), StatusCode::kResourceExhausted);
}

TEST(ChatTemplateTest, HostileValuesAreBounded) {
  // Nesting deeper than Value::kMaxNesting would make printing recurse deeply.
  EXPECT_EQ(Err("{% set ns = namespace(l=[]) %}{% for i in range(1000) %}"
                "{% set ns.l = [ns.l] %}{% endfor %}{{ ns.l }}")
                .code(),
            StatusCode::kResourceExhausted);
  // A namespace inside a namespace could form a cycle.
  EXPECT_EQ(Err("{% set ns = namespace() %}{% set ns.me = [ns] %}").code(),
            StatusCode::kInvalidArgument);
  // Shared strings print far past the output limit: refused while printing.
  EXPECT_EQ(Err("{% set s = 'a' * 1000000 %}{{ [s] * 100 }}").code(),
            StatusCode::kResourceExhausted);
  // Comparing shared containers element by element is charged in steps.
  ChatTemplateLimits l;
  l.max_steps = 100000;
  EXPECT_EQ(
      Err("{% set a = range(1000) | list %}{% set m = [a] * 1000 %}{{ m == m }}", json::object(), l)
          .code(),
      StatusCode::kResourceExhausted);
}

TEST(ChatTemplateTest, Cancellation) {
  CancellationScope scope([] { return true; });
  auto t = ChatTemplate::Parse("{% for i in range(100000) %}{% endfor %}");
  ASSERT_TRUE(t.ok());
  const Status s = t->Render(json::object()).status();
  EXPECT_EQ(s.code(), StatusCode::kCancelled) << s;
}

TEST(ChatTemplateTest, ContextMustBeAnObject) {
  auto t = ChatTemplate::Parse("x");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->Render(json::array()).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace quantd::io
