// The thread pool's hand-off between jobs: workers poll for ATTN_SPIN_US (default 50 µs) before they
// sleep, and the caller polls for the workers to finish. Jobs that follow each other within the spin
// window, jobs after the workers fell asleep, and the no-spin mode must all run every chunk exactly
// once and return only when every chunk is done.
#include <attn/core/error.h>
#include <attn/core/parallel.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

namespace attn {
namespace {

class ThreadsGuard {
 public:
  ThreadsGuard() : saved_(num_threads()) {}
  ~ThreadsGuard() { set_num_threads(saved_); }

 private:
  int saved_;
};

// Runs `jobs` jobs of n items back to back (optionally pausing between them) and checks that every
// item of every job ran exactly once before parallel_for returned.
void run_jobs(int jobs, int64_t n, int64_t grain, std::chrono::microseconds pause) {
  std::vector<std::atomic<int>> hits(static_cast<std::size_t>(n));
  for (int j = 0; j < jobs; ++j) {
    for (auto& h : hits) h.store(0);
    parallel_for(n, grain, [&](int64_t b, int64_t e, int tid) {
      ASSERT_GE(tid, 0);
      ASSERT_LT(tid, num_threads());
      for (int64_t i = b; i < e; ++i) hits[static_cast<std::size_t>(i)].fetch_add(1);
    });
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[static_cast<std::size_t>(i)].load(), 1) << "job " << j;
    if (pause.count() > 0) std::this_thread::sleep_for(pause);
  }
}

TEST(ParallelHandOff, BackToBackJobsInsideTheSpinWindow) {
  ThreadsGuard guard;
  for (int threads : {2, 3}) {
    set_num_threads(threads);
    run_jobs(2000, 7, 1, std::chrono::microseconds(0));
    run_jobs(200, 1000, 16, std::chrono::microseconds(0));
  }
}

TEST(ParallelHandOff, JobsAfterTheWorkersFellAsleep) {
  ThreadsGuard guard;
  set_num_threads(2);
  run_jobs(20, 64, 1, std::chrono::microseconds(2000));  // 2 ms > the 50 µs spin
}

TEST(ParallelHandOff, ExceptionsAndResizeBetweenSpinningJobs) {
  ThreadsGuard guard;
  for (int round = 0; round < 50; ++round) {
    set_num_threads(round % 2 == 0 ? 2 : 3);
    EXPECT_THROW(parallel_for(100, 1,
                              [](int64_t b, int64_t, int) {
                                if (b == 37) ATTN_CHECK(false, "chunk 37 failed");
                              }),
                 Error);
    run_jobs(3, 50, 1, std::chrono::microseconds(0));
  }
}

// ATTN_SPIN_US is read once per process: run this binary again with 0 (sleep at once) and with a long
// spin, and the same checks must pass.
TEST(ParallelHandOff, SpinSettingFromTheEnvironment) {
  if (std::getenv("ATTN_PARALLEL_TEST_CHILD") != nullptr) {
    ThreadsGuard guard;
    set_num_threads(2);
    run_jobs(500, 9, 1, std::chrono::microseconds(0));
    run_jobs(5, 9, 1, std::chrono::microseconds(1000));
    return;
  }
  char self[4096] = {};
  ASSERT_GT(readlink("/proc/self/exe", self, sizeof(self) - 1), 0);
  for (const std::string us : {"0", "2000"}) {
    const std::string cmd = "ATTN_SPIN_US=" + us + " ATTN_PARALLEL_TEST_CHILD=1 " + std::string(self) +
                            " --gtest_filter=ParallelHandOff.SpinSettingFromTheEnvironment >/dev/null 2>&1";
    EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  }
}

}  // namespace
}  // namespace attn
