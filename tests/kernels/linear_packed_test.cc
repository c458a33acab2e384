// The pre-packed small-M linear (kernels/cpu/linear_packed.h) against a double reference on
// every ISA this CPU runs (the AVX-512, AVX2 and scalar bodies), and ops::inference_linear's
// packed path (include/attn/ops/linear.h): used only inside a PackedWeightScope with grad mode off,
// one pack per weight per scope, repacked by a new scope after the weight changed.
#include "kernels/cpu/linear_packed.h"

#include <attn/core/autograd.h>
#include <attn/core/parallel.h>
#include <attn/ops/basic.h>
#include <attn/ops/linear.h>

#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "kernels/isa_test_util.h"
#include "testing/testing.h"

namespace attn {
namespace {

struct PackedCase {
  std::string name;
  int64_t M, N, K;
  bool with_bias;
  int64_t ldx_pad, ldy_pad;  // extra row stride of x and y
};

std::vector<PackedCase> packed_cases() {
  std::vector<PackedCase> v;
  // Every M from 1 to 48 (all register-block sizes and balanced splits), with a column tail.
  for (int64_t M = 1; M <= 48; ++M) {
    std::string name = "m";
    name += std::to_string(M);
    name += "_n45_k37";
    v.push_back({name, M, 45, 37, M % 2 == 0, M % 3, M % 5});
  }
  v.push_back({"m32_n256_k256", 32, 256, 256, true, 0, 0});
  v.push_back({"m32_n1024_k256_ffn", 32, 1024, 256, true, 0, 0});
  v.push_back({"m32_n256_k1024_ffn2", 32, 256, 1024, true, 0, 0});
  v.push_back({"m32_n1003_k64_vocab_tail", 32, 1003, 64, false, 0, 0});
  v.push_back({"m1_n1_k1", 1, 1, 1, true, 0, 0});
  // One row (decoding at batch 1: its own body, four k per iteration): k tails 1..3, the model's shapes.
  v.push_back({"m1_n70_k5", 1, 70, 5, true, 0, 2});
  v.push_back({"m1_n33_k6", 1, 33, 6, false, 1, 0});
  v.push_back({"m1_n64_k7", 1, 64, 7, true, 0, 0});
  v.push_back({"m1_n256_k256", 1, 256, 256, true, 0, 0});
  v.push_back({"m1_n256_k1024_ffn2", 1, 256, 1024, true, 0, 0});
  v.push_back({"m1_n1003_k256_vocab_tail", 1, 1003, 256, false, 0, 0});
  v.push_back({"m7_n16_k3", 7, 16, 3, false, 2, 1});
  v.push_back({"m13_n17_k1", 13, 17, 1, true, 0, 3});
  v.push_back({"m48_n33_k16", 48, 33, 16, true, 0, 0});
  return v;
}

using LinearPacked = testing::IsaCaseTest<PackedCase>;

TEST_P(LinearPacked, MatchesDoubleReference) {
  const auto& [c, isa] = GetParam();
  kernels::cpu::force_isa(isa);
  const int64_t ldx = c.K + c.ldx_pad, ldy = c.N + c.ldy_pad;
  const std::vector<double> xd = testing::random_uniform({c.M, ldx}, 41, -1.0, 1.0).to_vector();
  const std::vector<double> wd = testing::random_uniform({c.N, c.K}, 42, -0.5, 0.5).to_vector();
  const std::vector<double> bd = testing::random_uniform({c.N}, 43).to_vector();
  std::vector<float> x(xd.begin(), xd.end()), w(wd.begin(), wd.end()), b(bd.begin(), bd.end());
  // x: [M, K] (stride ldx), w: [N, K], b: [N], y: [M, N] (stride ldy)
  const int64_t size = kernels::cpu::linear_packed_size(c.N, c.K);
  ASSERT_EQ(size, (c.N + 31) / 32 * 32 * c.K);
  float* packed =
      static_cast<float*>(std::aligned_alloc(64, static_cast<std::size_t>((size * 4 + 63) / 64 * 64)));
  kernels::cpu::pack_linear_weight(w.data(), c.N, c.K, packed);
  const float sentinel = 12345.0f;
  const double tol = 1e-5 * std::sqrt(static_cast<double>(c.K));
  // 1 thread: every panel in one call of the body (the next panel prefetched across the whole range);
  // 2 threads: chunks of panels over the pool.
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    std::vector<float> y(static_cast<std::size_t>(c.M * ldy), sentinel);
    kernels::cpu::linear_packed(x.data(), ldx, packed, c.with_bias ? b.data() : nullptr, y.data(), ldy, c.M,
                                c.N, c.K);
    for (int64_t m = 0; m < c.M; ++m) {
      for (int64_t n = 0; n < c.N; ++n) {
        double want = c.with_bias ? static_cast<double>(b[n]) : 0.0;
        for (int64_t k = 0; k < c.K; ++k) want += static_cast<double>(x[m * ldx + k]) * w[n * c.K + k];
        ASSERT_NEAR(y[m * ldy + n], want, tol * (1 + std::abs(want)))
            << "m " << m << " n " << n << " threads " << threads;
      }
      for (int64_t n = c.N; n < ldy; ++n)
        ASSERT_EQ(y[m * ldy + n], sentinel) << "wrote past N at m " << m << " threads " << threads;
    }
  }
  std::free(packed);
}

INSTANTIATE_TEST_SUITE_P(Cases, LinearPacked,
                         ::testing::Combine(::testing::ValuesIn(packed_cases()),
                                            ::testing::ValuesIn(testing::available_isas())),
                         testing::isa_case_name<PackedCase>);

// The packed layout itself, bit for bit (a pack only moves floats): full panels go through 16 x 16
// transposes on AVX-512 when K is a multiple of 16, the rest (and other ISAs) through the plain loop.
struct PackCase {
  std::string name;
  int64_t N, K;
};

using PackLayout = testing::IsaCaseTest<PackCase>;

TEST_P(PackLayout, IsTheDefinition) {
  const auto& [c, isa] = GetParam();
  kernels::cpu::force_isa(isa);
  set_num_threads(2);
  const std::vector<double> wd = testing::random_uniform({c.N, c.K}, 44, -1.0, 1.0).to_vector();
  const std::vector<float> w(wd.begin(), wd.end());
  const int64_t size = kernels::cpu::linear_packed_size(c.N, c.K);
  float* packed =
      static_cast<float*>(std::aligned_alloc(64, static_cast<std::size_t>((size * 4 + 63) / 64 * 64)));
  for (int64_t i = 0; i < size; ++i) packed[i] = 777.0f;  // every element must be written (zeros past N)
  kernels::cpu::pack_linear_weight(w.data(), c.N, c.K, packed);
  std::vector<float> got(packed, packed + size);
  std::free(packed);
  for (int64_t p = 0; p < (c.N + 31) / 32; ++p)
    for (int64_t k = 0; k < c.K; ++k)
      for (int64_t j = 0; j < 32; ++j) {
        const int64_t n = p * 32 + j;
        ASSERT_EQ(got[(p * c.K + k) * 32 + j], n < c.N ? w[n * c.K + k] : 0.0f)
            << "panel " << p << " k " << k << " j " << j;
      }
}

INSTANTIATE_TEST_SUITE_P(
    Cases, PackLayout,
    ::testing::Combine(::testing::Values(PackCase{"n32_k16", 32, 16}, PackCase{"n96_k48_full_panels", 96, 48},
                                         PackCase{"n45_k64_partial_panel", 45, 64},
                                         PackCase{"n64_k40_k_not_16", 64, 40}, PackCase{"n7_k3", 7, 3}),
                       ::testing::ValuesIn(testing::available_isas())),
    testing::isa_case_name<PackCase>);

// ---- ops::inference_linear -------------------------------------------------------------------

struct ScopeCase {
  std::string name;
  Shape x_shape;  // [..., K]
  int64_t N;
  bool with_bias;
  bool packs;  // expected to take the packed path (inside a scope, grad mode off)
};
void PrintTo(const ScopeCase& c, std::ostream* os) { *os << c.name; }

class InferenceLinear : public ::testing::TestWithParam<ScopeCase> {
 protected:
  void TearDown() override { kernels::cpu::force_isa(std::nullopt); }
};

TEST_P(InferenceLinear, MatchesDoubleAndPacksOncePerScope) {
  const ScopeCase& c = GetParam();
  // The packed path follows the active instruction set (ATTN_ISA may lower it below the CPU's).
  const bool vector_isa = kernels::cpu::active_isa() != kernels::cpu::Isa::scalar;  // AVX-512 or AVX2
  const int64_t K = c.x_shape.back();
  const Tensor x = testing::random_uniform(c.x_shape, 51, -1.0, 1.0);  // x: [..., K]
  Tensor w = testing::random_uniform({c.N, K}, 52, -0.5, 0.5);         // w: [N, K]
  const Tensor b = c.with_bias ? testing::random_uniform({c.N}, 53) : Tensor();
  auto want_for = [&](const Tensor& wt) {
    return linear(x.to(DType::f64), wt.to(DType::f64), c.with_bias ? b.to(DType::f64) : Tensor());
  };
  const testing::Tolerance tol{1e-5 * std::sqrt(static_cast<double>(K)), 1e-5};
  {
    NoGradGuard no_grad;
    ops::PackedWeightScope scope;
    // Unpacked for the first kPackAfter - 1 calls, packed at the kPackAfter-th, reused afterwards.
    for (int i = 1; i <= ops::PackedWeightScope::kPackAfter + 2; ++i) {
      const Tensor y = ops::inference_linear(x, w, b);
      EXPECT_EQ(y.shape(), want_for(w).shape());
      EXPECT_ALL_CLOSE(y.to(DType::f64), want_for(w), tol);
      EXPECT_EQ(scope.packs(), c.packs && vector_isa && i >= ops::PackedWeightScope::kPackAfter ? 1 : 0)
          << "call " << i;
    }
  }
  // A weight changed after a scope closed: the next scope packs it again and sees the change.
  w.copy_from(testing::random_uniform({c.N, K}, 54, -0.5, 0.5));  // in place: same storage
  {
    NoGradGuard no_grad;
    ops::PackedWeightScope scope;
    for (int i = 1; i <= ops::PackedWeightScope::kPackAfter; ++i)
      EXPECT_ALL_CLOSE(ops::inference_linear(x, w, b).to(DType::f64), want_for(w), tol);
    EXPECT_EQ(scope.packs(), c.packs && vector_isa ? 1 : 0);
  }
  // Grad mode on: never packed, and autograd records the product.
  ops::PackedWeightScope scope;
  w.set_requires_grad(true);
  const Tensor y = ops::inference_linear(x, w, b);
  EXPECT_TRUE(y.requires_grad());
  EXPECT_EQ(scope.packs(), 0);
  EXPECT_ALL_CLOSE(y.detach().to(DType::f64), want_for(w.detach()), tol);
}

INSTANTIATE_TEST_SUITE_P(Cases, InferenceLinear,
                         ::testing::Values(ScopeCase{"m1_batch1_decode", {1, 1, 64}, 40, true, true},
                                           ScopeCase{"m2", {2, 64}, 40, true, true},
                                           ScopeCase{"m32_decode", {32, 1, 256}, 1024, true, true},
                                           ScopeCase{"m32_tied_vocab_no_bias", {32, 256}, 1003, false, true},
                                           ScopeCase{"m48_limit", {4, 12, 20}, 37, true, true},
                                           ScopeCase{"m49_falls_back", {49, 20}, 37, true, false}),
                         [](const auto& info) { return info.param.name; });

TEST(InferenceLinear, NoScopeMeansNoPackAndBadShapesStillThrow) {
  NoGradGuard no_grad;
  const Tensor x = testing::random_uniform({4, 8}, 61);
  const Tensor w = testing::random_uniform({5, 8}, 62);
  EXPECT_EQ(ops::PackedWeightScope::active(), nullptr);
  const testing::Tolerance tol{1e-5, 1e-5};
  EXPECT_ALL_CLOSE(ops::inference_linear(x, w, Tensor()).to(DType::f64),
                   linear(x.to(DType::f64), w.to(DType::f64)), tol);
  ops::PackedWeightScope scope;
  EXPECT_EQ(ops::PackedWeightScope::active(), &scope);
  {
    ops::PackedWeightScope inner;
    EXPECT_EQ(ops::PackedWeightScope::active(), &inner);
  }
  EXPECT_EQ(ops::PackedWeightScope::active(), &scope);
  EXPECT_ERROR_CONTAINS(ops::inference_linear(testing::random_uniform({4, 7}, 63), w, Tensor()),
                        {"linear", "in = 8"});
}

}  // namespace
}  // namespace attn
