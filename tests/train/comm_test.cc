// The parts of data-parallel training that one process can check (the rest runs under mpirun in
// tests/mpi): shards are disjoint and cover the batch, the single-process communicator leaves data
// alone, a Loss's weight changes nothing in one process, and the parameter hash sees every byte.
#include <attn/train/comm.h>
#include <attn/train/trainer.h>

#include <algorithm>
#include <numeric>
#include <set>

#include "tiny_model.h"

namespace attn {
namespace {

using testing::TinyModel;

TEST(Comm, ShardsAreDisjointAndCoverTheBatch) {
  for (int n : {1, 2, 3, 5}) {
    for (std::size_t rows : {0u, 1u, 4u, 7u, 64u}) {
      std::vector<int64_t> batch(rows);
      std::iota(batch.begin(), batch.end(), 100);
      std::multiset<int64_t> seen;
      for (int r = 0; r < n; ++r) {
        const std::vector<int64_t> s = train::shard_rows(batch, r, n);
        EXPECT_LE(s.size(), (rows + n - 1) / n);
        EXPECT_GE(s.size(), rows / n);
        seen.insert(s.begin(), s.end());
      }
      EXPECT_EQ(seen, std::multiset<int64_t>(batch.begin(), batch.end()))
          << n << " ranks, " << rows << " rows";
    }
  }
  EXPECT_THROW(train::shard_rows({1, 2}, 2, 2), Error);
}

TEST(Comm, SingleProcessCollectivesLeaveTheData) {
  train::Communicator& c = train::single_process();
  EXPECT_EQ(c.rank(), 0);
  EXPECT_EQ(c.size(), 1);
  float f[3] = {1, 2, 3};
  c.allreduce_sum(f, 3);
  EXPECT_EQ(f[2], 3.0f);
  EXPECT_EQ(train::broadcast_string(c, "abc"), "abc");
  EXPECT_NO_THROW(train::check_same_on_all_ranks(c, {{"config", 1}}));
}

TEST(Comm, ParamsHashSeesEveryByteAndName) {
  TinyModel a(3), b(3);
  EXPECT_EQ(train::params_hash(a.params), train::params_hash(b.params));
  b.params[4].second.data<float>()[1] += 1e-7f;
  EXPECT_NE(train::params_hash(a.params), train::params_hash(b.params));
  TinyModel c(3);
  c.params[0].first = "renamed";
  EXPECT_NE(train::params_hash(a.params), train::params_hash(c.params));
}

// In one process the weight is only reported: the update is the loss's, as before.
TEST(Comm, LossWeightChangesNothingInOneProcess) {
  const Tensor x = testing::random_uniform({4, 5, TinyModel::C}, 3);
  Tensor y = Tensor::empty({4, 5}, DType::i64);
  for (int64_t i = 0; i < 20; ++i) y.data<int64_t>()[i] = (i * 3 + 1) % TinyModel::V;
  TinyModel m1(10), m2(10);
  train::AdamW o1(m1.params, {}), o2(m2.params, {});
  const train::ConstantSchedule sched(1e-2);
  train::TrainerOptions to;
  to.accumulation_steps = 2;
  to.clip_norm = 0.1;
  train::Trainer t1(o1, sched, to, 1), t2(o2, sched, to, 1);
  for (int s = 0; s < 3; ++s) {
    const train::StepResult r1 = t1.step([&](const train::StepContext&) { return m1.loss(x, y, 0, 0); });
    const train::StepResult r2 = t2.step([&](const train::StepContext& c) {
      return train::Loss{m2.loss(x, y, 0, 0), 7.0 + c.micro};
    });
    EXPECT_EQ(r1.loss, r2.loss);
    EXPECT_EQ(r2.weight, 15.0);
    EXPECT_EQ(r2.comm_bytes, 0u);
  }
  EXPECT_EQ(train::params_hash(m1.params), train::params_hash(m2.params));
}

}  // namespace
}  // namespace attn
