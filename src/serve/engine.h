// The generation engine of `attn serve` (issue 37): ONE model, one paged KV cache and one
// continuous-batching scheduler (models/runtime/scheduler.h) driven by one thread. HTTP workers
// submit requests and read their tokens from a GenStream; a request whose client goes away, or whose
// stop string has been seen, is cancelled and its blocks are freed at the next step. Private to the
// serve floor.
#pragma once

#include <attn/models/runtime/batch.h>
#include <attn/models/runtime/kv_cache.h>
#include <attn/models/runtime/scheduler.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "serve/metrics.h"
#include "serve/util.h"

namespace attn::serve::detail {

// One request's tokens as the engine produces them.
struct GenStream {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<int32_t> tokens;  // generated, not yet taken
  // With rows requested: per token in `tokens`, the attention row that chose it, [layers, heads, keys]
  // for the requested layers and heads (keys = the positions before the token).
  std::deque<std::vector<float>> rows;
  std::vector<int64_t> row_layers, row_heads;  // set before submission; empty: no rows
  bool admitted = false, finished = false;
  int64_t cached_tokens = 0;  // prompt tokens the prefix cache gave
  models::runtime::FinishReason reason = models::runtime::FinishReason::stop;
  std::string error;
  std::atomic<bool> cancel{false};  // set by the worker; the engine cancels before its next step
  // Filled by the engine thread.
  models::runtime::SequenceRequest request;
  int64_t id = -1;
};

struct EngineOptions {
  models::runtime::SchedulerOptions scheduler;
  int64_t kv_cache_bytes = 0;  // the pool
  int64_t block_tokens = 16;
  ops::KvDtype kv_dtype = ops::KvDtype::f32;
  int64_t max_waiting = 64;  // requests queued before 429
};

class GenEngine {
 public:
  // Each step holds `gate` (the server's compute gate): whoever holds it may use the model.
  GenEngine(models::runtime::BatchDecoder& model, const EngineOptions& options, Metrics& metrics,
            ComputeGate& gate);
  ~GenEngine();  // stop()
  GenEngine(const GenEngine&) = delete;
  GenEngine& operator=(const GenEngine&) = delete;

  // Queues a request (HttpError 429 when max_waiting requests wait already). The options must have
  // passed the server's checks; an error the scheduler still finds ends the stream with it.
  // row_layers / row_heads (both non-empty, ids in range): each token comes with its attention row.
  std::shared_ptr<GenStream> submit(std::vector<int32_t> prompt, const models::GenerateOptions& options,
                                    uint64_t seed, std::vector<int64_t> row_layers = {},
                                    std::vector<int64_t> row_heads = {});
  // Ends the request at the next step (blocks freed); its stream reports finished(cancelled).
  void cancel(GenStream& s);
  // The most positions one sequence may hold (the context, or the pool when smaller).
  int64_t sequence_capacity() const { return capacity_; }
  int64_t pool_bytes() const;
  // Finishes what runs and waits, then ends the thread (new submissions: 503).
  void stop();

 private:
  void run();
  void publish(bool force);

  models::runtime::BatchDecoder& model_;
  EngineOptions opt_;
  Metrics& metrics_;
  std::unique_ptr<models::runtime::PagedKvCache> cache_;
  std::unique_ptr<models::runtime::Scheduler> sched_;
  int64_t capacity_ = 0;
  ComputeGate& gate_;
  std::mutex mu_;  // inbox, active, stopping_
  std::condition_variable cv_;
  std::vector<std::shared_ptr<GenStream>> inbox_;
  std::vector<std::shared_ptr<GenStream>> active_;  // submitted to the scheduler, not finished
  std::atomic<int64_t> queued_{0};                  // in the inbox or waiting in the scheduler
  std::atomic<int64_t> running_{0};                 // in the batch
  bool stopping_ = false;
  std::thread thread_;
  std::chrono::steady_clock::time_point published_{};
};

}  // namespace attn::serve::detail
