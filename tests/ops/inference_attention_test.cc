// The inference-only attention entry points (include/attn/ops/inference.h) against attn::attention
// with Backend::reference (in double, from the same seeded inputs), and their validation errors.
// Table-driven: sizes off the SIMD width, D = 1, GQA, per-row key lengths, strided (cache-like) views.
#include <attn/core/f16.h>
#include <attn/ops/attention.h>
#include <attn/ops/inference.h>

#include <cmath>
#include <string>
#include <vector>

#include "testing/testing.h"

namespace attn {
namespace {

// attn::attention in double on the reference backend: out [B, H, Lq, D] f64.
Tensor reference(const Tensor& q, const Tensor& k, const Tensor& v,
                 const std::vector<int64_t>& lengths = {}) {
  AttentionOptions o;
  o.backend = Backend::reference;
  o.key_lengths = lengths;
  return attention(q.to(DType::f64), k.to(DType::f64), v.to(DType::f64), o).out;
}

// ---- ops::decode_attention ------------------------------------------------------------------------

struct DecodeCase {
  std::string name;
  int64_t B, H, Hkv, L, D;
  std::vector<int64_t> lengths;  // empty: all L
  int64_t cap;                   // rows per head of the cache buffer (>= L): k, v are views of it
};
void PrintTo(const DecodeCase& c, std::ostream* os) { *os << c.name; }

class DecodeAttention : public ::testing::TestWithParam<DecodeCase> {};

TEST_P(DecodeAttention, MatchesReferenceAttention) {
  const DecodeCase& c = GetParam();
  const Tensor q = testing::random_uniform({c.B, c.H, 1, c.D}, 11);
  const Tensor kbuf = testing::random_uniform({c.B, c.Hkv, c.cap, c.D}, 12, -2, 2);
  const Tensor vbuf = testing::random_uniform({c.B, c.Hkv, c.cap, c.D}, 13);
  const Tensor k = kbuf.slice(2, 0, c.L), v = vbuf.slice(2, 0, c.L);  // strided like a KV cache
  ASSERT_TRUE(ops::decode_attention_applies(q, k, v, c.lengths));
  const Tensor o = ops::decode_attention(q, k, v, c.lengths);  // [B, 1, H·D]
  ASSERT_EQ(o.shape(), Shape({c.B, 1, c.H * c.D}));
  const Tensor want = reference(q, k, v, c.lengths).permute({0, 2, 1, 3}).reshape({c.B, 1, c.H * c.D});
  EXPECT_ALL_CLOSE(o.to(DType::f64), want, (testing::Tolerance{2e-5, 2e-5}));
}

INSTANTIATE_TEST_SUITE_P(Cases, DecodeAttention,
                         ::testing::Values(DecodeCase{"one_key", 1, 1, 1, 1, 16, {}, 1},
                                           DecodeCase{"d1", 2, 2, 1, 5, 1, {}, 8},
                                           DecodeCase{"d17_tail", 1, 2, 2, 9, 17, {}, 12},
                                           DecodeCase{"gqa_lengths", 3, 6, 2, 21, 32, {21, 1, 13}, 32},
                                           DecodeCase{"d160_long", 1, 4, 4, 130, 160, {}, 140}),
                         [](const auto& info) { return info.param.name; });

TEST(DecodeAttentionErrors, NameTheProblem) {
  const Tensor q = testing::random_uniform({2, 4, 1, 8}, 1);
  const Tensor k = testing::random_uniform({2, 2, 5, 8}, 2);
  EXPECT_FALSE(ops::decode_attention_applies(q, k, k, {6, 1}));
  EXPECT_ERROR_CONTAINS(ops::decode_attention(q, k, k, {6, 1}), {"key_lengths[0]", "[1, 5]", "got 6"});
  EXPECT_ERROR_CONTAINS(ops::decode_attention(q, k, k, {3}), {"expected 2 key lengths", "got 1"});
  EXPECT_ERROR_CONTAINS(ops::decode_attention(testing::random_uniform({2, 4, 2, 8}, 3), k, k),
                        {"q must be [B, H, 1, D]", "[2, 4, 2, 8]"});
  EXPECT_ERROR_CONTAINS(ops::decode_attention(testing::random_uniform({2, 3, 1, 8}, 3), k, k),
                        {"H (3)", "multiple of Hkv (2)"});
  EXPECT_ERROR_CONTAINS(ops::decode_attention(q, testing::random_uniform({2, 2, 5, 4}, 4), k),
                        {"k and v must be [2, Hkv, L >= 1, 8]"});
  EXPECT_ERROR_CONTAINS(ops::decode_attention(q.to(DType::f64), k, k), {"must be f32", "f64"});
  EXPECT_ERROR_CONTAINS(ops::decode_attention(q, k.transpose(2, 3).contiguous().transpose(2, 3), k),
                        {"unit stride along D"});
}

// ---- ops::group_decode_attention (f32 and f16 caches) ----------------------------------------------

struct GroupCase {
  std::string name;
  int64_t G, Lk, D, ldk;
};
void PrintTo(const GroupCase& c, std::ostream* os) { *os << c.name; }

class GroupDecodeAttention : public ::testing::TestWithParam<GroupCase> {};

TEST_P(GroupDecodeAttention, MatchesReferenceAttentionF32AndF16) {
  const GroupCase& c = GetParam();
  const float scale = 1.0f / std::sqrt(static_cast<float>(c.D));
  const Tensor q = testing::random_uniform({1, c.G, 1, c.D}, 21);               // [1, G, 1, D] = [G, D]
  const Tensor kbuf = testing::random_uniform({1, 1, c.Lk, c.ldk}, 22, -2, 2);  // rows ldk apart
  const Tensor vbuf = testing::random_uniform({1, 1, c.Lk, c.ldk}, 23);
  const Tensor k = kbuf.slice(3, 0, c.D), v = vbuf.slice(3, 0, c.D);
  std::vector<float> scratch(static_cast<std::size_t>(c.G * c.Lk)), out(static_cast<std::size_t>(c.G * c.D));
  ops::group_decode_attention(q.data<float>(), c.G, kbuf.data<float>(), vbuf.data<float>(), c.ldk, c.Lk, c.D,
                              scale, scratch.data(), out.data());
  const Tensor want = reference(q, k, v);  // [1, G, 1, D]
  EXPECT_ALL_CLOSE(Tensor::from(out, {1, c.G, 1, c.D}).to(DType::f64), want,
                   (testing::Tolerance{2e-5, 2e-5}));

  // The f16 cache: the oracle reads the same values rounded to half.
  std::vector<uint16_t> k16(static_cast<std::size_t>(c.Lk * c.ldk)), v16(k16.size());
  ops::store_f16(kbuf.data<float>(), c.Lk * c.ldk, k16.data());
  ops::store_f16(vbuf.data<float>(), c.Lk * c.ldk, v16.data());
  const Tensor kh = kbuf.clone(), vh = vbuf.clone();
  for (int64_t i = 0; i < c.Lk * c.ldk; ++i) {
    kh.data<float>()[i] = round_to_f16(kh.data<float>()[i]);
    vh.data<float>()[i] = round_to_f16(vh.data<float>()[i]);
  }
  ops::group_decode_attention_f16(q.data<float>(), c.G, k16.data(), v16.data(), c.ldk, c.Lk, c.D, scale,
                                  scratch.data(), out.data());
  const Tensor want16 = reference(q, kh.slice(3, 0, c.D), vh.slice(3, 0, c.D));
  EXPECT_ALL_CLOSE(Tensor::from(out, {1, c.G, 1, c.D}).to(DType::f64), want16,
                   (testing::Tolerance{2e-5, 2e-5}));
}

INSTANTIATE_TEST_SUITE_P(Cases, GroupDecodeAttention,
                         ::testing::Values(GroupCase{"one_key", 1, 1, 16, 16}, GroupCase{"d1", 2, 7, 1, 1},
                                           GroupCase{"d20_strided", 3, 19, 20, 27},
                                           GroupCase{"smollm2_like", 3, 70, 64, 64},
                                           GroupCase{"long", 4, 300, 32, 48}),
                         [](const auto& info) { return info.param.name; });

TEST(GroupDecodeAttentionErrors, NameTheProblem) {
  std::vector<float> buf(256, 0.5f);
  std::vector<uint16_t> h(256, 0);
  float* p = buf.data();
  EXPECT_ERROR_CONTAINS(ops::group_decode_attention(p, 2, p, p, 4, 3, 8, 1.0f, p, p),
                        {"ldk", ">= D = 8", "got 4"});
  EXPECT_ERROR_CONTAINS(ops::group_decode_attention(p, 0, p, p, 8, 3, 8, 1.0f, p, p), {"G, Lk and D", "G 0"});
  EXPECT_ERROR_CONTAINS(ops::group_decode_attention(p, 1, p, p, 8, 0, 8, 1.0f, p, p), {"Lk 0"});
  EXPECT_ERROR_CONTAINS(ops::group_decode_attention(p, 1, nullptr, p, 8, 2, 8, 1.0f, p, p), {"non-null"});
  EXPECT_ERROR_CONTAINS(ops::group_decode_attention_f16(p, 1, h.data(), h.data(), 8, 2, 8, 1.0f, nullptr, p),
                        {"group_decode_attention_f16", "non-null"});
  EXPECT_ERROR_CONTAINS(ops::store_f16(p, -1, h.data()), {"store_f16", "got n -1"});
}

// ---- ops::encoder_attention (the fused-QKV layout, heads merged) ------------------------------------

struct EncoderCase {
  std::string name;
  int64_t B, L, H, D;
  std::vector<int64_t> lengths;
};
void PrintTo(const EncoderCase& c, std::ostream* os) { *os << c.name; }

class EncoderAttention : public ::testing::TestWithParam<EncoderCase> {};

TEST_P(EncoderAttention, MatchesReferenceAttentionOnQkvViews) {
  const EncoderCase& c = GetParam();
  if (!ops::encoder_attention_fast(c.D)) GTEST_SKIP() << "no vectorised encoder attention for D " << c.D;
  const Tensor qkv = testing::random_uniform({c.B, c.L, 3, c.H, c.D}, 31, -2, 2);
  const Tensor ctx = Tensor::full({c.B, c.L, c.H, c.D}, 777.0);
  const float scale = 1.0f / std::sqrt(static_cast<float>(c.D));
  ops::encoder_attention(qkv, c.lengths, ctx, scale);
  const Tensor q = qkv.select(2, 0).permute({0, 2, 1, 3});  // [B, H, L, D]
  const Tensor k = qkv.select(2, 1).permute({0, 2, 1, 3});
  const Tensor v = qkv.select(2, 2).permute({0, 2, 1, 3});
  const Tensor want = reference(q, k, v, c.lengths).permute({0, 2, 1, 3});  // [B, L, H, D]
  EXPECT_ALL_CLOSE(ctx.to(DType::f64), want, (testing::Tolerance{2e-5, 2e-5}));
}

// Rows i < queries only (a last layer read at its first token): the fused kernel gives the same bits as
// the full call's rows; the capturing path (attn::attention, whose tiling depends on the query count) the
// same within f32 rounding, with [B, H, queries, L] probabilities; the rows past them are left as they were.
TEST_P(EncoderAttention, LeadingQueriesAreTheFullCallsRows) {
  const EncoderCase& c = GetParam();
  const Tensor qkv = testing::random_uniform({c.B, c.L, 3, c.H, c.D}, 37, -2, 2);
  const float scale = 1.0f / std::sqrt(static_cast<float>(c.D));
  for (const bool capture : {false, true}) {
    if (!capture && !ops::encoder_attention_fast(c.D)) continue;
    const Tensor full = Tensor::full({c.B, c.L, c.H, c.D}, 777.0);
    const Tensor want_p = ops::encoder_self_attention(qkv, c.lengths, full, scale, capture);
    for (const int64_t nq : {int64_t{1}, std::min<int64_t>(3, c.L), c.L}) {
      const Tensor part = Tensor::full({c.B, c.L, c.H, c.D}, 777.0);
      const Tensor got_p = ops::encoder_self_attention(qkv, c.lengths, part, scale, capture, nq);
      const float* g = part.data<float>();
      const float* w = full.data<float>();
      const int64_t row = c.H * c.D;
      for (int64_t b = 0; b < c.B; ++b)
        for (int64_t l = 0; l < c.L; ++l)
          for (int64_t e = 0; e < row; ++e) {
            const int64_t i = (b * c.L + l) * row + e;
            if (l < nq && !capture)
              ASSERT_EQ(g[i], w[i]) << "queries " << nq << ", b " << b << ", l " << l;
            else if (l < nq)
              ASSERT_NEAR(g[i], w[i], 1e-5) << "capture, queries " << nq << ", b " << b << ", l " << l;
            else
              ASSERT_EQ(g[i], 777.0f) << "row past the queries written: b " << b << ", l " << l;
          }
      if (capture) {
        ASSERT_EQ(got_p.shape(), (std::vector<int64_t>{c.B, c.H, nq, c.L}));
        EXPECT_ALL_CLOSE(got_p, want_p.slice(2, 0, nq).contiguous(), (testing::Tolerance{1e-6, 1e-6}));
      }
    }
  }
  EXPECT_ERROR_CONTAINS(
      ops::encoder_self_attention(qkv, c.lengths, Tensor::zeros({c.B, c.L, c.H, c.D}), scale, false, c.L + 1),
      {"queries must be in [1, " + std::to_string(c.L) + "]"});
}

INSTANTIATE_TEST_SUITE_P(Cases, EncoderAttention,
                         ::testing::Values(EncoderCase{"one_token", 1, 1, 2, 16, {1}},
                                           EncoderCase{"minilm_like", 2, 9, 12, 32, {9, 4}},
                                           EncoderCase{"padded_batch", 3, 17, 2, 64, {17, 1, 10}}),
                         [](const auto& info) { return info.param.name; });

TEST(EncoderAttentionErrors, NameTheProblem) {
  const Tensor qkv = testing::random_uniform({2, 4, 3, 2, 16}, 1);
  const Tensor ctx = Tensor::zeros({2, 4, 2, 16});
  EXPECT_ERROR_CONTAINS(
      ops::encoder_attention(testing::random_uniform({2, 4, 2, 2, 16}, 2), {4, 4}, ctx, 1.0f),
      {"qkv must be a contiguous f32 [B, L, 3, H, D]"});
  EXPECT_ERROR_CONTAINS(ops::encoder_attention(qkv, {4, 4}, Tensor::zeros({2, 4, 32}), 1.0f),
                        {"ctx must be a contiguous f32 [2, 4, 2, 16]"});
  EXPECT_ERROR_CONTAINS(ops::encoder_attention(qkv, {4}, ctx, 1.0f), {"expected 2 lengths", "got 1"});
  EXPECT_ERROR_CONTAINS(ops::encoder_attention(qkv, {4, 0}, ctx, 1.0f), {"lengths[1]", "[1, 4]", "got 0"});
  // No vectorised body for a head size that is not a multiple of 8 (AVX2) or 16 (AVX-512).
  EXPECT_FALSE(ops::encoder_attention_fast(12));
  EXPECT_ERROR_CONTAINS(ops::encoder_attention(testing::random_uniform({1, 2, 3, 1, 12}, 3), {2},
                                               Tensor::zeros({1, 2, 1, 12}), 1.0f),
                        {"no vectorised body for head size 12"});
}

}  // namespace
}  // namespace attn
