// attn serve: the server's life (start, load, stop), its routes and the small endpoints
// (include/attn/serve/server.h).
#include <attn/core/error.h>
#include <attn/io/model_files.h>
#include <attn/serve/server.h>
#include <attn/tasks/embed.h>
#include <signal.h>
#include <sys/socket.h>

#include <chrono>
#include <new>
#include <thread>

#include "serve/impl.h"

namespace attn::serve {
namespace detail {

// The endpoint label of a path (a fixed set, so the metrics' label values stay bounded).
std::string endpoint_of(const std::string& path) {
  static const char* known[] = {"/v1/embeddings",  "/v1/chat/completions",
                                "/v1/completions", "/v1/classify",
                                "/v1/rerank",      "/v1/attention",
                                "/v1/models",      "/health",
                                "/metrics",        "/",
                                "/view",           "/explain",
                                "/v1/explain"};
  for (const char* k : known)
    if (path == k) return k;
  return "other";
}

void Impl::require_ready() const {
  if (stopping.load()) {
    HttpError e(503, "the server is shutting down", "", "shutting_down");
    e.retry_after_s = 1;
    throw e;
  }
  if (!loaded.load()) {
    HttpError e(503, "the models are still loading; retry in a moment (GET /health says when)", "",
                "loading");
    e.retry_after_s = 1;
    throw e;
  }
}

void Impl::models_list(const http::Request&, http::Response& res) {
  json::Value data = json::Value::array();
  const int64_t now = unix_time();
  auto add = [&](const std::string& id, const char* kind) {
    if (id.empty()) return;
    json::Value m = json::Value::object();
    m.set("id", json::Value::string(id));
    m.set("object", json::Value::string("model"));
    m.set("created", json::Value::integer(now));
    m.set("owned_by", json::Value::string("attn"));
    m.set("task", json::Value::string(kind));
    data.push_back(std::move(m));
  };
  if (loaded.load()) {
    add(embed_id, "embeddings");
    add(generate_id, "generation");
    add(classify_id, "classification");
    add(rerank_id, "rerank");
  }
  json::Value body = json::Value::object();
  body.set("object", json::Value::string("list"));
  body.set("data", std::move(data));
  send_json(res, 200, json::dump(body));
}

void Impl::routes() {
  using http::Request;
  using http::Response;
  // Every handler: errors become OpenAI-style bodies; nothing escapes to the HTTP layer.
  auto wrap = [this](auto fn) {
    return [this, fn](const Request& req, Response& res) {
      try {
        fn(req, res);
      } catch (const HttpError& e) {
        send_error(res, e);
      } catch (const std::bad_alloc&) {
        HttpError e(503, "the server ran out of memory for this request; retry later or send less", "",
                    "out_of_memory");
        e.retry_after_s = 2;
        send_error(res, e);
      } catch (const Error& e) {
        send_error(res, bad_request(e.what(), "", "invalid_request"));
      } catch (const std::exception& e) {
        log(std::string("error: ") + req.method + " " + req.path + ": " + e.what());
        send_error(res, HttpError(500, std::string("internal error: ") + e.what(), "", "internal_error"));
      } catch (...) {
        send_error(res, HttpError(500, "internal error", "", "internal_error"));
      }
    };
  };
  router.set_error([](http::Response& res, int status, const std::string& code, const std::string& msg) {
    send_error(res, HttpError(status, msg, "", code));
  });
  router.add("POST", "/v1/embeddings", wrap([this](const Request& q, Response& r) { embeddings(q, r); }));
  router.add("POST", "/embeddings", wrap([this](const Request& q, Response& r) { embeddings(q, r); }));
  router.add("POST", "/v1/chat/completions",
             wrap([this](const Request& q, Response& r) { completions(q, r, true); }));
  router.add("POST", "/v1/completions",
             wrap([this](const Request& q, Response& r) { completions(q, r, false); }));
  router.add("POST", "/v1/classify", wrap([this](const Request& q, Response& r) { classify(q, r); }));
  router.add("POST", "/v1/rerank", wrap([this](const Request& q, Response& r) { rerank(q, r); }));
  router.add("POST", "/rerank", wrap([this](const Request& q, Response& r) { rerank(q, r); }));
  router.add("POST", "/v1/attention", wrap([this](const Request& q, Response& r) { attention(q, r); }));
  router.add("GET", "/v1/models", wrap([this](const Request& q, Response& r) { models_list(q, r); }));
  router.add("GET", "/view", wrap([this](const Request& q, Response& r) { view(q, r); }));
  router.add("GET", "/", wrap([this](const Request& q, Response& r) { index_page(q, r); }));
  router.add("GET", "/explain", wrap([this](const Request& q, Response& r) { explain_page(q, r); }));
  router.add("POST", "/v1/explain", wrap([this](const Request& q, Response& r) { explain_stages(q, r); }));
  router.add("GET", "/health", wrap([this](const Request&, Response& r) {
               if (stopping.load()) {
                 r.set_header("Retry-After", "1");
                 send_json(r, 503, "{\"status\":\"shutting down\"}");
               } else if (!loaded.load()) {
                 r.set_header("Retry-After", "1");
                 send_json(r, 503, "{\"status\":\"loading\"}");
               } else {
                 send_json(r, 200, "{\"status\":\"ok\"}");
               }
             }));
  router.add("GET", "/metrics", wrap([this](const Request&, Response& r) {
               r.set_content(metrics.text(), "text/plain; version=0.0.4; charset=utf-8");
             }));
}

void Impl::handle(http::Request& req, http::Response& res) {
  try {
    check_host(req);
    check_key(req, res);
    check_origin(req);
    router.route(req, res);
  } catch (const HttpError& e) {
    send_error(res, e);
  } catch (const std::exception& e) {
    send_error(res, HttpError(500, std::string("internal error: ") + e.what(), "", "internal_error"));
  }
}

}  // namespace detail

using detail::Impl;

Server::Server(ServerOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {
  const Limits& l = impl_->options.limits;
  ATTN_CHECK(l.max_body_bytes >= 1024, "serve: max_body_bytes must be >= 1024; got ", l.max_body_bytes);
  ATTN_CHECK(l.max_inputs >= 1 && l.max_batch_tokens >= 1 && l.max_queued_inputs >= 1,
             "serve: max_inputs, max_batch_tokens and max_queued_inputs must be >= 1");
  ATTN_CHECK(l.max_wait_ms >= 0 && l.max_wait_ms <= 1000, "serve: max_wait_ms must be in [0, 1000]; got ",
             l.max_wait_ms);
  ATTN_CHECK(l.max_tokens >= 1 && l.default_max_tokens >= 1, "serve: max_tokens must be >= 1");
  ATTN_CHECK(l.context >= 16, "serve: context must be >= 16 tokens; got ", l.context);
  ATTN_CHECK(l.http_threads >= 2 && l.http_threads <= 4096, "serve: http_threads must be in [2, 4096]; got ",
             l.http_threads);
  ATTN_CHECK(impl_->options.generate_slots >= 1 && impl_->options.generate_slots <= 256,
             "serve: generate_slots must be in [1, 256]; got ", impl_->options.generate_slots);
  ATTN_CHECK(impl_->options.kv_cache_bytes >= 0, "serve: kv_cache_bytes must be >= 0; got ",
             impl_->options.kv_cache_bytes);
  ATTN_CHECK(impl_->options.prefill_chunk >= 16 && impl_->options.prefill_chunk <= 8192,
             "serve: prefill_chunk must be in [16, 8192]; got ", impl_->options.prefill_chunk);
  ATTN_CHECK(
      l.max_connections >= 1 && l.max_headers >= 1 && l.max_header_bytes >= 1024 && l.max_request_line >= 64,
      "serve: max_connections, max_headers must be >= 1, max_header_bytes >= 1024, max_request_line >= 64");
  ATTN_CHECK(l.header_timeout_s > 0 && l.read_timeout_s > 0 && l.keep_alive_s > 0 && l.write_timeout_s > 0,
             "serve: the timeouts must be > 0 s");
  ATTN_CHECK(impl_->options.port >= 0 && impl_->options.port <= 65535,
             "serve: port must be in [0, 65535]; got ", impl_->options.port);
}

Server::~Server() { stop(); }

void Server::start() {
  Impl& s = *impl_;
  ATTN_CHECK(!s.started.load(), "serve: the server was started already");
  ::signal(SIGPIPE, SIG_IGN);
  const Limits& l = s.options.limits;
  http::Limits hl;
  hl.max_request_line = static_cast<std::size_t>(l.max_request_line);
  hl.max_header_bytes = static_cast<std::size_t>(l.max_header_bytes);
  hl.max_headers = static_cast<std::size_t>(l.max_headers);
  hl.max_body_bytes = static_cast<std::size_t>(l.max_body_bytes);
  hl.header_timeout_s = l.header_timeout_s;
  hl.body_timeout_s = l.read_timeout_s;
  hl.keep_alive_s = l.keep_alive_s;
  hl.write_timeout_s = l.write_timeout_s;
  hl.max_connections = static_cast<std::size_t>(l.max_connections);
  hl.threads = static_cast<int>(l.http_threads);
  s.routes();
  s.http = std::make_unique<http::Server>(
      hl, [&s](http::Request& q, http::Response& r) { s.handle(q, r); },
      [](http::Response& res, int status, const std::string& code, const std::string& msg) {
        detail::send_error(res, detail::HttpError(status, msg, "", code));
      },
      [&s](const http::Request& q, const http::Response& r, double seconds) {
        s.metrics.request(detail::endpoint_of(q.path), r.status, seconds);
      });
  s.port = s.http->bind(s.options.host, s.options.port);
  if (!detail::is_loopback_host(s.options.host) && s.options.api_key.empty())
    s.log("warning: listening on " + s.options.host +
          ", beyond this machine, without --api-key: anyone who reaches this address can use the models");
  s.started.store(true);
  s.listen_thread = std::thread([&s] { s.http->run(); });
  // stop() acts only on a running server: wait until it runs.
  for (int i = 0; i < 5000 && !s.http->running(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

int Server::port() const { return impl_->port; }

std::string Server::url() const {
  const std::string& h = impl_->options.host;
  const bool v6 = h.find(':') != std::string::npos;
  return "http://" + (v6 ? "[" + h + "]" : h) + ":" + std::to_string(impl_->port);
}

bool Server::ready() const { return impl_->loaded.load(); }

void Server::load_models() {
  Impl& s = *impl_;
  const ServerOptions& o = s.options;
  const Limits& l = o.limits;
  ATTN_CHECK(!o.embed.empty() || !o.generate.empty() || !o.classify.empty() || !o.explain.empty() ||
                 !o.rerank.empty(),
             "serve: no model to serve; give --embed, --generate, --classify, --rerank or --explain");
  if (!o.rerank.empty()) detail::load_reranker(s);
  if (!o.embed.empty()) {
    const tasks::NamedEncoder ne = tasks::find_encoder(o.embed);
    s.embed_id = ne.id;
    s.encoder = ne.encoder;
    const models::SentenceEncoder* enc = s.encoder;
    s.embed_batcher = std::make_unique<detail::Batcher<detail::EmbedInput, detail::EmbedOutput>>(
        [&s, enc](const std::vector<const detail::EmbedInput*>& batch) {
          std::vector<std::vector<int32_t>> ids;
          ids.reserve(batch.size());
          for (const detail::EmbedInput* in : batch) ids.push_back(in->ids);
          models::EmbedOptions eo;
          eo.batch_size = 256;
          models::Embeddings e;
          {
            detail::GateHold hold(s.gate);
            e = enc->embed_ids(ids, eo);
          }
          const int64_t C = e.vectors.size(1);
          const float* p = e.vectors.data<float>();
          std::vector<detail::EmbedOutput> out(batch.size());
          for (std::size_t i = 0; i < batch.size(); ++i)
            out[i].assign(p + static_cast<int64_t>(i) * C, p + static_cast<int64_t>(i + 1) * C);
          return out;
        },
        l.max_batch_tokens, l.max_wait_ms, l.max_queued_inputs,
        [&s](int64_t n, int64_t t) { s.metrics.batch("embeddings", n, t); },
        [&s](int64_t d) { s.metrics.queue_depth("embeddings", d); });
    s.log("loaded " + s.embed_id + " (embeddings, " + std::to_string(enc->dim()) + " dimensions)");
  }
  if (!o.classify.empty()) {
    s.classifier = models::TextClassifier::load(o.classify);
    std::string id = o.classify;
    const std::size_t slash = id.find_last_of('/');
    if (slash != std::string::npos && slash > 0) {
      // "runs/classify/model.attn" -> "classify": the folder names the model better than the file.
      const std::size_t prev = id.find_last_of('/', slash - 1);
      id = id.substr(prev == std::string::npos ? 0 : prev + 1,
                     slash - (prev == std::string::npos ? 0 : prev + 1));
    }
    s.classify_id = id;
    models::TextClassifier* clf = s.classifier.get();
    s.classify_batcher = std::make_unique<detail::Batcher<detail::ClassifyInput, detail::ClassifyOutput>>(
        [&s, clf](const std::vector<const detail::ClassifyInput*>& batch) {
          std::vector<std::string> texts;
          for (const detail::ClassifyInput* in : batch) texts.push_back(in->text);
          std::vector<detail::ClassifyOutput> out(batch.size());
          detail::GateHold hold(s.gate);
          try {
            std::vector<models::Classification> cs = clf->classify(texts, false, 64);
            for (std::size_t i = 0; i < cs.size(); ++i) out[i].c = std::move(cs[i]);
          } catch (const Error&) {
            // One bad input (e.g. empty after normalisation) fails only itself: one by one.
            for (std::size_t i = 0; i < texts.size(); ++i) {
              try {
                out[i].c = std::move(clf->classify({texts[i]}, false, 1).front());
              } catch (const Error& e) {
                out[i].error = e.what();
              }
            }
          }
          return out;
        },
        l.max_batch_tokens, l.max_wait_ms, l.max_queued_inputs,
        [&s](int64_t n, int64_t t) { s.metrics.batch("classify", n, t); },
        [&s](int64_t d) { s.metrics.queue_depth("classify", d); });
    s.log("loaded " + s.classify_id + " (classification, labels " + std::to_string(clf->labels().size()) +
          ")");
  }
  if (!o.generate.empty()) {
    s.gen_model = detail::load_gen_model(o.generate, l.context, o.generate_quantize, &s.generate_id);
    s.generate_aliases = {o.generate};
    if (s.gen_model->architecture() == "gemma3")
      s.generate_aliases.insert(s.generate_aliases.end(), {"gemma3", "gemma-3-270m"});
    else
      s.generate_aliases.push_back("smollm2");
    ATTN_CHECK(s.gen_model->capacity() >= 16, "serve: the generation context holds only ",
               s.gen_model->capacity(), " tokens");
    detail::EngineOptions eo;
    eo.scheduler.max_sequences = o.generate_slots;
    eo.scheduler.prefill_chunk = o.prefill_chunk;
    eo.scheduler.max_batch_tokens = o.prefill_chunk + o.generate_slots;
    eo.scheduler.prefix_cache = o.prefix_cache;
    eo.kv_dtype = o.kv_cache_type;
    eo.max_waiting = l.max_queued_generations;
    models::runtime::BatchDecoder& dec = s.gen_model->decoder();
    const models::runtime::KvCacheConfig kc = dec.kv_layout();
    const int64_t position_bytes =
        kc.layers * ops::kv_position_bytes(o.kv_cache_type, kc.kv_heads, kc.head_dim);
    const int64_t cap = s.gen_model->capacity();
    // Default: room for generate_slots sequences of half the context each (at least one whole one),
    // plus one block.
    eo.kv_cache_bytes = o.kv_cache_bytes > 0
                            ? o.kv_cache_bytes
                            : (std::max(cap, o.generate_slots * cap / 2) + eo.block_tokens) * position_bytes;
    ATTN_CHECK(eo.kv_cache_bytes >= eo.block_tokens * position_bytes, "serve: the KV cache of ",
               eo.kv_cache_bytes, " bytes holds no block of ", eo.block_tokens, " positions (",
               eo.block_tokens * position_bytes, " bytes); give a larger --kv-cache-mb");
    s.engine = std::make_unique<detail::GenEngine>(dec, eo, s.metrics, s.gate);
    s.log("loaded " + s.generate_id + " (generation: up to " + std::to_string(o.generate_slots) +
          " sequences per batch, " + std::to_string(s.engine->sequence_capacity()) +
          " tokens each, KV cache " + std::to_string(s.engine->pool_bytes() >> 20) + " MiB " +
          ops::kv_dtype_name(o.kv_cache_type) + ")");
  }
  s.load_explainers();
  s.loaded.store(true);
  s.metrics.set_ready(true);
}

void Server::stop() {
  Impl& s = *impl_;
  std::lock_guard<std::mutex> lk(s.stop_mu);
  if (s.stopped.load()) return;
  s.stopping.store(true);  // new requests for the models get 503 shutting_down from here on
  // Let the generation requests in flight finish first (those waiting for a slot included):
  // the HTTP server's stop() waits for them too, but new model requests get 503 meanwhile.
  const auto limit = std::chrono::steady_clock::now() +
                     std::chrono::duration<double>(s.options.limits.max_queue_wait_s + 600);
  while (s.generations_in_flight.load() > 0 && std::chrono::steady_clock::now() < limit)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  if (s.started.load()) {
    s.http->stop();  // stops accepting; returns once every request being handled is answered
    if (s.listen_thread.joinable()) s.listen_thread.join();
  }
  if (s.engine) s.engine->stop();
  if (s.embed_batcher) s.embed_batcher->stop();
  if (s.classify_batcher) s.classify_batcher->stop();
  if (s.rerank_batcher) s.rerank_batcher->stop();
  s.stopped.store(true);
}

}  // namespace attn::serve
