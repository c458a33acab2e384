// The one-query decode attention (kernels/cpu/decode_attention.h) against a double reference
// computed here from the same seeded inputs, on every ISA this CPU runs: head sizes with and
// without a 16-float tail (and above the AVX-512 body's 128), GQA, per-row key lengths, strided
// (cache-like) keys and values.
#include "kernels/cpu/decode_attention.h"

#include <attn/core/parallel.h>

#include <cmath>
#include <string>
#include <vector>

#include "kernels/isa_test_util.h"
#include "testing/testing.h"

namespace attn {
namespace {

struct DecodeCase {
  std::string name;
  int64_t B, H, Hkv, L, D;
  std::vector<int64_t> lengths;  // empty: all L
  int64_t cap;                   // key/value rows allocated per head (>= L), as a KV cache buffer
};

using DecodeAttention = testing::IsaCaseTest<DecodeCase>;

TEST_P(DecodeAttention, MatchesDoubleReference) {
  const auto& [c, isa] = GetParam();
  kernels::cpu::force_isa(isa);
  set_num_threads(2);
  // q: [B, H, D] padded to a row stride D + 3; k, v: [B, Hkv, cap, D]; o: [B, H, D] with stride D + 5
  const int64_t sq = c.D + 3, so = c.D + 5;
  const std::vector<double> qd = testing::random_uniform({c.B * c.H * sq}, 71, -1.0, 1.0).to_vector();
  const std::vector<double> kd =
      testing::random_uniform({c.B * c.Hkv * c.cap * c.D}, 72, -2.0, 2.0).to_vector();
  const std::vector<double> vd =
      testing::random_uniform({c.B * c.Hkv * c.cap * c.D}, 73, -1.0, 1.0).to_vector();
  std::vector<float> q(qd.begin(), qd.end()), k(kd.begin(), kd.end()), v(vd.begin(), vd.end());
  const float sentinel = 777.0f;
  std::vector<float> o(static_cast<std::size_t>(c.B * c.H * so), sentinel);
  kernels::cpu::DecodeAttnArgs a;
  a.q = q.data(), a.k = k.data(), a.v = v.data(), a.o = o.data();
  a.lengths = c.lengths.empty() ? nullptr : c.lengths.data();
  a.B = c.B, a.H = c.H, a.Hkv = c.Hkv, a.L = c.L, a.D = c.D;
  a.sqb = c.H * sq, a.sqh = sq;
  a.skb = a.svb = c.Hkv * c.cap * c.D, a.skh = a.svh = c.cap * c.D, a.skl = a.svl = c.D;
  a.sob = c.H * so, a.soh = so;
  a.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(c.D)));
  kernels::cpu::decode_attention(a);
  for (int64_t b = 0; b < c.B; ++b)
    for (int64_t h = 0; h < c.H; ++h) {
      const int64_t g = h / (c.H / c.Hkv), len = c.lengths.empty() ? c.L : c.lengths[b];
      const float* qr = q.data() + b * a.sqb + h * a.sqh;
      const float* kr = k.data() + b * a.skb + g * a.skh;
      const float* vr = v.data() + b * a.svb + g * a.svh;
      std::vector<double> s(static_cast<std::size_t>(len));
      double mx = -INFINITY, total = 0;
      for (int64_t j = 0; j < len; ++j) {
        double d = 0;
        for (int64_t x = 0; x < c.D; ++x) d += static_cast<double>(qr[x]) * kr[j * c.D + x];
        s[j] = d / std::sqrt(static_cast<double>(c.D));
        mx = std::max(mx, s[j]);
      }
      for (double& x : s) total += x = std::exp(x - mx);
      const float* got = o.data() + b * a.sob + h * a.soh;
      for (int64_t x = 0; x < c.D; ++x) {
        double want = 0;
        for (int64_t j = 0; j < len; ++j) want += s[j] / total * vr[j * c.D + x];
        ASSERT_NEAR(got[x], want, 2e-5 * (1 + std::abs(want))) << "b " << b << " h " << h << " d " << x;
      }
      for (int64_t x = c.D; x < so; ++x)
        ASSERT_EQ(got[x], sentinel) << "wrote past D at b " << b << " h " << h;
    }
}

INSTANTIATE_TEST_SUITE_P(
    Cases, DecodeAttention,
    ::testing::Combine(
        ::testing::Values(DecodeCase{"bench_shape_b32_h4_l64_d64", 32, 4, 4, 64, 64, {}, 128},
                          DecodeCase{"one_key", 3, 2, 2, 1, 16, {}, 16},
                          DecodeCase{"keys_tail_l7_d17", 2, 3, 3, 7, 17, {}, 9},
                          DecodeCase{"d1", 2, 2, 1, 5, 1, {}, 5},
                          DecodeCase{"d15_l33", 2, 2, 2, 33, 15, {}, 40},
                          DecodeCase{"d100_l18", 2, 2, 2, 18, 100, {}, 18},
                          DecodeCase{"d128_l20", 1, 2, 2, 20, 128, {}, 20},
                          DecodeCase{"d130_scalar_fallback", 1, 2, 2, 6, 130, {}, 8},
                          DecodeCase{"gqa_h8_kv2", 2, 8, 2, 19, 32, {}, 32},
                          DecodeCase{"key_lengths_padded_sources", 4, 4, 4, 21, 64, {21, 1, 5, 16}, 21},
                          DecodeCase{"gqa_and_lengths", 3, 6, 3, 12, 24, {12, 4, 7}, 12}),
        ::testing::ValuesIn(testing::available_isas())),
    testing::isa_case_name<DecodeCase>);

}  // namespace
}  // namespace attn
