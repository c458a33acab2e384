// Strided tensors through the attention operator, the layouts a framework hands over: q, k, v and
// dout as [B, L, H, D] buffers seen through transpose(1, 2) (what torch's SDPA receives from a
// fused QKV projection), and attention_into writing the output into such a view. Every layout is
// checked against the plain reference on contiguous copies, in both backends, with the options
// that change the kernel's row loop (causal, GQA, split keys at Lq = 1, captured weights), and the
// memory around a strided output must stay untouched.
#include <attn/ops/attention.h>

#include <cmath>
#include <cstring>
#include <ostream>
#include <string>
#include <vector>

#include "testing/testing.h"
#include "testing/tolerances.h"

namespace attn {
namespace {

using testing::random_uniform;
using testing::tol::kFusedBackward;
using testing::tol::kFusedForward;

// [B, H, L, D] seen through a [B, L, H, D] buffer (transpose(1, 2)).
Tensor transposed_view(const Tensor& x) { return x.transpose(1, 2).contiguous().transpose(1, 2); }

// [B, L, 3, H, D] packed buffer and q, k, v as its slices (the fused QKV projection's layout).
struct Packed {
  Tensor q, k, v;
};
Packed packed_qkv(int64_t B, int64_t H, int64_t L, int64_t D, uint64_t seed) {
  const Tensor buf = random_uniform({B, L, 3, H, D}, seed);
  const Tensor p = buf.permute({2, 0, 3, 1, 4});  // [3, B, H, L, D]
  return {p.select(0, 0), p.select(0, 1), p.select(0, 2)};
}

struct Case {
  std::string name;
  int64_t B, H, Hkv, Lq, Lk, D;
  bool causal;
  bool capture;
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

std::vector<Case> cases() {
  return {{"mha", 2, 4, 4, 37, 37, 16, false, false},  {"causal", 2, 3, 3, 70, 70, 64, true, false},
          {"gqa", 1, 8, 2, 19, 33, 32, true, false},   {"decode_rows", 2, 4, 4, 1, 300, 64, false, false},
          {"capture", 1, 2, 2, 9, 11, 8, false, true}, {"odd_d", 3, 2, 1, 13, 17, 7, true, false}};
}

AttentionOptions options(const Case& c, Backend be) {
  AttentionOptions o;
  o.causal = c.causal;
  o.backend = be;
  o.capture.enabled = c.capture;
  return o;
}

class AttentionStrided : public ::testing::TestWithParam<Case> {};

TEST_P(AttentionStrided, TransposedInputsAndOutputMatchTheReference) {
  const Case& c = GetParam();
  const Tensor q = random_uniform({c.B, c.H, c.Lq, c.D}, 11), k = random_uniform({c.B, c.Hkv, c.Lk, c.D}, 12),
               v = random_uniform({c.B, c.Hkv, c.Lk, c.D}, 13);
  const AttentionResult want = attention(q, k, v, options(c, Backend::reference));
  const Tensor tq = transposed_view(q), tk = transposed_view(k), tv = transposed_view(v);
  ASSERT_FALSE(tq.is_contiguous() && tk.is_contiguous());
  for (Backend be : {Backend::fused, Backend::reference}) {
    SCOPED_TRACE(backend_name(be));
    // Strided inputs, allocated output.
    const AttentionResult a = attention(tq, tk, tv, options(c, be));
    EXPECT_ALL_CLOSE(a.out, want.out, kFusedForward);
    EXPECT_ALL_CLOSE(a.lse, want.lse, kFusedForward);
    // Strided inputs, output written into a [B, Lq, H, D] buffer with a guard band around it.
    const int64_t n = c.B * c.Lq * c.H * c.D, guard = 64;
    Tensor buf = Tensor::full({n + 2 * guard}, 12345.0);
    const Tensor out = buf.slice(0, guard, guard + n).reshape({c.B, c.Lq, c.H, c.D}).transpose(1, 2);
    const AttentionResult b = attention_into(tq, tk, tv, out, options(c, be));
    EXPECT_EQ(b.out.data<float>(), out.data<float>()) << "attention_into did not return the caller's tensor";
    EXPECT_ALL_CLOSE(out, want.out, kFusedForward);
    EXPECT_ALL_CLOSE(b.lse, want.lse, kFusedForward);
    if (c.capture) {
      EXPECT_ALL_CLOSE(b.weights, want.weights, testing::tol::kWeights);
    }
    const float* p = buf.data<float>();
    for (int64_t i = 0; i < guard; ++i) {
      ASSERT_EQ(p[i], 12345.f) << "wrote before the output at " << i;
      ASSERT_EQ(p[guard + n + i], 12345.f) << "wrote after the output at " << i;
    }
  }
}

TEST_P(AttentionStrided, BackwardOnPackedAndTransposedTensorsMatchesTheReference) {
  const Case& c = GetParam();
  if (c.capture) GTEST_SKIP() << "weights are not part of the backward";
  const Tensor q = random_uniform({c.B, c.H, c.Lq, c.D}, 21), k = random_uniform({c.B, c.Hkv, c.Lk, c.D}, 22),
               v = random_uniform({c.B, c.Hkv, c.Lk, c.D}, 23),
               dout = random_uniform({c.B, c.H, c.Lq, c.D}, 24);
  const AttentionOptions ref = options(c, Backend::reference);
  const AttentionResult f = attention(q, k, v, ref);
  const AttentionGrads want = attention_backward(q, k, v, f.out, f.lse, dout, ref);
  for (Backend be : {Backend::fused, Backend::reference}) {
    SCOPED_TRACE(backend_name(be));
    const AttentionOptions o = options(c, be);
    const Tensor tq = transposed_view(q), tk = transposed_view(k), tv = transposed_view(v);
    const Tensor out = transposed_view(f.out), tdout = transposed_view(dout);
    const AttentionGrads g = attention_backward(tq, tk, tv, out, f.lse, tdout, o);
    EXPECT_ALL_CLOSE(g.dq, want.dq, kFusedBackward);
    EXPECT_ALL_CLOSE(g.dk, want.dk, kFusedBackward);
    EXPECT_ALL_CLOSE(g.dv, want.dv, kFusedBackward);
  }
}

INSTANTIATE_TEST_SUITE_P(Layouts, AttentionStrided, ::testing::ValuesIn(cases()),
                         [](const auto& info) { return info.param.name; });

TEST(AttentionStridedPacked, QkvSlicesOfOneProjectionAndOutputIntoTheMergedHeads) {
  const int64_t B = 2, H = 4, L = 48, D = 32;
  const Packed p = packed_qkv(B, H, L, D, 5);
  ASSERT_FALSE(p.q.is_contiguous());
  AttentionOptions o;
  o.causal = true;
  AttentionOptions ref = o;
  ref.backend = Backend::reference;
  const Tensor q = p.q.contiguous(), k = p.k.contiguous(), v = p.v.contiguous();
  const AttentionResult want = attention(q, k, v, ref);
  // The output as the [B, L, H·D] input of the output projection.
  Tensor merged = Tensor::zeros({B, L, H * D});
  const Tensor out = merged.reshape({B, L, H, D}).transpose(1, 2);
  attention_into(p.q, p.k, p.v, out, o);
  EXPECT_ALL_CLOSE(out, want.out, kFusedForward);
  const Tensor dout = transposed_view(random_uniform({B, H, L, D}, 6));
  const AttentionGrads g = attention_backward(p.q, p.k, p.v, out, want.lse, dout, o);
  const AttentionGrads w = attention_backward(q, k, v, want.out, want.lse, dout.contiguous(), ref);
  EXPECT_ALL_CLOSE(g.dq, w.dq, kFusedBackward);
  EXPECT_ALL_CLOSE(g.dk, w.dk, kFusedBackward);
  EXPECT_ALL_CLOSE(g.dv, w.dv, kFusedBackward);
}

TEST(AttentionStridedPacked, F64IntoAStridedOutput) {
  const Tensor q = random_uniform({1, 2, 5, 4}, 1, -1, 1, DType::f64),
               k = random_uniform({1, 2, 6, 4}, 2, -1, 1, DType::f64);
  const AttentionResult want = attention(q, k, k);
  const Tensor out = Tensor::zeros({1, 5, 2, 4}, DType::f64).transpose(1, 2);
  attention_into(q, k, k, out);
  EXPECT_ALL_CLOSE(out, want.out, testing::tol::kTorchParityF64);
}

TEST(AttentionStridedPacked, BadOutputsAreRejected) {
  const Tensor q = random_uniform({2, 4, 5, 8}, 1), k = random_uniform({2, 2, 6, 8}, 2);
  EXPECT_ERROR_CONTAINS(attention_into(q, k, k, Tensor::zeros({2, 4, 5, 7})),
                        {"attention_into", "[2, 4, 5, 8]", "[2, 4, 5, 7]"});
  EXPECT_ERROR_CONTAINS(attention_into(q, k, k, Tensor::zeros({2, 4, 5, 8}, DType::f64)),
                        {"attention_into", "f32", "f64"});
  EXPECT_ERROR_CONTAINS(attention_into(q, k, k, Tensor::zeros({1, 4, 5, 8}).expand({2, 4, 5, 8})),
                        {"attention_into", "overlap"});
  EXPECT_ERROR_CONTAINS(attention_into(q, k, k, Tensor::zeros({2, 4, 8, 5}).transpose(2, 3)),
                        {"attention_into", "unit stride in D"});
  EXPECT_ERROR_CONTAINS(attention_into(q, k, k, Tensor()), {"attention_into", "undefined"});
}

}  // namespace
}  // namespace attn
