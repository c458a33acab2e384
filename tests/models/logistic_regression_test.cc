// Logistic-regression baseline: the trained objective against a plain dense
// full-batch gradient descent on the same objective, the logits against the
// formula, a separable toy set, determinism and bad input.
#include <attn/core/error.h>
#include <attn/core/random.h>
#include <attn/models/baseline.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "testing/testing.h"

namespace attn {
namespace {

using models::LogisticRegression;
using models::LogisticRegressionOptions;

struct Toy {
  std::vector<std::vector<std::string>> docs;
  std::vector<int32_t> labels;
};

// Class c draws its first token and most others from its own set ("c<c>_<k>"), the rest
// from shared noise: separable.
Toy toy(int classes, int per_class, uint64_t seed, int noise_every = 3) {
  Rng rng(seed);
  Toy t;
  for (int i = 0; i < classes * per_class; ++i) {
    const int c = i % classes;
    std::vector<std::string> d;
    const int n = 2 + static_cast<int>(rng.below(6));
    for (int k = 0; k < n; ++k) {
      std::string tok;
      if (k > 0 && rng.below(static_cast<uint64_t>(noise_every)) == 0) {
        tok.append("n").append(std::to_string(rng.below(4)));
      } else {
        tok.append("c").append(std::to_string(c)).append("_").append(std::to_string(rng.below(5)));
      }
      d.push_back(tok);
    }
    t.docs.push_back(d);
    t.labels.push_back(c);
  }
  return t;
}

// The same objective minimised by plain dense gradient descent (all documents per step).
double reference_min_objective(const Toy& t, int classes, const LogisticRegressionOptions& o, int iters) {
  std::map<std::string, int> index;
  std::vector<std::vector<int>> rows;
  for (const auto& d : t.docs) {
    std::vector<int> r;
    for (const auto& f : models::ngram_features(d, o.bigrams)) {
      auto it = index.try_emplace(f, static_cast<int>(index.size())).first;
      r.push_back(it->second);
    }
    std::sort(r.begin(), r.end());
    r.erase(std::unique(r.begin(), r.end()), r.end());
    rows.push_back(r);
  }
  const int F = static_cast<int>(index.size()), C = classes;
  const double N = static_cast<double>(t.docs.size());
  std::vector<double> w(static_cast<std::size_t>(F * C), 0.0), b(C, 0.0);
  auto objective_and_grad = [&](std::vector<double>* gw, std::vector<double>* gb) {
    double loss = 0;
    if (gw) gw->assign(w.size(), 0.0), gb->assign(C, 0.0);
    for (std::size_t d = 0; d < rows.size(); ++d) {
      const double x = 1.0 / std::sqrt(static_cast<double>(rows[d].size()));
      std::vector<double> z(b);
      for (int f : rows[d])
        for (int c = 0; c < C; ++c) z[c] += w[f * C + c] * x;
      double m = z[0];
      for (double v : z) m = std::max(m, v);
      double s = 0;
      for (double v : z) s += std::exp(v - m);
      loss += m + std::log(s) - z[t.labels[d]];
      if (gw)
        for (int c = 0; c < C; ++c) {
          const double g = (std::exp(z[c] - m) / s - (c == t.labels[d] ? 1.0 : 0.0)) / N;
          (*gb)[c] += g;
          for (int f : rows[d]) (*gw)[f * C + c] += g * x;
        }
    }
    double w2 = 0;
    for (std::size_t i = 0; i < w.size(); ++i) {
      w2 += w[i] * w[i];
      if (gw) (*gw)[i] += o.l2 * w[i];
    }
    return loss / N + 0.5 * o.l2 * w2;
  };
  std::vector<double> gw, gb;
  for (int it = 0; it < iters; ++it) {
    objective_and_grad(&gw, &gb);
    for (std::size_t i = 0; i < w.size(); ++i) w[i] -= 2.0 * gw[i];
    for (int c = 0; c < C; ++c) b[c] -= 2.0 * gb[c];
  }
  return objective_and_grad(nullptr, nullptr);
}

TEST(LogisticRegression, ReachesTheMinimumOfPlainGradientDescent) {
  // Noisy classes (half the tokens shared) and a real penalty: a strongly convex problem.
  const Toy t = toy(2, 80, 7, 2);
  LogisticRegressionOptions o;
  o.l2 = 1e-2;
  o.epochs = 60;
  o.lr = 0.5;
  const LogisticRegression lr = LogisticRegression::train(t.docs, t.labels, 2, o);
  const double ours = lr.objective(t.docs, t.labels);
  const double ref = reference_min_objective(t, 2, o, 3000);
  EXPECT_GE(ours, ref - 1e-3);  // gradient descent converged: nothing is much lower
  EXPECT_LE(ours, ref * 1.02 + 1e-3) << "SGD objective " << ours << " vs reference minimum " << ref;
}

TEST(LogisticRegression, LogitsAreBiasPlusWeightsOverSqrtOfFeatureCount) {
  const Toy t = toy(3, 20, 3);
  const LogisticRegression lr = LogisticRegression::train(t.docs, t.labels, 3);
  const std::vector<std::string> doc = {"c1_0", "c1_2", "c1_0", "never-seen"};
  // distinct known features: c1_0, c1_2, c1_0|c1_2, c1_2|c1_0 (bigram "c1_0|never-seen" unknown)
  const std::vector<std::string> feats = {"c1_0", "c1_2", std::string("c1_0\x01") + "c1_2",
                                          std::string("c1_2\x01") + "c1_0"};
  int known = 0;
  for (const auto& f : feats) known += lr.weight(f, 0) != 0.0 || lr.weight(f, 1) != 0.0;
  const std::vector<double> z = lr.logits(doc);
  ASSERT_EQ(z.size(), 3u);
  for (int32_t c = 0; c < 3; ++c) {
    double e = lr.bias(c);
    for (const auto& f : feats) e += lr.weight(f, c) / std::sqrt(static_cast<double>(known));
    EXPECT_NEAR(z[c], e, 1e-12) << "class " << c;
  }
  const std::vector<double> p = lr.probabilities(doc);
  EXPECT_NEAR(p[0] + p[1] + p[2], 1.0, 1e-12);
  EXPECT_EQ(lr.predict(doc), 1);
}

class LogisticRegressionSeparable : public ::testing::TestWithParam<int> {};

TEST_P(LogisticRegressionSeparable, HeldOutAccuracyIsOne) {
  const int classes = GetParam();
  const Toy train = toy(classes, 60, 11), test = toy(classes, 30, 12);
  const LogisticRegression lr = LogisticRegression::train(train.docs, train.labels, classes);
  std::vector<int32_t> pred;
  for (const auto& d : test.docs) pred.push_back(lr.predict(d));
  EXPECT_EQ(models::classification_metrics(test.labels, pred, classes).accuracy, 1.0);
}

INSTANTIATE_TEST_SUITE_P(Classes, LogisticRegressionSeparable, ::testing::Values(2, 3, 5));

TEST(LogisticRegression, SameSeedSameWeightsOtherSeedOtherOrder) {
  const Toy t = toy(2, 50, 5, 2);
  const LogisticRegression a = LogisticRegression::train(t.docs, t.labels, 2);
  const LogisticRegression b = LogisticRegression::train(t.docs, t.labels, 2);
  LogisticRegressionOptions o;
  o.seed = 99;
  const LogisticRegression c = LogisticRegression::train(t.docs, t.labels, 2, o);
  bool differs = false;
  for (const auto& d : t.docs) {
    EXPECT_EQ(a.logits(d), b.logits(d));  // bit for bit: single-threaded, seeded order
    differs = differs || a.logits(d) != c.logits(d);
  }
  EXPECT_TRUE(differs) << "another seed visits the documents in another order";
}

TEST(LogisticRegression, MinCountDropsRareFeatures) {
  LogisticRegressionOptions o;
  o.bigrams = false;
  o.min_count = 2;
  const LogisticRegression lr = LogisticRegression::train({{"a", "b"}, {"a", "c"}, {"d"}}, {0, 1, 1}, 2, o);
  EXPECT_EQ(lr.num_features(), 1);  // only "a" is in two documents
  EXPECT_EQ(lr.logits({"b", "c", "d"}), (std::vector<double>{lr.bias(0), lr.bias(1)}));
}

TEST(LogisticRegression, RejectsBadInput) {
  EXPECT_ERROR_CONTAINS(LogisticRegression::train({}, {}, 2), {"no training documents"});
  EXPECT_ERROR_CONTAINS(LogisticRegression::train({{"a"}}, {0, 1}, 2), {"1 documents but 2 labels"});
  EXPECT_ERROR_CONTAINS(LogisticRegression::train({{"a"}}, {2}, 2), {"label of document 0", "got 2"});
  EXPECT_ERROR_CONTAINS(LogisticRegression::train({{"a"}}, {0}, 1), {"at least 2 classes"});
  LogisticRegressionOptions o;
  o.lr = 0;
  EXPECT_ERROR_CONTAINS(LogisticRegression::train({{"a"}}, {0}, 2, o), {"lr must be > 0"});
  o = {};
  o.l2 = -1;
  EXPECT_ERROR_CONTAINS(LogisticRegression::train({{"a"}}, {0}, 2, o), {"l2 must be >= 0"});
  EXPECT_ERROR_CONTAINS(LogisticRegression().logits({"a"}), {"not trained"});
}

}  // namespace
}  // namespace attn
