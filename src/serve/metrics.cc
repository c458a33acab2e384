#include "serve/metrics.h"

#include <cstdio>

namespace attn::serve::detail {
namespace {

std::string num(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.15g", v);
  return buf;
}

const std::vector<double>& latency_bounds() {
  static const std::vector<double> b = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                                        0.5,   1,      2.5,   5,    10,    30,   60,  120};
  return b;
}

const std::vector<double>& batch_input_bounds() {
  static const std::vector<double> b = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024};
  return b;
}

const std::vector<double>& batch_token_bounds() {
  static const std::vector<double> b = {16, 64, 256, 1024, 2048, 4096, 8192, 16384, 65536};
  return b;
}

}  // namespace

void Histogram::observe(double v) {
  std::lock_guard<std::mutex> lk(mu_);
  std::size_t i = 0;
  while (i < bounds_.size() && v > bounds_[i]) ++i;
  ++counts_[i];
  sum_ += v;
  ++count_;
}

void Histogram::write(std::string& out, const std::string& name, const std::string& labels) const {
  std::lock_guard<std::mutex> lk(mu_);
  uint64_t cum = 0;
  const std::string sep = labels.empty() ? "" : ",";
  for (std::size_t i = 0; i <= bounds_.size(); ++i) {
    cum += counts_[i];
    out += name + "_bucket{" + labels + sep + "le=\"" + (i < bounds_.size() ? num(bounds_[i]) : "+Inf") +
           "\"} " + std::to_string(cum) + "\n";
  }
  const std::string l = labels.empty() ? "" : "{" + labels + "}";
  out += name + "_sum" + l + " " + num(sum_) + "\n";
  out += name + "_count" + l + " " + std::to_string(count_) + "\n";
}

Metrics::Metrics() {}

void Metrics::request(const std::string& endpoint, int status, double seconds) {
  std::lock_guard<std::mutex> lk(mu_);
  ++requests_[{endpoint, status}];
  latency_.try_emplace(endpoint, latency_bounds()).first->second.observe(seconds);
}

void Metrics::tokens(const char* kind, int64_t n) {
  std::lock_guard<std::mutex> lk(mu_);
  tokens_[kind] += static_cast<uint64_t>(n);
}

void Metrics::batch(const char* batcher, int64_t inputs, int64_t tokens) {
  std::lock_guard<std::mutex> lk(mu_);
  batch_inputs_.try_emplace(batcher, batch_input_bounds()).first->second.observe(static_cast<double>(inputs));
  batch_tokens_.try_emplace(batcher, batch_token_bounds()).first->second.observe(static_cast<double>(tokens));
}

void Metrics::queue_depth(const char* queue, int64_t depth) {
  std::lock_guard<std::mutex> lk(mu_);
  queues_[queue] = depth;
}

void Metrics::runtime(const RuntimeGauges& g) {
  std::lock_guard<std::mutex> lk(mu_);
  runtime_ = g;
  runtime_.present = true;
}

namespace {
void runtime_text(std::string& out, const RuntimeGauges& g) {
  const auto line = [&out](const std::string& name, int64_t v) {
    out += name + " " + std::to_string(v) + "\n";
  };
  out +=
      "# HELP attn_kv_cache_bytes the paged KV pool: pool, reserved (held by sequences or the prefix cache), "
      "used (filled positions), wasted (reserved - used), cached (held only by the prefix cache), free\n";
  out += "# TYPE attn_kv_cache_bytes gauge\n";
  line("attn_kv_cache_bytes{state=\"pool\"}", g.pool_bytes);
  line("attn_kv_cache_bytes{state=\"reserved\"}", g.reserved_bytes);
  line("attn_kv_cache_bytes{state=\"used\"}", g.used_bytes);
  line("attn_kv_cache_bytes{state=\"wasted\"}", g.wasted_bytes);
  line("attn_kv_cache_bytes{state=\"cached\"}", g.cached_bytes);
  line("attn_kv_cache_bytes{state=\"free\"}", g.pool_bytes - g.reserved_bytes);
  out += "# HELP attn_kv_cache_blocks blocks of the paged KV pool: all, free, in use\n";
  out += "# TYPE attn_kv_cache_blocks gauge\n";
  line("attn_kv_cache_blocks{state=\"all\"}", g.blocks);
  line("attn_kv_cache_blocks{state=\"free\"}", g.blocks_free);
  line("attn_kv_cache_blocks{state=\"in_use\"}", g.blocks - g.blocks_free);
  out +=
      "# HELP attn_prefix_cache_tokens_total prompt tokens of admitted requests: from the prefix cache "
      "(hit) or computed (miss)\n";
  out += "# TYPE attn_prefix_cache_tokens_total counter\n";
  line("attn_prefix_cache_tokens_total{result=\"hit\"}", g.cached_tokens);
  line("attn_prefix_cache_tokens_total{result=\"miss\"}", g.prompt_tokens - g.cached_tokens);
  out += "# HELP attn_prefix_cache_hit_ratio prompt tokens from the prefix cache / all prompt tokens\n";
  out += "# TYPE attn_prefix_cache_hit_ratio gauge\n";
  out += "attn_prefix_cache_hit_ratio " +
         std::to_string(g.prompt_tokens ? static_cast<double>(g.cached_tokens) / g.prompt_tokens : 0.0) +
         "\n";
  out += "# HELP attn_kv_cache_evictions_total prefix-cache entries evicted for room\n";
  out += "# TYPE attn_kv_cache_evictions_total counter\n";
  line("attn_kv_cache_evictions_total", g.evictions);
  out += "# HELP attn_preemptions_total sequences preempted (blocks freed, recomputed later)\n";
  out += "# TYPE attn_preemptions_total counter\n";
  line("attn_preemptions_total", g.preemptions);
  out += "# HELP attn_generate_steps_total batched steps, and their rows (tokens computed)\n";
  out += "# TYPE attn_generate_steps_total counter\n";
  line("attn_generate_steps_total", g.steps);
  line("attn_generate_step_rows_total", g.rows);
  out += "# HELP attn_generate_sequences generation sequences running in the batch, and waiting for room\n";
  out += "# TYPE attn_generate_sequences gauge\n";
  line("attn_generate_sequences{state=\"running\"}", g.running);
  line("attn_generate_sequences{state=\"waiting\"}", g.waiting);
}
}  // namespace

std::string Metrics::text() const {
  std::lock_guard<std::mutex> lk(mu_);
  std::string out;
  out += "# HELP attn_ready 1 once the models are loaded\n# TYPE attn_ready gauge\n";
  out += "attn_ready " + std::string(ready_.load() ? "1" : "0") + "\n";
  out += "# HELP attn_requests_total HTTP requests answered, by endpoint and status\n";
  out += "# TYPE attn_requests_total counter\n";
  for (const auto& [key, n] : requests_)
    out += "attn_requests_total{endpoint=\"" + key.first + "\",status=\"" + std::to_string(key.second) +
           "\"} " + std::to_string(n) + "\n";
  out += "# HELP attn_request_duration_seconds time from the request's arrival to its last byte\n";
  out += "# TYPE attn_request_duration_seconds histogram\n";
  for (const auto& [endpoint, h] : latency_)
    h.write(out, "attn_request_duration_seconds", "endpoint=\"" + endpoint + "\"");
  out += "# HELP attn_tokens_total tokens processed, by kind\n# TYPE attn_tokens_total counter\n";
  for (const auto& [kind, n] : tokens_)
    out += "attn_tokens_total{kind=\"" + kind + "\"} " + std::to_string(n) + "\n";
  out += "# HELP attn_batch_inputs inputs per model batch\n# TYPE attn_batch_inputs histogram\n";
  for (const auto& [b, h] : batch_inputs_) h.write(out, "attn_batch_inputs", "batcher=\"" + b + "\"");
  out += "# HELP attn_batch_tokens tokens per model batch\n# TYPE attn_batch_tokens histogram\n";
  for (const auto& [b, h] : batch_tokens_) h.write(out, "attn_batch_tokens", "batcher=\"" + b + "\"");
  out += "# HELP attn_queue_depth inputs or requests waiting, by queue\n# TYPE attn_queue_depth gauge\n";
  for (const auto& [q, d] : queues_)
    out += "attn_queue_depth{queue=\"" + q + "\"} " + std::to_string(d) + "\n";
  out += "# HELP attn_generations_active generation requests decoding now\n";
  out += "# TYPE attn_generations_active gauge\n";
  out += "attn_generations_active " + std::to_string(active_.load()) + "\n";
  if (runtime_.present) runtime_text(out, runtime_);
  return out;
}

}  // namespace attn::serve::detail
