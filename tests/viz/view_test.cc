// Viewing (include/attn/viz/view.h): the terminal heatmap (alignment by display
// width, shading computed from the weights, 0-based ranges), the page
// (self-contained, data embedded exactly) and the demos (the rules they claim).
#include <attn/core/error.h>
#include <attn/io/json.h>
#include <attn/ops/attention.h>
#include <attn/text/width.h>
#include <attn/viz/view.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include "testing/testing.h"
#include "viz/viz_test_util.h"

namespace attn::viz {
namespace {

using namespace attn::viz::testing;
using attn::text::display_width;

// ---- the terminal ------------------------------------------------------------------

// Cells of one heatmap line: the text between the label and "   ->", two columns per key.
std::vector<std::string> shade_cells(const std::string& line, int label_width, int keys) {
  std::size_t i = 0;
  int w = 0;
  while (w < label_width + 2 && i < line.size()) w += text::code_point_width(text::next_code_point(line, i));
  std::vector<std::string> cells;
  for (int j = 0; j < keys; ++j) {
    const std::size_t start = i;
    text::next_code_point(line, i);
    text::next_code_point(line, i);
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
  const Export e = parse_export(self_export(tokens, 1, 2, w));
  const std::string out = terminal_heatmap(e, {.set = "", .layer = 0, .head = 1});
  const auto lines = lines_of(out);
  // The header names layer and head from 0.
  EXPECT_EQ(lines.at(0),
            "self-attention, layer 0 of 0..0, head 1 of 0..1: 4 queries (rows) x 4 keys (columns)");
  // The heatmap rows are the lines starting with "<i> <token>" (positions from 0).
  std::vector<std::string> rows;
  for (const auto& l : lines)
    for (int i = 0; i < n; ++i)
      if (l.rfind(std::to_string(i) + " " + tokens[static_cast<std::size_t>(i)], 0) == 0) rows.push_back(l);
  ASSERT_EQ(rows.size(), static_cast<std::size_t>(n)) << out;
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
  EXPECT_EQ(headers, 1) << out;
}

TEST(ViewTerminal, RejectsLayerAndHeadOutOfRange) {
  const Export e = parse_export(self_export({"a", "b", "c"}, 2, 2, uniform3));
  EXPECT_ERROR_CONTAINS(terminal_heatmap(e, {.set = "", .layer = 2, .head = 0}),
                        {"--layer: expected a layer in 0..1"});
  EXPECT_ERROR_CONTAINS(terminal_heatmap(e, {.set = "", .layer = 0, .head = 5}),
                        {"--head: expected a head in 0..1"});
  EXPECT_ERROR_CONTAINS(terminal_heatmap(e, {.set = "", .layer = -1, .head = 0}),
                        {"--layer: expected a layer in 0..1"});
  EXPECT_ERROR_CONTAINS(terminal_heatmap(e, {.set = "cross_attention", .layer = 0, .head = 0}),
                        {"export has no \"cross_attention\""});
  // The last layer and head are in range.
  EXPECT_NE(terminal_heatmap(e, {.set = "attention", .layer = 1, .head = 1})
                .find("layer 1 of 0..1, head 1 of 0..1"),
            std::string::npos);
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
  const std::string html = page_html(demo_translation(synthetic_translation()));
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
  // The placeholder is replaced.
  EXPECT_EQ(html.find("/*ATTN_DATA*/null"), std::string::npos);
}

// issue 17 (zh-view): the page's first language, the CJK font list and the legend.
TEST(ViewPage, LanguageFontsAndLegend) {
  const Export e = demo_translation(synthetic_translation());
  const std::string en = page_html(e);
  EXPECT_NE(en.find("id=\"attn-lang\">\"en\"</script>"), std::string::npos);
  PageOptions zh;
  zh.lang = "zh";
  const std::string page = page_html(e, zh);
  EXPECT_NE(page.find("id=\"attn-lang\">\"zh\"</script>"), std::string::npos);
  EXPECT_EQ(page.find("/*ATTN_LANG*/"), std::string::npos);
  for (const char* s :
       {"\"Noto Sans CJK SC\"", "\"Source Han Sans SC\"", "\"WenQuanYi Micro Hei\"", "\"PingFang SC\"",
        "\"Microsoft YaHei\"", "id=\"legend\"", "id=\"cjk-notice\"", "id=\"lang\"", "线越粗"})
    EXPECT_NE(page.find(s), std::string::npos) << s;
  PageOptions bad;
  bad.lang = "fr";
  try {
    page_html(e, bad);
    FAIL() << "expected an error";
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find("'fr'"), std::string::npos) << err.what();
  }
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
  const std::string html = page_html(parse_export(text));
  const std::string data = embedded_data(html);
  ASSERT_FALSE(data.empty());
  EXPECT_EQ(data.find('<'), std::string::npos) << "'<' inside the data must be escaped";
  const json::Value original = json::parse(text);
  const json::Value embedded = json::parse(data);
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
  // The embedded data is the one reader's input: it reads back as the same export.
  expect_same_export(parse_export(data), parse_export(text));
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
  const Export e = parse_export(text);
  const fs::path saved = temp_path("attr_saved.json");
  save_export(saved.string(), e);
  for (const std::string& data : {embedded_data(page_html(e)), attn::testing::read_text(saved.string())}) {
    const json::Value v = json::parse(data);
    const auto& a = v.at("attribution");
    EXPECT_EQ(a.at("target").as_string(), "pos");
    EXPECT_EQ(a.at("steps").as_int64(), 16);
    EXPECT_EQ(a.at("completeness_error").as_double(), -1.0 / 9);
    EXPECT_TRUE(a.at("tokens") == json::parse(tokens_json(tokens)));
    for (std::size_t i = 0; i < 3; ++i) {
      EXPECT_EQ(a.at("methods").at("ig").at(i).as_double(), ig[i]);
      EXPECT_EQ(a.at("methods").at("input_x_grad").at(i).as_double(), ixg[i]);
    }
  }
  fs::remove(saved);
}

// ---- the demos ---------------------------------------------------------------------------

// softmax(q_i · K^T / sqrt(d_k)) of head h (columns h*4 .. h*4+3 of the projections), by hand.
std::vector<double> head_row(const DemoExample& ex, int h, int i) {
  const int64_t N = static_cast<int64_t>(ex.words.size()), d = ex.d_model;
  auto proj = [&](const std::vector<double>& w, int64_t row, int c) {
    double s = 0;
    for (int64_t k = 0; k < d; ++k)
      s += ex.x[static_cast<std::size_t>(row * d + k)] * w[static_cast<std::size_t>(k * d + h * 4 + c)];
    return s;
  };
  std::vector<double> scores;
  for (int64_t j = 0; j < N; ++j) {
    double s = 0;
    for (int c = 0; c < 4; ++c) s += proj(ex.wq, i, c) * proj(ex.wk, j, c);
    scores.push_back(s / 2.0);
  }
  const double m = *std::max_element(scores.begin(), scores.end());
  double z = 0;
  for (double& s : scores) z += (s = std::exp(s - m));
  for (double& s : scores) s /= z;
  return scores;
}

TEST(ViewDemo, HeadsZeroAndOneUseTheExamplesProjections) {
  const DemoExample ex = synthetic_example();
  const Export e = demo_self_attention(ex);
  EXPECT_EQ(e.tokens, ex.words);
  EXPECT_EQ(e.text, ex.gloss);
  ASSERT_EQ(e.sets.size(), 1u);
  ASSERT_EQ(e.sets[0].layers.size(), 2u);
  EXPECT_EQ(e.layer_names.size(), 2u);
  const Layer& l0 = e.sets[0].layers[0];
  EXPECT_EQ(l0.heads, 4);
  for (int h = 0; h < 2; ++h)
    for (int i = 0; i < 7; ++i) {
      const std::vector<double> want = head_row(ex, h, i);
      for (int j = 0; j < 7; ++j)
        EXPECT_NEAR(l0.at(h, i, j), want[static_cast<std::size_t>(j)], 2e-6) << h << i << j;
    }
  // The same example gives the same export (seeded heads are a pure function of the seed).
  EXPECT_EQ(export_json(demo_self_attention(ex)), export_json(e));
}

TEST(ViewDemo, TranslationHasCausalDecoderAndNormalisedCrossRows) {
  const DemoTranslation t = synthetic_translation();
  const Export e = demo_translation(t);
  EXPECT_TRUE(e.encoder_decoder);
  EXPECT_EQ(e.text, "今天下雨，我没带伞 -> " + t.source.gloss);
  const std::size_t nd = e.decoder_tokens.size(), ne = e.encoder_tokens.size();
  ASSERT_EQ(nd, t.target.size());
  ASSERT_EQ(ne, t.source.words.size());
  for (const Layer& layer : e.set("decoder_attention").layers)
    for (int64_t h = 0; h < layer.heads; ++h)
      for (std::size_t i = 0; i < nd; ++i)
        for (std::size_t j = i + 1; j < nd; ++j)
          EXPECT_EQ(layer.at(h, static_cast<int64_t>(i), static_cast<int64_t>(j)), 0.0) << i << "," << j;
  for (const Layer& layer : e.set("cross_attention").layers) {
    ASSERT_EQ(static_cast<std::size_t>(layer.rows), nd);
    ASSERT_EQ(static_cast<std::size_t>(layer.cols), ne);
    for (int64_t h = 0; h < layer.heads; ++h)
      for (int64_t i = 0; i < layer.rows; ++i) {
        double s = 0;
        for (int64_t j = 0; j < layer.cols; ++j) s += layer.at(h, i, j);
        EXPECT_NEAR(s, 1.0, 1e-5);
      }
  }
}

TEST(ViewDemo, RefusesInputsOfTheWrongShape) {
  DemoExample ex = synthetic_example();
  ex.x.pop_back();
  EXPECT_ERROR_CONTAINS(demo_self_attention(ex), {"X has 55 values; expected 7 words x 8 = 56"});
  ex = synthetic_example();
  ex.d_model = 4;
  EXPECT_ERROR_CONTAINS(demo_self_attention(ex), {"d_model is 4; expected at least 8"});
  DemoTranslation t = synthetic_translation();
  t.align[3] = 7;
  EXPECT_ERROR_CONTAINS(demo_translation(t), {"align[3] is 7; expected a source position in 0..6"});
  t = synthetic_translation();
  t.target_x.resize(8);
  EXPECT_ERROR_CONTAINS(demo_translation(t), {"the target embeddings have 8 values; expected 10 words x 8"});
}

}  // namespace
}  // namespace attn::viz
