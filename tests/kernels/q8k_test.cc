// The 8-bit-activation integer products (kernels/cpu/q8k.h) on every ISA this CPU has: equal to the
// oracle bit for bit when every scale is a power of two (then the f32 scaling is exact too and only
// the integer sums remain), within f32 rounding of it for arbitrary scales, and within the bound the
// activation rounding gives (half a quantization step per value) of the f32 product with the
// dequantized weights.
#include "kernels/cpu/q8k.h"

#include <attn/core/f16.h>
#include <attn/io/gguf.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "kernels/isa_test_util.h"
#include "kernels/q8k_test_util.h"
#include "testing/testing.h"

namespace attn {
namespace {

using kernels::KFormat;
using kernels::Q8Kind;

struct QCase {
  std::string name;
  KFormat format;
  int64_t M, N, K;
  bool accumulate = false;
};

std::vector<QCase> cases() {
  std::vector<QCase> v;
  const std::pair<KFormat, const char*> fs[] = {
      {KFormat::q4_0, "q4_0"}, {KFormat::q4_1, "q4_1"}, {KFormat::q5_0, "q5_0"}, {KFormat::q8_0, "q8_0"},
      {KFormat::q4_k, "q4_k"}, {KFormat::q5_k, "q5_k"}, {KFormat::q6_k, "q6_k"}};
  for (const auto& [f, n] : fs) {
    const std::string p = std::string(n) + "_";
    const int64_t be = kernels::kformat_block_elems(f);
    v.push_back({p + "decode_1x13", f, 1, 13, 3 * be});
    v.push_back({p + "tile_4x7", f, 4, 7, 2 * be});
    v.push_back({p + "odd_5x9_accumulate", f, 5, 9, be, true});
    v.push_back({p + "gemma_3x5x640", f, 3, 5, be == 256 ? 768 : 640});
  }
  return v;
}

using Q8K = testing::IsaCaseTest<QCase>;

TEST_P(Q8K, MatchesTheIntegerOracleAndTheF32ProductWithinTheRoundingBound) {
  const auto& [c, isa] = GetParam();
  kernels::cpu::force_isa(isa);
  const std::vector<std::byte> w = testing::random_kblocks(c.format, c.N, c.K, 7);
  std::vector<float> x(c.M * c.K);
  std::mt19937 rng(11);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (float& v : x) v = nd(rng);
  x[3] = 40.0f;  // one outlier: a coarse scale for its block
  const Q8Kind kind = kernels::q8k_kind_for(c.format);
  const testing::Q8Activations xq = testing::q8_quantize(kind, x, c.M, c.K);

  const float init = c.accumulate ? 0.25f : 999.0f;
  std::vector<float> y(c.M * c.N, init), ref(c.M * c.N, init);
  kernels::cpu::q8k_dot_rows(c.format, w.data(), 0, c.N, c.K, xq.rows, y.data(), c.N, c.accumulate);
  kernels::ref::q8k_dot_rows(c.format, w.data(), 0, c.N, c.K, xq.rows, ref.data(), c.N, c.accumulate);

  std::vector<float> wd(c.N * c.K);
  io::dequantize(kernels::kformat_ggml_type(c.format), w.data(), c.N * c.K, wd.data());
  const int64_t B = kernels::q8k_block(kind);
  for (int64_t m = 0; m < c.M; ++m)
    for (int64_t n = 0; n < c.N; ++n) {
      double exact = 0, mag = 0, bound = 0;
      for (int64_t k = 0; k < c.K; ++k) {
        const double wk = wd[n * c.K + k], xk = x[m * c.K + k];
        exact += wk * xk;
        mag += std::fabs(wk * xk);
        // |x - d·q| <= d/2, plus (Q8_0) the f16 rounding of d: <= 2^-11 · d · 127
        const double dq = xq.d[m * (c.K / B) + k / B];
        bound += std::fabs(wk) * dq * (kind == Q8Kind::q8_0 ? 0.5 + 127.0 / 2048 : 0.5);
      }
      const double base = c.accumulate ? 0.25 : 0.0;
      const float got = y[m * c.N + n], want = ref[m * c.N + n];
      EXPECT_NEAR(got, want, 4e-6 * mag + 1e-30) << "row " << n << " activation " << m;
      EXPECT_NEAR(want - base, exact, bound * 1.0001 + 1e-6 * mag) << "row " << n << " activation " << m;
    }
}

INSTANTIATE_TEST_SUITE_P(Table, Q8K,
                         ::testing::Combine(::testing::ValuesIn(cases()),
                                            ::testing::ValuesIn(testing::available_isas())),
                         testing::isa_case_name<QCase>);

// Power-of-two block scales (weights 2^-6, activations 2^-3) and random quants: every f32 operation of
// the kernels is exact, so they must equal the oracle exactly; any integer slip shows.
using Q8KExact = testing::IsaCaseTest<QCase>;
TEST_P(Q8KExact, EqualsTheOracleWithPowerOfTwoScales) {
  const auto& [c, isa] = GetParam();
  kernels::cpu::force_isa(isa);
  const testing::ExactQ8Inputs in = testing::exact_q8_inputs(c.format, c.M, c.N, c.K);
  const std::vector<std::byte>& w = in.w;
  const testing::Q8Activations& xq = in.x;
  std::vector<float> y(c.M * c.N, 0.5f), ref(c.M * c.N, 0.5f);
  kernels::cpu::q8k_dot_rows(c.format, w.data(), 0, c.N, c.K, xq.rows, y.data(), c.N, c.accumulate);
  kernels::ref::q8k_dot_rows(c.format, w.data(), 0, c.N, c.K, xq.rows, ref.data(), c.N, c.accumulate);
  for (int64_t i = 0; i < c.M * c.N; ++i)
    ASSERT_EQ(y[i], ref[i]) << "activation " << i / c.N << " row " << i % c.N;
}

std::vector<QCase> exact_cases() {
  std::vector<QCase> v;
  for (const QCase& c : cases())
    if (c.K <= 512) v.push_back(c);
  return v;
}
INSTANTIATE_TEST_SUITE_P(Table, Q8KExact,
                         ::testing::Combine(::testing::ValuesIn(exact_cases()),
                                            ::testing::ValuesIn(testing::available_isas())),
                         testing::isa_case_name<QCase>);

TEST(Q8KQuantize, ScalesRoundsAndSumsEveryGroupOf16) {
  std::vector<float> x(256);
  for (int i = 0; i < 256; ++i) x[i] = static_cast<float>(i % 7) - 3.0f + 0.1f * static_cast<float>(i % 3);
  x[5] = -6.35f;  // the largest magnitude
  for (Q8Kind kind : {Q8Kind::q8_0, Q8Kind::q8_k}) {
    const testing::Q8Activations r = testing::q8_quantize(kind, x, 1, 256);
    const int64_t B = kernels::q8k_block(kind);
    for (int64_t g = 0; g < 16; ++g) {
      int32_t s = 0;
      for (int i = 0; i < 16; ++i) s += r.q[16 * g + i];
      EXPECT_EQ(r.bsum[g], s);
    }
    for (int i = 0; i < 256; ++i) {
      ASSERT_LE(std::abs(r.q[i]), 127);
      EXPECT_NEAR(r.d[i / B] * r.q[i], x[i], r.d[i / B] * 0.5 + std::fabs(x[i]) * 1.0 / 1024) << i;
    }
    EXPECT_EQ(r.q[5], -127);
  }
}

TEST(Q8KArgs, UnsupportedFormatsAndMismatchedKindsAreErrors) {
  std::vector<float> x(256, 1.0f), y(1);
  const testing::Q8Activations x0 = testing::q8_quantize(Q8Kind::q8_0, x, 1, 256);
  const std::vector<std::byte> wk = testing::random_kblocks(KFormat::q4_k, 1, 256, 1);
  EXPECT_ERROR_CONTAINS(
      kernels::cpu::q8k_dot_rows(KFormat::q4_k, wk.data(), 0, 1, 256, x0.rows, y.data(), 1, false),
      {"Q4_K", "Q8_K"});
  EXPECT_ERROR_CONTAINS(
      kernels::cpu::q8k_dot_rows(KFormat::q5_1, wk.data(), 0, 1, 256, x0.rows, y.data(), 1, false),
      {"Q5_1", "no 8-bit activation product"});
  std::vector<float> bad(100, 1.0f);
  std::vector<int8_t> q(100);
  std::vector<float> d(4);
  std::vector<int32_t> s(7);
  EXPECT_ERROR_CONTAINS(
      kernels::cpu::q8k_quantize(Q8Kind::q8_0, bad.data(), 1, 100, 100, q.data(), d.data(), s.data()),
      {"multiple of 32", "100"});
}

}  // namespace
}  // namespace attn
