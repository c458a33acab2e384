// Decode-step attention (kernels/cpu/group_decode_attention.h) on every ISA against the double reference,
// table-driven: group sizes, key counts with every tail of 4 and 16, head sizes on and off the AVX-512
// path (D % 16), strided cache rows; and against the general fused attention op.
#include "kernels/cpu/group_decode_attention.h"

#include <attn/core/f16.h>
#include <attn/ops/attention.h>
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/cpu/qdot.h"
#include "kernels/isa_test_util.h"
#include "testing/testing.h"
#include "testing/tolerances.h"

namespace attn {
namespace {

struct DaCase {
  std::string name;
  int64_t G, Lk, D;
  int64_t ldk_pad = 0;
  double qscale = 1.0;  // query magnitude: large values make the softmax peaked
};

std::vector<DaCase> cases() {
  return {{"g1_lk1_d64", 1, 1, 64},
          {"g3_lk2_d64", 3, 2, 64},
          {"g3_lk17_d64", 3, 17, 64},
          {"g3_lk600_d64_strided", 3, 600, 64, 128},
          {"g4_lk33_d32", 4, 33, 32},
          {"g2_lk100_d48_peaked", 2, 100, 48, 0, 8.0},
          {"g1_lk5_d40_scalar_only", 1, 5, 40},
          {"g2_lk257_d128", 2, 257, 128, 16},
          {"g7_lk31_d16", 7, 31, 16, 3},
          {"g1_lk64_d256", 1, 64, 256}};
}

using GroupDecodeAttention = testing::IsaCaseTest<DaCase>;

TEST_P(GroupDecodeAttention, MatchesDoubleReference) {
  const auto& [c, isa] = GetParam();
  kernels::cpu::force_isa(isa);
  const int64_t ldk = c.D + c.ldk_pad;
  const Tensor q = testing::random_uniform({c.G, c.D}, 1, -c.qscale, c.qscale);
  const Tensor k = testing::random_uniform({c.Lk, ldk}, 2);
  const Tensor v = testing::random_uniform({c.Lk, ldk}, 3);
  const float scale = 1.0f / std::sqrt(static_cast<float>(c.D));
  Tensor out = Tensor::full({c.G, c.D}, 777.0);
  Tensor ref = Tensor::zeros({c.G, c.D});
  std::vector<float> scratch(c.G * c.Lk, NAN);
  kernels::cpu::group_decode_attention(q.data<float>(), c.G, k.data<float>(), v.data<float>(), ldk, c.Lk, c.D,
                                       scale, scratch.data(), out.data<float>());
  kernels::ref::group_decode_attention(q.data<float>(), c.G, k.data<float>(), v.data<float>(), ldk, c.Lk, c.D,
                                       scale, ref.data<float>());
  EXPECT_ALL_CLOSE(out, ref, testing::tol::kFusedForward);
}

// The f16 cache: the same against the reference computed from the f16-rounded keys and values.
TEST_P(GroupDecodeAttention, F16CacheMatchesDoubleReference) {
  const auto& [c, isa] = GetParam();
  kernels::cpu::force_isa(isa);
  const int64_t ldk = c.D + c.ldk_pad;
  const Tensor q = testing::random_uniform({c.G, c.D}, 1, -c.qscale, c.qscale);
  const Tensor k = testing::random_uniform({c.Lk, ldk}, 2);
  const Tensor v = testing::random_uniform({c.Lk, ldk}, 3);
  std::vector<uint16_t> k16(c.Lk * ldk), v16(c.Lk * ldk);
  kernels::cpu::f32_to_f16(k.data<float>(), c.Lk * ldk, k16.data());
  kernels::cpu::f32_to_f16(v.data<float>(), c.Lk * ldk, v16.data());
  std::vector<float> kr(c.Lk * ldk), vr(c.Lk * ldk);
  for (int64_t i = 0; i < c.Lk * ldk; ++i) {
    kr[i] = f16_to_f32(k16[i]);
    vr[i] = f16_to_f32(v16[i]);
  }
  const float scale = 1.0f / std::sqrt(static_cast<float>(c.D));
  Tensor out = Tensor::full({c.G, c.D}, 777.0);
  Tensor ref = Tensor::zeros({c.G, c.D});
  std::vector<float> scratch(c.G * c.Lk, NAN);
  kernels::cpu::group_decode_attention_f16(q.data<float>(), c.G, k16.data(), v16.data(), ldk, c.Lk, c.D,
                                           scale, scratch.data(), out.data<float>());
  kernels::ref::group_decode_attention(q.data<float>(), c.G, kr.data(), vr.data(), ldk, c.Lk, c.D, scale,
                                       ref.data<float>());
  EXPECT_ALL_CLOSE(out, ref, testing::tol::kFusedForward);
}

INSTANTIATE_TEST_SUITE_P(Table, GroupDecodeAttention,
                         ::testing::Combine(::testing::ValuesIn(cases()),
                                            ::testing::ValuesIn(testing::available_isas())),
                         testing::isa_case_name<DaCase>);

// f32 → f16 on every ISA: the nearest half, ties to even, as attn::round_to_f16 (core/f16.h) computes it,
// over random values of every magnitude and the edge cases (subnormals, the largest half, overflow).
TEST(F32ToF16, NearestEvenOnEveryIsa) {
  std::vector<float> x = {
      0.0f,     -0.0f,       1.0f,     -2.5f,     65504.0f,         65519.0f,
      65520.0f, -70000.f,    1e-8f,    6.1e-5f,   6.0e-8f,          2.9e-8f,
      3.0e-8f,  1.0f / 3.0f, INFINITY, -INFINITY, 6.103515625e-05f, 5.960464477539063e-08f};
  std::mt19937 rng(9);
  for (int i = 0; i < 3000; ++i) {
    const float m = std::uniform_real_distribution<float>(-1.0f, 1.0f)(rng);
    x.push_back(std::ldexp(m, static_cast<int>(rng() % 44) - 28));
  }
  for (kernels::cpu::Isa isa : testing::available_isas()) {
    kernels::cpu::force_isa(isa);
    std::vector<uint16_t> h(x.size());
    kernels::cpu::f32_to_f16(x.data(), static_cast<int64_t>(x.size()), h.data());
    for (std::size_t i = 0; i < x.size(); ++i)
      ASSERT_EQ(f16_to_f32(h[i]), round_to_f16(x[i]))
          << "x=" << x[i] << " isa " << kernels::cpu::isa_str(isa);
  }
  kernels::cpu::force_isa(std::nullopt);
}

// The same numbers as the general attention op (grouped heads, one query row at the bottom-right).
TEST(GroupDecodeAttentionOp, MatchesAttentionOp) {
  const int64_t H = 6, Hkv = 2, G = H / Hkv, Lk = 45, D = 64;
  const Tensor q = testing::random_uniform({1, H, 1, D}, 4);
  const Tensor k = testing::random_uniform({1, Hkv, Lk, D}, 5);
  const Tensor v = testing::random_uniform({1, Hkv, Lk, D}, 6);
  AttentionOptions o;
  o.causal = true;
  o.align = Align::bottom_right;
  const Tensor want = attention(q, k, v, o).out.contiguous();  // [1, H, 1, D]
  Tensor got = Tensor::zeros({1, H, 1, D});
  std::vector<float> scratch(G * Lk);
  for (int64_t h = 0; h < Hkv; ++h)
    kernels::cpu::group_decode_attention(q.data<float>() + h * G * D, G, k.data<float>() + h * Lk * D,
                                         v.data<float>() + h * Lk * D, D, Lk, D, 1.0f / std::sqrt(float(D)),
                                         scratch.data(), got.data<float>() + h * G * D);
  EXPECT_ALL_CLOSE(got, want, testing::tol::kFusedForward);
}

}  // namespace
}  // namespace attn
