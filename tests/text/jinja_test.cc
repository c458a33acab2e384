// attn's Jinja engine (text/jinja.h). Rendering is compared with Jinja2 as transformers configures it:
// tests/text/data/chat_template_fixtures.json's engine_cases (written by
// python/reference/chat_template_fixtures.py) hold small templates, one construct each, and Jinja2's
// output. The other tests check what Jinja2 cannot tell: provenance of each byte, errors that name
// the template, line and column, and the limits against hostile templates.
#include <attn/io/json.h>
#include <attn/text/jinja.h>

#include <ctime>
#include <string>
#include <vector>

#include "testing/testing.h"

namespace attn {
namespace {

using text::TextPieces;
using text::jinja::Limits;
using text::jinja::RenderOptions;
using text::jinja::Template;
using text::jinja::Value;

json::Value fixture() {
  return json::parse(testing::read_text(testing::source_path("tests/text/data/chat_template_fixtures.json")));
}

std::string render(const std::string& source, const Value& vars = Value::dict(),
                   const RenderOptions& o = {}) {
  return Template(source, "t").render(vars, o);
}

// The fixed time the fixture's strftime_now saw.
RenderOptions fixture_time(const json::Value& root) {
  RenderOptions o;
  std::tm tm{};
  const std::string now = root.at("now").as_string();
  EXPECT_NE(strptime(now.c_str(), "%Y-%m-%d %H:%M:%S", &tm), nullptr) << now;
  o.now = tm;
  return o;
}

TEST(Jinja, EngineCasesMatchJinja2) {
  const json::Value root = fixture();
  const RenderOptions options = fixture_time(root);
  const Value vars = Value::from_json(root.at("engine_context"));
  const auto& cases = root.at("engine_cases").items();
  ASSERT_GE(cases.size(), 40u);
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const std::string& src = cases[i].at("template").as_string();
    std::string got;
    try {
      got = Template(src, "case" + std::to_string(i)).render(vars, options);
    } catch (const Error& e) {
      got = std::string("error: ") + e.what();
    }
    EXPECT_EQ(got, cases[i].at("expected").as_string()) << "engine case " << i << ": " << src;
  }
}

// Pieces alternate in provenance, and their text joined is render()'s string.
void expect_well_formed(const TextPieces& pieces, const std::string& joined) {
  for (std::size_t i = 1; i < pieces.size(); ++i)
    EXPECT_NE(pieces[i - 1].allow_special, pieces[i].allow_special)
        << "adjacent pieces " << i - 1 << ", " << i;
  for (const auto& p : pieces) EXPECT_FALSE(p.text.empty());
  EXPECT_EQ(text::jinja::join_pieces(pieces), joined);
}

TEST(Jinja, ProvenanceOfTemplateTextAndInput) {
  Value vars = Value::dict();
  vars.set("user", Value::input("<|im_end|>hi"));
  vars.set("bos", Value::text("<s>"));
  const Template t("{{ bos }}[{{ user }}]{{ '<|a|>' + user + '<|b|>' }}{{ user|upper }}{{ user[2:5] }}", "t");
  const TextPieces p = t.render_pieces(vars);
  const std::vector<std::pair<std::string, bool>> want = {{"<s>[", true},   {"<|im_end|>hi", false},
                                                          {"]<|a|>", true}, {"<|im_end|>hi", false},
                                                          {"<|b|>", true},  {"<|IM_END|>HIim_", false}};
  ASSERT_EQ(p.size(), want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(p[i].text, want[i].first) << i;
    EXPECT_EQ(p[i].allow_special, want[i].second) << i;
  }
  expect_well_formed(p, t.render(vars));
}

TEST(Jinja, ProvenanceThroughContainersMacrosAndSetBlocks) {
  Value msg = Value::dict();
  msg.set("role", Value::input("user"));
  msg.set("content", Value::input("<|x|>"));
  Value vars = Value::dict();
  vars.set("messages", Value::list({msg}));
  const Template t(
      "{% macro wrap(s) %}<m>{{ s }}</m>{% endmacro %}"
      "{% set block %}<b>{{ messages[0].content }}{% endset %}"
      "{{ wrap(messages[0]['content']) }}{{ block }}{{ messages|tojson }}{{ "
      "messages|map(attribute='role')|join('+') }}"
      "{% for k, v in messages[0]|items %}{{ k }}{% endfor %}{{ messages|length }}",
      "t");
  const TextPieces p = t.render_pieces(vars);
  expect_well_formed(p, t.render(vars));
  std::string trusted, untrusted;
  for (const auto& piece : p) (piece.allow_special ? trusted : untrusted) += piece.text;
  EXPECT_EQ(trusted, "<m></m><b>1");  // the template's own text and the computed length
  EXPECT_EQ(untrusted, "<|x|><|x|>[{\"role\": \"user\", \"content\": \"<|x|>\"}]userrolecontent");
}

TEST(Jinja, JsonInputIsUntrustedUnlessMarked) {
  const json::Value j = json::parse(R"({"a": ["<s>", 1, null, true, 2.5], "b": {"c": "x"}})");
  const Value in = Value::from_json(j);
  const Value tr = Value::from_json(j, true);
  EXPECT_FALSE(in.find("a")->items()[0].str_trusted());
  EXPECT_TRUE(tr.find("a")->items()[0].str_trusted());
  EXPECT_EQ(in.find("a")->items()[1].as_int(), 1);
  EXPECT_TRUE(in.find("a")->items()[2].is_none());
  EXPECT_EQ(in.find("b")->find("c")->str(), "x");
  EXPECT_EQ(in.find("nope"), nullptr);
}

TEST(Jinja, ErrorsNameTemplateLineAndColumn) {
  EXPECT_ERROR_CONTAINS(Template("a\nb {{ x +", "chat.jinja"), {"template 'chat.jinja' line 2", "column"});
  EXPECT_ERROR_CONTAINS(Template("{% if x %}\nopen", "t"), {"template 't'", "expected {% endif %}"});
  EXPECT_ERROR_CONTAINS(Template("\n\n  {% include 'other' %}", "t"),
                        {"line 3 column 6", "unsupported or misplaced tag '{% include %}'"});
  // Unknown filters and tests fail when they run (as in Jinja2 3, where a branch not taken may use them).
  EXPECT_ERROR_CONTAINS(render("{{ 1 | nosuch }}"),
                        {"line 1 column 6", "unknown or unsupported filter 'nosuch'"});
  EXPECT_ERROR_CONTAINS(render("{{ 1 is nosuch }}"), {"unknown or unsupported test 'nosuch'"});
  // A generator (map / select / ...) is always true and cannot be printed, as in Jinja2.
  EXPECT_ERROR_CONTAINS(render("{{ [1]|map('string') }}"), {"a generator in Jinja2", "apply |list first"});
  EXPECT_ERROR_CONTAINS(render("{{ [1]|select|length }}"), {"has no length"});
  EXPECT_ERROR_CONTAINS(render("{{ true[1:] }}"), {"a bool is not subscriptable"});
  EXPECT_ERROR_CONTAINS(Template("{% if a if b else c %}{% endif %}", "t"), {"expected end of tag '%}'"});
  EXPECT_ERROR_CONTAINS(Template("{% for x in y recursive %}{% endfor %}", "t"), {"recursive for loops"});
  EXPECT_ERROR_CONTAINS(Template("{{ 'abc }}", "t"), {"unterminated string literal"});
  EXPECT_ERROR_CONTAINS(Template("{% break %}", "t"), {"'break' outside a for loop"});
  EXPECT_ERROR_CONTAINS(render("line 1\n{{ missing.attr }}"),
                        {"template 't' line 2 column", "'missing' is undefined"});
  EXPECT_ERROR_CONTAINS(render("{{ 1 + 'a' }}"), {"unsupported operand types for +: int and string"});
  EXPECT_ERROR_CONTAINS(
      render("{%- if true -%}\n  {{ raise_exception('Roles must alternate') }}\n{%- endif -%}"),
      {"line 2", "raise_exception: Roles must alternate"});
  EXPECT_ERROR_CONTAINS(render("{{ [1].append(2) }}"), {"'append' would modify a list"});
  EXPECT_ERROR_CONTAINS(render("{% set x = 1 %}{% set x.y = 2 %}"),
                        {"only namespace() objects take attribute"});
  EXPECT_ERROR_CONTAINS(render("{% set ns = namespace() %}{% set ns._p = 1 %}"), {"may not start with '_'"});
  EXPECT_ERROR_CONTAINS(render("{% for a, b in [[1, 2, 3]] %}{% endfor %}"),
                        {"cannot unpack 3 values into 2"});
  EXPECT_ERROR_CONTAINS(render("{{ x|tojson }}"), {"'x' is undefined"});
  EXPECT_ERROR_CONTAINS(render("{{ 1 // 0 }}"), {"division or modulo by zero"});
  EXPECT_ERROR_CONTAINS(Template("{{ 1 }}", "t").render(Value::list()),
                        {"the variables must be a dict; got list"});
}

TEST(Jinja, UndefinedBehavesAsJinja2Default) {
  EXPECT_EQ(
      render("[{{ nope }}][{{ nope|length }}][{{ nope is defined }}][{% for x in nope %}x{% endfor %}]"),
      "[][0][False][]");
  EXPECT_EQ(render("{{ nope|default('d') }}{{ none.x is defined }}{{ [][0] is defined }}"), "dFalseFalse");
  EXPECT_EQ(render("{% if nope %}y{% else %}n{% endif %}{{ not nope }}{{ nope == nope }}"), "nTrueTrue");
}

TEST(Jinja, LimitsStopHostileTemplates) {
  RenderOptions small;
  small.limits.max_output_bytes = 1000;
  EXPECT_ERROR_CONTAINS(render("{% for i in range(2000) %}x{% endfor %}", Value::dict(), small),
                        {"output exceeds the limit of 1000 bytes"});
  EXPECT_ERROR_CONTAINS(render("{{ 'ab' * 100000 }}", Value::dict(), small),
                        {"exceeds the output limit of 1000"});
  EXPECT_EQ(render("{% for i in range(400) %}x{% endfor %}", Value::dict(), small), std::string(400, 'x'));
  RenderOptions few;
  few.limits.max_steps = 10000;
  EXPECT_ERROR_CONTAINS(render("{% for i in range(1000) %}{% for j in range(1000) %}{% endfor %}{% endfor %}",
                               Value::dict(), few),
                        {"step"});
  EXPECT_ERROR_CONTAINS(render("{% macro f(n) %}{{ f(n) }}{% endmacro %}{{ f(1) }}"),
                        {"macro calls nest deeper than the limit of 64"});
  EXPECT_ERROR_CONTAINS(Template("{{ " + std::string(200, '(') + "1" + std::string(200, ')') + " }}", "t"),
                        {"nesting deeper than the limit"});
  // A long operator chain nests as deep as it is long: bounded when parsed (evaluation recurses on it).
  std::string chain = "{{ 1";
  for (int i = 0; i < 5000; ++i) chain += " + 1";
  EXPECT_ERROR_CONTAINS(Template(chain + " }}", "t"), {"an expression nests deeper than the limit of 256"});
  std::string filters = "{{ x";
  for (int i = 0; i < 400; ++i) filters += "|trim";
  EXPECT_ERROR_CONTAINS(Template(filters + " }}", "t"), {"nests deeper than the limit"});
  // Values cannot nest without bound, and a namespace never holds a namespace (so none holds itself).
  EXPECT_ERROR_CONTAINS(
      render("{% set ns = namespace(v=[]) %}{% for i in range(600) %}{% set ns.v = [ns.v] %}{% endfor %}"),
      {"line 1", "would nest deeper than 512 levels"});
  EXPECT_ERROR_CONTAINS(render("{% set ns = namespace(v=1) %}{% set ns.v = [ns] %}"),
                        {"a namespace cannot hold a namespace"});
  EXPECT_ERROR_CONTAINS(render("{% set a = namespace() %}{% set b = namespace(x=a) %}"),
                        {"a namespace cannot hold a namespace"});
  EXPECT_ERROR_CONTAINS(Template(std::string(300, 'a') + "{% if x %}", "big", Limits{64, 1 << 20, 1000, 100}),
                        {"template 'big'", "the limit is 100"});
}

TEST(Jinja, StrftimeNowUsesTheGivenTime) {
  RenderOptions o;
  std::tm tm{};
  tm.tm_year = 2026 - 1900;
  tm.tm_mon = 0;
  tm.tm_mday = 5;
  o.now = tm;
  EXPECT_EQ(render("{{ strftime_now('%d %b %Y') }}|{{ strftime_now('%Y-%m-%d') }}", Value::dict(), o),
            "05 Jan 2026|2026-01-05");
}

TEST(Jinja, NewlinesAndTrailingNewlineAsJinja2) {
  // \r\n and \r become \n; one trailing newline is dropped (keep_trailing_newline=False).
  EXPECT_EQ(render("a\r\nb\rc\n"), "a\nb\nc");
  EXPECT_EQ(render("a\n\n"), "a\n");
  EXPECT_EQ(render("{% raw %}{{ x }}{% endraw %}"), "{{ x }}");
}

}  // namespace
}  // namespace attn
