// Naive Bayes baseline and classification metrics: a tiny example computed by
// hand from the formula, a synthetic separable set (table of settings), the
// feature list, and bad input.
#include <attn/core/error.h>
#include <attn/core/random.h>
#include <attn/models/baseline.h>

#include <cmath>
#include <string>
#include <vector>

#include "testing/testing.h"

namespace attn {
namespace {

using models::NaiveBayes;
using models::NaiveBayesOptions;

TEST(NaiveBayes, HandComputedUnigramScores) {
  // class 0: "a a b"; class 1: "b c". Features {a, b, c}: N0 = 3, N1 = 2, priors 1/2.
  NaiveBayesOptions o;
  o.bigrams = false;
  const NaiveBayes nb = NaiveBayes::train({{"a", "a", "b"}, {"b", "c"}}, {0, 1}, 2, o);
  EXPECT_EQ(nb.num_features(), 3);
  const std::vector<double> s = nb.log_scores({"a", "c", "z"});  // "z" was never seen: ignored
  const double e0 = std::log(0.5) + std::log(3.0 / 6.0) + std::log(1.0 / 6.0);
  const double e1 = std::log(0.5) + std::log(1.0 / 5.0) + std::log(2.0 / 5.0);
  EXPECT_NEAR(s[0], e0, 1e-12);
  EXPECT_NEAR(s[1], e1, 1e-12);
  EXPECT_EQ(nb.predict({"a", "c", "z"}), e0 > e1 ? 0 : 1);
  const std::vector<double> p = nb.probabilities({"a", "c", "z"});
  EXPECT_NEAR(p[0], 1.0 / (1.0 + std::exp(e1 - e0)), 1e-12);
  EXPECT_NEAR(p[0] + p[1], 1.0, 1e-12);
}

TEST(NaiveBayes, HandComputedWithBigramsAndSmoothing) {
  // alpha 0.5; features {x, y, x|y} in class 0 (N0 = 3), {y, y} in class 1 (N1 = 2); |F| = 3.
  NaiveBayesOptions o;
  o.alpha = 0.5;
  const NaiveBayes nb = NaiveBayes::train({{"x", "y"}, {"y"}, {"y"}}, {0, 1, 1}, 2, o);
  EXPECT_EQ(nb.num_features(), 3);
  const std::vector<double> s = nb.log_scores({"x", "y"});  // features x, y, x|y
  const double e0 = std::log(1.0 / 3) + 3 * std::log(1.5 / 4.5);
  const double e1 = std::log(2.0 / 3) + std::log(0.5 / 3.5) + std::log(2.5 / 3.5) + std::log(0.5 / 3.5);
  EXPECT_NEAR(s[0], e0, 1e-12);
  EXPECT_NEAR(s[1], e1, 1e-12);
}

TEST(NaiveBayes, FeaturesAreTokensThenAdjacentPairs) {
  const std::vector<std::string> f = models::ngram_features({"好", "不", "好"}, true);
  const std::vector<std::string> e = {"好", "不", "好", "好\x01不", "不\x01好"};
  EXPECT_EQ(f, e);
  EXPECT_EQ(models::ngram_features({"好"}, true), std::vector<std::string>{"好"});
  EXPECT_EQ(models::ngram_features({"a", "b"}, false), (std::vector<std::string>{"a", "b"}));
}

struct SeparableCase {
  const char* name;
  double alpha;
  bool bigrams;
  int classes;
};

class NaiveBayesSeparable : public ::testing::TestWithParam<SeparableCase> {};

// Documents of class c draw tokens from their own vocabulary ("c<k>_<i>") plus
// shared noise tokens: the classes are separable, so held-out accuracy is 1.
TEST_P(NaiveBayesSeparable, LearnsDisjointVocabularies) {
  const SeparableCase& tc = GetParam();
  Rng rng(1234);
  auto doc = [&](int c) {
    std::vector<std::string> d;
    const int n = 3 + static_cast<int>(rng.below(8));
    for (int i = 0; i < n; ++i)
      d.push_back(
          rng.below(3) == 0
              ? std::string("n").append(std::to_string(rng.below(5)))
              : std::string("c").append(std::to_string(c)).append("_").append(std::to_string(rng.below(6))));
    return d;
  };
  std::vector<std::vector<std::string>> train, test;
  std::vector<int32_t> ytrain, ytest;
  for (int i = 0; i < 60 * tc.classes; ++i) {
    train.push_back(doc(i % tc.classes));
    ytrain.push_back(i % tc.classes);
  }
  for (int i = 0; i < 30 * tc.classes; ++i) {
    test.push_back(doc(i % tc.classes));
    ytest.push_back(i % tc.classes);
  }
  NaiveBayesOptions o;
  o.alpha = tc.alpha;
  o.bigrams = tc.bigrams;
  const NaiveBayes nb = NaiveBayes::train(train, ytrain, tc.classes, o);
  std::vector<int32_t> pred;
  for (const auto& d : test) {
    pred.push_back(nb.predict(d));
    const std::vector<double> p = nb.probabilities(d);
    double sum = 0;
    for (double v : p) sum += v;
    EXPECT_NEAR(sum, 1.0, 1e-12);
  }
  const models::Metrics m = models::classification_metrics(ytest, pred, tc.classes);
  EXPECT_EQ(m.accuracy, 1.0);
  EXPECT_EQ(m.macro_f1, 1.0);
}

INSTANTIATE_TEST_SUITE_P(Settings, NaiveBayesSeparable,
                         ::testing::Values(SeparableCase{"unigram_alpha1", 1.0, false, 2},
                                           SeparableCase{"bigram_alpha1", 1.0, true, 2},
                                           SeparableCase{"bigram_alpha0_1", 0.1, true, 2},
                                           SeparableCase{"bigram_3classes", 1.0, true, 3}),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(NaiveBayes, RejectsBadInput) {
  EXPECT_ERROR_CONTAINS(NaiveBayes::train({}, {}, 2), {"no training documents"});
  EXPECT_ERROR_CONTAINS(NaiveBayes::train({{"a"}}, {0, 1}, 2), {"1 documents but 2 labels"});
  EXPECT_ERROR_CONTAINS(NaiveBayes::train({{"a"}}, {2}, 2), {"label of document 0", "got 2"});
  NaiveBayesOptions o;
  o.alpha = 0;
  EXPECT_ERROR_CONTAINS(NaiveBayes::train({{"a"}}, {0}, 2, o), {"alpha must be > 0"});
}

TEST(Metrics, HandComputedBinary) {
  // truth 0 0 1 1 1, predicted 0 1 1 1 0: confusion [[1, 1], [1, 2]].
  const models::Metrics m = models::classification_metrics({0, 0, 1, 1, 1}, {0, 1, 1, 1, 0}, 2);
  EXPECT_EQ(m.count, 5);
  EXPECT_DOUBLE_EQ(m.accuracy, 3.0 / 5);
  EXPECT_EQ(m.confusion, (std::vector<std::vector<int64_t>>{{1, 1}, {1, 2}}));
  EXPECT_DOUBLE_EQ(m.per_class[0].precision, 0.5);
  EXPECT_DOUBLE_EQ(m.per_class[0].recall, 0.5);
  EXPECT_DOUBLE_EQ(m.per_class[0].f1, 0.5);
  EXPECT_DOUBLE_EQ(m.per_class[1].precision, 2.0 / 3);
  EXPECT_DOUBLE_EQ(m.per_class[1].recall, 2.0 / 3);
  EXPECT_NEAR(m.per_class[1].f1, 2.0 / 3, 1e-15);
  EXPECT_NEAR(m.macro_f1, (0.5 + 2.0 / 3) / 2, 1e-15);
  EXPECT_EQ(m.per_class[0].support, 2);
  EXPECT_EQ(m.per_class[1].support, 3);
  const json::Value j = m.to_json({"neg", "pos"});
  EXPECT_EQ(j.at("per_class").at(1).at("label").as_string(), "pos");
  EXPECT_EQ(j.at("confusion").at(1).at(1).as_int64(), 2);
}

TEST(Metrics, NeverPredictedClassHasZeroPrecision) {
  const models::Metrics m = models::classification_metrics({0, 1, 1}, {1, 1, 1}, 2);
  EXPECT_EQ(m.per_class[0].precision, 0.0);
  EXPECT_EQ(m.per_class[0].recall, 0.0);
  EXPECT_EQ(m.per_class[0].f1, 0.0);
  EXPECT_DOUBLE_EQ(m.per_class[1].precision, 2.0 / 3);
  EXPECT_DOUBLE_EQ(m.per_class[1].recall, 1.0);
  EXPECT_ERROR_CONTAINS(models::classification_metrics({0}, {0, 1}, 2), {"1 true labels but 2 predictions"});
  EXPECT_ERROR_CONTAINS(models::classification_metrics({0}, {3}, 2), {"outside [0, 2)"});
}

}  // namespace
}  // namespace attn
