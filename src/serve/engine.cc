// The generation engine (serve/engine.h).
#include "serve/engine.h"

#include <attn/core/error.h>

#include <algorithm>

namespace attn::serve::detail {

using models::runtime::FinishReason;
using models::runtime::SequenceEvent;

GenEngine::GenEngine(models::runtime::BatchDecoder& model, const EngineOptions& options, Metrics& metrics,
                     ComputeGate& gate)
    : model_(model), opt_(options), metrics_(metrics), gate_(gate) {
  models::runtime::KvCacheConfig kc = model.kv_layout();
  kc.block_tokens = options.block_tokens;
  kc.dtype = options.kv_dtype;
  kc.pool_bytes = options.kv_cache_bytes;
  cache_ = std::make_unique<models::runtime::PagedKvCache>(kc);
  sched_ = std::make_unique<models::runtime::Scheduler>(model, *cache_, options.scheduler);
  capacity_ = sched_->sequence_capacity();
  publish(true);
  thread_ = std::thread([this] { run(); });
}

GenEngine::~GenEngine() { stop(); }

int64_t GenEngine::pool_bytes() const { return cache_->num_blocks() * cache_->block_bytes(); }

std::shared_ptr<GenStream> GenEngine::submit(std::vector<int32_t> prompt,
                                             const models::GenerateOptions& options, uint64_t seed,
                                             std::vector<int64_t> row_layers,
                                             std::vector<int64_t> row_heads) {
  auto s = std::make_shared<GenStream>();
  s->request.prompt = std::move(prompt);
  s->request.options = options;
  s->request.seed = seed;
  s->row_layers = std::move(row_layers);
  s->row_heads = std::move(row_heads);
  s->request.capture_attention = !s->row_layers.empty() && !s->row_heads.empty();
  GenStream* raw = s.get();
  const int64_t layers = model_.kv_layout().layers;
  // Runs on the engine thread (inside step or cancel); the stream outlives it (active_ holds it).
  s->request.on_event = [raw, layers](const SequenceEvent& e) {
    {
      std::lock_guard<std::mutex> lk(raw->mu);
      if (e.kind == SequenceEvent::Kind::admitted) {
        raw->admitted = true;
        raw->cached_tokens = e.cached_tokens;
      } else if (e.kind == SequenceEvent::Kind::token) {
        raw->tokens.push_back(static_cast<int32_t>(e.token));
        if (e.attention) {  // [layers, H, keys] -> the requested [layers', heads', keys]
          const int64_t keys = e.keys;
          const int64_t H = static_cast<int64_t>(e.attention->size()) / (layers * keys);
          std::vector<float> rows;
          rows.reserve(raw->row_layers.size() * raw->row_heads.size() * static_cast<std::size_t>(keys));
          for (const int64_t l : raw->row_layers)
            for (const int64_t h : raw->row_heads) {
              const float* src = e.attention->data() + (l * H + h) * keys;
              rows.insert(rows.end(), src, src + keys);
            }
          raw->rows.push_back(std::move(rows));
        }
      } else {
        raw->finished = true;
        raw->reason = e.reason;
        raw->error = e.error;
      }
    }
    raw->cv.notify_all();
  };
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (stopping_) throw HttpError(503, "the server is shutting down", "", "shutting_down");
    // Requests beyond the batch's free places wait; more than max_waiting of them: 429.
    const int64_t places = std::max<int64_t>(0, opt_.scheduler.max_sequences - running_.load());
    if (queued_.load() >= opt_.max_waiting + places) {
      HttpError e(429,
                  "the server is busy: " + std::to_string(queued_.load()) +
                      " generation requests are waiting for room in the batch (limit " +
                      std::to_string(opt_.max_waiting) + ", --max-queued-generations); retry later",
                  "", "queue_full");
      e.retry_after_s = 1;
      throw e;
    }
    ++queued_;
    inbox_.push_back(s);
  }
  cv_.notify_all();
  return s;
}

void GenEngine::cancel(GenStream& s) {
  s.cancel.store(true);
  cv_.notify_all();
}

void GenEngine::stop() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void GenEngine::publish(bool force) {
  const auto now = std::chrono::steady_clock::now();
  if (!force && now - published_ < std::chrono::milliseconds(200)) return;
  published_ = now;
  const models::runtime::KvAccounting a = cache_->accounting();
  const models::runtime::SchedulerStats st = sched_->stats();
  RuntimeGauges g;
  g.pool_bytes = a.pool;
  g.reserved_bytes = a.reserved;
  g.used_bytes = a.used;
  g.wasted_bytes = a.wasted;
  g.cached_bytes = a.cached;
  g.blocks = cache_->num_blocks();
  g.blocks_free = a.blocks_free;
  g.prompt_tokens = st.prompt_tokens;
  g.cached_tokens = st.cached_tokens;
  g.evictions = cache_->evictions();
  g.preemptions = st.preemptions;
  g.steps = st.steps;
  g.rows = st.rows;
  g.running = st.running;
  g.waiting = st.waiting;
  metrics_.runtime(g);
  metrics_.queue_depth("generate", st.waiting);
  metrics_.generations_active(st.running);
}

void GenEngine::run() {
  for (;;) {
    std::vector<std::shared_ptr<GenStream>> fresh;
    {
      std::unique_lock<std::mutex> lk(mu_);
      cv_.wait(lk, [&] { return stopping_ || !inbox_.empty() || !sched_->idle(); });
      if (stopping_ && inbox_.empty() && sched_->idle()) break;
      fresh.swap(inbox_);
    }
    for (auto& s : fresh) {
      try {
        if (s->cancel.load()) throw Error("cancelled before it was queued");
        s->id = sched_->submit(std::move(s->request));
        active_.push_back(s);
      } catch (const std::exception& e) {
        --queued_;
        {
          std::lock_guard<std::mutex> lk(s->mu);
          s->finished = true;
          s->reason = s->cancel.load() ? FinishReason::cancelled : FinishReason::error;
          s->error = e.what();
        }
        s->cv.notify_all();
      }
    }
    for (auto& s : active_)
      if (s->cancel.load()) sched_->cancel(s->id);  // its finished event comes at once
    try {
      GateHold hold(gate_);
      sched_->step();
    } catch (const std::exception& e) {
      // The scheduler ends the sequences of a failed forward pass itself (finished, error). Anything else
      // thrown here ends every active request (their workers answer 500); the engine goes on.
      for (auto& s : active_) sched_->cancel(s->id);
    }
    // Finished streams leave; the queue count follows the scheduler.
    active_.erase(std::remove_if(active_.begin(), active_.end(),
                                 [](const std::shared_ptr<GenStream>& s) {
                                   std::lock_guard<std::mutex> lk(s->mu);
                                   return s->finished;
                                 }),
                  active_.end());
    {
      std::lock_guard<std::mutex> lk(mu_);
      const models::runtime::SchedulerStats st = sched_->stats();
      queued_.store(static_cast<int64_t>(inbox_.size()) + st.waiting);
      running_.store(st.running);
    }
    publish(sched_->idle());
  }
  publish(true);
}

}  // namespace attn::serve::detail
