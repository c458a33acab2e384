#include <attn/core/config.h>
#include <attn/core/error.h>
#include <attn/core/parallel.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#if defined(__x86_64__) || defined(_M_X64)
#include <immintrin.h>
#endif

namespace attn {
namespace {

int default_threads() {
  if (const std::optional<int> n = runtime_config().num_threads) return *n;
  const unsigned hc = std::thread::hardware_concurrency();
  return hc == 0 ? 1 : static_cast<int>(hc);
}

// How long a worker polls for the next job, and the caller for the workers to finish, before
// sleeping on a condition variable (ATTN_SPIN_US, default 50 µs, 0 = sleep at once). A decoding step
// makes ~20 parallel_for calls a few microseconds apart; waking a sleeping thread through the kernel
// cost ~10% of a batch-32 step (futex wake-ups in perf).
std::chrono::nanoseconds spin_time() {
  static const std::chrono::nanoseconds t(runtime_config().spin_us * 1000);
  return t;
}

inline void cpu_relax() {
#if defined(__x86_64__) || defined(_M_X64)
  _mm_pause();
#else
  std::this_thread::yield();
#endif
}

// Polls `ready` for up to spin_time(); true if it became true.
template <class F>
bool spin_until(F ready) {
  const auto limit = spin_time();
  if (limit.count() == 0) return ready();
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0;; ++i) {
    if (ready()) return true;
    cpu_relax();
    if ((i & 63) == 63 && std::chrono::steady_clock::now() - start > limit) return ready();
  }
}

// Workers poll briefly, then sleep on a condition variable between jobs. A job is a range
// [0, n) split into chunks; every participant (workers + caller) pulls chunks
// from an atomic counter until none are left.
class Pool {
 public:
  explicit Pool(int n) { resize(n); }
  ~Pool() { stop(); }

  int size() const { return size_; }

  void resize(int n) {
    std::lock_guard<std::mutex> run_lock(run_mu_);
    stop();
    size_ = n;
    quit_.store(false);
    // A new worker must only wake for jobs started after it exists: starting it
    // from generation 0 made it run a stale generation and decrement active_
    // twice, so run() could return early or wait forever.
    const uint64_t gen = generation_.load();
    for (int t = 1; t < n; ++t) workers_.emplace_back([this, t, gen] { worker(t, gen); });
  }

  void run(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t, int)>& fn) {
    std::lock_guard<std::mutex> run_lock(run_mu_);
    const int64_t chunks = (n + grain - 1) / grain;
    {
      std::lock_guard<std::mutex> lk(mu_);
      fn_ = &fn;
      n_ = n;
      grain_ = grain;
      chunks_ = chunks;
      next_.store(0);
      error_ = nullptr;
      active_.store(static_cast<int>(workers_.size()));
      generation_.fetch_add(1, std::memory_order_release);
    }
    cv_.notify_all();
    work(0);
    spin_until([this] { return active_.load(std::memory_order_acquire) == 0; });
    std::unique_lock<std::mutex> lk(mu_);
    done_cv_.wait(lk, [this] { return active_.load() == 0; });
    fn_ = nullptr;
    if (error_) std::rethrow_exception(error_);
  }

 private:
  void work(int tid) {
    tls_in_pool = true;
    tls_tid = tid;
    while (true) {
      const int64_t c = next_.fetch_add(1);
      if (c >= chunks_) break;
      const int64_t b = c * grain_, e = std::min(n_, b + grain_);
      try {
        (*fn_)(b, e, tid);
      } catch (...) {
        std::lock_guard<std::mutex> lk(mu_);
        if (!error_) error_ = std::current_exception();
        next_.store(chunks_);
      }
    }
    tls_in_pool = false;
  }

  void worker(int tid, uint64_t seen) {
    while (true) {
      spin_until([&] {
        return quit_.load(std::memory_order_acquire) || generation_.load(std::memory_order_acquire) != seen;
      });
      {
        std::unique_lock<std::mutex> lk(mu_);
        cv_.wait(lk, [&] { return quit_.load() || generation_.load() != seen; });
        if (quit_.load()) return;
        seen = generation_.load();
      }
      work(tid);
      if (active_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
        std::lock_guard<std::mutex> lk(mu_);  // the caller checks active_ under mu_ before it sleeps
        done_cv_.notify_one();
      }
    }
  }

  void stop() {
    {
      std::lock_guard<std::mutex> lk(mu_);
      quit_.store(true);
    }
    cv_.notify_all();
    for (auto& w : workers_) w.join();
    workers_.clear();
  }

 public:
  static thread_local bool tls_in_pool;
  static thread_local int tls_tid;

 private:
  std::mutex run_mu_;  // one job at a time
  std::mutex mu_;
  std::condition_variable cv_, done_cv_;
  std::vector<std::thread> workers_;
  int size_ = 1;
  std::atomic<bool> quit_{false};
  std::atomic<uint64_t> generation_{0};  // changes (under mu_) when a job is published
  std::atomic<int> active_{0};           // workers still in the current job
  const std::function<void(int64_t, int64_t, int)>* fn_ = nullptr;
  int64_t n_ = 0, grain_ = 1, chunks_ = 0;
  std::atomic<int64_t> next_{0};
  std::exception_ptr error_;
};

thread_local bool Pool::tls_in_pool = false;
thread_local int Pool::tls_tid = 0;

Pool& pool() {
  static Pool p(default_threads());
  return p;
}

// The outside team set on this thread (set_thread_team), or none.
thread_local TeamRun tls_team_run = nullptr;
thread_local int tls_team_threads = 1;

// One parallel_for job on an outside team: every member pulls chunks from `next` as the pool's
// threads do; the first exception is kept and rethrown on the caller.
struct TeamJob {
  const std::function<void(int64_t, int64_t, int)>* fn;
  int64_t n, grain, chunks;
  std::atomic<int64_t> next{0};
  std::mutex mu;
  std::exception_ptr error;
};

void team_body(int tid, void* ctx) {
  auto& j = *static_cast<TeamJob*>(ctx);
  const bool was_in = Pool::tls_in_pool;
  const int was_tid = Pool::tls_tid;
  Pool::tls_in_pool = true;
  Pool::tls_tid = tid;
  while (true) {
    const int64_t c = j.next.fetch_add(1);
    if (c >= j.chunks) break;
    const int64_t b = c * j.grain, e = std::min(j.n, b + j.grain);
    try {
      (*j.fn)(b, e, tid);
    } catch (...) {
      std::lock_guard<std::mutex> lk(j.mu);
      if (!j.error) j.error = std::current_exception();
      j.next.store(j.chunks);
    }
  }
  Pool::tls_in_pool = was_in;
  Pool::tls_tid = was_tid;
}

}  // namespace

int num_threads() { return tls_team_run ? tls_team_threads : pool().size(); }

void set_thread_team(TeamRun run, int threads) {
  ATTN_CHECK(run == nullptr || threads >= 1, "set_thread_team: expected threads >= 1; got ", threads);
  tls_team_run = run;
  tls_team_threads = run ? threads : 1;
}

TeamScope::TeamScope(TeamRun run, int threads) : run_(tls_team_run), threads_(tls_team_threads) {
  set_thread_team(run, threads);
}

TeamScope::~TeamScope() { set_thread_team(run_, threads_); }

bool in_parallel_for() { return Pool::tls_in_pool; }

void set_num_threads(int n) {
  ATTN_CHECK(n >= 1, "set_num_threads: expected n >= 1; got ", n);
  if (n != pool().size()) pool().resize(n);
}

void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t, int)>& fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  if (Pool::tls_in_pool || num_threads() == 1 || n <= grain) {
    // Serial: a nested call keeps the caller's thread id so per-thread
    // scratch indexed by it stays private.
    const int tid = Pool::tls_in_pool ? Pool::tls_tid : 0;
    for (int64_t b = 0; b < n; b += grain) fn(b, std::min(n, b + grain), tid);
    return;
  }
  if (tls_team_run) {
    TeamJob job;
    job.fn = &fn;
    job.n = n;
    job.grain = grain;
    job.chunks = (n + grain - 1) / grain;
    tls_team_run(tls_team_threads, &team_body, &job);
    if (job.error) std::rethrow_exception(job.error);
    return;
  }
  pool().run(n, grain, fn);
}

}  // namespace attn
