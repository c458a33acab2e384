// How the engine sums gradients (src/core/autograd.cc): in place into a gradient
// nobody else sees, never into a shared one; a leaf's first gradient kept without
// a copy when nobody else sees it; accumulation across backward calls (the dW of
// linear) equal to the sum, also over the threaded add of large tensors.
#include <attn/core/autograd.h>
#include <attn/core/parallel.h>
#include <attn/ops/basic.h>

#include <vector>

#include "testing/testing.h"
#include "testing/tolerances.h"

namespace attn {
namespace {

namespace tol = testing::tol;

// out = x (a copy); its backward returns `give` whatever the incoming gradient
// (`give` stands for a gradient that aliases memory other tensors use).
Tensor pass_giving(const Tensor& x, const Tensor& give) {
  Tensor out = x.clone();
  record("pass_giving", out, {x},
         [give](const Tensor&, const GradNeeds&) { return std::vector<Tensor>{give}; });
  return out;
}

// out = x (a copy); its backward returns a fresh tensor of `value` and writes
// its data pointer to *made.
Tensor pass_fresh(const Tensor& x, double value, const void** made) {
  Tensor out = x.clone();
  record("pass_fresh", out, {x}, [value, made](const Tensor& g, const GradNeeds&) {
    Tensor r = Tensor::full(g.shape(), value, g.dtype());
    *made = r.raw_data();
    return std::vector<Tensor>{r};
  });
  return out;
}

struct SumCase {
  int64_t n;  // elements (over the threaded add's chunk from 1 << 15)
  DType dtype;
};

void PrintTo(const SumCase& c, std::ostream* os) { *os << "n" << c.n << " " << dtype_name(c.dtype); }

class GradSums : public ::testing::TestWithParam<SumCase> {};

TEST_P(GradSums, SharedGradientsAreNeverWrittenInPlace) {
  const SumCase c = GetParam();
  Tensor x = testing::random_uniform({c.n}, 1, -1, 1, c.dtype);
  x.set_requires_grad(true);
  const Tensor keep = testing::random_uniform({c.n}, 2, -1, 1, c.dtype);  // seen by the caller
  const std::vector<double> keep_before = keep.to_vector();
  // h has two consumers whose gradients are both `keep`: they meet in h's pending sum,
  // and again at the leaf x (through h's pass_giving, which also gives `keep`).
  Tensor h = pass_giving(x, keep);
  Tensor y = add(pass_giving(h, keep), pass_giving(h, keep));
  y.backward(Tensor::full({c.n}, 1.0, c.dtype));
  EXPECT_EQ(keep.to_vector(), keep_before);
  EXPECT_ALL_CLOSE(x.grad(), keep, tol::kRefFloat);
  // A second backward adds into the leaf's .grad, still without touching `keep`.
  Tensor h2 = pass_giving(x, keep);
  Tensor y2 = add(pass_giving(h2, keep), pass_giving(h2, keep));
  y2.backward(Tensor::full({c.n}, 1.0, c.dtype));
  EXPECT_EQ(keep.to_vector(), keep_before);
  EXPECT_ALL_CLOSE(x.grad(), scale(keep, 2.0), tol::kRefFloat);
}

TEST_P(GradSums, FreshGradientsAreSummedAndKept) {
  const SumCase c = GetParam();
  Tensor x = testing::random_uniform({c.n}, 3, -1, 1, c.dtype);
  x.set_requires_grad(true);
  const void* made_a = nullptr;
  const void* made_b = nullptr;
  const void* made_leaf = nullptr;
  // Two fresh gradients (0.25 and 0.5) meet at h; h's own backward gives x a fresh 3.
  Tensor h = pass_fresh(x, 3.0, &made_leaf);
  Tensor y = add(pass_fresh(h, 0.25, &made_a), pass_fresh(h, 0.5, &made_b));
  y.backward(Tensor::full({c.n}, 1.0, c.dtype));
  // x's first gradient is the very tensor the backward made: no copy.
  ASSERT_TRUE(x.grad().defined());
  EXPECT_EQ(x.grad().raw_data(), made_leaf);
  EXPECT_EQ(x.grad().to_vector(), std::vector<double>(c.n, 3.0));
  // Accumulates: 3 + 3.
  Tensor h2 = pass_fresh(x, 3.0, &made_leaf);
  sum(add(h2, h2)).backward();
  EXPECT_EQ(x.grad().to_vector(), std::vector<double>(c.n, 6.0));
}

// The dW of linear accumulated over two backward calls equals the sum of the two
// single-call gradients, and zero_grad starts the sum again.
TEST_P(GradSums, LinearWeightGradientAccumulatesToTheSum) {
  const SumCase c = GetParam();
  const int64_t in = 64, out = c.n / in;
  Tensor w = testing::random_uniform({out, in}, 4, -1, 1, c.dtype);
  Tensor b = testing::random_uniform({out}, 5, -1, 1, c.dtype);
  w.set_requires_grad(true);
  b.set_requires_grad(true);
  const Tensor x1 = testing::random_uniform({9, in}, 6, -1, 1, c.dtype);
  const Tensor x2 = testing::random_uniform({9, in}, 7, -1, 1, c.dtype);
  auto grads_of = [&](const Tensor& x) {
    w.set_grad(Tensor());
    b.set_grad(Tensor());
    sum(linear(x, w, b)).backward();
    return std::vector<Tensor>{w.grad().clone(), b.grad().clone()};
  };
  const std::vector<Tensor> g1 = grads_of(x1), g2 = grads_of(x2);
  w.zero_grad();
  b.zero_grad();
  EXPECT_EQ(w.grad().to_vector(), std::vector<double>(w.numel(), 0.0));
  sum(linear(x1, w, b)).backward();
  sum(linear(x2, w, b)).backward();
  // Accumulation is one addition per element: bit for bit the sum of the two gradients.
  const Tensor want_w = add(g1[0], g2[0]), want_b = add(g1[1], g2[1]);
  EXPECT_EQ(w.grad().to_vector(), want_w.to_vector());
  EXPECT_EQ(b.grad().to_vector(), want_b.to_vector());
}

INSTANTIATE_TEST_SUITE_P(Sizes, GradSums,
                         ::testing::Values(SumCase{5, DType::f64}, SumCase{64 * 3, DType::f32},
                                           SumCase{64 * 1700, DType::f32}, SumCase{64 * 1100, DType::f64}));

}  // namespace
}  // namespace attn
