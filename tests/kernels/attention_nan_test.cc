// NaN propagation (include/attn/ops/attention.h): a NaN logit makes its query row NaN in the fused
// forward kernel (tile path, row path, split keys, causal) on every ISA exactly where the reference
// makes it NaN, and in the decode kernels; the finite rows still match. Before the fix the SIMD exp
// clamped NaN to a finite value and the final 1/l turned a NaN row into zeros.
#include <attn/core/parallel.h>
#include <attn/ops/attention.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "kernels/cpu/decode_attention.h"
#include "kernels/cpu/group_decode_attention.h"
#include "kernels/cpu/isa.h"
#include "kernels/isa_test_util.h"
#include "testing/testing.h"
#include "testing/tolerances.h"

namespace attn {
namespace {

constexpr float kNan = std::numeric_limits<float>::quiet_NaN();

struct NanCase {
  std::string name;
  int64_t H = 1, Lq = 1, Lk = 1, D = 16;
  bool causal = false;
  int64_t nan_key = -1;    // key row of kv head 0 set to NaN
  int64_t nan_query = -1;  // query row of head 0 set to NaN (every logit of the row is NaN)
};

std::ostream& operator<<(std::ostream& os, const NanCase& c) { return os << c.name; }

using AttentionNan = testing::IsaCaseTest<NanCase>;

TEST_P(AttentionNan, FusedMatchesReferenceNanPattern) {
  const auto& [c, isa] = GetParam();
  Tensor q = testing::random_uniform({1, c.H, c.Lq, c.D}, 11);
  Tensor k = testing::random_uniform({1, c.H, c.Lk, c.D}, 12);
  Tensor v = testing::random_uniform({1, c.H, c.Lk, c.D}, 13);
  if (c.nan_key >= 0) k.data<float>()[c.nan_key * c.D + 3] = kNan;
  if (c.nan_query >= 0) q.data<float>()[c.nan_query * c.D] = kNan;
  AttentionOptions o;
  o.causal = c.causal;
  o.backend = Backend::reference;
  const AttentionResult ref = attention(q.to(DType::f64), k.to(DType::f64), v.to(DType::f64), o);
  o.backend = Backend::fused;
  kernels::cpu::force_isa(isa);
  for (int threads : {1, 3}) {
    set_num_threads(threads);
    const AttentionResult r = attention(q, k, v, o);
    const std::vector<double> got = r.out.to_vector(), want = ref.out.to_vector();
    const std::vector<double> glse = r.lse.to_vector(), wlse = ref.lse.to_vector();
    int64_t nan_rows = 0;
    for (std::size_t row = 0; row < wlse.size(); ++row) {
      ASSERT_EQ(std::isnan(glse[row]), std::isnan(wlse[row]))
          << "lse of row " << row << " threads " << threads;
      nan_rows += std::isnan(wlse[row]);
      for (int64_t d = 0; d < c.D; ++d) {
        const std::size_t x = row * static_cast<std::size_t>(c.D) + static_cast<std::size_t>(d);
        ASSERT_EQ(std::isnan(got[x]), std::isnan(want[x])) << "row " << row << " d " << d;
        if (!std::isnan(want[x])) {
          ASSERT_NEAR(got[x], want[x], 1e-4 * (1 + std::abs(want[x])));
        }
      }
    }
    EXPECT_GT(nan_rows, 0) << "the case must produce NaN rows";
    EXPECT_LT(nan_rows, static_cast<int64_t>(wlse.size())) << "the case must keep finite rows";
  }
}

INSTANTIATE_TEST_SUITE_P(
    Table, AttentionNan,
    ::testing::Combine(
        ::testing::Values(
            NanCase{.name = "TileNanKey", .H = 2, .Lq = 20, .Lk = 31, .D = 24, .nan_key = 7},
            NanCase{.name = "TileNanQueryRow", .H = 2, .Lq = 20, .Lk = 31, .D = 24, .nan_query = 4},
            // A NaN key in a later key tile, when the rows' running maxima are finite (AVX-512: the
            // scores kernel's fused softmax sees the NaN and leaves the tile to the plain softmax).
            NanCase{.name = "TileNanKeyLateTile", .H = 2, .Lq = 40, .Lk = 300, .D = 64, .nan_key = 250},
            NanCase{.name = "RowsNanKey", .H = 2, .Lq = 1, .Lk = 100, .D = 33, .nan_key = 99},
            NanCase{.name = "RowsNanQuery", .H = 2, .Lq = 2, .Lk = 40, .D = 16, .nan_query = 1},
            NanCase{.name = "SplitKeysNanKey", .H = 2, .Lq = 1, .Lk = 5000, .D = 128, .nan_key = 4321},
            NanCase{.name = "CausalNanKeyMaskedForEarlyRows",
                    .H = 1,
                    .Lq = 40,
                    .Lk = 40,
                    .D = 16,
                    .causal = true,
                    .nan_key = 30}),
        ::testing::ValuesIn(testing::available_isas())),
    testing::isa_case_name<NanCase>);

TEST(DecodeAttentionNan, NanKeyMakesItsGroupNanOnEveryIsa) {
  const int64_t B = 1, H = 4, Hkv = 2, L = 37, D = 32;
  const std::vector<double> qd = testing::random_uniform({B * H * D}, 21).to_vector();
  const std::vector<double> kd = testing::random_uniform({B * Hkv * L * D}, 22).to_vector();
  const std::vector<double> vd = testing::random_uniform({B * Hkv * L * D}, 23).to_vector();
  std::vector<float> q(qd.begin(), qd.end()), k(kd.begin(), kd.end()), v(vd.begin(), vd.end());
  k[11 * D + 5] = kNan;  // kv head 0, key 11: query heads 0 and 1
  for (auto isa : testing::available_isas()) {
    kernels::cpu::force_isa(isa);
    std::vector<float> o(static_cast<std::size_t>(B * H * D), 777.f);
    kernels::cpu::DecodeAttnArgs a;
    a.q = q.data(), a.k = k.data(), a.v = v.data(), a.o = o.data();
    a.B = B, a.H = H, a.Hkv = Hkv, a.L = L, a.D = D;
    a.sqb = H * D, a.sqh = D, a.skb = a.svb = Hkv * L * D, a.skh = a.svh = L * D, a.skl = a.svl = D;
    a.sob = H * D, a.soh = D;
    a.scale = 0.2f;
    kernels::cpu::decode_attention(a);
    for (int64_t h = 0; h < H; ++h)
      for (int64_t d = 0; d < D; ++d)
        ASSERT_EQ(std::isnan(o[h * D + d]), h < 2) << kernels::cpu::isa_str(isa) << " h " << h << " d " << d;
  }
  kernels::cpu::force_isa(std::nullopt);
}

TEST(GroupDecodeAttentionNan, MatchesReferenceNanPatternOnEveryIsa) {
  const int64_t G = 3, Lk = 50, D = 64;
  const Tensor q = testing::random_uniform({G, D}, 31);
  Tensor k = testing::random_uniform({Lk, D}, 32);
  const Tensor v = testing::random_uniform({Lk, D}, 33);
  k.data<float>()[17 * D + 2] = kNan;
  for (auto isa : testing::available_isas()) {
    kernels::cpu::force_isa(isa);
    Tensor out = Tensor::full({G, D}, 777.0), ref = Tensor::zeros({G, D});
    std::vector<float> scratch(G * Lk, 0.f);
    kernels::cpu::group_decode_attention(q.data<float>(), G, k.data<float>(), v.data<float>(), D, Lk, D,
                                         0.125f, scratch.data(), out.data<float>());
    kernels::ref::group_decode_attention(q.data<float>(), G, k.data<float>(), v.data<float>(), D, Lk, D,
                                         0.125f, ref.data<float>());
    for (int64_t x = 0; x < G * D; ++x) {
      ASSERT_TRUE(std::isnan(ref.data<float>()[x])) << "the reference propagates NaN";
      ASSERT_TRUE(std::isnan(out.data<float>()[x])) << kernels::cpu::isa_str(isa) << " element " << x;
    }
  }
  kernels::cpu::force_isa(std::nullopt);
}

}  // namespace
}  // namespace attn
