// The fused CPU attention backward against the reference backward computed in
// fp64 from the same seeded inputs. out and lse come from the fp64 reference
// forward (rounded to f32), so only the backward is under test.
#include <attn/core/parallel.h>
#include <attn/ops/attention.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <tuple>

#include "kernels/cpu/isa.h"
#include "testing/testing.h"
#include "testing/tolerances.h"

namespace attn {
namespace {

using testing::random_mask;
using testing::random_uniform;

// Forces an instruction set ("scalar", "avx2", "avx512"; nullptr = automatic)
// for the lifetime of the guard.
class IsaGuard {
 public:
  explicit IsaGuard(const char* isa) {
    if (!isa) return;
    using kernels::cpu::Isa;
    kernels::cpu::force_isa(std::strcmp(isa, "scalar") == 0 ? Isa::scalar
                            : std::strcmp(isa, "avx2") == 0 ? Isa::avx2
                                                            : Isa::avx512);
  }
  ~IsaGuard() { kernels::cpu::force_isa(std::nullopt); }
};

// Restores the thread count after a test changes it.
class ThreadsGuard {
 public:
  explicit ThreadsGuard(int n) : old_(num_threads()) { set_num_threads(n); }
  ~ThreadsGuard() { set_num_threads(old_); }

 private:
  int old_;
};

enum class Layout {
  contiguous,
  transposed,  // [B, L, H, D] storage viewed as [B, H, L, D]: strided rows, unit last dim
  strided_d,   // every other element of the last dim: the front-end packs it
};

struct BwdCase {
  std::string name;
  int64_t B, H, Hkv, Lq, Lk, D;
  AttentionOptions opt;
  int threads = 2;
  const char* isa = nullptr;  // ATTN_ISA for the fused call (nullptr: unchanged)
  Layout layout = Layout::contiguous;
  double range = 1.0;  // inputs uniform in [-range, range)
};

void PrintTo(const BwdCase& c, std::ostream* os) { *os << c.name; }

// A seeded f32 tensor of logical shape [n0, n1, n2, n3] stored in `layout`.
Tensor make_input(int64_t n0, int64_t n1, int64_t n2, int64_t n3, uint64_t seed, double range,
                  Layout layout) {
  switch (layout) {
    case Layout::contiguous:
      return random_uniform({n0, n1, n2, n3}, seed, -range, range);
    case Layout::transposed:
      return random_uniform({n0, n2, n1, n3}, seed, -range, range).transpose(1, 2);
    case Layout::strided_d:
      return random_uniform({n0, n1, n2, 2 * n3}, seed, -range, range).slice(3, 0, 2 * n3, 2);
  }
  return {};
}

Tensor to_layout(const Tensor& t, Layout layout) {
  if (layout == Layout::contiguous) return t;
  Tensor x = make_input(t.size(0), t.size(1), t.size(2), t.size(3), 0, 1.0, layout);
  x.copy_from(t);
  return x;
}

struct Grads {
  AttentionGrads fused, ref;
};

Grads run_case(const BwdCase& c) {
  Tensor q = make_input(c.B, c.H, c.Lq, c.D, 11, c.range, c.layout);
  Tensor k = make_input(c.B, c.Hkv, c.Lk, c.D, 12, c.range, c.layout);
  Tensor v = make_input(c.B, c.Hkv, c.Lk, c.D, 13, 1.0, c.layout);
  Tensor dout = make_input(c.B, c.H, c.Lq, c.D, 14, 1.0, c.layout);
  AttentionOptions ro = c.opt;
  ro.backend = Backend::reference;
  const Tensor q64 = q.to(DType::f64), k64 = k.to(DType::f64), v64 = v.to(DType::f64);
  const Tensor dout64 = dout.to(DType::f64);
  const AttentionResult r = attention(q64, k64, v64, ro);
  Grads g;
  g.ref = attention_backward(q64, k64, v64, r.out, r.lse, dout64, ro);

  AttentionOptions fo = c.opt;
  fo.backend = Backend::fused;
  const Tensor out = to_layout(r.out.to(DType::f32), c.layout);
  const Tensor lse = r.lse.to(DType::f32);
  ThreadsGuard threads(c.threads);
  IsaGuard isa(c.isa);
  g.fused = attention_backward(q, k, v, out, lse, dout, fo);
  return g;
}

class FusedBackward : public ::testing::TestWithParam<BwdCase> {};

TEST_P(FusedBackward, MatchesReferenceInDouble) {
  const BwdCase& c = GetParam();
  if (c.isa && std::strcmp(c.isa, "avx512") == 0 && !kernels::cpu::isa_available(kernels::cpu::Isa::avx512))
    GTEST_SKIP() << "this CPU has no AVX-512";
  const Grads g = run_case(c);
  EXPECT_EQ(g.fused.dq.dtype(), DType::f32);
  EXPECT_ALL_CLOSE(g.fused.dq, g.ref.dq, testing::tol::kFusedBackward) << "dq";
  EXPECT_ALL_CLOSE(g.fused.dk, g.ref.dk, testing::tol::kFusedBackward) << "dk";
  EXPECT_ALL_CLOSE(g.fused.dv, g.ref.dv, testing::tol::kFusedBackward) << "dv";
  // The comparison must not pass on all-zero gradients by accident: every case
  // has at least one row that attends somewhere.
  double mx = 0;
  for (double x : g.ref.dv.to_vector()) mx = std::max(mx, std::abs(x));
  EXPECT_GT(mx, 0.0) << "case has no gradient at all";
}

BwdCase base(std::string name, int64_t B, int64_t H, int64_t Hkv, int64_t Lq, int64_t Lk, int64_t D) {
  BwdCase c;
  c.name = std::move(name);
  c.B = B, c.H = H, c.Hkv = Hkv, c.Lq = Lq, c.Lk = Lk, c.D = D;
  return c;
}

std::vector<BwdCase> cases() {
  std::vector<BwdCase> cs;
  // Head sizes off the SIMD width, tiles crossing the 64-row/64-key boundaries.
  for (int64_t d : {1, 7, 33, 64, 80, 128})
    cs.push_back(base(std::string("d").append(std::to_string(d)), 2, 2, 2, 70, 130, d));
  cs.push_back(base("size_one", 1, 1, 1, 1, 1, 1));
  cs.push_back(base("lq_gt_lk", 1, 2, 1, 150, 40, 16));
  cs.push_back(base("lq_lt_lk", 1, 2, 1, 40, 150, 16));
  cs.push_back(base("lq_one", 2, 2, 2, 1, 200, 32));
  cs.push_back(base("lk_one", 1, 2, 2, 9, 1, 32));
  cs.push_back(base("gqa2", 1, 4, 2, 50, 70, 24));
  cs.push_back(base("gqa4", 2, 8, 2, 33, 65, 16));
  cs.push_back(base("gqa8", 1, 8, 1, 40, 64, 16));
  cs.push_back(base("mqa", 2, 6, 1, 65, 66, 20));
  {
    BwdCase c = base("causal_top_left", 1, 2, 2, 150, 150, 32);
    c.opt.causal = true;
    cs.push_back(c);
    c = base("causal_top_left_lq_lt_lk", 1, 2, 1, 70, 200, 16);
    c.opt.causal = true;
    cs.push_back(c);
    c = base("causal_bottom_right_lq_lt_lk", 1, 2, 1, 70, 200, 16);
    c.opt.causal = true;
    c.opt.align = Align::bottom_right;
    cs.push_back(c);
    // Lq > Lk bottom-right: the first Lq − Lk rows see nothing (fully masked).
    c = base("causal_bottom_right_lq_gt_lk", 1, 2, 2, 200, 70, 16);
    c.opt.causal = true;
    c.opt.align = Align::bottom_right;
    cs.push_back(c);
    c = base("causal_top_left_lq_gt_lk", 2, 2, 1, 200, 70, 16);
    c.opt.causal = true;
    cs.push_back(c);
  }
  {
    BwdCase c = base("window_left", 1, 2, 2, 160, 160, 16);
    c.opt.window_left = 20;
    cs.push_back(c);
    c = base("window_both", 1, 2, 2, 160, 190, 16);
    c.opt.window_left = 70;
    c.opt.window_right = 5;
    cs.push_back(c);
    c = base("window_causal_bottom_right", 2, 2, 1, 90, 200, 16);
    c.opt.causal = true;
    c.opt.align = Align::bottom_right;
    c.opt.window_left = 33;
    cs.push_back(c);
    c = base("window_zero", 1, 1, 1, 70, 70, 8);  // each row sees only its diagonal key
    c.opt.window_left = 0;
    c.opt.window_right = 0;
    cs.push_back(c);
  }
  {
    BwdCase c = base("key_lengths", 3, 2, 2, 70, 130, 16);
    c.opt.key_lengths = {0, 37, 130};
    cs.push_back(c);
    c = base("key_lengths_causal", 2, 4, 2, 100, 100, 16);
    c.opt.key_lengths = {64, 1};
    c.opt.causal = true;
    cs.push_back(c);
  }
  {
    BwdCase c = base("allow_full", 2, 2, 1, 70, 80, 16);
    c.opt.allow = random_mask({2, 2, 70, 80}, 31, 0.6);
    cs.push_back(c);
    c = base("allow_broadcast_lq_lk", 2, 2, 2, 70, 80, 16);
    c.opt.allow = random_mask({70, 80}, 32, 0.5);
    cs.push_back(c);
    c = base("allow_key_padding", 2, 2, 2, 30, 100, 16);  // [B, 1, 1, Lk]
    c.opt.allow = random_mask({2, 1, 1, 100}, 33, 0.7);
    cs.push_back(c);
    c = base("allow_per_row", 1, 2, 2, 40, 70, 16);  // [B, H, Lq, 1]: key stride 0
    c.opt.allow = random_mask({1, 2, 40, 1}, 34, 0.5);
    cs.push_back(c);
    c = base("allow_key_strided", 1, 2, 2, 40, 70, 16);  // non-unit key stride
    c.opt.allow = random_mask({1, 2, 70, 40}, 35, 0.6).transpose(2, 3);
    cs.push_back(c);
    c = base("fully_masked_rows", 1, 2, 2, 50, 60, 16);
    c.opt.allow = random_mask({1, 2, 50, 60}, 36, 0.8);
    for (int64_t h = 0; h < 2; ++h)
      for (int64_t i : {0, 7, 49})
        for (int64_t j = 0; j < 60; ++j) c.opt.allow.set({0, h, i, j}, 0);
    cs.push_back(c);
  }
  {
    BwdCase c = base("bias_full", 1, 2, 2, 70, 80, 16);
    c.opt.bias = random_uniform({1, 2, 70, 80}, 41, -2, 2);
    cs.push_back(c);
    c = base("bias_broadcast_keys", 2, 4, 2, 30, 90, 16);  // [Lk]
    c.opt.bias = random_uniform({90}, 42, -2, 2);
    cs.push_back(c);
    c = base("bias_per_row", 1, 2, 1, 40, 70, 16);  // [Lq, 1]: key stride 0
    c.opt.bias = random_uniform({40, 1}, 43, -2, 2);
    cs.push_back(c);
    c = base("bias_key_strided", 1, 2, 2, 40, 70, 16);
    c.opt.bias = random_uniform({1, 2, 70, 40}, 44, -2, 2).transpose(2, 3);
    cs.push_back(c);
    c = base("bias_minus_inf", 1, 2, 2, 40, 70, 16);  // −inf masks, including whole rows
    c.opt.bias = random_uniform({1, 1, 40, 70}, 45, -1, 1);
    for (int64_t i = 0; i < 40; ++i)
      for (int64_t j = 0; j < 70; ++j)
        if ((i * 7 + j) % 5 == 0 || i == 3)
          c.opt.bias.set({0, 0, i, j}, -std::numeric_limits<double>::infinity());
    cs.push_back(c);
    c = base("allow_and_bias_causal", 2, 2, 1, 70, 70, 16);
    c.opt.allow = random_mask({2, 1, 70, 70}, 46, 0.7);
    c.opt.bias = random_uniform({2, 2, 1, 70}, 47, -1, 1);
    c.opt.causal = true;
    cs.push_back(c);
  }
  {
    // Logits of typical magnitude ~200 (up to ~3e3): exp(s) alone would
    // overflow fp32; P = exp(s − lse) must not.
    BwdCase c = base("huge_logits", 1, 2, 2, 40, 70, 32);
    c.range = 10.0;
    c.opt.scale = 1.0;
    cs.push_back(c);
  }
  {
    BwdCase c = base("dropout", 2, 2, 2, 70, 90, 16);
    c.opt.dropout_p = 0.2;
    c.opt.dropout_seed = 1234;
    cs.push_back(c);
    c = base("dropout_gqa_causal_bias", 1, 4, 2, 80, 80, 16);
    c.opt.dropout_p = 0.5;
    c.opt.dropout_seed = 99;
    c.opt.causal = true;
    c.opt.bias = random_uniform({80, 80}, 48, -1, 1);
    cs.push_back(c);
  }
  {
    BwdCase c = base("softcap", 1, 2, 2, 70, 80, 32);
    c.opt.softcap = 2.0;
    c.opt.scale = 1.5;
    cs.push_back(c);
    c = base("softcap_bias_window", 1, 2, 1, 70, 80, 16);
    c.opt.softcap = 0.7;
    c.opt.bias = random_uniform({1, 2, 70, 80}, 49, -1, 1);
    c.opt.window_left = 10;
    c.opt.window_right = 10;
    cs.push_back(c);
  }
  {
    BwdCase c = base("noncontiguous_transposed", 2, 4, 2, 70, 90, 24);
    c.layout = Layout::transposed;
    c.opt.causal = true;
    cs.push_back(c);
    c = base("noncontiguous_strided_d", 1, 2, 2, 40, 70, 20);
    c.layout = Layout::strided_d;
    cs.push_back(c);
  }
  // Thread counts. With B·Hkv = 1 < threads the kernel splits each unit: by
  // key range when dQ is the smaller partial buffer (the *_split cases:
  // H·Lq < 2·Lk), by query heads when dK + dV is (the *_heads cases).
  for (int t = 1; t <= 4; ++t) {
    BwdCase h = base("threads" + std::to_string(t) + "_heads", 1, 6, 1, 100, 130, 16);
    h.threads = t;
    h.opt.causal = t % 2 == 1;
    cs.push_back(h);
    BwdCase c = base("threads" + std::to_string(t) + "_split", 1, 2, 1, 150, 300, 16);
    c.threads = t;
    c.opt.causal = t % 2 == 0;
    cs.push_back(c);
    c = base("threads" + std::to_string(t) + "_units", 3, 3, 3, 70, 90, 16);
    c.threads = t;
    cs.push_back(c);
  }
  // The scalar and AVX2 tiles, forced through ATTN_ISA (the cases above run the
  // tile of this CPU's ISA; CI runs the suite again under ATTN_ISA=avx2).
  {
    BwdCase c = base("scalar_d33", 2, 2, 2, 70, 130, 33);
    c.isa = "scalar";
    cs.push_back(c);
    c = base("scalar_everything", 2, 4, 2, 70, 90, 16);
    c.isa = "scalar";
    c.opt.causal = true;
    c.opt.align = Align::bottom_right;
    c.opt.allow = random_mask({2, 1, 70, 90}, 51, 0.8);
    c.opt.bias = random_uniform({90}, 52, -1, 1);
    c.opt.softcap = 1.0;
    c.opt.dropout_p = 0.3;
    c.opt.dropout_seed = 5;
    c.opt.key_lengths = {90, 40};
    cs.push_back(c);
    c = base("avx2_request_split", 1, 2, 1, 100, 200, 16);
    c.isa = "avx2";
    c.threads = 3;
    cs.push_back(c);
    c = base("avx512_everything", 2, 4, 2, 70, 90, 16);
    c.isa = "avx512";
    c.opt = cs[cs.size() - 2].opt;
    cs.push_back(c);
    c = base("avx2_everything", 2, 4, 2, 70, 90, 16);
    c.isa = "avx2";
    c.opt = cs.back().opt;  // avx512_everything's
    cs.push_back(c);
    c = base("avx2_d33_window_bias_strided", 1, 2, 2, 70, 130, 33);  // D past two 16-float blocks
    c.isa = "avx2";
    c.opt.window_left = 20;
    c.opt.bias = random_uniform({1, 2, 130, 70}, 53, -1, 1).transpose(2, 3);  // a key stride of 70
    cs.push_back(c);
    c = base("avx2_softcap_allow_rows", 1, 2, 1, 70, 80, 64);
    c.isa = "avx2";
    c.opt.softcap = 1.5;
    c.opt.allow = random_mask({1, 1, 70, 1}, 54, 0.7).expand({1, 1, 70, 80});  // allow_c = 0
    c.opt.dropout_p = 0.1;
    c.opt.dropout_seed = 7;
    cs.push_back(c);
  }
  return cs;
}

INSTANTIATE_TEST_SUITE_P(Cases, FusedBackward, ::testing::ValuesIn(cases()),
                         [](const auto& info) { return info.param.name; });

bool bit_identical(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.is_contiguous() && b.is_contiguous() &&
         std::memcmp(a.raw_data(), b.raw_data(), sizeof(float) * a.numel()) == 0;
}

// (threads, query heads). With B = Hkv = 1, H = 1 splits the key range and
// H = 4 splits the query heads when there are several threads.
class FusedBackwardDeterminism : public ::testing::TestWithParam<std::tuple<int, int64_t>> {};

TEST_P(FusedBackwardDeterminism, SameCallTwiceIsBitIdentical) {
  const auto [nthreads, H] = GetParam();
  ThreadsGuard threads(nthreads);
  Tensor q = random_uniform({1, H, 200, 40}, 61);
  Tensor k = random_uniform({1, 1, 260, 40}, 62);
  Tensor v = random_uniform({1, 1, 260, 40}, 63);
  Tensor dout = random_uniform({1, H, 200, 40}, 64);
  AttentionOptions o;
  o.causal = true;
  o.align = Align::bottom_right;
  o.dropout_p = 0.1;
  o.dropout_seed = 3;
  o.backend = Backend::reference;
  const AttentionResult r = attention(q, k, v, o);
  o.backend = Backend::fused;
  const AttentionGrads g1 = attention_backward(q, k, v, r.out, r.lse, dout, o);
  const AttentionGrads g2 = attention_backward(q, k, v, r.out, r.lse, dout, o);
  EXPECT_TRUE(bit_identical(g1.dq, g2.dq));
  EXPECT_TRUE(bit_identical(g1.dk, g2.dk));
  EXPECT_TRUE(bit_identical(g1.dv, g2.dv));
}

INSTANTIATE_TEST_SUITE_P(Threads, FusedBackwardDeterminism,
                         ::testing::Combine(::testing::Values(1, 2, 3, 4), ::testing::Values(1, 4)));

TEST(FusedBackwardIsa, FullyMaskedRowsGiveZeroNotNan) {
  // Every row fully masked through key_lengths = 0: all gradients are exactly 0.
  Tensor q = random_uniform({1, 2, 5, 8}, 81);
  Tensor k = random_uniform({1, 2, 6, 8}, 82);
  AttentionOptions o;
  o.key_lengths = {0};
  o.backend = Backend::fused;
  const AttentionResult r = attention(q, k, k, o);
  const AttentionGrads g = attention_backward(q, k, k, r.out, r.lse, q, o);
  for (const Tensor* t : {&g.dq, &g.dk, &g.dv})
    for (double x : t->to_vector()) ASSERT_EQ(x, 0.0);
}

}  // namespace
}  // namespace attn
