// Dynamic batching of embedding and classification inputs. Requests submit their inputs (each
// with its token count) and wait; one thread gathers inputs from the waiting requests, in arrival
// order, into a batch of at most max_batch_tokens tokens, closing it early when that many are
// waiting and otherwise max_wait after its first input arrived, and runs it. A request's inputs may
// span batches. Private to the serve floor.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "serve/util.h"

namespace attn::serve::detail {

template <class In, class Out>
class Batcher {
 public:
  // Runs one batch: one result per input, in order.
  using RunFn = std::function<std::vector<Out>(const std::vector<const In*>& batch)>;
  // Called with each batch's inputs and tokens, and the queue depth in inputs after every change.
  using BatchNote = std::function<void(int64_t inputs, int64_t tokens)>;
  using DepthNote = std::function<void(int64_t depth)>;

  Batcher(RunFn run, int64_t max_batch_tokens, double max_wait_ms, int64_t max_queued, BatchNote on_batch,
          DepthNote on_depth)
      : run_(std::move(run)),
        max_tokens_(max_batch_tokens),
        max_wait_(std::chrono::microseconds(static_cast<int64_t>(max_wait_ms * 1000))),
        max_queued_(max_queued),
        on_batch_(std::move(on_batch)),
        on_depth_(std::move(on_depth)),
        thread_([this] { loop(); }) {}
  ~Batcher() { stop(); }

  // Blocks until every input has run; rethrows a batch's error. HttpError 429 when the queue holds
  // max_queued inputs already.
  std::vector<Out> run(std::vector<In> inputs, std::vector<int64_t> tokens) {
    auto job = std::make_shared<Job>();
    job->in = std::move(inputs);
    job->tokens = std::move(tokens);
    job->out.resize(job->in.size());
    job->arrival = std::chrono::steady_clock::now();
    const auto n = static_cast<int64_t>(job->in.size());
    {
      std::unique_lock<std::mutex> lk(mu_);
      if (queued_ + n > max_queued_) {
        HttpError e(429,
                    "the server is busy: " + std::to_string(queued_) + " inputs are waiting (limit " +
                        std::to_string(max_queued_) + ", --max-queued-inputs); retry later",
                    "", "queue_full");
        e.retry_after_s = 1;
        throw e;
      }
      if (stopped_) throw HttpError(503, "the server is shutting down", "", "shutting_down");
      queue_.push_back(job);
      queued_ += n;
      for (int64_t t : job->tokens) queued_tokens_ += t;
      if (on_depth_) on_depth_(queued_);
    }
    cv_.notify_all();
    std::unique_lock<std::mutex> lk(mu_);
    done_cv_.wait(lk, [&] { return job->done == job->in.size(); });
    if (job->error) std::rethrow_exception(job->error);
    return std::move(job->out);
  }

  void stop() {
    {
      std::lock_guard<std::mutex> lk(mu_);
      if (stopped_) return;
      stopped_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

 private:
  struct Job {
    std::vector<In> in;
    std::vector<int64_t> tokens;
    std::vector<Out> out;
    std::size_t next = 0, done = 0;
    std::exception_ptr error;
    std::chrono::steady_clock::time_point arrival;
  };

  void loop() {
    std::unique_lock<std::mutex> lk(mu_);
    while (true) {
      cv_.wait(lk, [&] { return stopped_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopped, nothing left
      const auto deadline = queue_.front()->arrival + max_wait_;
      cv_.wait_until(lk, deadline, [&] { return stopped_ || queued_tokens_ >= max_tokens_; });
      // Gather.
      std::vector<std::pair<std::shared_ptr<Job>, std::size_t>> items;
      int64_t tokens = 0;
      while (!queue_.empty()) {
        const std::shared_ptr<Job>& job = queue_.front();
        while (job->next < job->in.size()) {
          const int64_t t = job->tokens[job->next];
          if (!items.empty() && tokens + t > max_tokens_) break;
          items.emplace_back(job, job->next++);
          tokens += t;
        }
        if (job->next < job->in.size()) break;
        queue_.pop_front();
      }
      queued_ -= static_cast<int64_t>(items.size());
      queued_tokens_ -= tokens;
      if (on_depth_) on_depth_(queued_);
      lk.unlock();
      std::vector<const In*> batch;
      batch.reserve(items.size());
      for (const auto& [job, i] : items) batch.push_back(&job->in[i]);
      std::vector<Out> out;
      std::exception_ptr error;
      try {
        out = run_(batch);
        if (out.size() != batch.size()) throw HttpError(500, "internal error: a batch lost results");
      } catch (...) {
        error = std::current_exception();
      }
      if (on_batch_) on_batch_(static_cast<int64_t>(items.size()), tokens);
      lk.lock();
      for (std::size_t k = 0; k < items.size(); ++k) {
        const auto& [job, i] = items[k];
        if (error) {
          if (!job->error) job->error = error;
        } else {
          job->out[i] = std::move(out[k]);
        }
        ++job->done;
      }
      done_cv_.notify_all();
    }
  }

  RunFn run_;
  int64_t max_tokens_;
  std::chrono::steady_clock::duration max_wait_;
  int64_t max_queued_;
  BatchNote on_batch_;
  DepthNote on_depth_;
  std::mutex mu_;
  std::condition_variable cv_, done_cv_;
  std::deque<std::shared_ptr<Job>> queue_;
  int64_t queued_ = 0, queued_tokens_ = 0;
  bool stopped_ = false;
  std::thread thread_;  // last: starts after the members it uses exist
};

}  // namespace attn::serve::detail
