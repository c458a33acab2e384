// The autograd engine: accumulation, zero_grad, diamonds, grad mode, detach,
// seeds, single-use graphs, freed saved tensors, and the checker itself.
#include <attn/core/autograd.h>
#include <attn/ops/basic.h>
#include <attn/ops/nn_functional.h>
#include <pthread.h>

#include <memory>
#include <string>
#include <vector>

#include "autograd/grad_check.h"
#include "testing/testing.h"
#include "testing/tolerances.h"

namespace attn {
namespace {

namespace tol = testing::tol;

Tensor leaf(const Shape& s, uint64_t seed, DType dt = DType::f64) {
  Tensor t = testing::random_uniform(s, seed, -1, 1, dt);
  t.set_requires_grad(true);
  return t;
}

// Expected tensor: f(x) elementwise.
template <typename F>
Tensor map(const Tensor& x, F f) {
  Tensor r = Tensor::empty(x.shape(), DType::f64);
  const std::vector<double> v = x.to_vector();
  for (std::size_t i = 0; i < v.size(); ++i) r.data<double>()[i] = f(v[i]);
  return r;
}

TEST(Engine, LeafFlagsAndGradFn) {
  Tensor x = leaf({2, 3}, 1);
  EXPECT_TRUE(x.requires_grad());
  EXPECT_EQ(x.grad_fn(), nullptr);
  EXPECT_FALSE(x.grad().defined());
  Tensor y = mul(x, x);
  EXPECT_TRUE(y.requires_grad());
  ASSERT_NE(y.grad_fn(), nullptr);
  EXPECT_EQ(y.grad_fn()->name(), "mul");
  Tensor c = Tensor::zeros({2, 3}, DType::f64);
  EXPECT_FALSE(add(c, c).requires_grad());
  EXPECT_EQ(add(c, c).grad_fn(), nullptr);
  // Copies share the meta, also copies made before the tensor was marked.
  Tensor x2 = x;
  x2.set_requires_grad(false);
  EXPECT_FALSE(x.requires_grad());
  Tensor p = Tensor::zeros({2}, DType::f64);
  std::vector<Tensor> params{p};
  params[0].set_requires_grad(true);
  EXPECT_TRUE(p.requires_grad());
  sum(mul(p, p)).backward();
  EXPECT_TRUE(params[0].grad().defined());
}

TEST(Engine, RawViewsAreNotDifferentiable) {
  Tensor x = leaf({4, 3}, 2);
  EXPECT_FALSE(x.slice(0, 1, 3).requires_grad());
  EXPECT_FALSE(x.transpose(0, 1).requires_grad());
  EXPECT_FALSE(x.view({12}).requires_grad());
  EXPECT_FALSE(x.contiguous().requires_grad());
  EXPECT_TRUE(slice(x, 0, 1, 3).requires_grad());
  EXPECT_TRUE(transpose(x, 0, 1).requires_grad());
}

TEST(Engine, GradientsAccumulateAcrossBackwardCallsUntilZeroGrad) {
  Tensor x = leaf({3, 4}, 3);
  const Tensor two_x = map(x, [](double v) { return 2 * v; });
  sum(mul(x, x)).backward();
  EXPECT_ALL_CLOSE(x.grad(), two_x, tol::kRefFloat);
  const Tensor g_first = x.grad();
  sum(mul(x, x)).backward();
  EXPECT_ALL_CLOSE(x.grad(), map(x, [](double v) { return 4 * v; }), tol::kRefFloat);
  EXPECT_EQ(x.grad().raw_data(), g_first.raw_data());  // accumulated in place
  x.zero_grad();
  EXPECT_ALL_CLOSE(x.grad(), Tensor::zeros({3, 4}, DType::f64), tol::kRefFloat);
  sum(mul(x, x)).backward();
  EXPECT_ALL_CLOSE(x.grad(), two_x, tol::kRefFloat);
}

TEST(Engine, DiamondSumsBothPaths) {
  // y = sum(a · a + a) with a = 3x: dy/dx = 3 (2a + 1).
  Tensor x = leaf({5}, 4);
  Tensor a = scale(x, 3.0);
  sum(add(mul(a, a), a)).backward();
  EXPECT_ALL_CLOSE(x.grad(), map(x, [](double v) { return 3 * (6 * v + 1); }), tol::kRefFloat);
  EXPECT_FALSE(a.grad().defined());  // non-leaf: no .grad kept
}

TEST(Engine, TensorUsedTwiceByOneOp) {
  Tensor x = leaf({2, 2}, 5);
  sum(matmul(x, x)).backward();
  // d/dx sum(x x) = 1 xᵀ + xᵀ 1 (1 = all-ones)
  Tensor expect = Tensor::zeros({2, 2}, DType::f64);
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 2; ++j) expect.set({i, j}, x.at({j, 0}) + x.at({j, 1}) + x.at({0, i}) + x.at({1, i}));
  EXPECT_ALL_CLOSE(x.grad(), expect, tol::kRefFloat);
}

TEST(Engine, BranchThatSendsNoGradientDoesNotBlockOthers) {
  // `partial` returns no gradient for its second input: the node behind it
  // (b = 2h) gets none, yet h's node must still run once a = 3h is done.
  Tensor x = leaf({3}, 6);
  Tensor h = scale(x, 1.0);
  Tensor a = scale(h, 3.0), b = scale(h, 2.0);
  Tensor y = add(a, b);
  Tensor out = y.detach().clone();
  record("partial", out, {a, b}, [](const Tensor& g, const GradNeeds& need) {
    EXPECT_TRUE(need[0] && need[1]);
    return std::vector<Tensor>{g, Tensor()};
  });
  sum(out).backward();
  EXPECT_ALL_CLOSE(x.grad(), Tensor::full({3}, 3.0, DType::f64), tol::kRefFloat);
}

TEST(Engine, NoGradGuardRecordsNothing) {
  Tensor x = leaf({3}, 7);
  EXPECT_TRUE(grad_mode_enabled());
  {
    NoGradGuard g;
    EXPECT_FALSE(grad_mode_enabled());
    Tensor y = softmax(linear(x.view({1, 3}), leaf({2, 3}, 8)));
    EXPECT_FALSE(y.requires_grad());
    EXPECT_EQ(y.grad_fn(), nullptr);
    {
      NoGradGuard nested;
      EXPECT_FALSE(grad_mode_enabled());
    }
    EXPECT_FALSE(grad_mode_enabled());
    EXPECT_THROW(y.backward(), Error);
  }
  EXPECT_TRUE(grad_mode_enabled());
  EXPECT_TRUE(mul(x, x).requires_grad());
}

TEST(Engine, DetachStopsGradients) {
  Tensor x = leaf({4}, 9);
  Tensor d = x.detach();
  EXPECT_FALSE(d.requires_grad());
  EXPECT_EQ(d.raw_data(), x.raw_data());  // same storage
  sum(mul(d, x)).backward();              // d/dx (c · x) with c = x held constant
  EXPECT_ALL_CLOSE(x.grad(), x, tol::kRefFloat);
}

TEST(Engine, SeedRulesForNonScalarOutputs) {
  Tensor x = leaf({2, 3}, 10);
  Tensor y = scale(x, 2.0);
  try {
    y.backward();
    ADD_FAILURE() << "backward on a [2, 3] output without a seed must throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("seed"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("[2, 3]"), std::string::npos) << e.what();
  }
  const Tensor seed = testing::random_uniform({2, 3}, 11, -1, 1, DType::f64);
  EXPECT_THROW(scale(x, 2.0).backward(Tensor::zeros({3, 2}, DType::f64)), Error);
  scale(x, 2.0).backward(seed);
  EXPECT_ALL_CLOSE(x.grad(), map(seed, [](double v) { return 2 * v; }), tol::kRefFloat);
  // A numel-1 output of any rank takes the default seed 1.
  Tensor z = leaf({1, 1}, 12);
  scale(z, 5.0).backward();
  EXPECT_DOUBLE_EQ(z.grad().at({0, 0}), 5.0);
}

TEST(Engine, BackwardOnALeafAccumulatesTheSeed) {
  Tensor x = leaf({}, 13);
  x.backward();
  x.backward();
  EXPECT_DOUBLE_EQ(x.grad().at({}), 2.0);
}

TEST(Engine, GraphsAreSingleUse) {
  Tensor x = leaf({3}, 14);
  Tensor loss = sum(mul(x, x));
  loss.backward();
  try {
    loss.backward();
    ADD_FAILURE() << "a second backward through a released graph must throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("already ran"), std::string::npos) << e.what();
  }
}

TEST(Engine, SavedTensorsAreFreedAfterBackward) {
  Tensor x = leaf({8, 16}, 15, DType::f32);
  Tensor w = leaf({4, 16}, 16, DType::f32);
  const long x_before = x.storage().use_count(), w_before = w.storage().use_count();
  Tensor loss = sum(softmax(linear(x, w)));
  EXPECT_GT(x.storage().use_count(), x_before);  // saved by linear
  EXPECT_GT(w.storage().use_count(), w_before);
  std::weak_ptr<Node> root = loss.grad_fn();
  loss.backward();
  EXPECT_EQ(x.storage().use_count(), x_before);
  EXPECT_EQ(w.storage().use_count(), w_before);
  EXPECT_TRUE(root.lock()->released());
  loss = Tensor();
  EXPECT_TRUE(root.expired());  // no reference cycle keeps the graph alive
}

TEST(Engine, GraphDroppedWithoutBackwardIsFreed) {
  // Ops that save their own output (softmax) must not form a cycle through it.
  Tensor x = leaf({3, 5}, 17);
  std::weak_ptr<Node> n;
  long before = x.storage().use_count();
  {
    Tensor y = log_softmax(softmax(x));
    n = y.grad_fn();
    EXPECT_FALSE(n.expired());
  }
  EXPECT_TRUE(n.expired());
  EXPECT_EQ(x.storage().use_count(), before);
}

// Drops `t` on a thread with a 256 KiB stack: a destructor that recursed once
// per node of a 20k-node chain would overflow it.
void drop_on_small_stack(Tensor t) {
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, 256 * 1024);
  pthread_t th;
  auto* holder = new Tensor(std::move(t));
  ASSERT_EQ(pthread_create(
                &th, &attr,
                [](void* p) -> void* {
                  delete static_cast<Tensor*>(p);
                  return nullptr;
                },
                holder),
            0);
  pthread_join(th, nullptr);
  pthread_attr_destroy(&attr);
}

TEST(Engine, DeepChainsBackpropagateAndFreeWithoutRecursion) {
  const int n = 20000;
  Tensor x = leaf({1}, 23);
  Tensor y = x;
  for (int i = 0; i < n; ++i) y = scale(y, 1.0);
  sum(y).backward();
  EXPECT_DOUBLE_EQ(x.grad().at({0}), 1.0);
  std::weak_ptr<Node> head;
  {
    Tensor z = x;
    for (int i = 0; i < n; ++i) z = scale(z, 1.0);
    head = z.grad_fn();
    drop_on_small_stack(std::move(z));
  }
  EXPECT_TRUE(head.expired());
}

TEST(Engine, LeafMarkingRules) {
  EXPECT_THROW(Tensor::zeros({2}, DType::i64).set_requires_grad(true), Error);
  Tensor x = leaf({2}, 18);
  Tensor y = scale(x, 2.0);
  EXPECT_THROW(y.set_requires_grad(true), Error);
  Tensor d = y.detach();
  d.set_requires_grad(true);  // a detached tensor is a fresh leaf
  EXPECT_TRUE(d.requires_grad());
}

TEST(Engine, GradientOnlyReachesLeavesOnThePath) {
  Tensor x = leaf({3}, 19), unused = leaf({3}, 20);
  Tensor other = mul(unused, unused);
  sum(scale(x, 1.0)).backward();
  EXPECT_TRUE(x.grad().defined());
  EXPECT_FALSE(unused.grad().defined());
  (void)other;
}

TEST(Engine, F32GradientsAreF32) {
  Tensor x = leaf({2, 4}, 21, DType::f32);
  Tensor w = leaf({3, 4}, 22, DType::f32);
  sum(gelu(linear(x, w))).backward();
  EXPECT_EQ(x.grad().dtype(), DType::f32);
  EXPECT_EQ(w.grad().dtype(), DType::f32);
}

TEST(Engine, ErrorsNameWhatWasExpected) {
  const Tensor table = Tensor::zeros({5, 3});
  try {
    embedding(Tensor::from(std::vector<int64_t>{1, 7}, {2}), table);
    ADD_FAILURE() << "an id >= V must throw";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("id 7"), std::string::npos) << m;
    EXPECT_NE(m.find("V = 5"), std::string::npos) << m;
  }
  EXPECT_THROW(embedding(Tensor::from(std::vector<int64_t>{-1}, {1}), table), Error);
  try {
    cross_entropy(Tensor::zeros({2, 4}), Tensor::from(std::vector<int64_t>{0, 4}, {2}));
    ADD_FAILURE() << "a target >= V must throw";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("target 4"), std::string::npos) << m;
    EXPECT_NE(m.find("V = 4"), std::string::npos) << m;
  }
  EXPECT_THROW(matmul(Tensor::zeros({2, 3}), Tensor::zeros({4, 2})), Error);
  EXPECT_THROW(add(Tensor::zeros({2, 3}), Tensor::zeros({4})), Error);
  EXPECT_THROW(add(Tensor::zeros({2}), Tensor::zeros({2}, DType::f64)), Error);
  EXPECT_THROW(linear(Tensor::zeros({2, 3}), Tensor::zeros({4, 2})), Error);
  EXPECT_THROW(layer_norm(Tensor::zeros({2, 3}), Tensor::zeros({4}), Tensor()), Error);
  EXPECT_THROW(gelu(Tensor::zeros({2}), "sigmoid"), Error);
  EXPECT_THROW(rope(Tensor::zeros({2, 3})), Error);  // odd D
  EXPECT_THROW(dropout(Tensor::zeros({2}), 1.0, true, 0), Error);
  EXPECT_THROW(concat({Tensor::zeros({2, 3}), Tensor::zeros({3, 3})}, 1), Error);
}

// The checker must fail on a wrong backward (a test that cannot fail proves nothing).
TEST(GradChecker, DetectsAWrongBackward) {
  auto wrong_square = [](const std::vector<Tensor>& in) {
    const Tensor& x = in[0];
    NoGradGuard g;
    Tensor y = mul(x, x);
    {
      set_grad_mode_enabled(true);
      if (needs_grad(x))
        record("wrong_square", y, {x}, [x = x.detach()](const Tensor& gy, const GradNeeds&) {
          return std::vector<Tensor>{mul(gy, x)};  // should be 2 · x · gy
        });
      set_grad_mode_enabled(false);
    }
    return y;
  };
  EXPECT_FALSE(testing::check_gradients(wrong_square, {{{3, 2}}}, 1, tol::kFiniteDiff));
  auto right = [](const std::vector<Tensor>& in) { return mul(in[0], in[0]); };
  EXPECT_TRUE(testing::check_gradients(right, {{{3, 2}}}, 1, tol::kFiniteDiff));
}

}  // namespace
}  // namespace attn
