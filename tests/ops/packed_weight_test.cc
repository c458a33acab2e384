// Weights packed once at load (include/attn/ops/linear.h: pack_weight_t, linear_packed, gemm_packed,
// as models/bert.cc uses them) against a double reference on every instruction set this CPU runs
// (AVX-512 and AVX2 read the panels in the own GEMM; scalar unpacks them for ops::gemm), few and many
// rows, beta 0 and 1, padded strides, 1 and 2 threads; and the errors for a tensor that is not the
// packed form of the stated shape.
#include <attn/core/parallel.h>
#include <attn/ops/inference.h>
#include <attn/ops/linear.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "kernels/isa_test_util.h"
#include "testing/testing.h"

namespace attn {
namespace {

struct Case {
  std::string name;
  int64_t M, N, K;
  int64_t pad;
};
void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

std::vector<Case> cases() {
  return {{"m1_n5_k3", 1, 5, 3, 0},
          {"m7_n33_k40", 7, 33, 40, 2},
          {"m16_n1152_k384", 16, 1152, 384, 0},
          {"m13_n384_k1536", 13, 384, 1536, 1},
          {"m128_n97_k257", 128, 97, 257, 0},
          {"m300_n384_k384", 300, 384, 384, 3},
          {"m40_n300_k50_column_split", 40, 300, 50, 1},
          {"m400_n200_k64_row_blocks", 400, 200, 64, 2}};
}

using PackedWeight = testing::IsaCaseTest<Case>;

std::vector<float> to_float(const Tensor& t) {
  const std::vector<double> d = t.to_vector();
  return std::vector<float>(d.begin(), d.end());
}

TEST_P(PackedWeight, LinearAndGemmMatchDouble) {
  const auto& [c, isa] = GetParam();
  kernels::cpu::force_isa(isa);
  const int64_t ldx = c.K + c.pad, ldy = c.N + c.pad;
  const std::vector<float> x = to_float(testing::random_uniform({c.M, ldx}, 61, -1.0, 1.0));
  const Tensor wt = testing::random_uniform({c.K, c.N}, 62, -0.5, 0.5);  // wt: [K, N] (in -> out)
  const std::vector<float> w = to_float(wt), bias = to_float(testing::random_uniform({c.N}, 63));
  const std::vector<float> c0 = to_float(testing::random_uniform({c.M, ldy}, 64));
  const Tensor packed = ops::pack_weight_t(wt);
  const double tol = 2e-6 * std::sqrt(static_cast<double>(c.K));
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    // linear_packed: y = x · wt + bias;  gemm_packed with beta 1: C = c0 + x · wt;  beta 0: C = x · wt (NaN
    // not read)
    std::vector<float> y(static_cast<size_t>(c.M * ldy), 777.f),
        acc = c0, fresh(static_cast<size_t>(c.M * ldy), std::numeric_limits<float>::quiet_NaN());
    for (int64_t m = 0; m < c.M; ++m)
      for (int64_t n = c.N; n < ldy; ++n)
        acc[static_cast<size_t>(m * ldy + n)] = fresh[static_cast<size_t>(m * ldy + n)] = 777.f;
    ops::linear_packed(x.data(), ldx, packed, bias.data(), y.data(), ldy, c.M, c.N, c.K);
    ops::gemm_packed(x.data(), ldx, packed, 1.0f, acc.data(), ldy, c.M, c.N, c.K);
    ops::gemm_packed(x.data(), ldx, packed, 0.0f, fresh.data(), ldy, c.M, c.N, c.K);
    for (int64_t m = 0; m < c.M; ++m)
      for (int64_t n = 0; n < ldy; ++n) {
        const size_t i = static_cast<size_t>(m * ldy + n);
        if (n >= c.N) {
          ASSERT_EQ(y[i], 777.f) << "linear_packed wrote past N";
          ASSERT_EQ(acc[i], 777.f) << "gemm_packed wrote past N";
          ASSERT_EQ(fresh[i], 777.f) << "gemm_packed wrote past N";
          continue;
        }
        double dot = 0;
        for (int64_t k = 0; k < c.K; ++k)
          dot +=
              static_cast<double>(x[static_cast<size_t>(m * ldx + k)]) * w[static_cast<size_t>(k * c.N + n)];
        const double scale = 1 + std::abs(dot);
        ASSERT_NEAR(y[i], dot + bias[static_cast<size_t>(n)], tol * scale) << "m " << m << " n " << n;
        ASSERT_NEAR(acc[i], dot + c0[i], tol * scale) << "m " << m << " n " << n;
        ASSERT_NEAR(fresh[i], dot, tol * scale) << "m " << m << " n " << n << " threads " << threads;
      }
  }
}

// The epilogues (bias; bias + GELU) give exactly what gemm_packed followed by the separate pass gives: the
// same functions on the same values, only applied block by block while the block is in cache.
TEST_P(PackedWeight, EpiloguesEqualTheSeparatePasses) {
  const auto& [c, isa] = GetParam();
  kernels::cpu::force_isa(isa);
  const int64_t ldx = c.K + c.pad, ldy = c.N + c.pad;
  const std::vector<float> x = to_float(testing::random_uniform({c.M, ldx}, 71, -1.0, 1.0));
  const Tensor packed = ops::pack_weight_t(testing::random_uniform({c.K, c.N}, 72, -0.5, 0.5));
  const std::vector<float> bias = to_float(testing::random_uniform({c.N}, 73));
  const std::vector<float> c0 = to_float(testing::random_uniform({c.M, ldy}, 74));
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    for (float beta : {0.0f, 1.0f}) {
      std::vector<float> plain = c0, with_bias = c0, with_gelu = c0;
      ops::gemm_packed(x.data(), ldx, packed, beta, plain.data(), ldy, c.M, c.N, c.K);
      ops::gemm_packed(x.data(), ldx, packed, beta, with_bias.data(), ldy, c.M, c.N, c.K,
                       ops::GemmEpilogue::bias, bias.data());
      ops::gemm_packed(x.data(), ldx, packed, beta, with_gelu.data(), ldy, c.M, c.N, c.K,
                       ops::GemmEpilogue::bias_gelu, bias.data());
      std::vector<float> want_gelu = plain;
      for (int64_t m = 0; m < c.M; ++m) ops::bias_gelu(want_gelu.data() + m * ldy, bias.data(), 1, c.N);
      for (int64_t m = 0; m < c.M; ++m)
        for (int64_t n = 0; n < ldy; ++n) {
          const size_t i = static_cast<size_t>(m * ldy + n);
          const float want_bias = n < c.N ? plain[i] + bias[static_cast<size_t>(n)] : c0[i];
          ASSERT_EQ(with_bias[i], want_bias) << "bias: m " << m << " n " << n << " beta " << beta;
          ASSERT_EQ(with_gelu[i], n < c.N ? want_gelu[i] : c0[i])
              << "gelu: m " << m << " n " << n << " beta " << beta;
        }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, PackedWeight,
                         ::testing::Combine(::testing::ValuesIn(cases()),
                                            ::testing::ValuesIn(testing::available_isas())),
                         testing::isa_case_name<Case>);

TEST(PackedWeightArgs, WrongTensorsAndStridesAreErrors) {
  const Tensor wt = testing::random_uniform({4, 40}, 1).to(DType::f32);  // [K 4, N 40]
  const Tensor packed = ops::pack_weight_t(wt);
  EXPECT_EQ(packed.numel(), 2 * 4 * 32);
  std::vector<float> x(64, 1.f), y(256, 0.f);
  EXPECT_ERROR_CONTAINS(ops::linear_packed(x.data(), 4, packed, nullptr, y.data(), 40, 2, 40, 5),
                        {"packed form of a [5, 40] weight"});
  EXPECT_ERROR_CONTAINS(ops::gemm_packed(x.data(), 4, wt, 0.f, y.data(), 40, 2, 40, 4),
                        {"packed form of a [4, 40] weight", "256 floats"});
  EXPECT_ERROR_CONTAINS(ops::linear_packed(x.data(), 3, packed, nullptr, y.data(), 40, 2, 40, 4),
                        {"ldx >= K = 4"});
  EXPECT_ERROR_CONTAINS(ops::gemm_packed(x.data(), 4, packed, 0.f, y.data(), 39, 2, 40, 4),
                        {"ldc >= N = 40"});
  EXPECT_ERROR_CONTAINS(ops::pack_weight_t(Tensor::empty({3})), {"expected an f32 [K, N] weight"});
  EXPECT_ERROR_CONTAINS(
      ops::gemm_packed(x.data(), 4, packed, 0.f, y.data(), 40, 2, 40, 4, ops::GemmEpilogue::bias, nullptr),
      {"need a bias [N] = [40]"});
}

}  // namespace
}  // namespace attn
