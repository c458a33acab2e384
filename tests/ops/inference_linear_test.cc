// The matrix-product fast paths (include/attn/ops/linear.h, quantized.h), the encoder's fused row
// ops and decoding's logits reductions (inference.h) and the AdamW update (optimizer.h) against
// references computed in double from the same seeded inputs, and their validation errors.
#include <attn/core/autograd.h>
#include <attn/io/gguf.h>
#include <attn/ops/basic.h>
#include <attn/ops/inference.h>
#include <attn/ops/linear.h>
#include <attn/ops/optimizer.h>
#include <attn/ops/quantized.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "kernels/cpu/isa.h"
#include "kernels/qblocks_test_util.h"
#include "kernels/ref/gemm_ref.h"
#include "testing/testing.h"

namespace attn {
namespace {

std::vector<float> floats(int64_t n, uint64_t seed, double lo = -1, double hi = 1) {
  const std::vector<double> d = testing::random_uniform({n}, seed, lo, hi).to_vector();
  return {d.begin(), d.end()};
}

double max_abs_diff(const std::vector<float>& a, const std::vector<double>& b) {
  double m = 0;
  for (std::size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(static_cast<double>(a[i]) - b[i]));
  return m;
}

// ---- ops::gemm ----------------------------------------------------------------------------------

struct GemmCase {
  std::string name;
  bool ta, tb;
  int64_t M, N, K;
  float alpha, beta;
};
void PrintTo(const GemmCase& c, std::ostream* os) { *os << c.name; }

class Gemm : public ::testing::TestWithParam<GemmCase> {};

TEST_P(Gemm, MatchesReferenceGemm) {
  const GemmCase& c = GetParam();
  const int64_t lda = (c.ta ? c.M : c.K) + 3, ldb = (c.tb ? c.K : c.N) + 1, ldc = c.N + 2;
  const std::vector<float> a = floats((c.ta ? c.K : c.M) * lda, 1), b = floats((c.tb ? c.N : c.K) * ldb, 2);
  std::vector<float> y = floats(c.M * ldc, 3);
  std::vector<double> want(y.begin(), y.end());
  const std::vector<double> ad(a.begin(), a.end()), bd(b.begin(), b.end());
  kernels::ref::gemm<double>(c.ta, c.tb, c.M, c.N, c.K, c.alpha, ad.data(), lda, bd.data(), ldb, c.beta,
                             want.data(), ldc);
  ops::gemm(c.ta, c.tb, c.M, c.N, c.K, c.alpha, a.data(), lda, b.data(), ldb, c.beta, y.data(), ldc);
  EXPECT_LT(max_abs_diff(y, want), 1e-4 * std::sqrt(static_cast<double>(c.K)) + 1e-6);
}

INSTANTIATE_TEST_SUITE_P(Cases, Gemm,
                         ::testing::Values(GemmCase{"nn_1x1x1", false, false, 1, 1, 1, 1.0f, 0.0f},
                                           GemmCase{"nt_beta1", false, true, 7, 33, 17, 1.0f, 1.0f},
                                           GemmCase{"tn_alpha", true, false, 19, 5, 40, 0.5f, 0.0f},
                                           GemmCase{"tt_beta_half", true, true, 16, 16, 16, -1.0f, 0.5f},
                                           GemmCase{"minilm_qkv", false, false, 40, 1152, 384, 1.0f, 1.0f}),
                         [](const auto& info) { return info.param.name; });

TEST(GemmErrors, NameTheProblem) {
  std::vector<float> a(64, 1.0f);
  EXPECT_ERROR_CONTAINS(ops::gemm(false, false, 2, 3, 4, 1, a.data(), 3, a.data(), 3, 0, a.data(), 3),
                        {"row strides too small", "lda 3"});
  EXPECT_ERROR_CONTAINS(ops::gemm(false, false, -1, 3, 4, 1, a.data(), 4, a.data(), 3, 0, a.data(), 3),
                        {"must be >= 0", "-1"});
  EXPECT_ERROR_CONTAINS(ops::gemm(false, false, 2, 3, 4, 1, nullptr, 4, a.data(), 3, 0, a.data(), 3),
                        {"non-null"});
}

// ---- ops::linear_small_m ------------------------------------------------------------------------

struct SmallMCase {
  std::string name;
  int64_t M, N, K;
  bool bias;
};
void PrintTo(const SmallMCase& c, std::ostream* os) { *os << c.name; }

class LinearSmallM : public ::testing::TestWithParam<SmallMCase> {};

TEST_P(LinearSmallM, MatchesReferenceGemm) {
  const SmallMCase& c = GetParam();
  const int64_t ldx = c.K + 1, ldy = c.N + 4;
  const std::vector<float> x = floats(c.M * ldx, 4), wt = floats(c.K * c.N, 5), b = floats(c.N, 6);
  std::vector<float> y(static_cast<std::size_t>(c.M * ldy), 777.0f);
  std::vector<double> want(y.size(), 0.0);
  for (int64_t m = 0; m < c.M; ++m)
    for (int64_t n = 0; n < c.N; ++n) want[m * ldy + n] = c.bias ? b[n] : 0.0;
  const std::vector<double> xd(x.begin(), x.end()), wd(wt.begin(), wt.end());
  kernels::ref::gemm<double>(false, false, c.M, c.N, c.K, 1.0, xd.data(), ldx, wd.data(), c.N, 1.0,
                             want.data(), ldy);
  for (int64_t m = 0; m < c.M; ++m)
    for (int64_t n = c.N; n < ldy; ++n) want[m * ldy + n] = 777.0;  // untouched past N
  ops::linear_small_m(x.data(), ldx, wt.data(), c.bias ? b.data() : nullptr, y.data(), ldy, c.M, c.N, c.K);
  EXPECT_LT(max_abs_diff(y, want), 1e-4 * std::sqrt(static_cast<double>(c.K)) + 1e-6);
}

INSTANTIATE_TEST_SUITE_P(Cases, LinearSmallM,
                         ::testing::Values(SmallMCase{"one_row", 1, 1, 1, true},
                                           SmallMCase{"tail", 5, 33, 17, false},
                                           SmallMCase{"minilm_ffn", 13, 1536, 384, true},
                                           SmallMCase{"rows_48", 48, 40, 64, true}),
                         [](const auto& info) { return info.param.name; });

TEST(LinearSmallMErrors, NameTheProblem) {
  std::vector<float> a(64, 1.0f);
  EXPECT_ERROR_CONTAINS(ops::linear_small_m(a.data(), 2, a.data(), nullptr, a.data(), 4, 2, 4, 3),
                        {"ldx >= K = 3", "got 2"});
  EXPECT_ERROR_CONTAINS(ops::linear_small_m(a.data(), 3, a.data(), nullptr, a.data(), 4, 2, 0, 3),
                        {"N >= 1"});
  EXPECT_ERROR_CONTAINS(ops::linear_small_m(a.data(), 3, nullptr, nullptr, a.data(), 4, 2, 4, 3),
                        {"non-null"});
}

// ---- ops::inference_linear: attn::linear outside a scope, the packed kernel inside ---------------

TEST(InferenceLinear, EqualsLinearInAndOutOfAPackedScope) {
  NoGradGuard no_grad;
  const Tensor x = testing::random_uniform({2, 5, 24}, 7), w = testing::random_uniform({40, 24}, 8),
               b = testing::random_uniform({40}, 9);
  const Tensor want = linear(x.to(DType::f64), w.to(DType::f64), b.to(DType::f64));
  EXPECT_ALL_CLOSE(ops::inference_linear(x, w, b).to(DType::f64), want, (testing::Tolerance{1e-5, 1e-5}));
  ops::PackedWeightScope scope;
  for (int i = 0; i < ops::PackedWeightScope::kPackAfter + 1; ++i)
    EXPECT_ALL_CLOSE(ops::inference_linear(x, w, b).to(DType::f64), want, (testing::Tolerance{1e-5, 1e-5}));
  EXPECT_ERROR_CONTAINS(ops::inference_linear(testing::random_uniform({2, 7}, 10), w, b),
                        {"linear", "in = 24"});
}

// d15b: the scope packs weights smaller than 4 MiB into shared blocks. Weights of several sizes (tiny
// ones side by side, enough to fill a block and start the next, one larger than a block) packed one after
// the other: every packed copy still gives its own product once all are packed (none overwrote another).
TEST(InferenceLinear, ManyWeightsInOneScopeKeepTheirOwnPackedCopies) {
  NoGradGuard no_grad;
  struct W {
    Tensor w, b, x, want;
  };
  std::vector<W> ws;
  const std::vector<std::pair<int64_t, int64_t>> shapes = {{5, 3},      {33, 17},    {256, 256},
                                                           {1024, 256}, {256, 1024}, {1024, 256},
                                                           {256, 1024}, {2100, 520}, {40, 24}};
  uint64_t seed = 100;
  for (const auto& [N, K] : shapes) {
    W e;
    e.w = testing::random_uniform({N, K}, seed++, -0.5, 0.5);
    e.b = testing::random_uniform({N}, seed++);
    e.x = testing::random_uniform({3, K}, seed++);
    e.want = linear(e.x.to(DType::f64), e.w.to(DType::f64), e.b.to(DType::f64));
    ws.push_back(e);
  }
  ops::PackedWeightScope scope;
  for (int i = 0; i < ops::PackedWeightScope::kPackAfter; ++i)
    for (const W& e : ws) (void)ops::inference_linear(e.x, e.w, e.b);
  if (kernels::cpu::active_isa() != kernels::cpu::Isa::scalar) {
    EXPECT_EQ(scope.packs(), static_cast<int64_t>(ws.size()));
  }
  for (const W& e : ws) {
    const double tol = 2e-6 * std::sqrt(static_cast<double>(e.w.size(1)));
    EXPECT_ALL_CLOSE(ops::inference_linear(e.x, e.w, e.b).to(DType::f64), e.want,
                     (testing::Tolerance{tol, tol}))
        << "weight [" << e.w.size(0) << ", " << e.w.size(1) << "]";
  }
}

// ---- ops::QuantMatrix, quant_linear_rows and Q8Dot -----------------------------------------------

struct QuantCase {
  std::string name;
  ops::QuantFormat format;
  int64_t M, N, K;
};
void PrintTo(const QuantCase& c, std::ostream* os) { *os << c.name; }

kernels::QFormat kformat(ops::QuantFormat f) {
  return f == ops::QuantFormat::q4_1 ? kernels::QFormat::q4_1 : kernels::QFormat::q8_0;
}

class QuantLinear : public ::testing::TestWithParam<QuantCase> {};

TEST_P(QuantLinear, F32AndQ8ActivationsMatchTheDequantizedProduct) {
  const QuantCase& c = GetParam();
  const std::vector<std::byte> blocks = testing::random_blocks(kformat(c.format), c.N, c.K, 41);
  std::vector<float> wf(static_cast<std::size_t>(c.N * c.K));
  io::dequantize(testing::ggml_type_of(kformat(c.format)), blocks.data(), c.N * c.K, wf.data());
  ops::QuantMatrix w(c.format, blocks.data(), c.N, c.K);
  EXPECT_EQ(w.row_bytes(), c.K / 32 * ops::quant_block_bytes(c.format));
  const int64_t ldx = c.K + 5, ldy = c.N + 3;
  const std::vector<float> x = floats(c.M * ldx, 42);
  std::vector<double> want(static_cast<std::size_t>(c.M * ldy), 0.0);
  double scale = 0;  // Σ|x·w| bounds the rounding of both paths
  for (int64_t m = 0; m < c.M; ++m)
    for (int64_t n = 0; n < c.N; ++n) {
      double s = 0, a = 0;
      for (int64_t k = 0; k < c.K; ++k) {
        s += static_cast<double>(x[m * ldx + k]) * wf[n * c.K + k];
        a += std::abs(static_cast<double>(x[m * ldx + k]) * wf[n * c.K + k]);
      }
      want[m * ldy + n] = s;
      scale = std::max(scale, a);
    }
  // f32 activations, the rows in two ranges as a caller's threads would split them.
  std::vector<float> y(static_cast<std::size_t>(c.M * ldy), 0.0f);
  ops::quant_linear_rows(w, 0, c.N / 2, x.data(), c.M, ldx, y.data(), ldy);
  ops::quant_linear_rows(w, c.N / 2, c.N, x.data(), c.M, ldx, y.data(), ldy);
  EXPECT_LT(max_abs_diff(y, want), 1e-5 * scale + 1e-6);
  // 8-bit activations: ~2^-8 relative error per activation.
  w.pack_q8();
  ASSERT_TRUE(w.has_q8());
  ops::Q8Activations xq;
  xq.quantize(x.data(), c.M, c.K, ldx);
  EXPECT_EQ(xq.rows(), c.M);
  EXPECT_EQ(xq.cols(), c.K);
  const ops::Q8Dot dot = ops::q8_dot();
  std::vector<float> yq(y.size(), 0.0f);
  dot(w, 0, c.N, xq, yq.data(), ldy, false);
  EXPECT_LT(max_abs_diff(yq, want), 2e-2 * scale + 1e-6);
  // accumulate: y += the product
  std::vector<double> twice(want);
  for (double& v : twice) v *= 2;
  dot(w, 0, c.N, xq, yq.data(), ldy, true);
  EXPECT_LT(max_abs_diff(yq, twice), 4e-2 * scale + 1e-6);
}

INSTANTIATE_TEST_SUITE_P(Cases, QuantLinear,
                         ::testing::Values(QuantCase{"q4_1_one", ops::QuantFormat::q4_1, 1, 1, 32},
                                           QuantCase{"q8_0_one", ops::QuantFormat::q8_0, 1, 3, 32},
                                           QuantCase{"q4_1_rows", ops::QuantFormat::q4_1, 5, 37, 96},
                                           QuantCase{"q8_0_rows", ops::QuantFormat::q8_0, 9, 20, 576}),
                         [](const auto& info) { return info.param.name; });

TEST(QuantLinearErrors, NameTheProblem) {
  const std::vector<std::byte> blocks = testing::random_blocks(kernels::QFormat::q8_0, 4, 64, 1);
  EXPECT_ERROR_CONTAINS(ops::QuantMatrix(ops::QuantFormat::q8_0, blocks.data(), 4, 48),
                        {"multiple of 32", "K 48"});
  const ops::QuantMatrix w(ops::QuantFormat::q8_0, blocks.data(), 4, 64);
  std::vector<float> x(128, 0.5f), y(16, 0.0f);
  EXPECT_ERROR_CONTAINS(ops::quant_linear_rows(w, 0, 5, x.data(), 1, 64, y.data(), 4),
                        {"[0, N = 4]", "[0, 5)"});
  EXPECT_ERROR_CONTAINS(ops::quant_linear_rows(w, 0, 4, x.data(), 1, 32, y.data(), 4), {"row stride >= K"});
  EXPECT_ERROR_CONTAINS(ops::quant_linear_rows(w, 0, 4, x.data(), 1, 64, y.data(), 3), {"ldy 3"});
  ops::Q8Activations xq;
  xq.quantize(x.data(), 1, 64, 64);
  EXPECT_ERROR_CONTAINS(ops::q8_dot()(w, 0, 4, xq, y.data(), 4, false), {"pack_q8"});
  ops::QuantMatrix packed(ops::QuantFormat::q8_0, blocks.data(), 4, 64);
  packed.pack_q8();
  ops::Q8Activations short_x;
  short_x.quantize(x.data(), 1, 32, 32);
  EXPECT_ERROR_CONTAINS(ops::q8_dot()(packed, 0, 4, short_x, y.data(), 4, false), {"K = 32", "K = 64"});
  EXPECT_ERROR_CONTAINS(xq.quantize(x.data(), 1, 40, 40), {"multiple of 32", "K 40"});
}

// ---- the encoder's fused row ops -------------------------------------------------------------------

struct RowCase {
  std::string name;
  int64_t rows, C;
};
void PrintTo(const RowCase& c, std::ostream* os) { *os << c.name; }

class EncoderRowOps : public ::testing::TestWithParam<RowCase> {};

TEST_P(EncoderRowOps, MatchDoubleFormulas) {
  const RowCase& c = GetParam();
  const int64_t n = c.rows * c.C;
  const std::vector<float> x0 = floats(n, 51, -3, 3), bias = floats(c.C, 52), y = floats(n, 53),
                           w = floats(c.C, 54), b = floats(c.C, 55);
  std::vector<float> x = x0;
  ops::bias_gelu(x.data(), bias.data(), c.rows, c.C);
  std::vector<double> want(static_cast<std::size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const double u = static_cast<double>(x0[i]) + bias[i % c.C];
    want[i] = 0.5 * u * (1 + std::erf(u / std::sqrt(2.0)));
  }
  EXPECT_LT(max_abs_diff(x, want), 1e-5);
  const float eps = 1e-12f;
  x = x0;
  ops::residual_layer_norm(x.data(), y.data(), bias.data(), w.data(), b.data(), c.rows, c.C, eps);
  for (int64_t r = 0; r < c.rows; ++r) {
    double mean = 0, var = 0;
    std::vector<double> h(static_cast<std::size_t>(c.C));
    for (int64_t k = 0; k < c.C; ++k) {
      h[k] = static_cast<double>(x0[r * c.C + k]) + y[r * c.C + k] + bias[k];
      mean += h[k] / c.C;
    }
    for (int64_t k = 0; k < c.C; ++k) var += (h[k] - mean) * (h[k] - mean) / c.C;
    for (int64_t k = 0; k < c.C; ++k) want[r * c.C + k] = (h[k] - mean) / std::sqrt(var + eps) * w[k] + b[k];
  }
  EXPECT_LT(max_abs_diff(x, want), 1e-4);
}

INSTANTIATE_TEST_SUITE_P(Cases, EncoderRowOps,
                         ::testing::Values(RowCase{"one", 1, 1}, RowCase{"tail", 3, 17},
                                           RowCase{"minilm", 9, 384}),
                         [](const auto& info) { return info.param.name; });

TEST(EncoderRowOpsErrors, NameTheProblem) {
  std::vector<float> a(8, 1.0f);
  EXPECT_ERROR_CONTAINS(ops::bias_gelu(a.data(), nullptr, 2, 0), {"bias_gelu", "C 0"});
  EXPECT_ERROR_CONTAINS(ops::bias_gelu(nullptr, nullptr, 2, 4), {"non-null"});
  EXPECT_ERROR_CONTAINS(ops::residual_layer_norm(a.data(), nullptr, nullptr, nullptr, a.data(), 2, 4, 1e-5f),
                        {"weight and bias"});
  EXPECT_ERROR_CONTAINS(
      ops::residual_layer_norm(a.data(), nullptr, nullptr, a.data(), a.data(), -1, 4, 1e-5f), {"rows -1"});
}

// ---- decoding's logits reductions ---------------------------------------------------------------

class LogitsReductions : public ::testing::TestWithParam<int64_t> {};

TEST_P(LogitsReductions, MatchMaxElementAndDoubleLogSumExp) {
  const int64_t V = GetParam();
  std::vector<float> x = floats(V, 61, -15, 15);
  if (V > 3) x[V / 2] = 16.0f, x[V - 1] = 16.0f;  // a tie: the lower id wins
  double mx = -INFINITY, s = 0;
  for (float v : x) mx = std::max(mx, static_cast<double>(v));
  for (float v : x) s += std::exp(static_cast<double>(v) - mx);
  const ops::ArgmaxLse r = ops::row_argmax_logsumexp(x.data(), V);
  EXPECT_EQ(r.token, std::max_element(x.begin(), x.end()) - x.begin());
  EXPECT_NEAR(r.lse, mx + std::log(s), 1e-5 * std::abs(mx) + 1e-5);
  EXPECT_EQ(r.lse, ops::row_logsumexp(x.data(), V));
}

INSTANTIATE_TEST_SUITE_P(Lengths, LogitsReductions, ::testing::Values(1, 7, 16, 33, 49152));

TEST(LogitsReductionsErrors, NameTheProblem) {
  const float x = 1.0f;
  EXPECT_ERROR_CONTAINS(ops::row_logsumexp(&x, 0), {"row_logsumexp", "V >= 1", "got V 0"});
  EXPECT_ERROR_CONTAINS(ops::row_argmax_logsumexp(nullptr, 3), {"row_argmax_logsumexp", "non-null"});
}

// ---- ops::adamw_update -------------------------------------------------------------------------------

class AdamWUpdate : public ::testing::TestWithParam<int64_t> {};

TEST_P(AdamWUpdate, MatchesTheFormulaInDouble) {
  const int64_t n = GetParam();
  std::vector<float> p = floats(n, 71), g = floats(n, 72), m = floats(n, 73, -0.1, 0.1),
                     v = floats(n, 74, 0, 0.01);
  const std::vector<float> p0 = p, m0 = m, v0 = v;
  const ops::AdamWScalars s{true, 0.999f, 0.1f, 0.999f, 0.001f, 0.0447f, 1e-8f, -0.0123f};
  ops::adamw_update(p.data(), g.data(), m.data(), v.data(), n, s);
  std::vector<double> wp(static_cast<std::size_t>(n)), wm(wp.size()), wv(wp.size());
  for (int64_t j = 0; j < n; ++j) {
    wm[j] = m0[j] + double{s.w1} * (g[j] - m0[j]);
    wv[j] = v0[j] * double{s.b2} + double{s.w2} * g[j] * g[j];
    wp[j] = p0[j] * double{s.decay} + double{s.neg_step} * wm[j] / (std::sqrt(wv[j]) / s.bc2_sqrt + s.eps);
  }
  EXPECT_LT(max_abs_diff(m, wm), 1e-6);
  EXPECT_LT(max_abs_diff(v, wv), 1e-6);
  EXPECT_LT(max_abs_diff(p, wp), 1e-5);
}

INSTANTIATE_TEST_SUITE_P(Lengths, AdamWUpdate, ::testing::Values(1, 15, 16, 17, 1000));

TEST(AdamWUpdateErrors, NameTheProblem) {
  float a = 0;
  EXPECT_ERROR_CONTAINS(ops::adamw_update(&a, &a, &a, &a, -1, {}), {"n must be >= 0", "got -1"});
  EXPECT_ERROR_CONTAINS(ops::adamw_update(&a, nullptr, &a, &a, 1, {}), {"non-null"});
}

}  // namespace
}  // namespace attn
