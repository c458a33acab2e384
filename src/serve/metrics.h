// The server's counters, as Prometheus text (GET /metrics). Private to the serve floor.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace attn::serve::detail {

// A histogram with fixed upper bounds (Prometheus "le"); thread-safe.
class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size() + 1) {}
  void observe(double v);
  // "<name>_bucket{<labels>le=...} n" lines, then _sum and _count.
  void write(std::string& out, const std::string& name, const std::string& labels) const;

 private:
  std::vector<double> bounds_;
  mutable std::mutex mu_;
  std::vector<uint64_t> counts_;
  double sum_ = 0;
  uint64_t count_ = 0;
};

// The generation runtime's state (models/runtime): the paged KV pool and the scheduler's counters.
struct RuntimeGauges {
  bool present = false;
  int64_t pool_bytes = 0, reserved_bytes = 0, used_bytes = 0, wasted_bytes = 0, cached_bytes = 0;
  int64_t blocks = 0, blocks_free = 0;
  int64_t prompt_tokens = 0, cached_tokens = 0;  // admitted prompts' tokens, and those from the prefix cache
  int64_t evictions = 0, preemptions = 0;
  int64_t steps = 0, rows = 0;
  int64_t running = 0, waiting = 0;
};

class Metrics {
 public:
  Metrics();
  // One finished request: its endpoint (a known path, else "other"), status and seconds.
  void request(const std::string& endpoint, int status, double seconds);
  void tokens(const char* kind, int64_t n);  // kind: prompt, completion, embedding, classify
  void batch(const char* batcher, int64_t inputs, int64_t tokens);
  void queue_depth(const char* queue, int64_t depth);
  void generations_active(int64_t n) { active_.store(n); }
  void set_ready(bool r) { ready_.store(r); }
  void runtime(const RuntimeGauges& g);
  std::string text() const;  // the Prometheus exposition format (text/plain; version=0.0.4)

 private:
  mutable std::mutex mu_;
  std::map<std::pair<std::string, int>, uint64_t> requests_;
  std::map<std::string, Histogram> latency_;  // per endpoint
  std::map<std::string, uint64_t> tokens_;
  std::map<std::string, Histogram> batch_inputs_, batch_tokens_;
  std::map<std::string, int64_t> queues_;
  std::atomic<int64_t> active_{0};
  std::atomic<bool> ready_{false};
  RuntimeGauges runtime_;
};

}  // namespace attn::serve::detail
