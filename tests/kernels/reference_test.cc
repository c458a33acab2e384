// The reference kernel: the tutorial's numbers, mask semantics, and its
// backward against central finite differences in fp64.
#include <attn/ops/attention.h>

#include <cmath>
#include <limits>

#include "testing/testing.h"
#include "testing/tolerances.h"

namespace attn {
namespace {

using testing::random_uniform;

// Attention weights of one query over keys whose logits are exactly `scores`:
// D = 1, q = [1], k_j = [score_j], scale 1.
std::vector<double> softmax_via_attention(const std::vector<double>& scores) {
  const int64_t n = static_cast<int64_t>(scores.size());
  Tensor q = Tensor::full({1, 1, 1, 1}, 1.0, DType::f64);
  Tensor k = Tensor::from<double>(scores, {1, 1, n, 1});
  Tensor v = Tensor::zeros({1, 1, n, 1}, DType::f64);
  AttentionOptions o;
  o.scale = 1.0;
  o.capture.enabled = true;
  return attention(q, k, v, o).weights.to_vector();
}

TEST(Reference, TutorialSecondExampleWeights) {
  // Scores [0.1, 0.3, 0.2, 0.5, 0.1, 1.2]: positions 2 and 4 (1-based) get 0.14 and 0.17.
  const auto w = softmax_via_attention({0.1, 0.3, 0.2, 0.5, 0.1, 1.2});
  EXPECT_NEAR(w[1], 0.14, 0.005);
  EXPECT_NEAR(w[3], 0.17, 0.005);
  double sum = 0;
  for (double x : w) sum += x;
  EXPECT_NEAR(sum, 1.0, 1e-12);
}

TEST(Reference, TutorialFirstExampleIsExactSoftmax) {
  // The tutorial prints [0.06, 0.42, 0.11, 0.07, 0.07, 0.27] for these scores;
  // exact softmax gives [0.05, 0.47, 0.09, 0.05, 0.06, 0.29] (no single
  // temperature reproduces the printed row). We check the exact values and that
  // the ranking the tutorial draws from them (2.5 wins, then 2.0) holds.
  const std::vector<double> s{0.2, 2.5, 0.8, 0.3, 0.4, 2.0};
  const auto w = softmax_via_attention(s);
  const std::vector<double> exact{0.05, 0.47, 0.09, 0.05, 0.06, 0.29};
  for (std::size_t j = 0; j < s.size(); ++j) EXPECT_NEAR(w[j], exact[j], 0.005) << "position " << j;
  double z = 0;
  for (double x : s) z += std::exp(x);
  for (std::size_t j = 0; j < s.size(); ++j) EXPECT_NEAR(w[j], std::exp(s[j]) / z, 1e-12);
  EXPECT_GT(w[1], w[5]);
  EXPECT_GT(w[5], w[2]);
}

TEST(Reference, FullyMaskedRowGivesZeroOutputAndMinusInfLse) {
  Tensor q = random_uniform({1, 1, 3, 4}, 1, -1, 1, DType::f64);
  Tensor k = random_uniform({1, 1, 5, 4}, 2, -1, 1, DType::f64);
  Tensor v = random_uniform({1, 1, 5, 4}, 3, -1, 1, DType::f64);
  AttentionOptions o;
  o.allow = Tensor::full({1, 1, 3, 5}, 1, DType::u8);
  for (int64_t j = 0; j < 5; ++j) o.allow.set({0, 0, 1, j}, 0);  // row 1 sees nothing
  auto r = attention(q, k, v, o);
  for (int64_t d = 0; d < 4; ++d) EXPECT_EQ(r.out.at({0, 0, 1, d}), 0.0);
  EXPECT_EQ(r.lse.at({0, 0, 1}), -std::numeric_limits<double>::infinity());
  EXPECT_TRUE(std::isfinite(r.lse.at({0, 0, 0})));
  Tensor dout = random_uniform({1, 1, 3, 4}, 4, -1, 1, DType::f64);
  auto g = attention_backward(q, k, v, r.out, r.lse, dout, o);
  for (int64_t d = 0; d < 4; ++d) EXPECT_EQ(g.dq.at({0, 0, 1, d}), 0.0);
  for (double x : g.dk.to_vector()) EXPECT_FALSE(std::isnan(x));
}

TEST(Reference, CausalAlignmentTopLeftAndBottomRight) {
  // Lq = 2, Lk = 4. Top-left: row 0 sees key 0 only. Bottom-right: row 0 sees keys 0..2.
  Tensor q = random_uniform({1, 1, 2, 3}, 5, -1, 1, DType::f64);
  Tensor k = random_uniform({1, 1, 4, 3}, 6, -1, 1, DType::f64);
  Tensor v = random_uniform({1, 1, 4, 3}, 7, -1, 1, DType::f64);
  AttentionOptions o;
  o.causal = true;
  o.capture.enabled = true;
  auto tl = attention(q, k, v, o).weights;
  EXPECT_NEAR(tl.at({0, 0, 0, 0}), 1.0, 1e-12);
  EXPECT_EQ(tl.at({0, 0, 1, 2}), 0.0);
  o.align = Align::bottom_right;
  auto br = attention(q, k, v, o).weights;
  EXPECT_GT(br.at({0, 0, 0, 2}), 0.0);
  EXPECT_EQ(br.at({0, 0, 0, 3}), 0.0);
  EXPECT_GT(br.at({0, 0, 1, 3}), 0.0);
}

TEST(Reference, WindowAndKeyLengthsMaskTheRightKeys) {
  Tensor q = random_uniform({2, 1, 6, 3}, 8, -1, 1, DType::f64);
  Tensor k = random_uniform({2, 1, 6, 3}, 9, -1, 1, DType::f64);
  Tensor v = random_uniform({2, 1, 6, 3}, 10, -1, 1, DType::f64);
  AttentionOptions o;
  o.window_left = 1;
  o.window_right = 2;
  o.key_lengths = {6, 4};
  o.capture.enabled = true;
  auto w = attention(q, k, v, o).weights;
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t i = 0; i < 6; ++i)
      for (int64_t j = 0; j < 6; ++j) {
        const bool allowed = j >= i - 1 && j <= i + 2 && j < o.key_lengths[b];
        EXPECT_EQ(w.at({b, 0, i, j}) > 0, allowed) << "b " << b << " i " << i << " j " << j;
      }
}

TEST(Reference, HugeLogitsDoNotOverflow) {
  Tensor q = Tensor::full({1, 1, 2, 2}, 100.0, DType::f64);
  Tensor k = random_uniform({1, 1, 8, 2}, 11, -100, 100, DType::f64);
  Tensor v = random_uniform({1, 1, 8, 2}, 12, -1, 1, DType::f64);
  AttentionOptions o;
  o.scale = 1.0;  // logits up to ±2e4
  auto r = attention(q, k, v, o);
  for (double x : r.out.to_vector()) EXPECT_TRUE(std::isfinite(x));
  for (double x : r.lse.to_vector()) EXPECT_TRUE(std::isfinite(x));
}

TEST(Reference, DropoutKeepsExpectedFractionAndIsDeterministic) {
  int kept = 0;
  const int n = 100000;
  for (int j = 0; j < n; ++j) kept += dropout_keep(42, 0, 1, 2, j, 0.25);
  EXPECT_NEAR(static_cast<double>(kept) / n, 0.75, 0.01);
  EXPECT_EQ(dropout_keep(42, 0, 1, 2, 3, 0.25), dropout_keep(42, 0, 1, 2, 3, 0.25));
  EXPECT_TRUE(dropout_keep(42, 0, 1, 2, 3, 0.0));
}

// ---- finite differences ---------------------------------------------------

struct GradCase {
  const char* name;
  int64_t B, H, Hkv, Lq, Lk, D;
  AttentionOptions opt;
};

std::vector<GradCase> grad_cases() {
  std::vector<GradCase> cs;
  cs.push_back({"plain", 1, 2, 2, 3, 4, 5, {}});
  GradCase c{"causal_gqa", 2, 4, 2, 5, 5, 3, {}};
  c.opt.causal = true;
  cs.push_back(c);
  GradCase br{"bottom_right_window", 1, 2, 1, 3, 6, 4, {}};
  br.opt.causal = true;
  br.opt.align = Align::bottom_right;
  br.opt.window_left = 2;
  cs.push_back(br);
  GradCase sc{"softcap_bias_lengths", 2, 2, 2, 4, 5, 3, {}};
  sc.opt.softcap = 1.5;
  sc.opt.scale = 2.0;
  sc.opt.bias = random_uniform({1, 2, 4, 5}, 99, -1, 1, DType::f64);
  sc.opt.key_lengths = {5, 3};
  cs.push_back(sc);
  GradCase dr{"dropout_allow", 1, 2, 2, 4, 6, 3, {}};
  dr.opt.dropout_p = 0.3;
  dr.opt.dropout_seed = 7;
  dr.opt.allow = testing::random_mask({4, 6}, 17, 0.7);
  cs.push_back(dr);
  return cs;
}

class ReferenceGrad : public ::testing::TestWithParam<GradCase> {};

TEST_P(ReferenceGrad, MatchesCentralFiniteDifferences) {
  const GradCase& c = GetParam();
  Tensor q = random_uniform({c.B, c.H, c.Lq, c.D}, 21, -1, 1, DType::f64);
  Tensor k = random_uniform({c.B, c.Hkv, c.Lk, c.D}, 22, -1, 1, DType::f64);
  Tensor v = random_uniform({c.B, c.Hkv, c.Lk, c.D}, 23, -1, 1, DType::f64);
  Tensor w = random_uniform({c.B, c.H, c.Lq, c.D}, 24, -1, 1, DType::f64);  // loss = sum(out * w)
  AttentionOptions o = c.opt;
  o.backend = Backend::reference;
  auto loss = [&]() {
    auto r = attention(q, k, v, o);
    double s = 0;
    const auto ov = r.out.to_vector(), wv = w.to_vector();
    for (std::size_t i = 0; i < ov.size(); ++i) s += ov[i] * wv[i];
    return s;
  };
  auto r = attention(q, k, v, o);
  auto g = attention_backward(q, k, v, r.out, r.lse, w, o);
  const double h = 1e-6;
  for (auto [x, gx, name] :
       {std::tuple{&q, &g.dq, "dq"}, std::tuple{&k, &g.dk, "dk"}, std::tuple{&v, &g.dv, "dv"}}) {
    Tensor num = Tensor::zeros(x->shape(), DType::f64);
    double* p = x->data<double>();
    for (int64_t i = 0; i < x->numel(); ++i) {
      const double saved = p[i];
      p[i] = saved + h;
      const double up = loss();
      p[i] = saved - h;
      const double dn = loss();
      p[i] = saved;
      num.data<double>()[i] = (up - dn) / (2 * h);
    }
    EXPECT_TRUE(testing::all_close(*gx, num, testing::tol::kFiniteDiff)) << c.name << " " << name;
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, ReferenceGrad, ::testing::ValuesIn(grad_cases()),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace attn
