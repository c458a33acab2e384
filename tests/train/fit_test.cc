// train::fit, the shared training loop: epochs, step limit and time budget stop
// it where they say; evaluations come every N steps, after every epoch and
// after the last update; patience stops it; the best evaluation's weights are
// restored; a checkpoint taken by the hook resumes to the same weights.
#include <attn/core/autograd.h>
#include <attn/core/error.h>
#include <attn/train/fit.h>
#include <attn/train/trainer.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "testing/testing.h"
#include "tiny_model.h"

namespace attn {
namespace {

using testing::TinyModel;

// A TinyModel with SGD (momentum: optimizer state that a checkpoint must keep)
// and deterministic batches: batch b of epoch e depends on (e, b) only.
struct FitRun {
  TinyModel model{10};
  train::Sgd opt;
  train::ConstantSchedule sched{0.2};
  train::Trainer trainer;
  int64_t batches_per_epoch = 3;
  std::vector<int64_t> epochs_started;
  std::vector<std::pair<int64_t, int64_t>> batches_seen;  // (epoch, batch)

  static train::SgdOptions sgd() {
    train::SgdOptions o;
    o.lr = 0.2;
    o.momentum = 0.5;
    return o;
  }
  FitRun() : opt(model.params, sgd()), trainer(opt, sched, train::TrainerOptions{}, 1) {}

  train::FitHooks hooks() {
    train::FitHooks h;
    h.epoch_batches = [this](int64_t e) {
      epochs_started.push_back(e);
      return batches_per_epoch;
    };
    h.loss = [this](int64_t e, int64_t b, const train::StepContext&) {
      batches_seen.emplace_back(e, b);
      const uint64_t seed = static_cast<uint64_t>(100 * e + b + 1);
      const Tensor x = testing::random_uniform({2, 3, TinyModel::C}, seed);
      Tensor y = Tensor::empty({2, 3}, DType::i64);
      for (int64_t i = 0; i < 6; ++i) y.data<int64_t>()[i] = static_cast<int64_t>((i + seed) % TinyModel::V);
      return model.loss(x, y, 0.0, 0);
    };
    return h;
  }
};

std::vector<Tensor> snapshot(const NamedParams& p) {
  std::vector<Tensor> s;
  for (const auto& [n, t] : p) s.push_back(t.detach().clone());
  return s;
}

bool same(const std::vector<Tensor>& a, const NamedParams& p) {
  for (std::size_t i = 0; i < a.size(); ++i)
    if (a[i].to_vector() != p[i].second.to_vector()) return false;
  return true;
}

TEST(Fit, EpochsRunEveryBatchOnceAndEvaluateAfterEachEpoch) {
  FitRun s;
  train::FitHooks h = s.hooks();
  std::vector<train::FitEval> evals;
  h.evaluate = [] { return train::EvalScore{0.5, 1.0}; };
  h.on_eval = [&](const train::FitEval& e) { evals.push_back(e); };
  train::FitOptions o;
  o.epochs = 3;
  const train::FitResult r = train::fit(s.trainer, h, o);
  EXPECT_EQ(r.reason, train::StopReason::epochs);
  EXPECT_EQ(r.steps, 9);
  EXPECT_EQ(r.epoch, 2);
  EXPECT_TRUE(r.epoch_complete);
  EXPECT_EQ(s.epochs_started, (std::vector<int64_t>{0, 1, 2}));
  ASSERT_EQ(s.batches_seen.size(), 9u);
  for (int64_t i = 0; i < 9; ++i) EXPECT_EQ(s.batches_seen[i], std::make_pair(i / 3, i % 3));
  ASSERT_EQ(evals.size(), 3u);
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(evals[i].step, 3 * static_cast<int64_t>(i + 1));
    EXPECT_TRUE(evals[i].epoch_complete);
    EXPECT_EQ(evals[i].final, i == 2);
  }
  EXPECT_EQ(s.trainer.state().epoch, 3);  // the next batch: epoch 3, batch 0
  EXPECT_EQ(s.trainer.state().batch_in_epoch, 0);
}

TEST(Fit, StepLimitStopsWithinAnEpochAndEvaluatesTheLastStep) {
  FitRun s;
  train::FitHooks h = s.hooks();
  std::vector<train::FitEval> evals;
  double window = 0;
  h.on_step = [&](train::FitStep& st) { window += st.result.loss; };
  h.evaluate = [] { return train::EvalScore{0.5, 1.0}; };
  h.on_eval = [&](const train::FitEval& e) {
    // train_loss is the mean update loss since the previous evaluation.
    const int64_t n = e.step - (evals.empty() ? 0 : evals.back().step);
    EXPECT_NEAR(e.train_loss, window / static_cast<double>(n), 1e-12);
    window = 0;
    evals.push_back(e);
  };
  train::FitOptions o;
  o.max_steps = 7;
  o.eval_every = 3;
  const train::FitResult r = train::fit(s.trainer, h, o);
  EXPECT_EQ(r.reason, train::StopReason::steps);
  EXPECT_EQ(r.steps, 7);
  EXPECT_FALSE(r.epoch_complete);
  ASSERT_EQ(evals.size(), 3u);  // steps 3, 6 and the last one, 7
  EXPECT_EQ(evals[0].step, 3);
  EXPECT_EQ(evals[1].step, 6);
  EXPECT_EQ(evals[2].step, 7);
  EXPECT_TRUE(evals[2].final);
  EXPECT_FALSE(evals[2].epoch_complete);
  EXPECT_EQ(r.evaluations, 3);
}

TEST(Fit, OnStepCanSetTheStepLimitAndAnEndlessEpochNeedsOne) {
  FitRun s;
  s.batches_per_epoch = 0;  // an endless stream
  train::FitHooks h = s.hooks();
  h.on_step = [](train::FitStep& st) {
    if (st.result.step == 2) st.max_steps = 5;
  };
  train::FitOptions o;
  o.max_steps = 100;
  const train::FitResult r = train::fit(s.trainer, h, o);
  EXPECT_EQ(r.steps, 5);
  EXPECT_EQ(r.epoch, 0);
  EXPECT_EQ(s.epochs_started.size(), 1u);
  FitRun t;
  t.batches_per_epoch = 0;
  train::FitOptions only_epochs;
  only_epochs.epochs = 1;
  EXPECT_ERROR_CONTAINS(train::fit(t.trainer, t.hooks(), only_epochs), {"endless epoch"});
}

TEST(Fit, TimeBudgetStopsAfterTheFirstUpdatePastIt) {
  FitRun s;
  double now = 100;  // an injected clock: every update takes one second
  train::FitHooks h = s.hooks();
  const auto loss = h.loss;
  h.loss = [&](int64_t e, int64_t b, const train::StepContext& c) {
    now += 1;
    return loss(e, b, c);
  };
  std::vector<double> seconds;
  h.on_step = [&](train::FitStep& st) { seconds.push_back(st.seconds); };
  train::FitOptions o;
  o.time_budget_s = 4.5;
  o.clock = [&] { return now; };
  const train::FitResult r = train::fit(s.trainer, h, o);
  EXPECT_EQ(r.reason, train::StopReason::time);
  EXPECT_EQ(r.steps, 5);  // 4 s after step 4, 5 s after step 5
  EXPECT_EQ(seconds, (std::vector<double>{1, 2, 3, 4, 5}));
  EXPECT_DOUBLE_EQ(r.seconds, 5);
}

TEST(Fit, PatienceStopsAndTheBestWeightsAreRestored) {
  FitRun s;
  train::FitHooks h = s.hooks();
  // Scores per evaluation: the second is the best; the third ties it with a higher loss (not better).
  const std::vector<train::EvalScore> scores = {{0.5, 1.0}, {0.7, 0.8}, {0.7, 0.9}, {0.6, 0.7}, {0.9, 0.1}};
  std::size_t k = 0;
  std::vector<Tensor> at_best, before_restore;
  std::vector<bool> best_flags;
  h.evaluate = [&] { return scores.at(k++); };
  h.on_eval = [&](const train::FitEval& e) {
    best_flags.push_back(e.best);
    if (e.best) at_best = snapshot(s.model.params);
    before_restore = snapshot(s.model.params);
  };
  train::FitOptions o;
  o.epochs = 10;
  o.eval_every = 2;
  o.patience = 2;
  o.keep_best = true;
  const train::FitResult r = train::fit(s.trainer, h, o, s.model.params);
  EXPECT_EQ(r.reason, train::StopReason::patience);
  EXPECT_EQ(r.evaluations, 4);  // 0.5 best, 0.7 best, 0.7 (loss 0.9) and 0.6 not better: stop
  EXPECT_EQ(r.steps, 8);
  EXPECT_EQ(best_flags, (std::vector<bool>{true, true, false, false}));
  EXPECT_EQ(r.best_step, 4);
  EXPECT_DOUBLE_EQ(r.best.score, 0.7);
  EXPECT_DOUBLE_EQ(r.best.loss, 0.8);
  EXPECT_TRUE(same(at_best, s.model.params)) << "the weights of the best evaluation are restored";
  EXPECT_FALSE(same(before_restore, s.model.params)) << "training moved the weights after the best step";
}

TEST(Fit, ACheckpointResumesToTheSameWeights) {
  const std::string path =
      ::testing::TempDir() + "attn_fit_resume_" + std::to_string(::getpid()) + ".safetensors";
  FitRun whole;
  train::FitOptions o;
  o.epochs = 3;  // 9 updates
  train::fit(whole.trainer, whole.hooks(), o);

  FitRun first;
  train::FitHooks h = first.hooks();
  h.checkpoint = [&](const train::FitStep&) { first.trainer.save(path); };
  train::FitOptions part = o;
  part.max_steps = 4;  // stops within epoch 1, after its first batch
  part.checkpoint_every = 4;
  train::fit(first.trainer, h, part);

  FitRun resumed;
  resumed.trainer.load(path);
  EXPECT_EQ(resumed.trainer.state().step, 4);
  EXPECT_EQ(resumed.trainer.state().epoch, 1);
  EXPECT_EQ(resumed.trainer.state().batch_in_epoch, 1);
  const train::FitResult r = train::fit(resumed.trainer, resumed.hooks(), o);
  EXPECT_EQ(r.steps, 9);
  EXPECT_EQ(resumed.batches_seen.front(), std::make_pair(int64_t{1}, int64_t{1}));
  EXPECT_TRUE(same(snapshot(whole.model.params), resumed.model.params));
  std::remove(path.c_str());
}

TEST(Fit, BadOptionsAreErrors) {
  FitRun s;
  EXPECT_ERROR_CONTAINS(train::fit(s.trainer, s.hooks(), train::FitOptions{}), {"set a limit"});
  train::FitOptions o;
  o.epochs = 1;
  o.keep_best = true;
  EXPECT_ERROR_CONTAINS(train::fit(s.trainer, s.hooks(), o), {"keep_best"});
  o.keep_best = false;
  o.patience = 2;
  EXPECT_ERROR_CONTAINS(train::fit(s.trainer, s.hooks(), o), {"patience needs hooks.evaluate"});
  EXPECT_STREQ(train::stop_reason_name(train::StopReason::patience), "patience");
}

}  // namespace
}  // namespace attn
