// TextClassifier: what the model reads ([CLS] + the first max_len - 1
// characters, [UNK] for unknown ones), the captured [CLS] attention against a
// reference computed in double from the model's own parameters and layer
// inputs, save/load round trip, and files of another task.
#include <attn/core/autograd.h>
#include <attn/core/error.h>
#include <attn/models/task_model.h>
#include <attn/models/text_classifier.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "testing/testing.h"
#include "testing/tolerances.h"

namespace attn {
namespace {

using models::TextClassifier;
using models::TransformerConfig;

const std::vector<std::string> kTexts = {"这个东西质量很好，物流也快", "太差了，不会再买",
                                         "房间干净，服务周到", "书的内容很一般"};

struct Case {
  const char* name;
  bool pre_norm;
  int64_t layers, heads;
};

TransformerConfig config_for(const Case& c, int64_t vocab) {
  TransformerConfig cfg = TransformerConfig::preset("micro");
  cfg.src_vocab = vocab;
  cfg.num_classes = 2;
  cfg.encoder_layers = c.layers;
  cfg.heads = c.heads;
  cfg.pre_norm = c.pre_norm;
  cfg.positions = models::Positions::learned;
  cfg.max_len = 16;
  cfg.dropout = 0.1;  // must not matter: classify() runs in eval mode
  cfg.seed = 5;
  return cfg;
}

TextClassifier make(const Case& c, int64_t max_len = 12) {
  text::CharTokenizer tok = text::CharTokenizer::train(kTexts, {});
  return TextClassifier(config_for(c, tok.vocab().size()), tok, {"neg", "pos"}, max_len);
}

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("attn_text_classifier_" + name)).string();
}

// Layer norm of row x (double).
std::vector<double> layer_norm(const std::vector<double>& x, const Tensor& w, const Tensor& b, double eps) {
  double mean = 0, var = 0;
  for (double v : x) mean += v / x.size();
  for (double v : x) var += (v - mean) * (v - mean) / x.size();
  std::vector<double> y(x.size());
  for (std::size_t i = 0; i < x.size(); ++i)
    y[i] = (x[i] - mean) / std::sqrt(var + eps) * w.at({static_cast<int64_t>(i)}) +
           b.at({static_cast<int64_t>(i)});
  return y;
}

// y = W x + b for W [out, in].
std::vector<double> affine(const std::vector<double>& x, const Tensor& w, const Tensor& b) {
  std::vector<double> y(static_cast<std::size_t>(w.size(0)));
  for (int64_t o = 0; o < w.size(0); ++o) {
    double s = b.at({o});
    for (int64_t i = 0; i < w.size(1); ++i) s += w.at({o, i}) * x[i];
    y[o] = s;
  }
  return y;
}

class ClsAttention : public ::testing::TestWithParam<Case> {};

// The weights classify() reports are softmax(q_[CLS] · k_j / sqrt(d)) over the
// real tokens of each text, with q and k projected from the (normed) layer input.
TEST_P(ClsAttention, MatchesDoubleReferenceFromParameters) {
  const Case& c = GetParam();
  TextClassifier clf = make(c);
  const std::vector<models::Classification> r = clf.classify(kTexts, true, 3);
  std::map<std::string, Tensor> p;
  for (const auto& [n, t] : clf.model().named_parameters()) p[n] = t;
  const TransformerConfig& cfg = clf.model().config();
  const int64_t dh = cfg.head_dim();
  for (std::size_t t = 0; t < kTexts.size(); ++t) {
    // Layer inputs of this text alone (a batch of one: no padding involved).
    std::vector<int64_t> ids = {text::Vocab::kCls};
    for (std::size_t k = 1; k < r[t].tokens.size(); ++k)
      ids.push_back(clf.tokenizer().vocab().id(r[t].tokens[k]));
    const auto L = static_cast<int64_t>(ids.size());
    nn::Trace trace;
    {
      NoGradGuard ng;
      clf.model().eval();
      clf.model().forward(Tensor::from(ids, {1, L}), {}, Tensor(), false, &trace);
    }
    ASSERT_EQ(r[t].attention.size(), static_cast<std::size_t>(c.layers));
    for (int64_t l = 0; l < c.layers; ++l) {
      const std::string in_name = l == 0 ? "encoder.embed" : "encoder.layers." + std::to_string(l - 1);
      Tensor x;
      for (const auto& [n, v] : trace)
        if (n == in_name) x = v;
      ASSERT_TRUE(x.defined()) << in_name;
      const std::string pre = "encoder.layers." + std::to_string(l) + ".";
      std::vector<std::vector<double>> k(static_cast<std::size_t>(L));
      std::vector<double> q;
      for (int64_t j = 0; j < L; ++j) {
        std::vector<double> row(static_cast<std::size_t>(cfg.d_model));
        for (int64_t i = 0; i < cfg.d_model; ++i) row[i] = x.at({0, j, i});
        if (c.pre_norm) row = layer_norm(row, p[pre + "norm1.weight"], p[pre + "norm1.bias"], cfg.norm_eps);
        k[j] = affine(row, p[pre + "self_attn.w_k.weight"], p[pre + "self_attn.w_k.bias"]);
        if (j == 0) q = affine(row, p[pre + "self_attn.w_q.weight"], p[pre + "self_attn.w_q.bias"]);
      }
      ASSERT_EQ(r[t].attention[l].size(), static_cast<std::size_t>(c.heads));
      for (int64_t h = 0; h < c.heads; ++h) {
        std::vector<double> s(static_cast<std::size_t>(L));
        double m = -INFINITY, sum = 0;
        for (int64_t j = 0; j < L; ++j) {
          double d = 0;
          for (int64_t i = h * dh; i < (h + 1) * dh; ++i) d += q[i] * k[j][i];
          s[j] = d / std::sqrt(static_cast<double>(dh));
          m = std::max(m, s[j]);
        }
        for (double& v : s) sum += (v = std::exp(v - m));
        const std::vector<double>& got = r[t].attention[l][h];
        ASSERT_EQ(got.size(), static_cast<std::size_t>(L));
        for (int64_t j = 0; j < L; ++j)
          EXPECT_NEAR(got[j], s[j] / sum,
                      testing::tol::kWeights.abs + testing::tol::kWeights.rel * s[j] / sum)
              << "text " << t << " layer " << l << " head " << h << " key " << j;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Configs, ClsAttention,
                         ::testing::Values(Case{"pre_norm_2x4", true, 2, 4},
                                           Case{"post_norm_2x4", false, 2, 4},
                                           Case{"pre_norm_3x2", true, 3, 2}),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(TextClassifier, ReadsClsPlusFirstCharactersAndMarksUnknown) {
  TextClassifier clf = make({"c", true, 2, 4}, 6);
  const auto r = clf.classify({"这个东西质量很好", "好吗"}, false);
  EXPECT_EQ(r[0].tokens, (std::vector<std::string>{"[CLS]", "这", "个", "东", "西", "质"}));
  EXPECT_TRUE(r[0].truncated);
  EXPECT_EQ(r[0].text_tokens, 8);
  EXPECT_EQ(r[1].tokens, (std::vector<std::string>{"[CLS]", "好", "吗"}));
  EXPECT_FALSE(r[1].truncated);
  EXPECT_EQ(r[1].unknown, (std::vector<bool>{false, false, true}));  // 吗 is not in kTexts
  for (const auto& x : r) {
    EXPECT_NEAR(x.probs[0] + x.probs[1], 1.0, 1e-12);
    EXPECT_EQ(x.label, x.probs[1] > x.probs[0] ? 1 : 0);
    EXPECT_TRUE(x.attention.empty());
  }
  EXPECT_ERROR_CONTAINS(clf.classify({"好", "  "}), {"text 2 is empty"});
}

TEST(TextClassifier, BatchingDoesNotChangeResults) {
  TextClassifier clf = make({"c", true, 2, 4});
  const auto all = clf.classify(kTexts, true, 4);
  for (std::size_t i = 0; i < kTexts.size(); ++i) {
    const auto one = clf.classify({kTexts[i]}, true, 1);
    for (int c = 0; c < 2; ++c) EXPECT_NEAR(one[0].probs[c], all[i].probs[c], 1e-5);
    for (std::size_t l = 0; l < one[0].attention.size(); ++l)
      for (std::size_t h = 0; h < one[0].attention[l].size(); ++h)
        for (std::size_t k = 0; k < one[0].attention[l][h].size(); ++k)
          EXPECT_NEAR(one[0].attention[l][h][k], all[i].attention[l][h][k], 1e-5);
  }
}

TEST(TextClassifier, SaveLoadRoundTripAndTokenizerRoundTrip) {
  TextClassifier clf = make({"c", true, 2, 4});
  const std::string path = temp_path("roundtrip.attn");
  clf.save(path, json::Value::object({{"note", json::Value::string("x")}}));
  auto back = TextClassifier::load(path);
  EXPECT_EQ(back->labels(), clf.labels());
  EXPECT_EQ(back->max_len(), clf.max_len());
  EXPECT_TRUE(back->tokenizer().vocab() == clf.tokenizer().vocab());
  const auto a = clf.classify(kTexts, true), b = back->classify(kTexts, true);
  for (std::size_t i = 0; i < kTexts.size(); ++i) {
    EXPECT_EQ(a[i].probs, b[i].probs);
    EXPECT_EQ(a[i].attention, b[i].attention);
    // Every character of the training texts is in the vocabulary: decode(encode(x)) == x.
    const std::vector<int32_t> ids = back->tokenizer().encode(kTexts[i]);
    EXPECT_EQ(back->tokenizer().decode(ids), kTexts[i]);
  }
  EXPECT_EQ(models::read_task_model(path, "classify").data.at("note").as_string(), "x");
  EXPECT_ERROR_CONTAINS(clf.save(path, json::Value::object({{"vocab", json::Value()}})),
                        {"may not replace \"vocab\""});
  std::filesystem::remove(path);
}

TEST(TextClassifier, RejectsAnotherTaskAndInconsistentParts) {
  TransformerConfig c = TransformerConfig::preset("micro");
  models::DecoderLM lm(c);
  const std::string path = temp_path("lm.attn");
  models::save_task_model(path, "lm", c, json::Value::object(), lm.named_parameters());
  EXPECT_ERROR_CONTAINS(TextClassifier::load(path), {"'lm'", "'classify'"});
  std::filesystem::remove(path);

  text::CharTokenizer tok = text::CharTokenizer::train(kTexts, {});
  TransformerConfig cfg = config_for({"c", true, 2, 4}, tok.vocab().size() + 1);
  EXPECT_ERROR_CONTAINS(TextClassifier(cfg, tok, {"neg", "pos"}, 8), {"src_vocab", "vocabulary has"});
  cfg.src_vocab = tok.vocab().size();
  EXPECT_ERROR_CONTAINS(TextClassifier(cfg, tok, {"a", "b", "c"}, 8), {"num_classes 2", "3 labels"});
  EXPECT_ERROR_CONTAINS(TextClassifier(cfg, tok, {"neg", "pos"}, 17), {"max_len must be in [2, 16]"});
}

}  // namespace
}  // namespace attn
