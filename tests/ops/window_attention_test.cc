// Window attention (Swin) against an independent naive oracle: full attention
// over all Hg·Wg tokens with an N x N allow mask derived from grid coordinates
// (same window after the cyclic shift, same side of the wrap-around) and the
// window bias mapped to token pairs, run in f64 on the reference backend.
#include <attn/ops/window_attention.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <optional>
#include <ostream>
#include <string>
#include <tuple>
#include <vector>

#include "testing/testing.h"
#include "testing/tolerances.h"

namespace attn {
namespace {

using testing::random_uniform;

int64_t mod(int64_t a, int64_t m) { return ((a % m) + m) % m; }

// ---- the oracle -------------------------------------------------------------

struct OracleSpec {
  int64_t Hg, Wg;
  int64_t window, shift;    // as requested; Swin's clamp is applied below
  bool region_mask = true;  // false: roll and partition, but let wrapped tokens mix (wrong on purpose)
};

struct OracleMasks {
  Tensor allow;  // [N, N] u8
  Tensor bias;   // [H, N, N] f64, or undefined
};

// Builds the N x N masks from first principles: tokens p = (yp, xp) and
// q = (yq, xq) of the grid. After padding to multiples of M and rolling by −s,
// token y sits at row (y − s) mod Hp; it may attend to q when both land in the
// same window and, in each direction, both or neither wrapped around (y < s).
OracleMasks oracle_masks(const OracleSpec& sp, const Tensor& window_bias /* [Hb, M², M²] or undefined */) {
  int64_t M = sp.window, s = sp.shift;
  if (std::min(sp.Hg, sp.Wg) <= M) {  // Swin: window = min(resolution), no shift
    M = std::min(sp.Hg, sp.Wg);
    s = 0;
  }
  const int64_t Hp = (sp.Hg + M - 1) / M * M, Wp = (sp.Wg + M - 1) / M * M;
  const int64_t N = sp.Hg * sp.Wg;
  OracleMasks m;
  m.allow = Tensor::zeros({N, N}, DType::u8);
  uint8_t* a = m.allow.data<uint8_t>();
  const int64_t Hb = window_bias.defined() ? window_bias.size(0) : 0;
  if (Hb) m.bias = Tensor::zeros({Hb, N, N}, DType::f64);
  for (int64_t p = 0; p < N; ++p)
    for (int64_t q = 0; q < N; ++q) {
      const int64_t yp = p / sp.Wg, xp = p % sp.Wg, yq = q / sp.Wg, xq = q % sp.Wg;
      const int64_t ryp = mod(yp - s, Hp), rxp = mod(xp - s, Wp), ryq = mod(yq - s, Hp),
                    rxq = mod(xq - s, Wp);
      const bool same_window = ryp / M == ryq / M && rxp / M == rxq / M;
      const bool same_side = ((yp < s) == (yq < s)) && ((xp < s) == (xq < s));
      a[p * N + q] = same_window && (same_side || !sp.region_mask);
      if (Hb) {
        const int64_t ip = (ryp % M) * M + rxp % M, iq = (ryq % M) * M + rxq % M;
        for (int64_t h = 0; h < Hb; ++h) m.bias.set({h, p, q}, window_bias.at({h, ip, iq}));
      }
    }
  return m;
}

// [B, Hs, Hg, Wg, D] -> contiguous f64 [B, Hs, N, D].
Tensor flat(const Tensor& x) {
  return x.to(DType::f64).view({x.size(0), x.size(1), x.size(2) * x.size(3), x.size(4)});
}

AttentionOptions oracle_options(const OracleMasks& m, std::optional<double> scale) {
  AttentionOptions o;
  o.backend = Backend::reference;
  o.scale = scale;
  o.allow = m.allow;
  o.bias = m.bias;
  return o;
}

// ---- parameterised cases ----------------------------------------------------

enum class BiasKind { none, random, swin_table };

struct Case {
  const char* name;
  int64_t B, H, Hkv, Hg, Wg, D, window, shift;
  BiasKind bias = BiasKind::none;
  std::optional<double> scale = std::nullopt;
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

std::vector<Case> cases() {
  return {
      {"w4_s0_8x8", 1, 2, 2, 8, 8, 5, 4, 0, BiasKind::random},
      {"w4_s2_8x8_b2", 2, 2, 2, 8, 8, 5, 4, 2, BiasKind::random},
      {"w3_s0_7x5_padded", 1, 2, 2, 7, 5, 4, 3, 0, BiasKind::random},
      {"w3_s1_7x5_padded", 2, 2, 2, 7, 5, 4, 3, 1, BiasKind::random},
      {"w2_s1_5x5_padded_nobias", 1, 1, 1, 5, 5, 3, 2, 1, BiasKind::none},
      {"w1_3x4", 1, 2, 2, 3, 4, 3, 1, 0, BiasKind::random},
      {"h3_d7_w3_s1_6x6", 1, 3, 3, 6, 6, 7, 3, 1, BiasKind::random, 0.7},
      {"gqa_h4_kv2_w3_s1_6x9", 2, 4, 2, 6, 9, 4, 3, 1, BiasKind::random},
      {"clamp_w7_s3_on_4x6", 1, 2, 2, 4, 6, 4, 7, 3, BiasKind::random},
      {"swin_w7_s3_14x14_table", 1, 2, 2, 14, 14, 8, 7, 3, BiasKind::swin_table},
      {"swin_w7_s3_10x9_padded_table", 1, 2, 2, 10, 9, 6, 7, 3, BiasKind::swin_table},
      {"w4_s3_9x13_padded", 1, 2, 1, 9, 13, 5, 4, 3, BiasKind::random},
  };
}

struct Inputs {
  Tensor q, k, v, dout;
  WindowAttentionOptions opt;
};

Inputs make_inputs(const Case& c, DType dtype) {
  Inputs in;
  in.q = random_uniform({c.B, c.H, c.Hg, c.Wg, c.D}, 101, -1, 1, dtype);
  in.k = random_uniform({c.B, c.Hkv, c.Hg, c.Wg, c.D}, 102, -1, 1, dtype);
  in.v = random_uniform({c.B, c.Hkv, c.Hg, c.Wg, c.D}, 103, -1, 1, dtype);
  in.dout = random_uniform({c.B, c.H, c.Hg, c.Wg, c.D}, 104, -1, 1, dtype);
  in.opt.window = c.window;
  in.opt.shift = c.shift;
  in.opt.scale = c.scale;
  const int64_t M = window_geometry(c.Hg, c.Wg, in.opt).window;
  const DType bt = dtype == DType::f64 ? DType::f64 : DType::f32;
  if (c.bias == BiasKind::random) {
    in.opt.bias = random_uniform({c.H, M * M, M * M}, 105, -2, 2, bt);
  } else if (c.bias == BiasKind::swin_table) {
    in.opt.bias =
        swin_relative_position_bias(random_uniform({(2 * M - 1) * (2 * M - 1), c.H}, 106, -2, 2, bt), M);
  }
  return in;
}

OracleSpec spec_of(const Case& c) { return {c.Hg, c.Wg, c.window, c.shift}; }

class WindowAttentionVsOracle : public ::testing::TestWithParam<Case> {};

TEST_P(WindowAttentionVsOracle, ForwardF32MatchesNaiveF64) {
  const Case& c = GetParam();
  const Inputs in = make_inputs(c, DType::f32);
  const auto r = window_attention(in.q, in.k, in.v, in.opt);  // automatic backend
  ASSERT_EQ(r.out.shape(), (Shape{c.B, c.H, c.Hg, c.Wg, c.D}));
  ASSERT_EQ(r.lse.shape(), (Shape{c.B, c.H, c.Hg, c.Wg}));

  const OracleMasks m = oracle_masks(spec_of(c), in.opt.bias);
  const auto e = attention(flat(in.q), flat(in.k), flat(in.v), oracle_options(m, c.scale));
  const int64_t N = c.Hg * c.Wg;
  EXPECT_ALL_CLOSE(r.out.view({c.B, c.H, N, c.D}), e.out, testing::tol::kFusedForward);
  EXPECT_ALL_CLOSE(r.lse.view({c.B, c.H, N}), e.lse, testing::tol::kFusedForward);
  for (double x : r.lse.to_vector()) EXPECT_TRUE(std::isfinite(x)) << "every token sees at least itself";
}

TEST_P(WindowAttentionVsOracle, ForwardF64MatchesNaiveF64) {
  const Case& c = GetParam();
  Inputs in = make_inputs(c, DType::f64);
  in.opt.backend = Backend::reference;
  const auto r = window_attention(in.q, in.k, in.v, in.opt);
  const OracleMasks m = oracle_masks(spec_of(c), in.opt.bias);
  const auto e = attention(flat(in.q), flat(in.k), flat(in.v), oracle_options(m, c.scale));
  const int64_t N = c.Hg * c.Wg;
  EXPECT_ALL_CLOSE(r.out.view({c.B, c.H, N, c.D}), e.out, testing::tol::kFiniteDiff);
  EXPECT_ALL_CLOSE(r.lse.view({c.B, c.H, N}), e.lse, testing::tol::kFiniteDiff);
}

TEST_P(WindowAttentionVsOracle, BackwardF32MatchesNaiveF64) {
  const Case& c = GetParam();
  const Inputs in = make_inputs(c, DType::f32);
  const auto r = window_attention(in.q, in.k, in.v, in.opt);
  const auto g = window_attention_backward(in.q, in.k, in.v, r.out, r.lse, in.dout, in.opt);

  const OracleMasks m = oracle_masks(spec_of(c), in.opt.bias);
  const AttentionOptions oo = oracle_options(m, c.scale);
  const Tensor q = flat(in.q), k = flat(in.k), v = flat(in.v), dout = flat(in.dout);
  const auto e = attention(q, k, v, oo);
  const auto eg = attention_backward(q, k, v, e.out, e.lse, dout, oo);
  const int64_t N = c.Hg * c.Wg;
  ASSERT_EQ(g.dq.shape(), in.q.shape());
  ASSERT_EQ(g.dk.shape(), in.k.shape());
  ASSERT_EQ(g.dv.shape(), in.v.shape());
  EXPECT_ALL_CLOSE(g.dq.view({c.B, c.H, N, c.D}), eg.dq, testing::tol::kFusedBackward) << "dq";
  EXPECT_ALL_CLOSE(g.dk.view({c.B, c.Hkv, N, c.D}), eg.dk, testing::tol::kFusedBackward) << "dk";
  EXPECT_ALL_CLOSE(g.dv.view({c.B, c.Hkv, N, c.D}), eg.dv, testing::tol::kFusedBackward) << "dv";
}

INSTANTIATE_TEST_SUITE_P(Cases, WindowAttentionVsOracle, ::testing::ValuesIn(cases()),
                         [](const auto& info) { return std::string(info.param.name); });

// ---- finite differences -------------------------------------------------------

std::vector<Case> fd_cases() {
  return {
      {"w3_s1_5x4_padded_gqa", 1, 2, 1, 5, 4, 3, 3, 1, BiasKind::random},
      {"w2_s1_4x4", 1, 1, 1, 4, 4, 2, 2, 1, BiasKind::swin_table, 1.3},
      {"clamp_w5_s2_3x4", 2, 1, 1, 3, 4, 2, 5, 2, BiasKind::none},
  };
}

class WindowAttentionGrad : public ::testing::TestWithParam<Case> {};

TEST_P(WindowAttentionGrad, MatchesCentralFiniteDifferences) {
  const Case& c = GetParam();
  Inputs in = make_inputs(c, DType::f64);
  in.opt.backend = Backend::reference;
  auto loss = [&]() {  // sum(out · dout)
    const auto o = window_attention(in.q, in.k, in.v, in.opt).out.to_vector();
    const auto w = in.dout.to_vector();
    double s = 0;
    for (std::size_t i = 0; i < o.size(); ++i) s += o[i] * w[i];
    return s;
  };
  const auto r = window_attention(in.q, in.k, in.v, in.opt);
  const auto g = window_attention_backward(in.q, in.k, in.v, r.out, r.lse, in.dout, in.opt);
  const double h = 1e-6;
  for (auto [x, gx, name] :
       {std::tuple{&in.q, &g.dq, "dq"}, std::tuple{&in.k, &g.dk, "dk"}, std::tuple{&in.v, &g.dv, "dv"}}) {
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
    EXPECT_ALL_CLOSE(*gx, num, testing::tol::kFiniteDiff) << c.name << " " << name;
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, WindowAttentionGrad, ::testing::ValuesIn(fd_cases()),
                         [](const auto& info) { return std::string(info.param.name); });

// ---- properties -----------------------------------------------------------------

double max_abs_diff(const Tensor& a, const Tensor& b) {
  const auto x = a.to_vector(), y = b.to_vector();
  double m = 0;
  for (std::size_t i = 0; i < x.size(); ++i) m = std::max(m, std::abs(x[i] - y[i]));
  return m;
}

TEST(WindowAttention, ShiftChangesTheResultAndTheRegionMaskMatters) {
  const Case c{"shift", 1, 2, 2, 8, 8, 4, 4, 2};
  Inputs in = make_inputs(c, DType::f32);
  const auto shifted = window_attention(in.q, in.k, in.v, in.opt);
  WindowAttentionOptions plain = in.opt;
  plain.shift = 0;
  const auto unshifted = window_attention(in.q, in.k, in.v, plain);
  EXPECT_GT(max_abs_diff(shifted.out, unshifted.out), 1e-2) << "shift 2 must change the windows";

  // Rolling without the region mask lets wrapped tokens mix with their new neighbours;
  // that is a different (wrong) answer, and the implementation must not give it.
  OracleSpec no_region = spec_of(c);
  no_region.region_mask = false;
  const OracleMasks m = oracle_masks(no_region, Tensor());
  const auto wrong = attention(flat(in.q), flat(in.k), flat(in.v), oracle_options(m, std::nullopt));
  EXPECT_GT(max_abs_diff(shifted.out.view({1, 2, 64, 4}), wrong.out), 1e-2);
  // Tokens away from the wrap-around (rows and columns 2..5) have no other
  // region in their window, so there the two agree.
  for (int64_t h = 0; h < 2; ++h)
    for (int64_t y = 2; y < 6; ++y)
      for (int64_t x = 2; x < 6; ++x)
        for (int64_t d = 0; d < 4; ++d)
          EXPECT_NEAR(shifted.out.at({0, h, y, x, d}), wrong.out.at({0, h, y * 8 + x, d}), 1e-5);
}

// Perturbs token (py, px) of k and v; returns which output tokens changed.
std::vector<std::vector<bool>> changed_tokens(const Case& c, int64_t py, int64_t px) {
  Inputs in = make_inputs(c, DType::f32);
  const auto before = window_attention(in.q, in.k, in.v, in.opt);
  for (int64_t h = 0; h < c.Hkv; ++h)
    for (int64_t d = 0; d < c.D; ++d) {
      in.k.set({0, h, py, px, d}, in.k.at({0, h, py, px, d}) + 0.5);
      in.v.set({0, h, py, px, d}, in.v.at({0, h, py, px, d}) - 0.5);
    }
  const auto after = window_attention(in.q, in.k, in.v, in.opt);
  std::vector<std::vector<bool>> changed(c.Hg, std::vector<bool>(c.Wg, false));
  for (int64_t h = 0; h < c.H; ++h)
    for (int64_t y = 0; y < c.Hg; ++y)
      for (int64_t x = 0; x < c.Wg; ++x)
        for (int64_t d = 0; d < c.D; ++d)
          if (before.out.at({0, h, y, x, d}) != after.out.at({0, h, y, x, d})) changed[y][x] = true;
  return changed;
}

TEST(WindowAttention, TokensInOtherWindowsAreNotInfluenced) {
  // 8x8 grid, M = 4, no shift: token (1, 2) lives in window rows 0..3, columns 0..3.
  const auto ch = changed_tokens({"w", 1, 2, 2, 8, 8, 3, 4, 0, BiasKind::random}, 1, 2);
  for (int64_t y = 0; y < 8; ++y)
    for (int64_t x = 0; x < 8; ++x) EXPECT_EQ(ch[y][x], y < 4 && x < 4) << "token (" << y << ", " << x << ")";
}

TEST(WindowAttention, ShiftedWindowsOnlyMixTokensOfOneRegion) {
  // 8x8, M = 4, s = 2. Token (0, 0) wraps in both directions into the bottom-right
  // shifted window, which holds rows/columns {6, 7, 0, 1}. Only the tokens that
  // also wrapped in both directions (rows 0..1, columns 0..1) may see it.
  const auto ch = changed_tokens({"w", 1, 2, 2, 8, 8, 3, 4, 2, BiasKind::random}, 0, 0);
  for (int64_t y = 0; y < 8; ++y)
    for (int64_t x = 0; x < 8; ++x) EXPECT_EQ(ch[y][x], y < 2 && x < 2) << "token (" << y << ", " << x << ")";
  // Token (3, 7): rows 2..5 form one shifted window; columns {6, 7, 0, 1} split into
  // the regions {6, 7} and {0, 1}; (3, 7) is seen by rows 2..5, columns 6..7.
  const auto ch2 = changed_tokens({"w", 1, 2, 2, 8, 8, 3, 4, 2, BiasKind::random}, 3, 7);
  for (int64_t y = 0; y < 8; ++y)
    for (int64_t x = 0; x < 8; ++x)
      EXPECT_EQ(ch2[y][x], y >= 2 && y < 6 && x >= 6) << "token (" << y << ", " << x << ")";
}

TEST(WindowAttention, WindowOfOneReturnsV) {
  const Case c{"m1", 2, 2, 1, 3, 5, 4, 1, 0};
  const Inputs in = make_inputs(c, DType::f32);
  const auto r = window_attention(in.q, in.k, in.v, in.opt);
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t h = 0; h < 2; ++h)
      for (int64_t y = 0; y < 3; ++y)
        for (int64_t x = 0; x < 5; ++x) {
          double dot = 0;
          for (int64_t d = 0; d < 4; ++d) {
            EXPECT_NEAR(r.out.at({b, h, y, x, d}), in.v.at({b, 0, y, x, d}), 1e-6);
            dot += in.q.at({b, h, y, x, d}) * in.k.at({b, 0, y, x, d});
          }
          EXPECT_NEAR(r.lse.at({b, h, y, x}), dot / 2.0, 1e-5);  // the only logit, scale 1/sqrt(4)
        }
}

TEST(WindowAttention, WindowLargerThanGridIsClampedLikeSwin) {
  WindowAttentionOptions big;
  big.window = 7;
  big.shift = 3;
  const WindowGeometry g = window_geometry(4, 6, big);
  EXPECT_EQ(g.window, 4);
  EXPECT_EQ(g.shift, 0);
  EXPECT_EQ(g.Hp, 4);
  EXPECT_EQ(g.Wp, 8);
  EXPECT_EQ(g.nWh * g.nWw, 2);
  const WindowGeometry same = window_geometry(7, 9, big);  // min(grid) == M: Swin drops the shift too
  EXPECT_EQ(same.window, 7);
  EXPECT_EQ(same.shift, 0);
  const WindowGeometry keep = window_geometry(8, 9, big);
  EXPECT_EQ(keep.window, 7);
  EXPECT_EQ(keep.shift, 3);
  EXPECT_EQ(keep.Hp, 14);

  Tensor q = random_uniform({1, 2, 4, 6, 3}, 1), k = random_uniform({1, 2, 4, 6, 3}, 2),
         v = random_uniform({1, 2, 4, 6, 3}, 3);
  WindowAttentionOptions explicit_opt;
  explicit_opt.window = 4;
  const auto a = window_attention(q, k, v, big), b = window_attention(q, k, v, explicit_opt);
  EXPECT_EQ(max_abs_diff(a.out, b.out), 0.0);
}

TEST(WindowAttention, SwinLayoutViewsMatchContiguousInputs) {
  // Swin holds activations as [B, Hg, Wg, C] with C = H·D; the qkv heads are views.
  const int64_t B = 2, Hg = 6, Wg = 7, H = 3, D = 5;
  auto grid_view = [&](uint64_t seed) {
    return random_uniform({B, Hg, Wg, H * D}, seed).view({B, Hg, Wg, H, D}).permute({0, 3, 1, 2, 4});
  };
  const Tensor q = grid_view(11), k = grid_view(12), v = grid_view(13), dout = grid_view(14);
  ASSERT_FALSE(q.is_contiguous());
  WindowAttentionOptions o;
  o.window = 3;
  o.shift = 1;
  o.bias = random_uniform({H, 9, 9}, 15);
  const auto a = window_attention(q, k, v, o);
  const auto b = window_attention(q.contiguous(), k.contiguous(), v.contiguous(), o);
  EXPECT_EQ(max_abs_diff(a.out, b.out), 0.0);
  EXPECT_EQ(max_abs_diff(a.lse, b.lse), 0.0);
  const auto ga = window_attention_backward(q, k, v, a.out, a.lse, dout, o);
  const auto gb = window_attention_backward(q.contiguous(), k.contiguous(), v.contiguous(), b.out, b.lse,
                                            dout.contiguous(), o);
  EXPECT_EQ(max_abs_diff(ga.dq, gb.dq), 0.0);
  EXPECT_EQ(max_abs_diff(ga.dk, gb.dk), 0.0);
  EXPECT_EQ(max_abs_diff(ga.dv, gb.dv), 0.0);
}

TEST(WindowAttention, Bf16InputsMatchOracleOnTheSameValues) {
  const Case c{"bf16", 1, 2, 2, 7, 7, 8, 4, 2, BiasKind::random};
  const Inputs in = make_inputs(c, DType::bf16);
  const auto r = window_attention(in.q, in.k, in.v, in.opt);
  EXPECT_EQ(r.out.dtype(), DType::f32);
  const OracleMasks m = oracle_masks(spec_of(c), in.opt.bias);
  const auto e = attention(flat(in.q), flat(in.k), flat(in.v), oracle_options(m, std::nullopt));
  // bf16 inputs may take the fused AVX512_BF16 path, which rounds P to bf16 for P·V.
  EXPECT_ALL_CLOSE(r.out.view({1, 2, 49, 8}), e.out, testing::tol::kFusedForwardBf16Out);
}

TEST(WindowAttention, EmptyGridGivesEmptyOutputs) {
  const Tensor q = Tensor::zeros({1, 2, 0, 5, 3});
  const auto r = window_attention(q, q, q);
  EXPECT_EQ(r.out.shape(), (Shape{1, 2, 0, 5, 3}));
  EXPECT_EQ(r.lse.shape(), (Shape{1, 2, 0, 5}));
  const auto g = window_attention_backward(q, q, q, r.out, r.lse, q);
  EXPECT_EQ(g.dk.shape(), (Shape{1, 2, 0, 5, 3}));
}

// ---- Swin's relative-position bias -------------------------------------------------

TEST(SwinRelativePositionBias, HandComputedEntriesForWindowTwo) {
  // M = 2: tokens 0 = (0, 0), 1 = (0, 1), 2 = (1, 0), 3 = (1, 1); table rows (dy + 1)·3 + (dx + 1).
  std::vector<float> t(9 * 2);
  for (int r = 0; r < 9; ++r) {
    t[r * 2] = static_cast<float>(r);
    t[r * 2 + 1] = static_cast<float>(100 + r);
  }
  const Tensor bias = swin_relative_position_bias(Tensor::from(t, {9, 2}), 2);
  ASSERT_EQ(bias.shape(), (Shape{2, 4, 4}));
  EXPECT_EQ(bias.at({0, 0, 3}), 0.0);                                    // dy = −1, dx = −1
  EXPECT_EQ(bias.at({0, 3, 0}), 8.0);                                    // dy = +1, dx = +1
  EXPECT_EQ(bias.at({0, 1, 2}), 2.0);                                    // dy = −1, dx = +1
  EXPECT_EQ(bias.at({0, 2, 1}), 6.0);                                    // dy = +1, dx = −1
  EXPECT_EQ(bias.at({1, 0, 1}), 103.0);                                  // dy = 0, dx = −1
  for (int64_t i = 0; i < 4; ++i) EXPECT_EQ(bias.at({1, i, i}), 104.0);  // centre
}

TEST(SwinRelativePositionBias, DependsOnlyOnTheOffsetAndUsesEveryEntry) {
  const int64_t M = 5, span = 9, H = 3;
  const Tensor table = random_uniform({span * span, H}, 7);
  const Tensor bias = swin_relative_position_bias(table, M);
  std::vector<int> used(span * span, 0);
  for (int64_t i = 0; i < M * M; ++i)
    for (int64_t j = 0; j < M * M; ++j) {
      // Offsets of token i relative to token j: one table entry per offset, for every head.
      const int64_t off = (i / M - j / M + M - 1) * span + (i % M - j % M + M - 1);
      used[off] = 1;
      for (int64_t h = 0; h < H; ++h) ASSERT_EQ(bias.at({h, i, j}), table.at({off, h}));
    }
  EXPECT_EQ(std::count(used.begin(), used.end(), 1), span * span);
  // A table stored [H, (2M − 1)²] is passed as a transposed view.
  const Tensor bias_t = swin_relative_position_bias(table.transpose(0, 1).contiguous().transpose(0, 1), M);
  EXPECT_EQ(max_abs_diff(bias, bias_t), 0.0);
}

// ---- errors ------------------------------------------------------------------------

void expect_error(const std::function<void()>& fn, const std::vector<std::string>& parts) {
  try {
    fn();
    ADD_FAILURE() << "expected attn::Error containing \"" << parts.front() << "\"";
  } catch (const Error& e) {
    const std::string msg = e.what();
    for (const auto& p : parts)
      EXPECT_NE(msg.find(p), std::string::npos) << "message: " << msg << "\nwant: " << p;
  }
}

TEST(WindowAttention, BadInputsThrowInformativeErrors) {
  const Tensor q = random_uniform({1, 2, 6, 6, 4}, 1);
  const Tensor kv1 = random_uniform({1, 1, 6, 6, 4}, 2);
  WindowAttentionOptions o;
  o.window = 3;
  expect_error([&] { window_attention(q.select(0, 0), q, q, o); },
               {"q must have rank 5 [B, H, Hg, Wg, D]", "got rank 4 [2, 6, 6, 4]"});
  expect_error(
      [&] {
        window_attention(q, random_uniform({1, 2, 6, 5, 4}, 3), random_uniform({1, 2, 6, 5, 4}, 3), o);
      },
      {"shape [1, 2, 6, 6, 4]", "got [1, 2, 6, 5, 4]"});
  expect_error([&] { window_attention(q, q, kv1, o); },
               {"k and v must have the same shape", "[1, 1, 6, 6, 4]"});
  expect_error([&] { window_attention(q, q, q.to(DType::f64), o); }, {"share one dtype", "v f64"});
  expect_error(
      [&] {
        window_attention(q, random_uniform({1, 3, 6, 6, 4}, 4), random_uniform({1, 3, 6, 6, 4}, 4), o);
      },
      {"Hkv must divide", "H = 2, Hkv = 3"});
  expect_error(
      [&] {
        window_attention(Tensor::zeros({1, 2, 6, 6, 0}), Tensor::zeros({1, 2, 6, 6, 0}),
                         Tensor::zeros({1, 2, 6, 6, 0}), o);
      },
      {"D must be > 0"});
  WindowAttentionOptions w0 = o;
  w0.window = 0;
  expect_error([&] { window_attention(q, q, q, w0); }, {"window M must be >= 1; got 0"});
  WindowAttentionOptions sneg = o;
  sneg.shift = -1;
  expect_error([&] { window_attention(q, q, q, sneg); }, {"shift must be in [0, window M = 3); got -1"});
  WindowAttentionOptions sbig = o;
  sbig.shift = 3;
  expect_error([&] { window_attention(q, q, q, sbig); }, {"shift must be in [0, window M = 3); got 3"});
  WindowAttentionOptions b1 = o;
  b1.bias = random_uniform({2, 9, 8}, 5);
  expect_error([&] { window_attention(q, q, q, b1); },
               {"bias must have shape [H, M², M²] = [2, 9, 9]", "got [2, 9, 8]"});
  WindowAttentionOptions b2 = o;
  b2.bias = Tensor::zeros({2, 9, 9}, DType::u8);
  expect_error([&] { window_attention(q, q, q, b2); }, {"bias must be a float tensor", "u8"});
  WindowAttentionOptions clamp;  // window 7 on a 6x6 grid -> 6; a bias for 7 no longer fits
  clamp.bias = random_uniform({2, 49, 49}, 6);
  expect_error([&] { window_attention(q, q, q, clamp); },
               {"[2, 36, 36]", "clamped from 7 to 6", "6 x 6", "got [2, 49, 49]"});
  WindowAttentionOptions nan_scale = o;
  nan_scale.scale = std::numeric_limits<double>::quiet_NaN();
  expect_error([&] { window_attention(q, q, q, nan_scale); }, {"scale must be a finite number"});

  const auto r = window_attention(q, q, q, o);
  expect_error([&] { window_attention_backward(q, q, q, r.out.select(4, 0), r.lse, q, o); },
               {"window_attention_backward: out must have shape [1, 2, 6, 6, 4]", "got [1, 2, 6, 6]"});
  expect_error([&] { window_attention_backward(q, q, q, r.out, r.lse, Tensor(), o); },
               {"dout must have shape [1, 2, 6, 6, 4]", "undefined"});
  expect_error([&] { window_attention_backward(q, q, q, r.out, r.out, q, o); },
               {"lse must have shape [1, 2, 6, 6]", "got [1, 2, 6, 6, 4]"});

  expect_error(
      [&] {
        swin_relative_position_bias(random_uniform({25, 2}, 1), 7);
      },
      {"[(2M - 1)², H] = [169, H] for M = 7", "got [25, 2]"});
  expect_error([&] { swin_relative_position_bias(random_uniform({9, 2}, 1), 0); }, {"window M must be >= 1"});
}

}  // namespace
}  // namespace attn
