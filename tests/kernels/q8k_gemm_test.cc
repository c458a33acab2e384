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
#include "kernels/kquant_test_util.h"
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
  const std::pair<KFormat, const char*> fs[] = {{KFormat::q5_0, "q5_0"},
                                                {KFormat::q8_0, "q8_0"},
                                                {KFormat::q4_k, "q4_k"},
                                                {KFormat::q5_k, "q5_k"},
                                                {KFormat::q6_k, "q6_k"}};
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

struct Quantized {
  std::vector<int8_t> q;
  std::vector<float> d;
  std::vector<int32_t> bsum;
  kernels::Q8KRows rows;
};

Quantized quantize(Q8Kind kind, const std::vector<float>& x, int64_t M, int64_t K) {
  Quantized r;
  const int64_t B = kernels::q8k_block(kind);
  r.q.resize(M * K), r.d.resize(M * K / B), r.bsum.resize(M * K / 16);
  kernels::cpu::q8k_quantize(kind, x.data(), M, K, K, r.q.data(), r.d.data(), r.bsum.data());
  r.rows = {kind, M, K, r.q.data(), r.d.data(), r.bsum.data(), K, K / B, K / 16};
  return r;
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
  const Quantized xq = quantize(kernels::q8k_kind_for(c.format), x, c.M, c.K);
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
  std::vector<std::byte> w = testing::random_kblocks(c.format, c.N, c.K, 5);
  const int64_t be = kernels::kformat_block_elems(c.format), bb = kernels::kformat_block_bytes(c.format);
  std::vector<int> halves = {0};
  if (c.format == KFormat::q4_k || c.format == KFormat::q5_k) halves = {0, 2};
  if (c.format == KFormat::q6_k) halves = {208};
  const uint16_t h = f32_to_f16(1.0f / 64);
  for (int64_t b = 0; b < c.N * c.K / be; ++b)
    for (int off : halves) std::memcpy(w.data() + b * bb + off, &h, 2);
  const Q8Kind kind = kernels::q8k_kind_for(c.format);
  const int64_t B = kernels::q8k_block(kind);
  Quantized xq;
  xq.q.resize(c.M * c.K), xq.d.assign(c.M * c.K / B, 0.125f), xq.bsum.assign(c.M * c.K / 16, 0);
  std::mt19937 rng(3);
  for (int64_t i = 0; i < c.M * c.K; ++i) {
    xq.q[i] = static_cast<int8_t>(static_cast<int>(rng() % 255) - 127);
    xq.bsum[i / 16] += xq.q[i];
  }
  xq.rows = {kind, c.M, c.K, xq.q.data(), xq.d.data(), xq.bsum.data(), c.K, c.K / B, c.K / 16};
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
    const Quantized want = quantize(kind, x, M, K);
    for (kernels::cpu::Isa isa : testing::available_isas()) {
      kernels::cpu::force_isa(isa);
      const Quantized got = quantize(kind, x, M, K);
      EXPECT_EQ(got.q, want.q) << kernels::cpu::isa_str(isa);
      EXPECT_EQ(got.d, want.d) << kernels::cpu::isa_str(isa);
      EXPECT_EQ(got.bsum, want.bsum) << kernels::cpu::isa_str(isa);
      std::vector<float> bad = x;
      bad[K + 300] = std::numeric_limits<float>::quiet_NaN();
      EXPECT_ERROR_CONTAINS(quantize(kind, bad, M, K), {"activation row 1", "not finite"});
      bad[K + 300] = std::numeric_limits<float>::infinity();
      EXPECT_ERROR_CONTAINS(quantize(kind, bad, M, K), {"activation row 1", "not finite"});
    }
  }
  kernels::cpu::force_isa(std::nullopt);
}

TEST(Q8GemmArgs, UnsupportedFormatsShapesAndStaleTermsAreErrors) {
  const std::vector<std::byte> w = testing::random_kblocks(KFormat::q4_1, 2, 64, 1);
  std::vector<std::byte> out(4096);
  EXPECT_ERROR_CONTAINS(kernels::cpu::q8k_gemm_pack(KFormat::q4_1, w.data(), 2, 64, 0, 1, out.data()),
                        {"Q4_1", "no 8-bit activation product"});
  EXPECT_ERROR_CONTAINS(kernels::cpu::q8k_gemm_pack(KFormat::q8_0, w.data(), 2, 64, 0, 2, out.data()),
                        {"panels [p0, p1)", "[0, 1]"});
  std::vector<float> x(256, 1.0f);
  const Quantized x0 = quantize(Q8Kind::q8_0, x, 1, 256);
  kernels::cpu::Q8GemmTerms t;
  EXPECT_ERROR_CONTAINS(kernels::cpu::q8k_gemm_terms(KFormat::q4_k, x0.rows, &t), {"Q8_0", "Q4_K"});
}

}  // namespace
}  // namespace attn
