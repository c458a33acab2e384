// Forward properties of the nn ops that finite differences do not cover:
// positional encodings against their formulas, RoPE invariants, dropout
// statistics, cross-entropy edge cases.
#include <attn/core/autograd.h>
#include <attn/ops/basic.h>
#include <attn/ops/nn_functional.h>

#include <cmath>
#include <limits>
#include <vector>

#include "testing/testing.h"
#include "testing/tolerances.h"

namespace attn {
namespace {

namespace tol = testing::tol;
constexpr testing::Tolerance kExact{0, 0};

TEST(Positions, SinusoidalMatchesThePaperFormula) {
  const int64_t L = 9, C = 7, offset = 3;
  const Tensor pe = sinusoidal_positions(L, C, offset, DType::f64);
  ASSERT_EQ(pe.shape(), (Shape{L, C}));
  Tensor expect = Tensor::empty({L, C}, DType::f64);
  for (int64_t l = 0; l < L; ++l)
    for (int64_t i = 0; 2 * i < C; ++i) {
      // written independently: 10000^(2i/C) = exp(2i · ln(10000) / C)
      const double denom = std::exp(2.0 * i * std::log(10000.0) / C);
      expect.set({l, 2 * i}, std::sin((l + offset) / denom));
      if (2 * i + 1 < C) expect.set({l, 2 * i + 1}, std::cos((l + offset) / denom));
    }
  EXPECT_ALL_CLOSE(pe, expect, tol::kTorchParityF64);
  EXPECT_ALL_CLOSE(sinusoidal_positions(L, C, offset), expect, tol::kOpsFloatForward);
  // offset = rows of a longer table
  EXPECT_ALL_CLOSE(pe, sinusoidal_positions(L + offset, C, 0, DType::f64).slice(0, offset, L + offset),
                   tol::kTorchParityF64);
}

TEST(Positions, LearnedPositionsAreAnEmbeddingOfPositionIds) {
  const Tensor table = testing::random_uniform({10, 4}, 1);
  const Tensor ids = position_ids(3, 5);
  EXPECT_EQ(ids.to_vector(), (std::vector<double>{5, 6, 7}));
  EXPECT_ALL_CLOSE(embedding(ids, table), table.slice(0, 5, 8), kExact);
}

class Rope : public ::testing::TestWithParam<RopeLayout> {};

TEST_P(Rope, OffsetEqualsTheTailOfALongerSequence) {
  const Tensor x = testing::random_uniform({2, 3, 9, 8}, 2, -1, 1, DType::f64);
  const Tensor full = rope(x, {GetParam(), 10000.0, 0});
  const Tensor tail = rope(x.slice(2, 4, 9), {GetParam(), 10000.0, 4});
  EXPECT_ALL_CLOSE(tail, full.slice(2, 4, 9), tol::kTorchParityF64);
}

TEST_P(Rope, PositionZeroIsIdentityAndNormsArePreserved) {
  const Tensor x = testing::random_uniform({1, 1, 4, 6}, 3, -1, 1, DType::f64);
  const Tensor y = rope(x, {GetParam(), 500.0, 0});
  EXPECT_ALL_CLOSE(y.slice(2, 0, 1), x.slice(2, 0, 1), tol::kTorchParityF64);
  const Tensor nx = sum(mul(x, x), -1), ny = sum(mul(y, y), -1);
  EXPECT_ALL_CLOSE(ny, nx, tol::kTorchParityF64);
  // and the rotation really moves later positions
  EXPECT_FALSE(testing::all_close(y.slice(2, 1, 4), x.slice(2, 1, 4), {1e-3, 0}));
}

TEST_P(Rope, DotProductsDependOnlyOnRelativePosition) {
  const Tensor q = testing::random_uniform({1, 1, 1, 8}, 4, -1, 1, DType::f64);
  const Tensor k = testing::random_uniform({1, 1, 1, 8}, 5, -1, 1, DType::f64);
  auto dot_at = [&](int64_t m, int64_t n) {
    return sum(mul(rope(q, {GetParam(), 10000.0, m}), rope(k, {GetParam(), 10000.0, n}))).at({});
  };
  EXPECT_NEAR(dot_at(5, 2), dot_at(11, 8), 1e-12);
  EXPECT_GT(std::abs(dot_at(5, 2) - dot_at(5, 4)), 1e-6);
}

INSTANTIATE_TEST_SUITE_P(Layouts, Rope, ::testing::Values(RopeLayout::interleaved, RopeLayout::half_split),
                         [](const ::testing::TestParamInfo<RopeLayout>& i) {
                           return i.param == RopeLayout::interleaved ? "interleaved" : "half_split";
                         });

TEST(Rope, HalfSplitIsInterleavedWithPermutedDims) {
  // Pair i is (2i, 2i+1) interleaved and (i, i + D/2) half-split: permuting the
  // dims maps one layout onto the other.
  const int64_t D = 6;
  const Tensor x = testing::random_uniform({1, 1, 3, D}, 6, -1, 1, DType::f64);
  std::vector<int64_t> perm;  // interleaved position 2i <- half-split i, 2i+1 <- i + D/2
  for (int64_t i = 0; i < D / 2; ++i) {
    perm.push_back(i);
    perm.push_back(i + D / 2);
  }
  Tensor xi = Tensor::empty(x.shape(), DType::f64);
  for (int64_t l = 0; l < 3; ++l)
    for (int64_t d = 0; d < D; ++d) xi.set({0, 0, l, d}, x.at({0, 0, l, perm[d]}));
  const Tensor yh = rope(x, {RopeLayout::half_split, 10000.0, 2});
  const Tensor yi = rope(xi, {RopeLayout::interleaved, 10000.0, 2});
  for (int64_t l = 0; l < 3; ++l)
    for (int64_t d = 0; d < D; ++d) EXPECT_NEAR(yi.at({0, 0, l, d}), yh.at({0, 0, l, perm[d]}), 1e-14);
}

TEST(Dropout, KeepsAboutOneMinusPAndScalesSurvivors) {
  const double p = 0.3;
  const Tensor x = Tensor::full({200, 500}, 2.0);
  const Tensor y = dropout(x, p, true, 7);
  const std::vector<double> v = y.to_vector();
  int64_t zeros = 0;
  for (double e : v) {
    if (e == 0) {
      ++zeros;
    } else {
      EXPECT_FLOAT_EQ(e, 2.0 / (1 - p));
    }
  }
  EXPECT_NEAR(static_cast<double>(zeros) / v.size(), p, 0.01);
  EXPECT_EQ(dropout(x, p, true, 7).to_vector(), v);  // same seed, same mask
  EXPECT_NE(dropout(x, p, true, 8).to_vector(), v);
  // p = 0 or eval: the input itself
  EXPECT_EQ(dropout(x, 0.0, true, 7).raw_data(), x.raw_data());
  EXPECT_EQ(dropout(x, p, false, 7).raw_data(), x.raw_data());
}

TEST(CrossEntropy, AllTargetsIgnoredGivesZeroLossAndZeroGradient) {
  Tensor logits = testing::random_uniform({3, 4}, 8, -1, 1, DType::f64);
  logits.set_requires_grad(true);
  const Tensor loss = cross_entropy(logits, Tensor::from(std::vector<int64_t>{-100, -100, -100}, {3}));
  EXPECT_EQ(loss.at({}), 0.0);
  loss.backward();
  EXPECT_ALL_CLOSE(logits.grad(), Tensor::zeros({3, 4}, DType::f64), kExact);
}

TEST(CrossEntropy, MatchesLogSoftmaxPickedByHand) {
  const Tensor logits = testing::random_uniform({4, 5}, 9, -2, 2, DType::f64);
  const std::vector<int64_t> t{3, -100, 0, 4};
  const double eps = 0.2;
  const Tensor lp = log_softmax(logits);
  double total = 0;
  int valid = 0;
  for (int64_t r = 0; r < 4; ++r) {
    if (t[r] == -100) continue;
    double mean_lp = 0;
    for (int64_t v = 0; v < 5; ++v) mean_lp += lp.at({r, v}) / 5;
    total += (1 - eps) * -lp.at({r, t[r]}) + eps * -mean_lp;
    ++valid;
  }
  const Tensor loss = cross_entropy(logits, Tensor::from(t, {4}), {-100, eps});
  EXPECT_NEAR(loss.at({}), total / valid, 1e-13);
}

TEST(Softmax, FullyMaskedRowGivesZerosNotNaN) {
  Tensor x = Tensor::full({2, 3}, -std::numeric_limits<double>::infinity(), DType::f64);
  x.set({1, 0}, 0.5);
  x.set({1, 2}, -0.5);
  const Tensor y = softmax(x);
  for (int64_t j = 0; j < 3; ++j) EXPECT_EQ(y.at({0, j}), 0.0);
  EXPECT_NEAR(y.at({1, 0}) + y.at({1, 2}), 1.0, 1e-15);
  EXPECT_EQ(y.at({1, 1}), 0.0);
}

TEST(Attention, DifferentiableOpMatchesTheOperator) {
  const Tensor q = testing::random_uniform({1, 2, 3, 4}, 10), k = testing::random_uniform({1, 2, 5, 4}, 11),
               v = testing::random_uniform({1, 2, 5, 4}, 12);
  AttentionOptions o;
  o.causal = true;
  const Tensor out = scaled_dot_product_attention(q, k, v, o);
  EXPECT_ALL_CLOSE(out, attention(q, k, v, o).out, kExact);
}

}  // namespace
}  // namespace attn
