// Tests of `attn view`: run the built binary (ATTN_CLI_PATH) on exports built
// here, and check the validation errors (each kind), the --terminal heatmap
// (alignment by display width, shading computed from the weights), the page
// (self-contained, data embedded exactly) and the demos (against
// `attn explain --multi-head` and the attention rules they claim).
#include <attn/io/json.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include <attn/text/width.h>
#include "testing/cli_runner.h"
#include "testing/testing.h"

namespace {

namespace fs = std::filesystem;
using attn::text::display_width;

using attn::testing::CliRun;

CliRun run_cli(const std::string& args) { return attn::testing::run_attn(args); }

fs::path temp_path(const std::string& name) {
  return fs::path(::testing::TempDir()) / ("attn_view_" + std::to_string(::getpid()) + "_" + name);
}

fs::path write_temp(const std::string& name, const std::string& text) {
  const fs::path p = temp_path(name);
  std::ofstream(p, std::ios::binary) << text;
  return p;
}

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

using WeightFn = std::function<double(int l, int h, int i, int j)>;

std::string layers_json(int L, int H, int rows, int cols, const WeightFn& w) {
  std::string s = "[";
  for (int l = 0; l < L; ++l) {
    s += l ? ",[[" : "[[";
    for (int h = 0; h < H; ++h) {
      s += h ? ",[" : "[";
      for (int i = 0; i < rows; ++i) {
        s += i ? ",[" : "[";
        for (int j = 0; j < cols; ++j) {
          if (j) s += ',';
          s += num(w(l, h, i, j));
        }
        s += "]";
      }
      s += "]";
    }
    s += "]]";
  }
  return s + "]";
}

std::string tokens_json(const std::vector<std::string>& t) {
  std::string s = "[";
  for (std::size_t i = 0; i < t.size(); ++i) {
    if (i) s += ',';
    s += quoted(t[i]);
  }
  return s + "]";
}

std::string self_export(const std::vector<std::string>& tokens, int L, int H, const WeightFn& w) {
  const int n = static_cast<int>(tokens.size());
  return "{\"tokens\":" + tokens_json(tokens) + ",\"attention\":" + layers_json(L, H, n, n, w) + "}";
}

double uniform3(int, int, int, int) { return 1.0 / 3; }

// ---- validation: each kind of error ------------------------------------------------

struct BadExport {
  const char* name;
  std::string text;
  std::vector<std::string> expected;  // substrings of the error message
};

// Joins layers built separately (each "[[...]]" from layers_json with L = 1) into one list.
std::string join_layers(const std::vector<std::string>& layers) {
  std::string s = "[";
  for (std::size_t i = 0; i < layers.size(); ++i) {
    if (i) s += ',';
    s.append(layers[i], 1, layers[i].size() - 2);
  }
  return s + "]";
}

double one(int, int, int, int) { return 1.0; }

const std::string kNanText = "{\"tokens\":[\"a\"],\"attention\":[[[[[NaN]]]]]}";

std::vector<BadExport> bad_exports() {
  const std::vector<std::string> t3 = {"a", "b", "c"};
  const std::string good = self_export(t3, 2, 2, uniform3);
  // Two tokens, one layer, one head: rows given as text.
  auto two = [](const std::string& rows) {
    return "{\"tokens\":[\"a\",\"b\"],\"attention\":[[[" + rows + "]]]}";
  };
  std::vector<BadExport> v;
  v.push_back({"truncated", good.substr(0, 40), {"malformed JSON", "at byte 40", "got end of input"}});
  v.push_back(
      {"nan_literal", kNanText, {"malformed JSON", "at byte " + std::to_string(kNanText.find("NaN"))}});
  v.push_back({"not_object", "[1,2]", {"expected a JSON object", "got array"}});
  v.push_back({"missing_attention", "{\"tokens\":[\"a\"]}", {"missing \"attention\""}});
  v.push_back({"missing_tokens", "{\"attention\":[[[[[1]]]]]}", {"missing \"tokens\""}});
  v.push_back({"rows",
               "{\"tokens\":[\"a\",\"b\",\"c\"],\"attention\":" +
                   join_layers({layers_json(1, 2, 3, 3, uniform3), layers_json(1, 2, 2, 3, uniform3)}) + "}",
               {"attention layer 1, head 0: expected 3 rows (one per query token); got 2"}});
  v.push_back(
      {"ragged",
       "{\"tokens\":[\"a\",\"b\",\"c\"],\"attention\":[[[[[0.5,0.5,0],[0.5,0.5,0],[0.5,0.5,0]],"
       "[[0.5,0.5,0],[0.5,0.5,0],[0.5,0.5]]]]]}",
       {"attention layer 0, head 1, row 2 (query 'c'): expected 3 columns (one per key token); got 2"}});
  v.push_back({"null_weight",
               two("[[0.5,0.5],[null,1]]"),
               {"head 0, row 1 (query 'b'), column 0: expected a number; got null", "NaN"}});
  v.push_back({"negative",
               two("[[0.5,0.5],[-0.25,1.25]]"),
               {"row 1 (query 'b'), column 0: weight -0.25 is negative"}});
  v.push_back({"row_sum",
               two("[[0.5,0.4],[0.5,0.5]]"),
               {"row 0 (query 'a'): weights sum to 0.9", "expected 1 within 0.001", "fully masked"}});
  v.push_back({"row_sum_just_outside",
               two("[[0.5,0.5011],[0.5,0.5]]"),
               {"row 0 (query 'a'): weights sum to 1.0011"}});
  v.push_back({"batch",
               "{\"tokens\":[\"a\"],\"attention\":[[[[[1]]]],[[[[1]]],[[[1]]]]]}",
               {"attention layer 1: expected batch size 1", "got 2 batch entries"}});
  v.push_back({"heads_differ",
               "{\"tokens\":[\"a\"],\"attention\":" +
                   join_layers({layers_json(1, 2, 1, 1, one), layers_json(1, 1, 1, 1, one)}) + "}",
               {"attention layer 1 has 1 heads; expected 2 like layer 0"}});
  v.push_back({"layer_names",
               "{\"tokens\":[\"a\"],\"attention\":[[[[[1]]]]],\"layer_names\":[\"x\",\"y\"]}",
               {"\"layer_names\" has 2 names; expected 1"}});
  // Encoder-decoder: cross layers are [1, H, N_dec, N_enc]; here rows have 3 columns instead of 2.
  v.push_back(
      {"cross_shape",
       "{\"encoder_tokens\":[\"x\",\"y\"],\"decoder_tokens\":[\"p\",\"q\",\"r\"],\"cross_attention\":" +
           layers_json(1, 1, 3, 3, uniform3) + "}",
       {"cross_attention layer 0, head 0, row 0 (decoder (target) 'p'): expected 2 columns (one per "
        "encoder (source) token); got 3"}});
  // The optional attribution: tokens and scores must match the export's tokens.
  const std::string ab =
      "{\"tokens\":[\"a\",\"b\"],\"attention\":[[[[[0.5,0.5],[0.5,0.5]]]]],\"attribution\":";
  v.push_back({"attribution_length",
               ab + "{\"tokens\":[\"a\",\"b\"],\"methods\":{\"ig\":[0.5]}}}",
               {"attribution method \"ig\" has 1 scores; expected 2 (one per token)"}});
  v.push_back({"attribution_tokens",
               ab + "{\"tokens\":[\"a\"],\"methods\":{\"ig\":[0.5]}}}",
               {"attribution has 1 tokens; expected 2"}});
  v.push_back({"attribution_token_text",
               ab + "{\"tokens\":[\"a\",\"c\"],\"methods\":{\"ig\":[0.5,1]}}}",
               {"attribution token 1 is 'c'; expected 'b'"}});
  v.push_back({"attribution_null",
               ab + "{\"tokens\":[\"a\",\"b\"],\"methods\":{\"ig\":[0.5,null]}}}",
               {"attribution method \"ig\", token 1 ('b'): expected a number; got null", "NaN"}});
  v.push_back({"attribution_no_methods",
               ab + "{\"tokens\":[\"a\",\"b\"],\"methods\":{}}}",
               {"attribution needs \"methods\""}});
  v.push_back({"mixed_layouts",
               "{\"tokens\":[\"a\"],\"attention\":[[[[[1]]]]],\"encoder_tokens\":[\"a\"]}",
               {"mixes the self-attention layout"}});
  return v;
}

class ViewBadExport : public ::testing::TestWithParam<BadExport> {};

TEST_P(ViewBadExport, IsRefusedWithAClearMessage) {
  const BadExport& c = GetParam();
  const fs::path in = write_temp(std::string(c.name) + ".json", c.text);
  const fs::path out = temp_path(std::string(c.name) + ".html");
  fs::remove(out);
  const CliRun r = run_cli("view '" + in.string() + "' -o '" + out.string() + "'");
  EXPECT_EQ(r.status, 1) << r.err;
  ASSERT_FALSE(c.expected.empty());
  for (const auto& e : c.expected)
    EXPECT_NE(r.err.find(e), std::string::npos) << "missing '" << e << "' in:\n" << r.err;
  EXPECT_FALSE(fs::exists(out)) << "no page may be written for an invalid export";
}

INSTANTIATE_TEST_SUITE_P(Kinds, ViewBadExport, ::testing::ValuesIn(bad_exports()),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(View, AcceptsFullyMaskedRowsAndSumsWithinTolerance) {
  // Row 0 fully masked (all 0), row 1 sums to 1 + 0.0009 (inside the 1e-3 tolerance).
  const fs::path in =
      write_temp("edge.json", "{\"tokens\":[\"a\",\"b\"],\"attention\":[[[[[0,0],[0.5009,0.5]]]]]}");
  const CliRun r = run_cli("view '" + in.string() + "' --terminal");
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("(fully masked)"), std::string::npos) << r.out;
}

// ---- --terminal --------------------------------------------------------------------

// Cells of one heatmap line: the text between the label and "   ->", two columns per key.
std::vector<std::string> shade_cells(const std::string& line, int label_width, int keys) {
  std::size_t i = 0;
  int w = 0;
  while (w < label_width + 2 && i < line.size()) {
    const std::size_t start = i;
    w += attn::text::code_point_width(attn::text::next_code_point(line, i));
    (void)start;
  }
  std::vector<std::string> cells;
  for (int j = 0; j < keys; ++j) {
    const std::size_t start = i;
    attn::text::next_code_point(line, i);
    attn::text::next_code_point(line, i);
    cells.push_back(line.substr(start, i - start));
  }
  return cells;
}

std::vector<std::string> lines_of(const std::string& s) {
  std::vector<std::string> v;
  std::stringstream ss(s);
  for (std::string l; std::getline(ss, l);) v.push_back(l);
  return v;
}

TEST(ViewTerminal, ShadingFollowsTheWeightsAndColumnsAlignWithCjkLabels) {
  // Tokens of display width 2, 6, 1 and 4 (CJK counts two); 2 heads; head 1 is checked.
  const std::vector<std::string> tokens = {"今天", "umbrel", "，", "下雨"};
  const int n = 4;
  auto w = [](int, int h, int i, int j) {
    if (h == 0) return 0.25;
    // Row i: weights proportional to (j + i) % 4 (row 0: 0, 1/6, 2/6, 3/6).
    const double s = 6.0;
    return ((j + i) % 4) / s;
  };
  const fs::path in = write_temp("term.json", self_export(tokens, 1, 2, w));
  const CliRun r = run_cli("view '" + in.string() + "' --terminal --layer 0 --head 1");
  ASSERT_EQ(r.status, 0) << r.err;
  const auto lines = lines_of(r.out);
  // The heatmap rows are the lines starting with "<i> <token>".
  std::vector<std::string> rows;
  for (const auto& l : lines)
    for (int i = 0; i < n; ++i)
      if (l.rfind(std::to_string(i) + " " + tokens[static_cast<std::size_t>(i)], 0) == 0) rows.push_back(l);
  ASSERT_EQ(rows.size(), static_cast<std::size_t>(n)) << r.out;
  int label_w = 0;
  for (int i = 0; i < n; ++i)
    label_w = std::max(label_w, display_width(std::to_string(i) + " " + tokens[static_cast<std::size_t>(i)]));
  const double top = 3.0 / 6;
  const char* shades[] = {" ", "░", "▒", "▓", "█"};
  for (int i = 0; i < n; ++i) {
    const std::string& row = rows[static_cast<std::size_t>(i)];
    // Every row's arrow starts at the same display column.
    const auto arrow = row.find("   -> ");
    ASSERT_NE(arrow, std::string::npos) << row;
    EXPECT_EQ(display_width(row.substr(0, arrow)), label_w + 2 + 2 * n) << row;
    const auto cells = shade_cells(row, label_w, n);
    for (int j = 0; j < n; ++j) {
      const double x = w(0, 1, i, j);
      const int level =
          x <= 0 ? 0 : std::min(4, std::max(1, static_cast<int>(std::ceil(4 * x / top - 1e-12))));
      EXPECT_EQ(cells[static_cast<std::size_t>(j)], std::string(shades[level]) + shades[level])
          << "row " << i << " key " << j << " weight " << x;
    }
    // The strongest key is named with its weight.
    const int best = (3 - i + 4) % 4;
    EXPECT_NE(
        row.find("-> " + std::to_string(best) + " " + tokens[static_cast<std::size_t>(best)] + " 0.500"),
        std::string::npos)
        << row;
  }
  // The units header puts key j's digit over the second column of its cell.
  int headers = 0;
  for (const auto& l : lines) {
    if (l.find(" 0 1 2 3") != std::string::npos) {
      ++headers;
      EXPECT_EQ(display_width(l), label_w + 2 + 2 * n) << l;
    }
  }
  EXPECT_EQ(headers, 1) << r.out;
}

TEST(ViewTerminal, RejectsLayerAndHeadOutOfRange) {
  const fs::path in = write_temp("range.json", self_export({"a", "b", "c"}, 2, 2, uniform3));
  CliRun r = run_cli("view '" + in.string() + "' --terminal --layer 2");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("--layer: expected a layer in 0..1"), std::string::npos) << r.err;
  r = run_cli("view '" + in.string() + "' --terminal --head 5");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("--head: expected a head in 0..1"), std::string::npos) << r.err;
}

// ---- the page ------------------------------------------------------------------------

std::string embedded_data(const std::string& html) {
  const std::string open = "id=\"attn-data\">";
  const auto a = html.find(open);
  if (a == std::string::npos) return "";
  const auto b = html.find("</script>", a);
  return html.substr(a + open.size(), b - a - open.size());
}

TEST(ViewPage, IsSelfContained) {
  const fs::path out = temp_path("demo.html");
  const CliRun r = run_cli("view --demo -o '" + out.string() + "'");
  ASSERT_EQ(r.status, 0) << r.err;
  const std::string html = attn::testing::read_text(out);
  ASSERT_GT(html.size(), 1000u);
  // No resource is fetched: every src= / href= value is neither http(s) nor protocol-relative.
  for (const std::string attr : {"src=", "href="}) {
    for (auto p = html.find(attr); p != std::string::npos; p = html.find(attr, p + 1)) {
      std::string v = html.substr(p + attr.size(), 12);
      if (!v.empty() && (v[0] == '"' || v[0] == '\'')) v = v.substr(1);
      EXPECT_NE(v.rfind("http://", 0), 0u) << html.substr(p, 60);
      EXPECT_NE(v.rfind("https://", 0), 0u) << html.substr(p, 60);
      EXPECT_NE(v.rfind("//", 0), 0u) << html.substr(p, 60);
    }
  }
  for (const char* s : {"<link", "@import", "@font-face", "url(", "<iframe", "fetch(", "XMLHttpRequest"})
    EXPECT_EQ(html.find(s), std::string::npos) << s;
  // No temporary file is left next to the page.
  for (const auto& e : fs::directory_iterator(out.parent_path()))
    EXPECT_EQ(e.path().filename().string().find(out.filename().string() + ".tmp"), std::string::npos);
}

TEST(ViewPage, EmbeddedDataRoundTripsExactly) {
  // Tokens that could break out of the script element or the JSON string, and
  // weights that need all 17 digits.
  const std::vector<std::string> tokens = {"</script>", "\"q\"", "back\\slash", "伞"};
  auto w = [](int l, int h, int i, int j) {
    const double a = 1.0 / 3 + 0.01 * (l + h), b = (1 - a) / 3;
    return j == i ? a : b;
  };
  const std::string text = "{\"model\":\"m <b>\",\"text\":\"t\",\"tokens\":" + tokens_json(tokens) +
                           ",\"attention\":" + layers_json(2, 3, 4, 4, w) + "}";
  const fs::path in = write_temp("rt.json", text), out = temp_path("rt.html");
  const CliRun r = run_cli("view '" + in.string() + "' -o '" + out.string() + "'");
  ASSERT_EQ(r.status, 0) << r.err;
  const std::string html = attn::testing::read_text(out);
  const std::string data = embedded_data(html);
  ASSERT_FALSE(data.empty());
  EXPECT_EQ(data.find('<'), std::string::npos) << "'<' inside the data must be escaped";
  const attn::json::Value original = attn::json::parse(text);
  const attn::json::Value embedded = attn::json::parse(data);
  EXPECT_TRUE(original.at("tokens") == embedded.at("tokens"));
  EXPECT_EQ(embedded.at("model").as_string(), "m <b>");
  const auto& a = original.at("attention");
  const auto& b = embedded.at("attention");
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t l = 0; l < a.size(); ++l)
    for (std::size_t h = 0; h < 3; ++h)
      for (std::size_t i = 0; i < 4; ++i)
        for (std::size_t j = 0; j < 4; ++j)
          EXPECT_EQ(a.at(l).at(std::size_t{0}).at(h).at(i).at(j).as_double(),
                    b.at(l).at(std::size_t{0}).at(h).at(i).at(j).as_double())
              << l << h << i << j;
}

TEST(ViewPage, AttributionRoundTripsExactly) {
  const std::vector<std::string> tokens = {"[CLS]", "好", "</b>"};
  const std::vector<double> ig = {0.0, 1.0 / 3, -2.0 / 7}, ixg = {1e-300, -0.1, 12345.678};
  auto list = [](const std::vector<double>& v) {
    std::string s = "[";
    for (std::size_t i = 0; i < v.size(); ++i) {
      if (i) s += ',';
      s += num(v[i]);
    }
    return s + "]";
  };
  const std::string text = "{\"tokens\":" + tokens_json(tokens) +
                           ",\"attention\":" + layers_json(2, 2, 3, 3, uniform3) +
                           ",\"attribution\":{\"tokens\":" + tokens_json(tokens) +
                           ",\"target\":\"pos\",\"steps\":16,\"completeness_error\":" + num(-1.0 / 9) +
                           ",\"methods\":{\"ig\":" + list(ig) + ",\"input_x_grad\":" + list(ixg) + "}}}";
  const fs::path in = write_temp("attr.json", text), out = temp_path("attr.html"),
                 saved = temp_path("attr_saved.json");
  const CliRun r =
      run_cli("view '" + in.string() + "' -o '" + out.string() + "' --save-export '" + saved.string() + "'");
  ASSERT_EQ(r.status, 0) << r.err;
  for (const std::string& data :
       {embedded_data(attn::testing::read_text(out)), attn::testing::read_text(saved)}) {
    const attn::json::Value e = attn::json::parse(data);
    const auto& a = e.at("attribution");
    EXPECT_EQ(a.at("target").as_string(), "pos");
    EXPECT_EQ(a.at("steps").as_int64(), 16);
    EXPECT_EQ(a.at("completeness_error").as_double(), -1.0 / 9);
    EXPECT_TRUE(a.at("tokens") == attn::json::parse(tokens_json(tokens)));
    for (std::size_t i = 0; i < 3; ++i) {
      EXPECT_EQ(a.at("methods").at("ig").at(i).as_double(), ig[i]);
      EXPECT_EQ(a.at("methods").at("input_x_grad").at(i).as_double(), ixg[i]);
    }
  }
}

TEST(ViewPage, WritesNothingWhenTheDirectoryIsMissing) {
  const fs::path out = temp_path("no_such_dir") / "page.html";
  const CliRun r = run_cli("view --demo -o '" + out.string() + "'");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("cannot create the temporary file"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(out.string()), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(out.parent_path()));
}

TEST(ViewCli, NeedsExactlyOneSourceAndAnOutput) {
  CliRun r = run_cli("view -o x.html");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("expected exactly one source"), std::string::npos) << r.err;
  r = run_cli("view --demo --demo-translation -o x.html");
  EXPECT_EQ(r.status, 1);
  r = run_cli("view --demo");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("expected -o FILE"), std::string::npos) << r.err;
  r = run_cli("view --help");
  EXPECT_EQ(r.status, 0);
  EXPECT_NE(r.out.find("usage: attn view"), std::string::npos);
}

// ---- the demos ---------------------------------------------------------------------------

attn::json::Value demo_export(const std::string& flag) {
  const fs::path exp = temp_path(flag + ".json");
  const CliRun r = run_cli("view --" + flag + " --terminal --save-export '" + exp.string() + "'");
  EXPECT_EQ(r.status, 0) << r.err;
  return attn::json::parse(attn::testing::read_text(exp));
}

TEST(ViewDemo, HeadsZeroAndOneAreExplainsMultiHeadWeights) {
  const attn::json::Value e = demo_export("demo");
  const CliRun x = run_cli("explain --multi-head --json");
  ASSERT_EQ(x.status, 0) << x.err;
  const attn::json::Value ex = attn::json::parse(x.out);
  const std::size_t q = static_cast<std::size_t>(ex.at("query").at("position").as_int64());  // from 0
  const auto& layer0 = e.at("attention").at(std::size_t{0}).at(std::size_t{0});  // [H, N, N]
  EXPECT_EQ(layer0.size(), 4u);
  for (std::size_t h = 0; h < 2; ++h) {
    const auto& want = ex.at("head_weights").at(h);
    const auto& got = layer0.at(h).at(q);
    ASSERT_EQ(want.size(), got.size());
    for (std::size_t j = 0; j < want.size(); ++j)
      EXPECT_NEAR(got.at(j).as_double(), want.at(j).as_double(), 2e-6) << "head " << h << " key " << j;
  }
}

TEST(ViewDemo, TranslationHasCausalDecoderAndNormalisedCrossRows) {
  const attn::json::Value e = demo_export("demo-translation");
  const std::size_t nd = e.at("decoder_tokens").size(), ne = e.at("encoder_tokens").size();
  for (const auto& layer : e.at("decoder_attention").items())
    for (const auto& head : layer.at(std::size_t{0}).items())
      for (std::size_t i = 0; i < nd; ++i)
        for (std::size_t j = i + 1; j < nd; ++j)
          EXPECT_EQ(head.at(i).at(j).as_double(), 0.0) << i << "," << j;
  for (const auto& layer : e.at("cross_attention").items())
    for (const auto& head : layer.at(std::size_t{0}).items()) {
      ASSERT_EQ(head.size(), nd);
      for (const auto& row : head.items()) {
        ASSERT_EQ(row.size(), ne);
        double s = 0;
        for (const auto& x : row.items()) s += x.as_double();
        EXPECT_NEAR(s, 1.0, 1e-5);
      }
    }
}

}  // namespace
