// The explainer page and its drawings (include/attn/viz/explain_page.h) on a small stages document
// written here: the page embeds the document exactly (and a "</script>" in a token cannot end its
// script), lists the models, takes zh or en; every stage draws, its SVG holds the tokens' Chinese
// text and the numbers of its matrices, and an unknown stage or language is refused.
#include <attn/core/error.h>
#include <attn/io/json.h>
#include <attn/viz/explain_page.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "testing/testing.h"

namespace attn::viz {
namespace {

using json::Value;

Value parse(const std::string& s) { return json::parse(s); }

// N = 3 tokens, d_k = 2, 2 heads, causal, d_model 4: numbers chosen so each appears once.
Value stages_doc(const std::string& token0 = "今天") {
  const std::string part =
      R"({"shape": [3, 4], "cols": [0, 1, 2, 3], "rows": [[0.1, 0.2, 0.3, 0.4], [0.5, 0.6, 0.7, 0.8], [0.9, 1.1, 1.2, 1.3]]})";
  const std::string sq = R"([[1.0, 0, 0], [0.25, 0.75, 0], [0.125, 0.375, 0.5]])";
  Value tokens = Value::array();
  for (const std::string& t : {token0, std::string("下雨"), std::string("。")})
    tokens.push_back(Value::string(t));
  Value v =
      parse(std::string(R"({"model": "m", "kind": "decoder", "text": "今天下雨。", "layer": 1, "head": 0,
    "layers": 2, "heads": 2, "kv_heads": 2, "kv_head": 0, "d_model": 4, "d_k": 2, "n": 3, "window": 0,
    "scale": 0.7071067811865476, "sqrt_d": 1.4142135623730951, "causal": true, "norm": "pre_rms_norm", "qk": "rope",
    "ids": [5, 6, 7], "special": [false, false, false],
    "segmentation": {"method": "dictionary", "words": [{"text": "今天", "tokens": [0]}, {"text": "下雨", "tokens": [1]}]},
    "x": )") +
            part + R"(, "x_normed": )" + part + R"(,
    "q": [[1.5, -2.5], [3.5, 4.5], [5.5, 6.5]], "k": [[7.5, 8.5], [9.5, 10.5], [11.5, 12.5]],
    "v": [[13.5, 14.5], [15.5, 16.5], [17.5, 18.5]],
    "scores": [[-10.0, -11.0, -12.0], [13.0, 14.0, 15.0], [16.0, 17.0, 18.0]],
    "scaled": [[-7.07, -7.77, -8.48], [9.19, 9.89, 10.6], [11.3, 12.0, 12.7]],
    "allow": [[true, false, false], [true, true, false], [true, true, true]],
    "masked": [[-7.07, null, null], [9.19, 9.89, null], [11.3, 12.0, 12.7]],
    "weights": )" +
            sq + R"(, "weights_double": )" + sq + R"(, "row_sums": [1, 1, 1], "max_abs_diff": 0,
    "out": [[13.5, 14.5], [15.0, 16.0], [16.5, 17.5]], "out_engine": [[13.5, 14.5], [15.0, 16.0], [16.5, 17.5]],
    "out_from_engine": true, "head_weights": [)" +
            sq + ", " + sq + R"(],
    "concat": {"shape": [3, 4], "cols": [0, 1, 2, 3], "rows": [[2.25, 2.5, 2.75, 3.25], [3.5, 3.75, 4.25, 4.5], [4.75, 5.25, 5.5, 5.75]]},
    "o": )" +
            part + R"(, "x_after": )" + part + R"(, "normed_after": )" + part + R"(,
    "tutorial": {"scores": [0.2, 2.5], "printed_weights": [0.06, 0.42], "softmax": [0.09, 0.91], "printed_sum": 0.48, "is_softmax": false}})");
  v.set("tokens", std::move(tokens));
  return v;
}

TEST(ExplainPage, EmbedsTheStagesAndTheModels) {
  const Value doc = stages_doc();
  const std::string page =
      explain_page_html(doc, {.lang = "en", .models = {{"e5", "multilingual-e5-small"}}});
  EXPECT_NE(page.find("var DATA = " + json::dump(doc) + ";"), std::string::npos);
  EXPECT_NE(page.find(R"([["e5","multilingual-e5-small"]])"), std::string::npos);
  EXPECT_NE(page.find("var FIRST_LANG = \"en\";"), std::string::npos);
  EXPECT_EQ(page.find("/*ATTN_"), std::string::npos);  // every placeholder filled
  const std::string served = explain_page_html(Value());
  EXPECT_NE(served.find("var DATA = null;"), std::string::npos);
  EXPECT_NE(served.find("var FIRST_LANG = \"zh\";"), std::string::npos);
  EXPECT_THROW(explain_page_html(doc, {.lang = "fr", .models = {}}), Error);
}

TEST(ExplainPage, AScriptEndInATokenStaysInsideTheData) {
  const std::string page = explain_page_html(stages_doc("</script><b>"));
  EXPECT_EQ(page.find("</script><b>"), std::string::npos);
  EXPECT_NE(page.find("\\u003c/script>\\u003cb>"), std::string::npos);
}

TEST(ExplainDrawing, EveryStageDrawsItsNumbersAndChineseText) {
  const Value doc = stages_doc();
  for (const std::string& stage : kExplainStages) {
    const Drawing d = stage_drawing(doc, stage, "zh");
    EXPECT_GT(d.width, 0);
    EXPECT_GT(d.height, 0);
    const std::string svg = drawing_svg(d);
    EXPECT_EQ(svg.rfind("<svg xmlns=\"http://www.w3.org/2000/svg\"", 0), 0u) << stage;
    EXPECT_NE(svg.find("Noto Sans CJK SC"), std::string::npos);
    // The tokens label the rows (the heads' small maps are named instead).
    EXPECT_NE(svg.find(stage == "heads" ? ">头 1  [3, 3]<" : "今天"), std::string::npos) << stage;
    if (stage == "qkv") {
      EXPECT_NE(svg.find(">-2.5000<"), std::string::npos);
    }
    if (stage == "scores") {
      EXPECT_NE(svg.find(">-11.0000<"), std::string::npos);
    }
    if (stage == "mask") {
      EXPECT_NE(svg.find(">−∞<"), std::string::npos);
      EXPECT_NE(svg.find(">✗<"), std::string::npos);
    }
    if (stage == "softmax") {
      EXPECT_NE(svg.find(">0.3750<"), std::string::npos);
    }
    if (stage == "wv") {
      EXPECT_NE(svg.find(">16.0000<"), std::string::npos);
    }
    if (stage == "concat") {
      EXPECT_NE(svg.find(">h1.d0<"), std::string::npos);
    }
    if (stage == "residual") {
      EXPECT_NE(svg.find(">1.3000<"), std::string::npos);
    }
  }
  EXPECT_NE(drawing_svg(stage_drawing(doc, "softmax", "en")).find("attention weights"), std::string::npos);
  EXPECT_THROW(stage_drawing(doc, "attention", "zh"), Error);
  EXPECT_THROW(stage_drawing(doc, "softmax", "de"), Error);
}

// The padded batch (N = 3 real tokens, P = 1) and the causality panel, as teach::StagesModel::stages
// writes them with --pad and --classifier: drawn only when the document has them.
Value with_padding_and_causality() {
  Value doc = stages_doc();
  doc.set("padding", parse(R"({"pad": 1, "n": 3, "length": 4, "batch_lengths": [3, 4],
    "tokens": ["今天", "下雨", "。", "<pad>"], "other": ["<s>", "a", "b", "</s>"],
    "allow": [[true, true, true, false], [true, true, true, false], [true, true, true, false]],
    "scaled": [[0.5, 0.25, 0.125, 9.5], [0.5, 0.25, 0.125, 9.5], [0.5, 0.25, 0.125, 9.5]],
    "masked": [[0.5, 0.25, 0.125, null], [0.5, 0.25, 0.125, null], [0.5, 0.25, 0.125, null]],
    "weights": [[0.4375, 0.3125, 0.25, 0.0], [0.5, 0.25, 0.25, 0.0], [0.625, 0.125, 0.25, 0.0]],
    "weights_unpadded": [[0.4375, 0.3125, 0.25], [0.5, 0.25, 0.25], [0.625, 0.125, 0.25]],
    "max_abs_diff_unpadded": 0, "pad_weight_max": 0, "pad_weight_sum": 0})"));
  doc.set("causality",
          parse(R"({"text": "今天下雨。", "tokens": ["<s>", "今天", "下雨", "</s>"], "ids": [0, 5, 6, 2],
    "special": [true, false, false, true], "truncated": false, "labels": ["neg", "pos"], "encoder": "pretrained",
    "pooling": "mean", "predicted": 1, "target": 1, "probs": [0.125, 0.875], "logits": [-1.0, 0.9459],
    "layers": 2, "layer": 1, "heads": 2, "attention": [0.5, 0.1875, 0.0625, 0.25], "ig": [0.0, 1.375, -0.625, 0.0],
    "baseline": "pad", "baseline_keeps": [0, 3], "rule": "midpoint", "steps": 32, "f_input": 0.9459,
    "f_baseline": 0.1959, "ig_sum": 0.75, "completeness_error": 0.00001, "spearman": -1.0, "spearman_tokens": 2,
    "spearman_of": "x", "note_en": "Attention is not causality. The attention row says where [CLS] looked.",
    "note_zh": "注意力不是因果。注意力这一行说明最后一层里 [CLS] 看向了哪里。"})"));
  return doc;
}

TEST(ExplainDrawing, ThePaddedBatchAndTheCausalityPanelDrawWhenTheDocumentHasThem) {
  const Value plain = stages_doc();
  EXPECT_EQ(drawing_stages(plain), kExplainStages);
  EXPECT_ERROR_CONTAINS(stage_drawing(plain, "padding", "zh"), {"padding", "--pad"});
  EXPECT_ERROR_CONTAINS(stage_drawing(plain, "causality", "zh"), {"causality", "--classifier"});
  const Value doc = with_padding_and_causality();
  std::vector<std::string> all = kExplainStages;
  all.push_back("padding");
  all.push_back("causality");
  EXPECT_EQ(drawing_stages(doc), all);

  const std::string pad = drawing_svg(stage_drawing(doc, "padding", "zh"));
  EXPECT_NE(pad.find("填充"), std::string::npos);
  EXPECT_NE(pad.find(">今天·0<"), std::string::npos);        // the real queries label the rows
  EXPECT_NE(pad.find(">&lt;pad&gt;·<"), std::string::npos);  // the padded key's column (cut to 6 characters)
  EXPECT_NE(pad.find(">✗<"), std::string::npos);
  EXPECT_NE(pad.find(">−∞<"), std::string::npos);
  EXPECT_NE(pad.find(">0.4375<"), std::string::npos);  // the batch's weights and the sentence's alone
  EXPECT_NE(pad.find(">0.6250<"), std::string::npos);
  EXPECT_NE(pad.find(">1.0000<"), std::string::npos);  // row sums
  EXPECT_EQ(pad.find(">9.5000<"), std::string::npos);  // the padded column's score is shown −∞, not its value
  EXPECT_NE(drawing_svg(stage_drawing(doc, "padding", "en")).find("the padded columns"), std::string::npos);

  const std::string cz = drawing_svg(stage_drawing(doc, "causality", "zh"));
  for (const char* s : {"注意力不是因果", "积分梯度", ">今天·1<", ">0.1875<", ">+1.3750<", ">-0.6250<",
                        "= -1.000", "Σ IG = 0.7500", "m = 32", "看向了哪里"})
    EXPECT_NE(cz.find(s), std::string::npos) << s;
  const std::string en = drawing_svg(stage_drawing(doc, "causality", "en"));
  for (const char* s : {"Attention is not causality", "integrated gradients", "predicted: pos (p = 0.875)",
                        "Spearman", "where [CLS] looked"})
    EXPECT_NE(en.find(s), std::string::npos) << s;
  EXPECT_EQ(en.find("看向"), std::string::npos);
}

}  // namespace
}  // namespace attn::viz
