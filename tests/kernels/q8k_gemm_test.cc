// The 8-bit-activation GEMM (kernels/cpu/q8k_gemm.h) against the scalar oracle ref::q8k_dot_rows on
// the stored blocks, on every ISA this CPU has: every format, token counts that fill no tile and
// several (1, 5, 13, 29), row counts with a partial last panel, a panel range that starts inside the
// matrix, accumulation; bit for bit with power-of-two scales (then only the integer sums remain), within
// f32 rounding for random scales.
#include "kernels/cpu/q8k_gemm.h"

#include <attn/core/f16.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "kernels/isa_test_util.h"
#include "kernels/q8k_test_util.h"
#include "testing/testing.h"

namespace attn {
namespace {

using kernels::KFormat;
using kernels::Q8Kind;

struct GCase {
  std::string name;
  KFormat format;
  int64_t M, N, K;
  bool accumulate = false;
  int64_t p0 = 0;  // first panel multiplied (the rows before it keep their value)
};

std::vector<GCase> cases() {
  std::vector<GCase> v;
  const std::pair<KFormat, const char*> fs[] = {
      {KFormat::q4_0, "q4_0"}, {KFormat::q4_1, "q4_1"}, {KFormat::q5_0, "q5_0"}, {KFormat::q8_0, "q8_0"},
      {KFormat::q4_k, "q4_k"}, {KFormat::q5_k, "q5_k"}, {KFormat::q6_k, "q6_k"}};
  for (const auto& [f, n] : fs) {
    const std::string p = std::string(n) + "_";
    const int64_t be = kernels::kformat_block_elems(f);
    v.push_back({p + "one_token_1x16", f, 1, 16, be});
    v.push_back({p + "odd_5x37", f, 5, 37, 2 * be});
    v.push_back({p + "tiles_13x20_accumulate", f, 13, 20, be, true});
    v.push_back({p + "tiles_29x33_from_panel_1", f, 29, 33, 3 * be, false, 1});
    v.push_back({p + "gemma_26x48", f, 26, 48, be == 256 ? 768 : 640});
  }
  return v;
}

// y (init everywhere) with the GEMM over panels [c.p0, all) and, in ref, the oracle over the same rows.
void run_both(const GCase& c, const std::vector<std::byte>& w, const kernels::Q8KRows& x, float init,
              std::vector<float>* y, std::vector<float>* ref) {
  const int64_t np = (c.N + 15) / 16, pb = kernels::q8k_gemm_panel_bytes(c.format, c.K);
  std::vector<std::byte> panels((np - c.p0) * pb);
  kernels::cpu::q8k_gemm_pack(c.format, w.data(), c.N, c.K, c.p0, np, panels.data());
  kernels::cpu::Q8GemmTerms terms;
  kernels::cpu::q8k_gemm_terms(c.format, x, &terms);
  y->assign(c.M * c.N, init);
  ref->assign(c.M * c.N, init);
  kernels::cpu::q8k_gemm_panels(c.format, panels.data(), w.data(), c.N, c.K, c.p0, np, x, terms, y->data(),
                                c.N, c.accumulate);
  kernels::ref::q8k_dot_rows(c.format, w.data(), c.p0 * 16, c.N, c.K, x, ref->data(), c.N, c.accumulate);
}

using Q8Gemm = testing::IsaCaseTest<GCase>;

TEST_P(Q8Gemm, MatchesTheOracleWithinF32Rounding) {
  const auto& [c, isa] = GetParam();
  kernels::cpu::force_isa(isa);
  const std::vector<std::byte> w = testing::random_kblocks(c.format, c.N, c.K, 7);
  std::vector<float> x(c.M * c.K);
  std::mt19937 rng(11);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (float& v : x) v = nd(rng);
  x[5] = -30.0f;  // an outlier: a coarse scale for its block
  const testing::Q8Activations xq = testing::q8_quantize(kernels::q8k_kind_for(c.format), x, c.M, c.K);
  std::vector<float> y, ref;
  const float init = c.accumulate ? 0.25f : 999.0f;
  run_both(c, w, xq.rows, init, &y, &ref);
  // the size of the terms summed: Σ |w|·|x| over the row, from the dequantized weights
  std::vector<float> wd(c.N * c.K);
  io::dequantize(kernels::kformat_ggml_type(c.format), w.data(), c.N * c.K, wd.data());
  for (int64_t m = 0; m < c.M; ++m)
    for (int64_t n = 0; n < c.N; ++n) {
      double mag = 0;
      for (int64_t k = 0; k < c.K; ++k) mag += std::fabs(wd[n * c.K + k] * x[m * c.K + k]);
      const float got = y[m * c.N + n], want = ref[m * c.N + n];
      if (n < c.p0 * 16)
        ASSERT_EQ(got, init) << "row " << n << " before the first panel was written";
      else
        ASSERT_NEAR(got, want, 4e-6 * mag + 1e-30) << "row " << n << " token " << m;
    }
}

INSTANTIATE_TEST_SUITE_P(Table, Q8Gemm,
                         ::testing::Combine(::testing::ValuesIn(cases()),
                                            ::testing::ValuesIn(testing::available_isas())),
                         testing::isa_case_name<GCase>);

// Power-of-two scales (weights 2^-6, activations 2^-3) and random quants: every f32 operation is exact
// (the integer sums stay below 2^24), so the GEMM must equal the oracle exactly; any slip in the
// packing, the offsets or the tile edges shows.
using Q8GemmExact = testing::IsaCaseTest<GCase>;
TEST_P(Q8GemmExact, EqualsTheOracleWithPowerOfTwoScales) {
  const auto& [c, isa] = GetParam();
  kernels::cpu::force_isa(isa);
  const testing::ExactQ8Inputs in = testing::exact_q8_inputs(c.format, c.M, c.N, c.K);
  const std::vector<std::byte>& w = in.w;
  const testing::Q8Activations& xq = in.x;
  std::vector<float> y, ref;
  run_both(c, w, xq.rows, 0.5f, &y, &ref);
  for (int64_t i = 0; i < c.M * c.N; ++i)
    ASSERT_EQ(y[i], ref[i]) << "token " << i / c.N << " row " << i % c.N;
}

std::vector<GCase> exact_cases() {
  std::vector<GCase> v;
  for (const GCase& c : cases())
    if (c.K <= 512) v.push_back(c);
  return v;
}
INSTANTIATE_TEST_SUITE_P(Table, Q8GemmExact,
                         ::testing::Combine(::testing::ValuesIn(exact_cases()),
                                            ::testing::ValuesIn(testing::available_isas())),
                         testing::isa_case_name<GCase>);

// A token's row is the same bits whatever tile holds it: 29 tokens (tiles of 12 on AVX-512), the first
// 16 of them (a batched step's tiles of 8) and token 7 alone, in every format and on every ISA. The
// runtime's greedy tokens equal one-at-a-time decoding only because of this.
TEST(Q8GemmTiles, EachTokenIsTheSameBitsInAnyTile) {
  struct Restore {
    ~Restore() { kernels::cpu::force_isa(std::nullopt); }
  } restore;
  for (const auto& isa : testing::available_isas()) {
    kernels::cpu::force_isa(isa);
    for (const GCase& c : cases()) {
      if (c.M != 29) continue;
      const std::vector<std::byte> w = testing::random_kblocks(c.format, c.N, c.K, 5);
      std::vector<float> x(29 * c.K);
      std::mt19937 rng(3);
      std::normal_distribution<float> nd(0.0f, 1.0f);
      for (float& v : x) v = nd(rng);
      auto rows_of = [&](int64_t t0, int64_t M) {
        GCase d = c;
        d.M = M;
        const testing::Q8Activations xq = testing::q8_quantize(
            kernels::q8k_kind_for(c.format),
            std::vector<float>(x.begin() + t0 * c.K, x.begin() + (t0 + M) * c.K), M, c.K);
        std::vector<float> y, ref;
        run_both(d, w, xq.rows, 0.0f, &y, &ref);
        return y;
      };
      const std::vector<float> all = rows_of(0, 29), first16 = rows_of(0, 16), alone = rows_of(7, 1);
      for (int64_t n = c.p0 * 16; n < c.N; ++n) {
        for (int64_t m = 0; m < 16; ++m)
          ASSERT_EQ(first16[m * c.N + n], all[m * c.N + n]) << c.name << " token " << m << " row " << n;
        ASSERT_EQ(alone[n], all[7 * c.N + n]) << c.name << " token 7 row " << n;
      }
    }
  }
}

// q8k_quantize takes an AVX-512 loop when that ISA is active: the same bytes, scales and sums as the
// portable loop on every ISA, ties (x / d exactly k + 1/2) included, and the same error for a value
// that is not finite.
TEST(Q8GemmQuantize, EveryIsaGivesThePortableValues) {
  const int64_t M = 3, K = 512;
  std::vector<float> x(M * K);
  std::mt19937 rng(21);
  std::normal_distribution<float> nd(0.0f, 2.0f);
  for (float& v : x) v = nd(rng);
  for (int64_t i = 0; i < 64; ++i)
    x[K + i] = static_cast<float>(i % 9) * 0.5f - 2.0f;  // ties: max 2 -> steps of 2/127
  for (int64_t i = 0; i < 32; ++i)
    x[K + 64 + i] = (static_cast<float>(i) - 15.5f) * 127.0f / 16.0f;  // exact halves
  for (int64_t i = 0; i < 32; ++i) x[2 * K + i] = 0.0f;                // an all-zero block
  for (Q8Kind kind : {Q8Kind::q8_0, Q8Kind::q8_k}) {
    kernels::cpu::force_isa(kernels::cpu::Isa::scalar);
    const testing::Q8Activations want = testing::q8_quantize(kind, x, M, K);
    for (kernels::cpu::Isa isa : testing::available_isas()) {
      kernels::cpu::force_isa(isa);
      const testing::Q8Activations got = testing::q8_quantize(kind, x, M, K);
      EXPECT_EQ(got.q, want.q) << kernels::cpu::isa_str(isa);
      EXPECT_EQ(got.d, want.d) << kernels::cpu::isa_str(isa);
      EXPECT_EQ(got.bsum, want.bsum) << kernels::cpu::isa_str(isa);
      std::vector<float> bad = x;
      bad[K + 300] = std::numeric_limits<float>::quiet_NaN();
      EXPECT_ERROR_CONTAINS(testing::q8_quantize(kind, bad, M, K), {"activation row 1", "not finite"});
      bad[K + 300] = std::numeric_limits<float>::infinity();
      EXPECT_ERROR_CONTAINS(testing::q8_quantize(kind, bad, M, K), {"activation row 1", "not finite"});
    }
  }
  kernels::cpu::force_isa(std::nullopt);
}

TEST(Q8GemmArgs, UnsupportedFormatsShapesAndStaleTermsAreErrors) {
  const std::vector<std::byte> w = testing::random_kblocks(KFormat::q5_1, 2, 64, 1);
  std::vector<std::byte> out(4096);
  EXPECT_ERROR_CONTAINS(kernels::cpu::q8k_gemm_pack(KFormat::q5_1, w.data(), 2, 64, 0, 1, out.data()),
                        {"Q5_1", "no 8-bit activation product"});
  EXPECT_ERROR_CONTAINS(kernels::cpu::q8k_gemm_pack(KFormat::q8_0, w.data(), 2, 64, 0, 2, out.data()),
                        {"panels [p0, p1)", "[0, 1]"});
  std::vector<float> x(256, 1.0f);
  const testing::Q8Activations x0 = testing::q8_quantize(Q8Kind::q8_0, x, 1, 256);
  kernels::cpu::Q8GemmTerms t;
  EXPECT_ERROR_CONTAINS(kernels::cpu::q8k_gemm_terms(KFormat::q4_k, x0.rows, &t), {"Q8_0", "Q4_K"});
}

}  // namespace
}  // namespace attn
