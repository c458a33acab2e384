// set_thread_team / TeamScope: parallel_for on an outside thread team (what the Python module does
// with torch's OpenMP team). Every chunk must run exactly once with a thread id below num_threads(),
// exceptions must reach the caller, nested calls must stay serial, and the setting must belong to
// the thread that made it and end with the scope.
#include <attn/core/error.h>
#include <attn/core/parallel.h>
#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

namespace attn {
namespace {

std::atomic<int> g_team_calls{0};

// A team of real threads: body(t) on a fresh std::thread for each t.
void threads_team(int threads, void (*body)(int, void*), void* ctx) {
  g_team_calls.fetch_add(1);
  std::vector<std::thread> ts;
  for (int t = 1; t < threads; ++t) ts.emplace_back([=] { body(t, ctx); });
  body(0, ctx);
  for (auto& t : ts) t.join();
}

// A "team" that runs its members one after another on the caller (allowed by the contract).
void serial_team(int threads, void (*body)(int, void*), void* ctx) {
  g_team_calls.fetch_add(1);
  for (int t = threads - 1; t >= 0; --t) body(t, ctx);
}

void check_every_chunk_once(int64_t n, int64_t grain, int threads) {
  std::vector<std::atomic<int>> hits(static_cast<std::size_t>(n));
  std::mutex mu;
  std::set<int> tids;
  parallel_for(n, grain, [&](int64_t b, int64_t e, int tid) {
    ASSERT_GE(tid, 0);
    ASSERT_LT(tid, threads);
    {
      std::lock_guard<std::mutex> lk(mu);
      tids.insert(tid);
    }
    for (int64_t i = b; i < e; ++i) hits[static_cast<std::size_t>(i)].fetch_add(1);
  });
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[static_cast<std::size_t>(i)].load(), 1) << "item " << i;
}

TEST(ParallelTeam, RunsEveryChunkOnceOnTheTeam) {
  for (auto run : {&threads_team, &serial_team}) {
    for (int threads : {2, 3, 5}) {
      const int before = g_team_calls.load();
      {
        TeamScope scope(run, threads);
        EXPECT_EQ(num_threads(), threads);
        check_every_chunk_once(1000, 7, threads);
        check_every_chunk_once(3, 1, threads);
      }
      EXPECT_EQ(g_team_calls.load(), before + 2) << "the team was not used";
    }
  }
}

TEST(ParallelTeam, ScopeRestoresThePool) {
  const int pool = num_threads();
  {
    TeamScope outer(&threads_team, 4);
    {
      TeamScope inner(nullptr, 0);  // back to the pool inside
      EXPECT_EQ(num_threads(), pool);
    }
    EXPECT_EQ(num_threads(), 4);
  }
  EXPECT_EQ(num_threads(), pool);
  const int before = g_team_calls.load();
  check_every_chunk_once(100, 1, pool);
  EXPECT_EQ(g_team_calls.load(), before);
}

TEST(ParallelTeam, IsPerThread) {
  const int pool = num_threads();
  TeamScope scope(&threads_team, pool + 2);
  int seen = -1;
  std::thread other([&] { seen = num_threads(); });
  other.join();
  EXPECT_EQ(num_threads(), pool + 2);
  EXPECT_EQ(seen, pool) << "another thread saw this thread's team";
}

TEST(ParallelTeam, ExceptionsReachTheCaller) {
  TeamScope scope(&threads_team, 3);
  for (int round = 0; round < 20; ++round) {
    EXPECT_THROW(parallel_for(100, 1,
                              [](int64_t b, int64_t, int) {
                                if (b == 37) ATTN_CHECK(false, "chunk 37 failed");
                              }),
                 Error);
    check_every_chunk_once(50, 1, 3);
  }
}

TEST(ParallelTeam, NestedCallsRunSerially) {
  TeamScope scope(&threads_team, 3);
  std::atomic<int> inner_items{0};
  std::atomic<bool> wrong_tid{false};
  const int before = g_team_calls.load();
  parallel_for(6, 1, [&](int64_t, int64_t, int tid) {
    parallel_for(10, 1, [&](int64_t b, int64_t e, int inner_tid) {
      if (inner_tid != tid) wrong_tid = true;
      inner_items.fetch_add(static_cast<int>(e - b));
    });
  });
  EXPECT_EQ(inner_items.load(), 60);
  EXPECT_FALSE(wrong_tid.load()) << "a nested call changed thread id";
  EXPECT_EQ(g_team_calls.load(), before + 1) << "a nested call used the team";
}

TEST(ParallelTeam, RejectsZeroThreads) { EXPECT_THROW(set_thread_team(&threads_team, 0), Error); }

}  // namespace
}  // namespace attn
