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
  return out;
}

}  // namespace attn::serve::detail
