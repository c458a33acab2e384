// Tests of the attribution report (attn/teach/attribution.h) and of explain's
// model mode (attn/teach/explain.h) on seeded micro classifiers: the library's
// numbers against models::attribute, the model's parameters and its captured
// weights. Positions are numbered from 0 ([CLS] is position 0).
#include <attn/core/autograd.h>
#include <attn/io/json.h>
#include <attn/models/attribution.h>
#include <attn/models/text_classifier.h>
#include <attn/ops/basic.h>
#include <attn/ops/nn_functional.h>
#include <attn/teach/attribution.h>
#include <attn/teach/explain.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

#include "testing/micro_classifier.h"
#include "testing/testing.h"

namespace attn {
namespace {

namespace fs = std::filesystem;
namespace teach = attn::teach;
using models::TextClassifier;
using models::TransformerConfig;

using ModelCase = testing::MicroModelCase;
const std::vector<std::string>& kTexts = testing::kMicroTexts;
const std::string kSentence = "质量很好，物流也快";

void expect_near(const std::vector<double>& a, const std::vector<double>& b, double tol,
                 const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (std::size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], tol) << what << " [" << i << "]";
}

struct Report {
  teach::AttributionInput input;
  teach::AttributionResult result;
  models::Classification c;
};

// What `attn classify --explain` computes for one text: the classification
// (with attention) and the attribution report.
Report report_of(TextClassifier& clf, const std::string& text, const teach::AttributionReportOptions& o) {
  Report r;
  r.c = clf.classify({text}, true).at(0);
  r.input = teach::attribution_input(clf, text, r.c);
  r.result = teach::attribute_prediction(clf.model(), r.input, o);
  return r;
}

// [CLS]'s attention of one layer, the mean over heads (classify's own numbers).
std::vector<double> head_mean(const models::Classification& c, std::size_t layer) {
  std::vector<double> m(c.tokens.size(), 0.0);
  const auto& heads = c.attention.at(layer);
  for (const auto& h : heads)
    for (std::size_t k = 0; k < m.size(); ++k) m[k] += h[k] / static_cast<double>(heads.size());
  return m;
}

class ClassifyExplain : public ::testing::TestWithParam<ModelCase> {};

TEST_P(ClassifyExplain, JsonMatchesTheLibraryAndTheModel) {
  const std::string path = testing::save_micro_classifier(GetParam(), "attn_teach_attrib");
  auto clf = TextClassifier::load(path);
  teach::AttributionReportOptions ro;
  ro.attribution.steps = 16;
  ro.target = "pos";
  const Report rep = report_of(*clf, kSentence, ro);
  // Through the writer and the strict reader, as --json prints it.
  const json::Value ex = json::parse(json::dump(teach::attribution_json(rep.input, rep.result), 2));
  const std::vector<int64_t> ids = testing::micro_ids_of(*clf, kSentence);
  models::AttributionOptions o;
  o.steps = 16;
  o.target = 1;  // "pos"
  o.keep = {0};  // the report's baseline keeps [CLS]
  const models::Attribution a = models::attribute(clf->model(), ids, o);
  EXPECT_EQ(ex.at("target").as_string(), "pos");
  EXPECT_EQ(ex.at("label").as_string(), clf->labels().at(static_cast<std::size_t>(rep.c.label)));
  EXPECT_EQ(ex.at("tokens").size(), ids.size());
  EXPECT_EQ(rep.input.ids, ids);
  const json::Value& at = ex.at("attribution");
  expect_near(testing::json_numbers(at.at("ig")), a.integrated_gradients, 1e-6, "ig");
  expect_near(testing::json_numbers(at.at("input_x_grad")), a.input_x_grad, 1e-6, "input_x_grad");
  expect_near(testing::json_numbers(at.at("input_x_grad_norm")), a.input_x_grad_norm, 1e-6,
              "input_x_grad_norm");
  EXPECT_NEAR(at.at("completeness_error").as_double(), a.completeness_error, 1e-6);
  EXPECT_NEAR(at.at("ig_sum").as_double() - (at.at("f_input").as_double() - at.at("f_baseline").as_double()),
              at.at("completeness_error").as_double(), 1e-9);
  // The attention columns are classify's own [CLS] attention (head means), last layer and mean of layers.
  const std::size_t layers = rep.c.attention.size();
  const std::vector<double> last = head_mean(rep.c, layers - 1);
  expect_near(testing::json_numbers(ex.at("attention").at("last_layer")), last, 1e-6, "attention last layer");
  std::vector<double> mean(ids.size(), 0.0);
  for (std::size_t l = 0; l < layers; ++l) {
    const auto m = head_mean(rep.c, l);
    for (std::size_t j = 0; j < m.size(); ++j) mean[j] += m[j] / static_cast<double>(layers);
  }
  expect_near(testing::json_numbers(ex.at("attention").at("mean_over_layers")), mean, 1e-6, "attention mean");
  // Rank correlation over the characters ([CLS] left out) of attention and |IG|.
  std::vector<double> att_w(last.begin() + 1, last.end()), ig_w;
  for (std::size_t j = 1; j < ids.size(); ++j) ig_w.push_back(std::fabs(a.integrated_gradients[j]));
  EXPECT_NEAR(ex.at("rank_correlation").at("attention_last_vs_abs_ig").as_double(),
              models::spearman(att_w, ig_w), 1e-9);
  // The ranking is sorted by |IG|; its positions count from 0 ([CLS] = 0).
  const json::Value& ranking = ex.at("ranking");
  ASSERT_EQ(ranking.size(), ids.size());
  for (std::size_t k = 1; k < ranking.size(); ++k)
    EXPECT_GE(std::fabs(ranking.at(k - 1).at("ig").as_double()),
              std::fabs(ranking.at(k).at("ig").as_double()));
  for (const auto& e : ranking.items())
    EXPECT_EQ(e.at("token").as_string(),
              rep.input.tokens.at(static_cast<std::size_t>(e.at("position").as_int64())));
  EXPECT_NE(ex.at("note").as_string().find("Attention is not explanation"), std::string::npos);
}

TEST_P(ClassifyExplain, TextTableRanksByAttribution) {
  const std::string path = testing::save_micro_classifier(GetParam(), "attn_teach_attrib");
  auto clf = TextClassifier::load(path);
  const Report rep = report_of(*clf, kSentence, {});
  const std::string out = teach::attribution_text(rep.input, rep.result);
  for (const char* s :
       {"Attention next to attribution", "attention of [CLS]", "input×grad", "Spearman", "completeness error",
        "Attention is not explanation", "# is the position (0 = [CLS])"})
    EXPECT_NE(out.find(s), std::string::npos) << s << " in\n" << out;
  // The first ranked row is the character with the largest |IG|.
  const std::vector<int64_t> ids = testing::micro_ids_of(*clf, kSentence);
  models::AttributionOptions o;
  o.keep = {0};  // the report's baseline keeps [CLS] (AttributionReportOptions::keep_special)
  const models::Attribution a = models::attribute(clf->model(), ids, o);
  EXPECT_EQ(a.integrated_gradients[0], 0.0) << "[CLS] is not on the path";
  const auto best = std::max_element(a.integrated_gradients.begin(), a.integrated_gradients.end(),
                                     [](double x, double y) { return std::fabs(x) < std::fabs(y); }) -
                    a.integrated_gradients.begin();
  const auto tokens = clf->classify({kSentence}, false).at(0).tokens;
  std::istringstream lines(out);
  std::string line;
  while (std::getline(lines, line) && line.find("----  --") == std::string::npos) {
  }
  ASSERT_TRUE(std::getline(lines, line));
  std::istringstream first(line);
  std::string rank, pos, tok;
  first >> rank >> pos >> tok;
  EXPECT_EQ(rank, "1");
  EXPECT_EQ(pos, std::to_string(best));
  EXPECT_EQ(tok, tokens[best]);
}

teach::Report explain_model(const std::string& path, const std::string& sentence, int64_t layer, int64_t head,
                            const std::string& word) {
  teach::ModelOptions o;
  o.path = path;
  o.sentence = sentence;
  o.layer = layer;
  o.head = head;
  o.word = word;
  return teach::explain_model(o);
}

// explain's model mode: the JSON's Q, K, V are the layer input projected by this
// head's rows of the model's W_Q, W_K, W_V (computed here from the parameters),
// the weights are their softmax and equal what the model captured.
TEST_P(ClassifyExplain, ExplainModelUsesTheRealProjections) {
  const ModelCase& mc = GetParam();
  const std::string path = testing::save_micro_classifier(mc, "attn_teach_attrib");
  const int64_t layer = 1, head = 3;
  const json::Value j = json::parse(teach::json_text(explain_model(path, kSentence, layer, head, "好").json));
  EXPECT_EQ(j.at("mode").as_string(), "model");
  EXPECT_EQ(j.at("layer").as_int64(), layer);
  EXPECT_EQ(j.at("head").as_int64(), head);
  EXPECT_EQ(j.at("query").at("token").as_string(), "好");
  const int64_t qi = j.at("query").at("position").as_int64();  // from 0, [CLS] = 0
  auto clf = TextClassifier::load(path);
  models::EncoderClassifier& m = clf->model();
  const TransformerConfig& c = m.config();
  const std::vector<int64_t> ids = testing::micro_ids_of(*clf, kSentence);
  const int64_t L = static_cast<int64_t>(ids.size()), D = c.head_dim();
  const int64_t kvh = head / (c.heads / (c.kv_heads == 0 ? c.heads : c.kv_heads));
  EXPECT_EQ(j.at("kv_head").as_int64(), kvh);
  EXPECT_EQ(clf->classify({kSentence}, false).at(0).tokens.at(static_cast<std::size_t>(qi)), "好");
  // The same query by its position gives the same report.
  EXPECT_EQ(explain_model(path, kSentence, layer, head, std::to_string(qi)).text,
            explain_model(path, kSentence, layer, head, "好").text);
  // The layer input from a trace, and the captured weights of row qi.
  m.eval();
  NoGradGuard ng;
  nn::Trace trace;
  models::ClassifierCall call;
  call.capture = true;
  call.capture_rows = {qi};
  call.trace = &trace;
  const auto out = m.forward_embeddings(m.embed_tokens(Tensor::from(ids, {1, L})), call);
  Tensor x;
  for (const auto& [n, t] : trace)
    if (n == "encoder.layers.0") x = t;
  ASSERT_TRUE(x.defined());
  Tensor a = x;  // [1, L, C]
  std::map<std::string, Tensor> p;
  for (const auto& [n, t] : m.named_parameters()) p[n] = t;
  const std::string pre = "encoder.layers.1.";
  if (c.pre_norm) a = layer_norm(x, p[pre + "norm1.weight"], p[pre + "norm1.bias"], c.norm_eps);
  auto proj = [&](const std::string& w, int64_t h) {
    Tensor full = linear(a, p[pre + "self_attn." + w + ".weight"], p[pre + "self_attn." + w + ".bias"]);
    return full.slice(2, h * D, (h + 1) * D).contiguous().reshape({1, 1, L, D});  // [1, 1, L, D]
  };
  Tensor q = proj("w_q", head), k = proj("w_k", kvh), v = proj("w_v", kvh);
  if (c.positions == models::Positions::rope) q = rope(q), k = rope(k);
  const auto flat = [](const json::Value& mtx) {
    std::vector<double> f;
    for (const auto& row : mtx.items())
      for (const auto& x : row.items()) f.push_back(x.as_double());
    return f;
  };
  expect_near(flat(j.at("Q")), q.to_vector(), 2e-5, "Q");
  expect_near(flat(j.at("K")), k.to_vector(), 2e-5, "K");
  expect_near(flat(j.at("V")), v.to_vector(), 2e-5, "V");
  const json::Value& st = j.at("steps");
  const std::vector<double> scaled = testing::json_numbers(st.at("scaled")),
                            w = testing::json_numbers(st.at("weights"));
  const double mx = *std::max_element(scaled.begin(), scaled.end());
  double z = 0;
  for (double s : scaled) z += std::exp(s - mx);
  for (int64_t i = 0; i < L; ++i) EXPECT_NEAR(w[i], std::exp(scaled[i] - mx) / z, 1e-12);
  const std::vector<double> captured =
      out.attention[layer].select(0, 0).select(0, head).select(0, 0).to_vector();
  expect_near(w, captured, 1e-5, "weights vs captured");
  expect_near(testing::json_numbers(j.at("captured_weights")), captured, 1e-7, "captured in JSON");
}

INSTANTIATE_TEST_SUITE_P(Models, ClassifyExplain,
                         ::testing::Values(ModelCase{"prenorm_learned", true, models::Positions::learned, 0},
                                           ModelCase{"postnorm_sinusoidal", false,
                                                     models::Positions::sinusoidal, 0},
                                           ModelCase{"prenorm_rope_gqa", true, models::Positions::rope, 2}),
                         [](const auto& info) { return info.param.name; });

// The message of the attn::Error that `f` throws ("" and a failure when none).
template <typename F>
std::string error_of(F f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected an attn::Error";
  return "";
}

TEST(ClassifyExplainErrors, BadOptionsAreRefused) {
  const std::string path =
      testing::save_micro_classifier({"errors", true, models::Positions::learned, 0}, "attn_teach_attrib");
  auto clf = TextClassifier::load(path);
  struct Bad {
    std::string what;
    std::string message;
    std::vector<std::string> expected;
  };
  teach::AttributionReportOptions maybe;
  maybe.target = "maybe";
  const std::vector<Bad> cases = {
      {"--target maybe", error_of([&] { report_of(*clf, "好", maybe); }), {"--target", "neg, pos", "maybe"}},
      {"--layer 2", error_of([&] { explain_model(path, "好", 2, 0, ""); }), {"--layer"}},
      {"--head 4", error_of([&] { explain_model(path, "好", 1, 4, ""); }), {"--head"}},
      {"--word 猫", error_of([&] { explain_model(path, "好", 1, 0, "猫"); }), {"--word", "猫"}},
      {"--word 9", error_of([&] { explain_model(path, "好", 1, 0, "9"); }), {"--word", "[0, 1]", "9"}},
      {"--word 2", error_of([&] { explain_model(path, "好", 1, 0, "2"); }), {"--word", "[0, 1]", "got 2"}},
      {"no such file", error_of([&] { explain_model("/no/such/file.attn", "好", 1, 0, ""); }), {"not found"}},
  };
  for (const auto& c : cases)
    for (const auto& e : c.expected)
      EXPECT_NE(c.message.find(e), std::string::npos) << c.what << ": " << c.message;
}

}  // namespace
}  // namespace attn
