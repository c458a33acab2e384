// ops::linear in inference mode (grad mode off) takes the small-M kernel
// (kernels/cpu/encoder_kernels.h, linear_small_m_nt) for 2..48 rows of fp32 input; with grad
// mode on it stays on BLAS and records its backward. Both against linear() in double.
#include <attn/core/autograd.h>
#include <attn/core/parallel.h>
#include <attn/ops/basic.h>

#include <cmath>
#include <string>

#include "kernels/isa_test_util.h"
#include "testing/testing.h"

namespace attn {
namespace {

struct LinearCase {
  std::string name;
  Shape x_shape;  // [..., K]
  int64_t N;
  bool with_bias;
};

using LinearInference = testing::IsaCaseTest<LinearCase>;

TEST_P(LinearInference, MatchesDoubleInAndOutOfGradMode) {
  const auto& [c, isa] = GetParam();
  kernels::cpu::force_isa(isa);
  set_num_threads(2);
  const int64_t K = c.x_shape.back();
  const Tensor x = testing::random_uniform(c.x_shape, 31, -1.0, 1.0);  // x: [..., K]
  Tensor w = testing::random_uniform({c.N, K}, 32, -0.5, 0.5);         // w: [N, K]
  const Tensor b = c.with_bias ? testing::random_uniform({c.N}, 33) : Tensor();
  const Tensor want = linear(x.to(DType::f64), w.to(DType::f64), c.with_bias ? b.to(DType::f64) : Tensor());
  const testing::Tolerance tol{1e-5 * std::sqrt(static_cast<double>(K)), 1e-5};
  {
    NoGradGuard no_grad;
    const Tensor y = linear(x, w, b);  // y: [..., N]
    EXPECT_EQ(y.shape(), want.shape());
    EXPECT_ALL_CLOSE(y.to(DType::f64), want, tol);
  }
  w.set_requires_grad(true);
  const Tensor y = linear(x, w, b);
  EXPECT_TRUE(y.requires_grad());
  EXPECT_ALL_CLOSE(y.detach().to(DType::f64), want, tol);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, LinearInference,
    ::testing::Combine(::testing::Values(LinearCase{"m1_blas", {1, 64}, 40, true},
                                         LinearCase{"m2_smallest", {2, 33}, 9, true},
                                         LinearCase{"m32_decode_batch", {32, 1, 256}, 1024, true},
                                         LinearCase{"m32_tied_vocab", {32, 256}, 1003, false},
                                         LinearCase{"m48_limit", {4, 12, 20}, 37, true},
                                         LinearCase{"m49_blas", {49, 20}, 37, true}),
                       ::testing::ValuesIn(testing::available_isas())),
    testing::isa_case_name<LinearCase>);

}  // namespace
}  // namespace attn
