#include <attn/core/error.h>
#include <attn/core/parallel.h>

#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>


namespace attn {
namespace {

int default_threads() {
  if (const char* env = std::getenv("ATTN_NUM_THREADS")) {
    const int n = std::atoi(env);
    if (n >= 1) return n;
  }
  const unsigned hc = std::thread::hardware_concurrency();
  return hc == 0 ? 1 : static_cast<int>(hc);
}

// Workers sleep on a condition variable between jobs. A job is a range
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
    quit_ = false;
    // A new worker must only wake for jobs started after it exists: starting it
    // from generation 0 made it run a stale generation and decrement active_
    // twice, so run() could return early or wait forever.
    const uint64_t gen = generation_;
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
      active_ = static_cast<int>(workers_.size());
      ++generation_;
    }
    cv_.notify_all();
    work(0);
    std::unique_lock<std::mutex> lk(mu_);
    done_cv_.wait(lk, [this] { return active_ == 0; });
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
      {
        std::unique_lock<std::mutex> lk(mu_);
        cv_.wait(lk, [&] { return quit_ || generation_ != seen; });
        if (quit_) return;
        seen = generation_;
      }
      work(tid);
      {
        std::lock_guard<std::mutex> lk(mu_);
        if (--active_ == 0) done_cv_.notify_one();
      }
    }
  }

  void stop() {
    {
      std::lock_guard<std::mutex> lk(mu_);
      quit_ = true;
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
  bool quit_ = false;
  uint64_t generation_ = 0;
  int active_ = 0;
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

}  // namespace

int num_threads() { return pool().size(); }

bool in_parallel_for() { return Pool::tls_in_pool; }

void set_num_threads(int n) {
  ATTN_CHECK(n >= 1, "set_num_threads: expected n >= 1; got ", n);
  if (n != pool().size()) pool().resize(n);
}

void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t, int)>& fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  if (Pool::tls_in_pool || pool().size() == 1 || n <= grain) {
    // Serial: a nested call keeps the caller's thread id so per-thread
    // scratch indexed by it stays private.
    const int tid = Pool::tls_in_pool ? Pool::tls_tid : 0;
    for (int64_t b = 0; b < n; b += grain) fn(b, std::min(n, b + grain), tid);
    return;
  }
  pool().run(n, grain, fn);
}

}  // namespace attn
