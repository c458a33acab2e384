// ops::GreedyScreen (include/attn/ops/quantized.h, issue 19 g19b): exact greedy argmax over a 5-bit
// screen of a Q8_0 matrix. On every instruction set this CPU has: the bound holds on every row (a
// property test over random matrices and activation rows with a few huge coordinates, like Gemma 3's
// hidden vector), the pick equals std::max_element over the full product (quant_dot_rows) on random and
// adversarial near-tie / exact-tie inputs, the candidate count is reported; and the errors.
#include <attn/core/f16.h>
#include <attn/core/parallel.h>
#include <attn/ops/quantized.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

#include "kernels/cpu/isa.h"
#include "kernels/cpu/qscreen.h"
#include "kernels/isa_test_util.h"
#include "ops/quant_blocks_util.h"

namespace attn::ops {
namespace {

using kernels::cpu::Isa;

// Q8_0 blocks with realistic scales (normal, sd 0.02) and random quants (quant_blocks).
std::vector<std::byte> q8_rows(int64_t N, int64_t K, uint32_t seed) {
  return testing::quant_blocks(QuantFormat::q8_0, N, K, seed);
}

// An activation row: normal values with `spikes` coordinates 50-100x larger (Gemma 3's massive channels).
std::vector<float> hidden(int64_t K, uint32_t seed, int spikes) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(K);
  for (float& v : x) v = nd(rng);
  for (int i = 0; i < spikes; ++i)
    x[(rng() % K)] = (rng() & 1 ? 1.0f : -1.0f) * (50.0f + 50.0f * (rng() % 100) / 100.0f);
  return x;
}

std::vector<float> full_product(const QuantMatrix& w, const QuantActivations& x) {
  std::vector<float> y(w.rows());
  quant_dot_rows(w, 0, w.rows(), x, y.data(), w.rows(), false);
  return y;
}

int64_t first_max(const std::vector<float>& y) { return std::max_element(y.begin(), y.end()) - y.begin(); }

class GreedyScreenIsa : public ::testing::TestWithParam<Isa> {
 protected:
  void SetUp() override {
    threads_ = num_threads();
    kernels::cpu::force_isa(GetParam());
  }
  void TearDown() override {
    kernels::cpu::force_isa(std::nullopt);
    set_num_threads(threads_);
  }
  int threads_ = 1;
};

// The candidate selection and the best lower end: each ISA's the same as the portable loops (the
// same rows; the same maximum), NaN values kept as candidates and skipped by the lower end, on lengths
// off the vector width.
TEST_P(GreedyScreenIsa, SelectAndLowerEndEqualThePortableLoops) {
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0.0f, 3.0f);
  for (int64_t N : {1, 7, 16, 17, 40, 8195}) {
    std::vector<float> v(static_cast<std::size_t>(N)), b(v.size());
    for (int64_t n = 0; n < N; ++n) {
      v[static_cast<std::size_t>(n)] = nd(rng);
      b[static_cast<std::size_t>(n)] = std::fabs(nd(rng)) * 0.3f;
    }
    if (N > 5) v[3] = NAN, b[5] = NAN;
    for (float lower : {-INFINITY, 0.0f, 4.0f, 1e9f}) {
      std::vector<int64_t> want(static_cast<std::size_t>(N + 1)), got(want.size());
      const int64_t nw =
          kernels::cpu::detail::qscreen_select_scalar(v.data(), b.data(), N, lower, want.data());
      const int64_t ng = kernels::cpu::qscreen_select(v.data(), b.data(), N, lower, got.data());
      ASSERT_EQ(ng, nw) << "N " << N << ", lower " << lower;
      for (int64_t i = 0; i < nw; ++i) ASSERT_EQ(got[i], want[i]) << "N " << N << ", pick " << i;
      const float lw = kernels::cpu::detail::qscreen_lower_scalar(v.data(), b.data(), N, lower);
      const float lg = kernels::cpu::qscreen_lower(v.data(), b.data(), N, lower);
      ASSERT_EQ(lg, lw) << "N " << N << ", lower " << lower;
      ASSERT_FALSE(std::isnan(lg));
    }
  }
}

TEST_P(GreedyScreenIsa, BoundHoldsOnEveryRow) {
  for (const auto& [N, K, spikes, seed] : std::vector<std::tuple<int64_t, int64_t, int, uint32_t>>{
           {2000, 640, 4, 1}, {1500, 128, 0, 2}, {1000, 256, 8, 3}, {777, 64, 1, 4}}) {
    const std::vector<std::byte> wb = q8_rows(N, K, seed);
    const QuantMatrix w(QuantFormat::q8_0, wb.data(), N, K);
    for (int trial = 0; trial < 3; ++trial) {
      const std::vector<float> h = hidden(K, seed * 10 + trial, spikes);
      // outlier columns from this row (trial 0), another row (1) or the weights (2): only speed differs
      const std::vector<float> other = hidden(K, seed * 100 + trial, spikes);
      GreedyScreen screen(w, trial == 0   ? std::span<const float>(h)
                             : trial == 1 ? std::span<const float>(other)
                                          : std::span<const float>());
      ASSERT_EQ(screen.outlier_columns().size(), 16u);
      QuantActivations x;
      x.quantize(QuantFormat::q8_0, h.data(), 1, K, K);
      const std::vector<float> y = full_product(w, x);
      std::vector<float> value(N), bound(N);
      screen.screen(x, value.data(), bound.data());
      int64_t worst = 0;
      double worst_ratio = 0;
      for (int64_t n = 0; n < N; ++n) {
        ASSERT_TRUE(std::isfinite(value[n]) && std::isfinite(bound[n]) && bound[n] >= 0) << n;
        const double err = std::fabs(static_cast<double>(y[n]) - value[n]);
        ASSERT_LE(err, bound[n]) << "row " << n << " N " << N << " K " << K << " trial " << trial;
        if (bound[n] > 0 && err / bound[n] > worst_ratio) worst_ratio = err / bound[n], worst = n;
      }
      EXPECT_GT(worst_ratio, 0.0) << "the bound is never approached: the test could not fail (row " << worst
                                  << ")";
    }
  }
}

TEST_P(GreedyScreenIsa, PickEqualsTheFullProductsArgmax) {
  const int64_t N = 3000, K = 640;
  const std::vector<std::byte> wb = q8_rows(N, K, 7);
  const QuantMatrix w(QuantFormat::q8_0, wb.data(), N, K);
  GreedyScreen screen(w);
  int64_t pruned = 0;
  for (uint32_t s = 0; s < 20; ++s) {
    const std::vector<float> h = hidden(K, 100 + s, static_cast<int>(s % 5));
    QuantActivations x;
    x.quantize(QuantFormat::q8_0, h.data(), 1, K, K);
    const std::vector<float> y = full_product(w, x);
    const GreedyScreen::Pick p = screen.argmax(w, x);
    EXPECT_EQ(p.index, first_max(y)) << s;
    EXPECT_EQ(p.logit, y[first_max(y)]) << s;
    EXPECT_GE(p.candidates, 1);
    EXPECT_LE(p.candidates, N);
    pruned += N - p.candidates;
  }
  EXPECT_GT(pruned, 0) << "the screen never pruned a row";
}

// Near ties: the row of the maximum copied with one quant changed by ±1 (logits a few 1e-4 apart, far
// inside the bound), and exact ties (copies before and after it): the first of equal maxima is picked.
TEST_P(GreedyScreenIsa, NearAndExactTies) {
  const int64_t N = 1200, K = 640;
  std::vector<std::byte> wb = q8_rows(N, K, 11);
  const std::vector<float> h = hidden(K, 12, 3);
  QuantActivations x;
  x.quantize(QuantFormat::q8_0, h.data(), 1, K, K);
  const int64_t rb = K / 32 * 34;
  int64_t top;
  {
    const QuantMatrix w0(QuantFormat::q8_0, wb.data(), N, K);
    top = first_max(full_product(w0, x));
  }
  std::mt19937 rng(5);
  for (int64_t r : {int64_t{3}, int64_t{N - 2}, int64_t{600}}) {  // exact copies, one before the maximum
    if (r == top) continue;
    std::memcpy(wb.data() + r * rb, wb.data() + top * rb, rb);
  }
  for (int64_t r = 900; r < 1000; ++r) {  // near copies: one quant moved by 1, lowering the logit
    if (r == top) continue;
    std::memcpy(wb.data() + r * rb, wb.data() + top * rb, rb);
    const int64_t b = rng() % (K / 32), i = rng() % 32;
    uint16_t dh;
    std::memcpy(&dh, wb.data() + r * rb + b * 34, 2);
    const float dir = f16_to_f32(dh) * static_cast<float>(x.q()[32 * b + i]);  // logit change per +1
    auto& q = reinterpret_cast<int8_t&>(wb[r * rb + b * 34 + 2 + i]);
    if (dir > 0 && q > -128) q = static_cast<int8_t>(q - 1);
    if (dir < 0 && q < 127) q = static_cast<int8_t>(q + 1);
  }
  const QuantMatrix w(QuantFormat::q8_0, wb.data(), N, K);
  GreedyScreen screen(w, h);
  const std::vector<float> y = full_product(w, x);
  const GreedyScreen::Pick p = screen.argmax(w, x);
  EXPECT_EQ(p.index, first_max(y));
  EXPECT_EQ(p.index, std::min<int64_t>(3, top)) << "an exact copy at row 3 ties with the maximum";
  EXPECT_GE(p.candidates, 100);  // every near copy stays in
  // x = 0: every logit is 0, every row a candidate, row 0 the pick
  std::vector<float> zero(K, 0.0f);
  x.quantize(QuantFormat::q8_0, zero.data(), 1, K, K);
  const GreedyScreen::Pick z = screen.argmax(w, x);
  EXPECT_EQ(z.index, 0);
  EXPECT_EQ(z.candidates, N);
}

// g19c: the panel kernels (16 rows a panel, one lane per row) against the oracle over row ranges that
// start and end inside panels and a row count with a partial last panel; rows outside the range are left
// alone. Then the pick on 1 and 2 threads (the fused select / exact pass splits the rows in chunks).
TEST_P(GreedyScreenIsa, KernelMatchesTheOracleOnPanelsAndTails) {
  for (const auto& [N, K] : std::vector<std::pair<int64_t, int64_t>>{{37, 640}, {50, 64}, {16, 1024}}) {
    const std::vector<std::byte> wb = q8_rows(N, K, 31);
    std::vector<int32_t> cols;
    for (int j = 0; j < 16; ++j) cols.push_back(static_cast<int32_t>(j * (K / 16) + j % 5));
    std::vector<std::byte> scr(kernels::qscreen_bytes(N, K), std::byte{0});
    ASSERT_TRUE(kernels::cpu::detail::qscreen_build_scalar(wb.data(), 0, N, K, cols.data(), scr.data()));
    const std::vector<float> h = hidden(K, 32, 3);
    QuantActivations x;
    x.quantize(QuantFormat::q8_0, h.data(), 1, K, K);
    std::vector<int8_t> xq(K);
    std::vector<float> g(K / 32), hb(K / 32), xo(16);
    kernels::ScreenX sx;
    ASSERT_TRUE(kernels::qscreen_prepare(x.q(), x.d(), K, cols.data(), xq.data(), g.data(), hb.data(),
                                         xo.data(), &sx.ho));
    sx.xq = xq.data(), sx.d = x.d(), sx.g = g.data(), sx.hb = hb.data(), sx.xo = xo.data(), sx.K = K;
    std::vector<float> rv(N), rb(N);
    kernels::ref::qscreen_rows(scr.data(), 0, N, sx, rv.data(), rb.data());
    for (const auto& [n0, n1] :
         std::vector<std::pair<int64_t, int64_t>>{{0, N}, {5, 29}, {17, 18}, {N - 1, N}}) {
      if (n1 > N || n0 >= n1) continue;
      std::vector<float> v(N, 12345.0f), b(N, 12345.0f);
      kernels::cpu::qscreen_rows(scr.data(), n0, n1, sx, v.data(), b.data());
      for (int64_t n = 0; n < N; ++n) {
        if (n < n0 || n >= n1) {
          EXPECT_EQ(v[n], 12345.0f) << "row " << n << " outside [" << n0 << ", " << n1 << ") was written";
          EXPECT_EQ(b[n], 12345.0f) << n;
          continue;
        }
        // f32 sums against the oracle's double: within a few f32 roundings of the bound's scale
        const double tol = 1e-5 * (std::fabs(static_cast<double>(rv[n])) + rb[n]) + 1e-7;
        EXPECT_NEAR(v[n], rv[n], tol) << "row " << n << " N " << N << " K " << K;
        EXPECT_NEAR(b[n], rb[n], tol) << "row " << n;
      }
    }
  }
  const int64_t N = 3001, K = 640;  // a partial last panel
  const std::vector<std::byte> wb = q8_rows(N, K, 33);
  const QuantMatrix w(QuantFormat::q8_0, wb.data(), N, K);
  GreedyScreen screen(w);
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    for (uint32_t s = 0; s < 6; ++s) {
      const std::vector<float> h = hidden(K, 300 + s, static_cast<int>(s % 4));
      QuantActivations x;
      x.quantize(QuantFormat::q8_0, h.data(), 1, K, K);
      const std::vector<float> y = full_product(w, x);
      const GreedyScreen::Pick p = screen.argmax(w, x);
      EXPECT_EQ(p.index, first_max(y)) << "threads " << threads << " seed " << s;
      EXPECT_EQ(p.logit, y[first_max(y)]);
    }
  }
}

// Many activation rows at once (a batched decode step): the kernel gives each row the bits it gives it
// alone, over ranges inside panels and group counts past 8 (8 + 1, 8 + 8 + 1); argmax_rows picks what
// argmax picks for each row alone, also where near and exact copies of a row's maximum sit in the matrix,
// on 1 and 2 threads.
TEST_P(GreedyScreenIsa, ManyRowsGetWhatEachRowGetsAlone) {
  const int64_t N = 1203, K = 640;
  std::vector<std::byte> wb = q8_rows(N, K, 41);
  const int64_t rb = K / 32 * 34;
  for (int64_t r = 900; r < 940; ++r) std::memcpy(wb.data() + r * rb, wb.data() + (r % 7) * rb, rb);
  const QuantMatrix w(QuantFormat::q8_0, wb.data(), N, K);
  std::vector<int32_t> cols;
  for (int j = 0; j < 16; ++j) cols.push_back(static_cast<int32_t>(j * (K / 16) + j % 3));
  std::vector<std::byte> scr(kernels::qscreen_bytes(N, K), std::byte{0});
  ASSERT_TRUE(kernels::cpu::detail::qscreen_build_scalar(wb.data(), 0, N, K, cols.data(), scr.data()));
  for (const int64_t P : {int64_t{2}, int64_t{5}, int64_t{9}, int64_t{17}}) {
    std::vector<float> X;
    for (int64_t r = 0; r < P; ++r) {
      const std::vector<float> h = hidden(K, 500 + static_cast<uint32_t>(r), static_cast<int>(r % 4));
      X.insert(X.end(), h.begin(), h.end());
    }
    if (P >= 5) std::fill(X.begin() + 4 * K, X.begin() + 5 * K, 0.0f);  // a zero row: every row ties
    QuantActivations xa;
    xa.quantize(QuantFormat::q8_0, X.data(), P, K, K);
    std::vector<std::vector<int8_t>> xq(P, std::vector<int8_t>(K));
    std::vector<std::vector<float>> g(P, std::vector<float>(K / 32)), hb(P, std::vector<float>(K / 32)),
        xo(P, std::vector<float>(16));
    std::vector<kernels::ScreenX> sx(P);
    for (int64_t r = 0; r < P; ++r) {
      ASSERT_TRUE(kernels::qscreen_prepare(xa.q() + r * K, xa.d() + r * (K / 32), K, cols.data(),
                                           xq[r].data(), g[r].data(), hb[r].data(), xo[r].data(), &sx[r].ho));
      sx[r].xq = xq[r].data(), sx[r].d = xa.d() + r * (K / 32), sx[r].g = g[r].data(),
      sx[r].hb = hb[r].data();
      sx[r].xo = xo[r].data(), sx[r].K = K;
    }
    for (const auto& [n0, n1] :
         std::vector<std::pair<int64_t, int64_t>>{{0, N}, {5, 29}, {17, 18}, {N - 3, N}}) {
      const int64_t ld = N + 3;
      std::vector<float> v(P * ld, 12345.0f), b(P * ld, 12345.0f);
      kernels::cpu::qscreen_rows_multi(scr.data(), n0, n1, sx.data(), P, v.data(), b.data(), ld);
      for (int64_t r = 0; r < P; ++r) {
        std::vector<float> v1(N, 12345.0f), b1(N, 12345.0f);
        kernels::cpu::qscreen_rows(scr.data(), n0, n1, sx[r], v1.data(), b1.data());
        for (int64_t n = 0; n < N; ++n) {
          ASSERT_EQ(v[r * ld + n], v1[n])
              << "P " << P << " row " << r << " n " << n << " [" << n0 << ", " << n1 << ")";
          ASSERT_EQ(b[r * ld + n], b1[n]) << "P " << P << " row " << r << " n " << n;
        }
      }
    }
    GreedyScreen screen(w, std::span<const float>(X.data(), K));
    for (int threads : {1, 2}) {
      set_num_threads(threads);
      std::vector<GreedyScreen::Pick> got(P);
      screen.argmax_rows(w, xa, got.data());
      for (int64_t r = 0; r < P; ++r) {
        QuantActivations x1;
        x1.quantize(QuantFormat::q8_0, X.data() + r * K, 1, K, K);
        const GreedyScreen::Pick want = screen.argmax(w, x1);
        const std::vector<float> y = full_product(w, x1);
        EXPECT_EQ(want.index, first_max(y)) << "P " << P << " row " << r;
        EXPECT_EQ(got[r].index, want.index) << "P " << P << " row " << r << " threads " << threads;
        EXPECT_EQ(got[r].logit, want.logit) << "P " << P << " row " << r;
        EXPECT_EQ(got[r].candidates, want.candidates) << "P " << P << " row " << r;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Isas, GreedyScreenIsa, ::testing::ValuesIn(testing::available_isas()),
                         [](const ::testing::TestParamInfo<Isa>& i) {
                           return kernels::cpu::isa_str(i.param);
                         });

// The AVX-512 build of the screen writes the bytes of the portable one (the same f32 operations).
TEST(GreedyScreen, VectorBuildEqualsThePortableBuild) {
  if (!kernels::cpu::isa_available(Isa::avx512)) GTEST_SKIP() << "no AVX-512 on this CPU";
  for (const auto& [N, K] : std::vector<std::pair<int64_t, int64_t>>{{300, 640}, {200, 64}, {100, 1024}}) {
    std::vector<std::byte> wb = q8_rows(N, K, 21);
    std::memset(wb.data() + 5 * (K / 32 * 34), 0, K / 32 * 34);  // an all-zero row (scales 0)
    std::vector<int32_t> cols;
    for (int j = 0; j < 16; ++j) cols.push_back(static_cast<int32_t>(j * (K / 16) + j % 3));
    const int64_t bytes = kernels::qscreen_bytes(N, K);
    std::vector<std::byte> a(bytes, std::byte{0}), b(bytes, std::byte{0});
    ASSERT_TRUE(kernels::cpu::detail::qscreen_build_scalar(wb.data(), 0, N, K, cols.data(), a.data()));
    ASSERT_TRUE(kernels::cpu::detail::qscreen_build_avx512(wb.data(), 0, N, K, cols.data(), b.data()));
    EXPECT_TRUE(a == b) << "N " << N << " K " << K;
  }
}

TEST(GreedyScreen, ZeroMatrixPicksRowZero) {
  const int64_t N = 100, K = 64;
  std::vector<std::byte> wb(N * K / 32 * 34, std::byte{0});
  const QuantMatrix w(QuantFormat::q8_0, wb.data(), N, K);
  GreedyScreen screen(w);
  const std::vector<float> h = hidden(K, 1, 1);
  QuantActivations x;
  x.quantize(QuantFormat::q8_0, h.data(), 1, K, K);
  const GreedyScreen::Pick p = screen.argmax(w, x);
  EXPECT_EQ(p.index, 0);
  EXPECT_EQ(p.logit, 0.0f);
}

TEST(GreedyScreen, BadInputNamesWhatWasExpected) {
  auto throws_with = [](auto fn, const std::string& part) {
    try {
      fn();
      ADD_FAILURE() << "no error; expected one containing '" << part << "'";
    } catch (const std::exception& e) {
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
    }
  };
  const int64_t N = 10, K = 128;
  const std::vector<std::byte> wb = q8_rows(N, K, 1);
  const QuantMatrix w(QuantFormat::q8_0, wb.data(), N, K);
  throws_with([&] { GreedyScreen s{QuantMatrix()}; }, "non-empty Q8_0 matrix");  // empty vocabulary
  const std::vector<std::byte> k4 = testing::quant_blocks(QuantFormat::q4_k, N, 256, 1);
  throws_with([&] { GreedyScreen s(QuantMatrix(QuantFormat::q4_k, k4.data(), N, 256)); }, "expected Q8_0");
  const std::vector<std::byte> w96 = q8_rows(N, 96, 1);
  throws_with([&] { GreedyScreen s(QuantMatrix(QuantFormat::q8_0, w96.data(), N, 96)); }, "multiple of 64");
  std::vector<float> few(5, 1.0f);
  throws_with([&] { GreedyScreen s(w, few); }, "column_weight must have K = 128");
  GreedyScreen s(w);
  QuantActivations x;
  std::vector<float> h(2 * K, 0.5f);
  x.quantize(QuantFormat::q8_0, h.data(), 2, K, K);
  throws_with([&] { s.argmax(w, x); }, "expected one activation row of K = 128");
  x.quantize(QuantFormat::q8_0, h.data(), 1, 64, 64);
  throws_with([&] { s.argmax(w, x); }, "got 1 rows of K = 64");
  std::vector<float> h256(256, 0.5f);
  x.quantize(QuantFormat::q4_k, h256.data(), 1, 256, 256);
  throws_with([&] { s.argmax(w, x); }, "Q8_K");
  x.quantize(QuantFormat::q8_0, h.data(), 1, K, K);
  const QuantMatrix w5(QuantFormat::q8_0, wb.data(), 5, K);
  throws_with([&] { s.argmax(w5, x); }, "the screen was built from");
  // a non-finite weight scale
  std::vector<std::byte> bad = wb;
  const uint16_t inf = 0x7c00;
  std::memcpy(bad.data() + 3 * (K / 32 * 34), &inf, 2);
  throws_with([&] { GreedyScreen b(QuantMatrix(QuantFormat::q8_0, bad.data(), N, K)); }, "row 3");
}

}  // namespace
}  // namespace attn::ops
