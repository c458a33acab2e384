// Optimizer::zero_grad: keeping the buffers (zeros) or clearing them
// (set_to_none): the same gradients and updates for parameters that get one; a
// parameter that had a gradient once and gets none now is decayed after a zero
// fill and skipped after a clear.
#include <attn/core/autograd.h>
#include <attn/ops/basic.h>
#include <attn/train/optim.h>

#include <vector>

#include "testing/testing.h"

namespace attn {
namespace {

struct ZeroCase {
  bool set_to_none;
  int64_t in;  // x [5, in] · w^T, w [3, in]
};

void PrintTo(const ZeroCase& c, std::ostream* os) {
  *os << (c.set_to_none ? "set_to_none" : "zeros") << " in" << c.in;
}

class ZeroGrad : public ::testing::TestWithParam<ZeroCase> {};

TEST_P(ZeroGrad, SameUpdatesAndUnusedParametersAsDocumented) {
  const ZeroCase c = GetParam();
  // Two identical setups: one zeroes with c.set_to_none, the reference never
  // keeps a gradient across steps (set_grad(undefined) by hand before each backward).
  auto make = [&](uint64_t seed) {
    std::vector<Tensor> t{testing::random_uniform({3, c.in}, seed), testing::random_uniform({3}, seed + 1),
                          testing::random_uniform({4}, seed + 2)};
    for (Tensor& x : t) x.set_requires_grad(true);
    return t;
  };
  std::vector<Tensor> a = make(1), r = make(1);
  train::AdamWOptions o;
  o.lr = 0.1;
  o.weight_decay = 0.5;
  train::AdamW opt({{"w", a[0]}, {"b", a[1]}, {"unused", a[2]}}, o);
  train::AdamW ref({{"w", r[0]}, {"b", r[1]}, {"unused", r[2]}}, o);
  a[2].set_grad(Tensor::zeros({4}));  // "unused" had a gradient once (an earlier use)
  const std::vector<double> unused_before = a[2].to_vector();
  for (int step = 0; step < 3; ++step) {
    const Tensor x = testing::random_uniform({5, c.in}, 10 + step);
    opt.zero_grad(c.set_to_none);
    EXPECT_EQ(a[0].grad().defined(), step > 0 && !c.set_to_none);
    if (a[0].grad().defined()) {
      EXPECT_EQ(a[0].grad().to_vector(), std::vector<double>(a[0].numel(), 0.0));
    }
    sum(mul(linear(x, a[0], a[1]), linear(x, a[0], a[1]))).backward();
    opt.step();
    for (Tensor& t : r) t.set_grad(Tensor());
    sum(mul(linear(x, r[0], r[1]), linear(x, r[0], r[1]))).backward();
    if (!c.set_to_none) r[2].set_grad(Tensor::zeros({4}));  // what zero_grad keeps for it
    ref.step();
    EXPECT_EQ(a[0].grad().to_vector(), r[0].grad().to_vector()) << "step " << step;
    EXPECT_EQ(a[0].to_vector(), r[0].to_vector()) << "step " << step;
    EXPECT_EQ(a[1].to_vector(), r[1].to_vector()) << "step " << step;
  }
  // "unused" never gets a gradient: decayed from zero gradients, or left alone.
  EXPECT_EQ(a[2].to_vector() == unused_before, c.set_to_none);
  EXPECT_EQ(a[2].to_vector(), r[2].to_vector());
}

INSTANTIATE_TEST_SUITE_P(Modes, ZeroGrad,
                         ::testing::Values(ZeroCase{false, 7}, ZeroCase{true, 7}, ZeroCase{true, 40000}));

}  // namespace
}  // namespace attn
