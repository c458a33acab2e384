// The training loop: gradient accumulation equals one large batch, NaN/Inf
// gradients skip the update, schedule drives the optimizer's lr.
#include <attn/core/autograd.h>
#include <attn/train/trainer.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "testing/tolerances.h"
#include "tiny_model.h"

namespace attn {
namespace {

using testing::TinyModel;

struct AccumRow {
  int64_t k, b;  // k micro-batches of b samples
};
class Accumulation : public ::testing::TestWithParam<AccumRow> {};

// k micro-batches of size b give the gradients (and updates) of one batch of size k·b.
TEST_P(Accumulation, KMicroBatchesEqualOneBatch) {
  const auto [k, b] = GetParam();
  const int64_t N = k * b, L = 5;
  const Tensor x = testing::random_uniform({N, L, TinyModel::C}, 3);  // [N, L, C]
  Tensor y = Tensor::empty({N, L}, DType::i64);                       // [N, L]
  for (int64_t i = 0; i < N * L; ++i) y.data<int64_t>()[i] = (i * 3 + 1) % TinyModel::V;

  TinyModel big(10), small(10);
  train::SgdOptions so;
  so.lr = 0.5;
  so.momentum = 0.5;
  train::Sgd opt_big(big.params, so), opt_small(small.params, so);
  const train::ConstantSchedule sched(0.5);
  train::TrainerOptions one, many;
  many.accumulation_steps = k;
  train::Trainer t_big(opt_big, sched, one, 1), t_small(opt_small, sched, many, 1);
  for (int step = 0; step < 3; ++step) {
    const train::StepResult rb =
        t_big.step([&](const train::StepContext&) { return big.loss(x, y, 0.0, 0); });
    const train::StepResult rs = t_small.step([&](const train::StepContext& c) {
      return small.loss(x.slice(0, c.micro * b, (c.micro + 1) * b),
                        y.slice(0, c.micro * b, (c.micro + 1) * b), 0.0, 0);
    });
    EXPECT_NEAR(rs.loss, rb.loss, 1e-6 * std::abs(rb.loss));
    EXPECT_NEAR(rs.grad_norm, rb.grad_norm, 1e-5 * rb.grad_norm);
    for (std::size_t i = 0; i < big.params.size(); ++i)
      EXPECT_ALL_CLOSE(small.params[i].second.grad(), big.params[i].second.grad(),
                       testing::tol::kAccumulation)
          << big.params[i].first << " step " << step;
  }
  for (std::size_t i = 0; i < big.params.size(); ++i)
    EXPECT_ALL_CLOSE(small.params[i].second, big.params[i].second, testing::tol::kAccumulation)
        << big.params[i].first;
}

INSTANTIATE_TEST_SUITE_P(Rows, Accumulation,
                         ::testing::Values(AccumRow{2, 3}, AccumRow{4, 2}, AccumRow{3, 1}));

TEST(Trainer, NonFiniteGradientSkipsTheStepAndReportsIt) {
  TinyModel m(4);
  const Tensor x = testing::random_uniform({2, 3, TinyModel::C}, 8);
  Tensor y = Tensor::zeros({2, 3}, DType::i64);
  train::AdamW opt(m.params, {});
  const train::NoamSchedule sched(8, 4, 10.0);
  train::TrainerOptions o;
  o.clip_norm = 1.0;
  train::Trainer t(opt, sched, o, 5);
  const train::StepResult r1 = t.step([&](const train::StepContext&) { return m.loss(x, y, 0.0, 0); });
  EXPECT_FALSE(r1.skipped);
  EXPECT_EQ(r1.step, 1);
  EXPECT_DOUBLE_EQ(r1.lr, sched.lr(1));
  EXPECT_DOUBLE_EQ(opt.lr(), sched.lr(1));
  std::vector<std::vector<double>> before;
  for (const auto& [n, p] : m.params) before.push_back(p.to_vector());
  const train::StepResult r2 = t.step([&](const train::StepContext&) {
    return m.loss(x, y, 0.0, 0) * std::numeric_limits<double>::quiet_NaN();
  });
  EXPECT_TRUE(r2.skipped);
  EXPECT_EQ(r2.nonfinite.size(), m.params.size());
  EXPECT_FALSE(std::isfinite(r2.grad_norm));
  EXPECT_EQ(t.state().skipped_steps, 1);
  EXPECT_EQ(t.state().step, 2);
  EXPECT_EQ(opt.steps(), 1);
  for (std::size_t i = 0; i < m.params.size(); ++i) EXPECT_EQ(m.params[i].second.to_vector(), before[i]);
  const train::StepResult r3 = t.step([&](const train::StepContext&) { return m.loss(x, y, 0.0, 0); });
  EXPECT_FALSE(r3.skipped);
  EXPECT_EQ(opt.steps(), 2);
  EXPECT_TRUE(std::isfinite(r3.loss));
}

TEST(TrainRng, StateIsSeedAndCounter) {
  train::TrainRng a(7), b(7), c(8);
  EXPECT_EQ(a.next(), b.next());
  EXPECT_NE(a.next(), c.next());
  train::TrainRng d(0);
  d.restore(a.seed(), a.counter());
  EXPECT_EQ(d.next(), a.next());
  const double u = a.uniform();
  EXPECT_GE(u, 0.0);
  EXPECT_LT(u, 1.0);
  // data order: a permutation, deterministic per (seed, epoch), differing across epochs
  const std::vector<int64_t> o1 = train::epoch_order(50, 3, 0), o2 = train::epoch_order(50, 3, 1);
  EXPECT_EQ(o1, train::epoch_order(50, 3, 0));
  EXPECT_NE(o1, o2);
  std::vector<int64_t> sorted = o1;
  std::sort(sorted.begin(), sorted.end());
  for (int64_t i = 0; i < 50; ++i) EXPECT_EQ(sorted[i], i);
  EXPECT_NE(train::step_seed(3, 1), train::step_seed(3, 2));
  EXPECT_NE(train::step_seed(3, 1, 0), train::step_seed(3, 1, 1));
}

}  // namespace
}  // namespace attn
