// The fused encoder row kernels (src/kernels/cpu/encoder_kernels.h) on every
// instruction set this CPU has, against the same formulas in double.
#include "kernels/cpu/encoder_kernels.h"

#include <attn/core/parallel.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "kernels/isa_test_util.h"
#include "testing/testing.h"

namespace attn {
namespace {

using kernels::cpu::Isa;

struct RowCase {
  std::string name;
  int64_t rows, C;
  double scale;  // inputs uniform in [-scale, scale)
  bool with_bias;
};

using EncoderKernels = testing::IsaCaseTest<RowCase>;

std::vector<float> values(int64_t n, uint64_t seed, double scale) {
  const Tensor t = testing::random_uniform({n}, seed, -scale, scale);
  return std::vector<float>(t.data<float>(), t.data<float>() + n);
}

// |got - want| <= abs + rel · |want| everywhere; names the worst element.
void expect_close(const std::vector<float>& got, const std::vector<double>& want, double abs, double rel) {
  ASSERT_EQ(got.size(), want.size());
  double worst = 0;
  std::size_t at = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double excess = std::fabs(got[i] - want[i]) - (abs + rel * std::fabs(want[i]));
    if (i == 0 || excess > worst) worst = excess, at = i;
  }
  EXPECT_LE(worst, 0.0) << "element " << at << ": got " << got[at] << ", want " << want[at];
}

TEST_P(EncoderKernels, BiasGeluMatchesErfFormInDouble) {
  const auto& [c, isa] = GetParam();
  kernels::cpu::force_isa(isa);
  set_num_threads(2);
  std::vector<float> x = values(c.rows * c.C, 1, c.scale), bias = values(c.C, 2, 0.5);
  std::vector<double> want(x.size());
  for (int64_t r = 0; r < c.rows; ++r)
    for (int64_t j = 0; j < c.C; ++j) {
      const double u = static_cast<double>(x[r * c.C + j]) + (c.with_bias ? bias[j] : 0.0);
      want[r * c.C + j] = 0.5 * u * (1 + std::erf(u / std::sqrt(2.0)));
    }
  kernels::cpu::bias_gelu(x.data(), c.with_bias ? bias.data() : nullptr, c.rows, c.C);
  // fp32 inputs; the AVX-512 erf approximation is within 2e-7 absolute.
  expect_close(x, want, 1e-6, 2e-6);
}

// Far tails (erf saturating to ±1, |u| past the clamp inside the AVX-512 erf) on every ISA.
TEST(EncoderKernelsGelu, LargeInputsSaturate) {
  for (const Isa isa : testing::available_isas()) {
    kernels::cpu::force_isa(isa);
    std::vector<float> x = {1e30f, -1e30f, 20.0f,  -20.0f, 8.5f,   -8.5f,   7.9f,   -7.9f,  0.0f,
                            -3.5f, 3.5f,   -5.25f, 5.25f,  1e-20f, -1e-20f, 100.0f, -100.0f};
    std::vector<double> want;
    for (const float u : x) want.push_back(0.5 * u * (1 + std::erf(static_cast<double>(u) / std::sqrt(2.0))));
    kernels::cpu::bias_gelu(x.data(), nullptr, 1, static_cast<int64_t>(x.size()));
    expect_close(x, want, 1e-6, 2e-6);
  }
  kernels::cpu::force_isa(std::nullopt);
}

TEST_P(EncoderKernels, AddBiasIsExact) {
  const auto& [c, isa] = GetParam();
  kernels::cpu::force_isa(isa);
  std::vector<float> x = values(c.rows * c.C, 3, c.scale), bias = values(c.C, 4, 1.0);
  std::vector<double> want(x.size());
  for (int64_t r = 0; r < c.rows; ++r)
    for (int64_t j = 0; j < c.C; ++j) want[r * c.C + j] = static_cast<float>(x[r * c.C + j] + bias[j]);
  kernels::cpu::add_bias(x.data(), bias.data(), c.rows, c.C);
  expect_close(x, want, 0, 0);
}

TEST_P(EncoderKernels, ResidualLayerNormMatchesDouble) {
  const auto& [c, isa] = GetParam();
  kernels::cpu::force_isa(isa);
  set_num_threads(2);
  std::vector<float> h = values(c.rows * c.C, 5, c.scale), y = values(c.rows * c.C, 6, c.scale);
  const std::vector<float> bias = values(c.C, 7, 0.5), w = values(c.C, 8, 2.0), b = values(c.C, 9, 0.5);
  std::vector<double> want(h.size());
  for (int64_t r = 0; r < c.rows; ++r) {
    std::vector<double> s(static_cast<std::size_t>(c.C));
    double mean = 0, var = 0;
    for (int64_t j = 0; j < c.C; ++j) {
      s[j] = static_cast<double>(h[r * c.C + j]) +
             (c.with_bias ? y[r * c.C + j] + static_cast<double>(bias[j]) : 0.0);
      mean += s[j];
    }
    mean /= static_cast<double>(c.C);
    for (double v : s) var += (v - mean) * (v - mean);
    const double rs = 1 / std::sqrt(var / static_cast<double>(c.C) + 1e-12);
    for (int64_t j = 0; j < c.C; ++j) want[r * c.C + j] = (s[j] - mean) * rs * w[j] + b[j];
  }
  kernels::cpu::residual_layer_norm(h.data(), c.with_bias ? y.data() : nullptr,
                                    c.with_bias ? bias.data() : nullptr, w.data(), b.data(), c.rows, c.C,
                                    1e-12f);
  // Normalised values are O(|w|) = O(2); fp32 sums over C elements.
  expect_close(h, want, 2e-5, 2e-5);
}

INSTANTIATE_TEST_SUITE_P(Cases, EncoderKernels,
                         ::testing::Combine(::testing::Values(RowCase{"minilm_hidden", 37, 384, 4.0, true},
                                                              RowCase{"minilm_ffn", 9, 1536, 6.0, true},
                                                              RowCase{"tail_17", 5, 17, 3.0, true},
                                                              RowCase{"tiny_3", 4, 3, 3.0, false},
                                                              RowCase{"wide_range", 3, 64, 12.0, true},
                                                              RowCase{"no_bias", 11, 100, 2.0, false}),
                                            ::testing::ValuesIn(testing::available_isas())),
                         testing::isa_case_name<RowCase>);

struct GemmCase {
  std::string name;
  int64_t M, N, K, ldx_pad;
  bool with_bias;
};

using SmallMLinear = testing::IsaCaseTest<GemmCase>;

// y = x · wt + bias against the product in double; x with a row stride larger than K
// when ldx_pad > 0, y written into a wider buffer whose other columns must stay untouched.
TEST_P(SmallMLinear, MatchesDouble) {
  const auto& [c, isa] = GetParam();
  kernels::cpu::force_isa(isa);
  set_num_threads(2);
  const int64_t ldx = c.K + c.ldx_pad, ldy = c.N + 3;
  const std::vector<float> x = values(c.M * ldx, 11, 1.0), wt = values(c.K * c.N, 12, 0.5),
                           bias = values(c.N, 13, 1.0);
  std::vector<float> y(static_cast<std::size_t>(c.M * ldy), -7.0f);
  std::vector<double> want(y.size(), -7.0);
  for (int64_t m = 0; m < c.M; ++m)
    for (int64_t n = 0; n < c.N; ++n) {
      double s = c.with_bias ? bias[n] : 0.0;
      for (int64_t k = 0; k < c.K; ++k) s += static_cast<double>(x[m * ldx + k]) * wt[k * c.N + n];
      want[m * ldy + n] = s;
    }
  kernels::cpu::linear_small_m(x.data(), ldx, wt.data(), c.with_bias ? bias.data() : nullptr, y.data(), ldy,
                               c.M, c.N, c.K);
  // fp32 sums of K products of O(0.5) values.
  expect_close(y, want, 1e-5 * std::sqrt(static_cast<double>(c.K)), 1e-5);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, SmallMLinear,
    ::testing::Combine(::testing::Values(GemmCase{"m1_minilm_qkv", 1, 1152, 384, 0, true},
                                         GemmCase{"m16_minilm_ffn_out", 16, 384, 1536, 0, true},
                                         GemmCase{"m12_exact_block", 12, 64, 32, 5, false},
                                         GemmCase{"m13_block_tail", 13, 48, 17, 0, true},
                                         GemmCase{"m25_n_tail_7", 25, 7, 9, 2, true},
                                         GemmCase{"m3_n_tail_40", 3, 40, 5, 1, false},
                                         GemmCase{"k1", 5, 33, 1, 0, true}),
                       ::testing::ValuesIn(testing::available_isas())),
    testing::isa_case_name<GemmCase>);

using SmallMLinearNT = testing::IsaCaseTest<GemmCase>;

// y = x · wᵀ + bias with w in nn::Linear's [N, K] layout, against the product in double;
// strided x, y written into a wider buffer whose other columns must stay untouched.
TEST_P(SmallMLinearNT, MatchesDouble) {
  const auto& [c, isa] = GetParam();
  kernels::cpu::force_isa(isa);
  set_num_threads(2);
  const int64_t ldx = c.K + c.ldx_pad, ldy = c.N + 3;
  const std::vector<float> x = values(c.M * ldx, 21, 1.0), w = values(c.N * c.K, 22, 0.5),
                           bias = values(c.N, 23, 1.0);
  std::vector<float> y(static_cast<std::size_t>(c.M * ldy), -7.0f);
  std::vector<double> want(y.size(), -7.0);
  for (int64_t m = 0; m < c.M; ++m)
    for (int64_t n = 0; n < c.N; ++n) {
      double s = c.with_bias ? bias[n] : 0.0;
      for (int64_t k = 0; k < c.K; ++k) s += static_cast<double>(x[m * ldx + k]) * w[n * c.K + k];
      want[m * ldy + n] = s;
    }
  kernels::cpu::linear_small_m_nt(x.data(), ldx, w.data(), c.with_bias ? bias.data() : nullptr, y.data(), ldy,
                                  c.M, c.N, c.K);
  // fp32 sums of K products of O(0.5) values.
  expect_close(y, want, 1e-5 * std::sqrt(static_cast<double>(c.K)), 1e-5);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, SmallMLinearNT,
    ::testing::Combine(::testing::Values(GemmCase{"m1_decode_vocab", 1, 1000, 256, 0, true},
                                         GemmCase{"m32_decode_ffn", 32, 1024, 256, 0, true},
                                         GemmCase{"m6_exact_block", 6, 64, 32, 5, false},
                                         GemmCase{"m13_block_tail", 13, 47, 17, 0, true},
                                         GemmCase{"m25_n_tail_7", 25, 7, 9, 2, true},
                                         GemmCase{"m3_n_tail_40", 3, 42, 5, 1, false},
                                         GemmCase{"m64_k_tail", 64, 37, 131, 3, true},
                                         GemmCase{"k1", 5, 33, 1, 0, true}),
                       ::testing::ValuesIn(testing::available_isas())),
    testing::isa_case_name<GemmCase>);

struct AttCase {
  std::string name;
  int64_t L, H, D;
  std::vector<int64_t> lengths;  // one per sequence (B = lengths.size())
  double scale;                  // q, k uniform in [-scale, scale)
};

using EncoderAttention = testing::IsaCaseTest<AttCase>;

// ctx from the fused QKV layout against softmax attention in double: padded keys masked, every
// query row (padding rows too) written, heads merged.
TEST_P(EncoderAttention, MatchesDouble) {
  const auto& [c, isa] = GetParam();
  kernels::cpu::force_isa(isa);
  set_num_threads(2);
  const auto B = static_cast<int64_t>(c.lengths.size());
  const int64_t C = c.H * c.D, ld = 3 * C;
  std::vector<float> qkv = values(B * c.L * ld, 31, c.scale);
  const std::vector<float> vv = values(B * c.L * ld, 32, 1.0);
  for (int64_t t = 0; t < B * c.L; ++t)  // v columns in [-1, 1)
    for (int64_t e = 2 * C; e < 3 * C; ++e) qkv[t * ld + e] = vv[t * ld + e];
  const float scale = 1.0f / std::sqrt(static_cast<float>(c.D));
  std::vector<float> ctx(static_cast<std::size_t>(B * c.L * C), -7.0f);
  std::vector<double> want(ctx.size());
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < c.H; ++h)
      for (int64_t i = 0; i < c.L; ++i) {
        const int64_t n = c.lengths[static_cast<std::size_t>(b)];
        std::vector<double> p(static_cast<std::size_t>(n));
        double mx = -1e300, z = 0;
        for (int64_t j = 0; j < n; ++j) {
          double d = 0;
          for (int64_t e = 0; e < c.D; ++e)
            d += static_cast<double>(qkv[(b * c.L + i) * ld + h * c.D + e]) *
                 qkv[(b * c.L + j) * ld + C + h * c.D + e];
          p[j] = d * static_cast<double>(scale);
          mx = std::max(mx, p[j]);
        }
        for (double& x : p) z += (x = std::exp(x - mx));
        for (int64_t e = 0; e < c.D; ++e) {
          double o = 0;
          for (int64_t j = 0; j < n; ++j) o += p[j] / z * qkv[(b * c.L + j) * ld + 2 * C + h * c.D + e];
          want[(b * c.L + i) * C + h * c.D + e] = o;
        }
      }
  kernels::cpu::encoder_attention(qkv.data(), c.lengths.data(), ctx.data(), B, c.L, c.H, c.D, scale);
  // Convex combinations of values in [-1, 1); fp32 score errors grow with |q| |k| ~ scale² and pass
  // through exp into the weights.
  expect_close(ctx, want, 1e-6 * (1 + c.scale * c.scale), 2e-5);
}

TEST(EncoderAttentionErrors, RejectsBadLengths) {
  std::vector<float> qkv(2 * 4 * 3 * 16), ctx(2 * 4 * 16);
  const std::vector<int64_t> zero = {4, 0}, too_long = {5, 4};
  EXPECT_ERROR_CONTAINS(
      kernels::cpu::encoder_attention(qkv.data(), zero.data(), ctx.data(), 2, 4, 1, 16, 0.25f),
      {"lengths[1] = 0", "[1, 4]"});
  EXPECT_ERROR_CONTAINS(
      kernels::cpu::encoder_attention(qkv.data(), too_long.data(), ctx.data(), 2, 4, 1, 16, 0.25f),
      {"lengths[0] = 5", "[1, 4]"});
}

INSTANTIATE_TEST_SUITE_P(
    Cases, EncoderAttention,
    ::testing::Combine(::testing::Values(AttCase{"minilm_128", 128, 12, 32, {128, 77}, 2.0},
                                         AttCase{"minilm_latency_16", 16, 12, 32, {16}, 2.0},
                                         AttCase{"tails_l23_d16", 23, 3, 16, {23, 1, 17, 16}, 3.0},
                                         AttCase{"d64_l70", 70, 2, 64, {70, 33}, 1.5},
                                         AttCase{"d80_l5", 5, 1, 80, {5, 4}, 1.0},
                                         AttCase{"d48_l1", 1, 4, 48, {1}, 1.0},
                                         AttCase{"d8_l9", 9, 2, 8, {9, 3}, 2.0},
                                         AttCase{"d24_l30", 30, 2, 24, {30, 9, 25}, 2.0},
                                         AttCase{"d12_scalar_only", 7, 2, 12, {7, 2}, 2.0},
                                         AttCase{"peaked", 40, 2, 32, {40, 39}, 8.0}),
                       ::testing::ValuesIn(testing::available_isas())),
    testing::isa_case_name<AttCase>);

}  // namespace
}  // namespace attn
