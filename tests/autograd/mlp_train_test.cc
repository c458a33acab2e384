// End to end: a 2-layer MLP trained with plain SGD on a fixed toy problem
// through the same ops and engine the Transformer layers will use.
#include <attn/core/autograd.h>
#include <attn/ops/basic.h>
#include <attn/ops/nn_functional.h>

#include <cmath>
#include <iostream>
#include <vector>

#include "testing/testing.h"

namespace attn {
namespace {

// Three classes: points scattered around three centres in the plane.
void toy_problem(Tensor* x, Tensor* y) {
  const int64_t N = 96;
  const double cx[3] = {-1.0, 1.0, 0.0}, cy[3] = {-0.5, -0.5, 1.0};
  const Tensor noise = testing::random_uniform({N, 2}, 77, -0.6, 0.6);
  *x = Tensor::empty({N, 2});
  *y = Tensor::empty({N}, DType::i64);
  for (int64_t i = 0; i < N; ++i) {
    const int64_t c = i % 3;
    x->set({i, 0}, cx[c] + noise.at({i, 0}));
    x->set({i, 1}, cy[c] + noise.at({i, 1}));
    y->data<int64_t>()[i] = c;
  }
}

void sgd_step(const std::vector<Tensor>& params, float lr) {
  NoGradGuard no_grad;
  for (Tensor p : params) {
    float* w = p.data<float>();
    const float* g = p.grad().data<float>();
    for (int64_t i = 0; i < p.numel(); ++i) w[i] -= lr * g[i];
    p.zero_grad();
  }
}

TEST(Training, TwoLayerMlpWithSgdDrivesTheLossDown) {
  Tensor x, y;
  toy_problem(&x, &y);
  const int64_t hidden = 16;
  Tensor w1 = testing::random_uniform({hidden, 2}, 1, -0.7, 0.7), b1 = Tensor::zeros({hidden});
  Tensor w2 = testing::random_uniform({3, hidden}, 2, -0.25, 0.25), b2 = Tensor::zeros({3});
  const std::vector<Tensor> params{w1, b1, w2, b2};
  for (Tensor p : params) p.set_requires_grad(true);

  std::vector<double> losses;
  for (int step = 0; step < 50; ++step) {
    const Tensor logits = linear(gelu(linear(x, w1, b1)), w2, b2);  // logits: [N, 3]
    const Tensor loss = cross_entropy(logits, y);
    losses.push_back(loss.at({}));
    loss.backward();
    sgd_step(params, 0.5f);
  }
  const double first = losses.front(), last = losses.back();
  std::cout << "MLP cross-entropy: step 0 " << first << ", step 49 " << last << " (ratio " << last / first
            << ")\n";
  EXPECT_TRUE(std::isfinite(last));
  EXPECT_LT(last, 0.2 * first) << "loss went from " << first << " to " << last;
  // every parameter moved and received a gradient buffer
  for (const Tensor& p : params) EXPECT_TRUE(p.grad().defined());
  // inference under NoGradGuard records nothing and classifies the toy set
  NoGradGuard no_grad;
  const Tensor logits = linear(gelu(linear(x, w1, b1)), w2, b2);
  EXPECT_EQ(logits.grad_fn(), nullptr);
  int correct = 0;
  for (int64_t i = 0; i < x.size(0); ++i) {
    int64_t best = 0;
    for (int64_t c = 1; c < 3; ++c)
      if (logits.at({i, c}) > logits.at({i, best})) best = c;
    correct += best == y.data<int64_t>()[i];
  }
  EXPECT_GT(correct, 0.9 * x.size(0));
}

}  // namespace
}  // namespace attn
