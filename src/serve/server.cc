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
namespace {

// The endpoint label of a path (a fixed set, so the metrics' label values stay bounded).
std::string endpoint_of(const std::string& path) {
  static const char* known[] = {"/v1/embeddings",
                                "/v1/chat/completions",
                                "/v1/completions",
                                "/v1/classify",
                                "/v1/attention",
                                "/v1/models",
                                "/health",
                                "/metrics",
                                "/",
                                "/view"};
  for (const char* k : known)
    if (path == k) return k;
  return "other";
}

thread_local std::chrono::steady_clock::time_point t_request_start;

// httplib's connection queue (src/serve/util.h), as its TaskQueue.
class BoundedTaskQueue : public httplib::TaskQueue {
 public:
  BoundedTaskQueue(std::size_t threads, std::size_t max_pending) : q_(threads, max_pending) {}
  void enqueue(std::function<void()> fn) override { q_.push(std::move(fn)); }
  void shutdown() override { q_.finish(); }

 private:
  BoundedTaskQueueBase q_;
};

}  // namespace

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

void Impl::models_list(const httplib::Request&, httplib::Response& res) {
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
  }
  json::Value body = json::Value::object();
  body.set("object", json::Value::string("list"));
  body.set("data", std::move(data));
  send_json(res, 200, json::dump(body));
}

void Impl::routes() {
  using httplib::Request;
  using httplib::Response;
  // Every handler: errors become OpenAI-style bodies; nothing escapes to httplib.
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
        send_error(res, bad_request(e.what()));
      } catch (const std::exception& e) {
        log(std::string("error: ") + req.method + " " + req.path + ": " + e.what());
        send_error(res, HttpError(500, std::string("internal error: ") + e.what()));
      } catch (...) {
        send_error(res, HttpError(500, "internal error"));
      }
    };
  };
  http.Post("/v1/embeddings", wrap([this](const Request& q, Response& r) { embeddings(q, r); }));
  http.Post("/embeddings", wrap([this](const Request& q, Response& r) { embeddings(q, r); }));
  http.Post("/v1/chat/completions", wrap([this](const Request& q, Response& r) { completions(q, r, true); }));
  http.Post("/v1/completions", wrap([this](const Request& q, Response& r) { completions(q, r, false); }));
  http.Post("/v1/classify", wrap([this](const Request& q, Response& r) { classify(q, r); }));
  http.Post("/v1/attention", wrap([this](const Request& q, Response& r) { attention(q, r); }));
  http.Get("/v1/models", wrap([this](const Request& q, Response& r) { models_list(q, r); }));
  http.Get("/view", wrap([this](const Request& q, Response& r) { view(q, r); }));
  http.Get("/", wrap([this](const Request& q, Response& r) { index_page(q, r); }));
  http.Get("/health", wrap([this](const Request&, Response& r) {
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
  http.Get("/metrics", wrap([this](const Request&, Response& r) {
             r.set_content(metrics.text(), "text/plain; version=0.0.4; charset=utf-8");
           }));

  // Errors httplib answers itself (no route, body too large, a bad request line) get the same body.
  http.set_error_handler([this](const Request& req, Response& res) {
    if (!res.body.empty()) return;
    if (res.status == 404)
      send_error(res, HttpError(404,
                                "no route for " + req.method + " " + req.path.substr(0, 200) +
                                    "; the endpoints are listed in docs/serve.md",
                                "", "unknown_url"));
    else if (res.status == 413)
      send_error(res,
                 HttpError(413,
                           "the request body is too large; the limit is " +
                               std::to_string(options.limits.max_body_bytes) + " bytes (--max-body-bytes)",
                           "", "body_too_large"));
    else
      send_error(res, HttpError(res.status,
                                "the request could not be read (HTTP " + std::to_string(res.status) + ")"));
  });
  http.set_exception_handler([this](const Request&, Response& res, std::exception_ptr ep) {
    std::string what = "internal error";
    try {
      if (ep) std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what += std::string(": ") + e.what();
    } catch (...) {
    }
    log(what);
    send_error(res, HttpError(500, what));
  });
  http.set_pre_routing_handler([](const Request&, Response&) {
    t_request_start = std::chrono::steady_clock::now();
    return httplib::Server::HandlerResponse::Unhandled;
  });
  // Called once the response has been written (streams included).
  http.set_logger([this](const Request& req, const Response& res) {
    const double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t_request_start).count();
    metrics.request(endpoint_of(req.path), res.status, s);
  });
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
  ATTN_CHECK(impl_->options.generate_slots >= 1 && impl_->options.generate_slots <= 64,
             "serve: generate_slots must be in [1, 64]; got ", impl_->options.generate_slots);
  ATTN_CHECK(impl_->options.port >= 0 && impl_->options.port <= 65535,
             "serve: port must be in [0, 65535]; got ", impl_->options.port);
}

Server::~Server() { stop(); }

void Server::start() {
  Impl& s = *impl_;
  ATTN_CHECK(!s.started.load(), "serve: the server was started already");
  ::signal(SIGPIPE, SIG_IGN);
  const Limits& l = s.options.limits;
  s.http.new_task_queue = [threads = l.http_threads] {
    return new detail::BoundedTaskQueue(static_cast<std::size_t>(threads), static_cast<std::size_t>(threads));
  };
  s.http.set_payload_max_length(static_cast<std::size_t>(l.max_body_bytes));
  s.http.set_read_timeout(std::chrono::milliseconds(static_cast<int64_t>(l.read_timeout_s * 1000)));
  s.http.set_write_timeout(std::chrono::milliseconds(static_cast<int64_t>(l.write_timeout_s * 1000)));
  s.http.set_keep_alive_timeout(5);
  s.http.set_keep_alive_max_count(100000);
  s.http.set_tcp_nodelay(true);
  s.routes();
  if (s.options.port == 0) {
    s.port = s.http.bind_to_any_port(s.options.host);
    ATTN_CHECK(s.port > 0, "serve: cannot bind to ", s.options.host, " (an ephemeral port)");
  } else {
    ATTN_CHECK(s.http.bind_to_port(s.options.host, s.options.port), "serve: cannot bind to ", s.options.host,
               ":", s.options.port, " (in use, or not an address of this machine)");
    s.port = s.options.port;
  }
  // httplib listens with a backlog of 5: clients connecting at once past that wait for a SYN
  // retransmission (1 s). Listening again on the bound socket sets a larger one.
  ::listen(s.http.listening_socket(), 1024);
  s.started.store(true);
  s.listen_thread = std::thread([&s] { s.http.listen_after_bind(); });
  // stop() acts only on a running httplib server: wait until it runs.
  for (int i = 0; i < 5000 && !s.http.is_running(); ++i)
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
  ATTN_CHECK(!o.embed.empty() || !o.generate.empty() || !o.classify.empty(),
             "serve: no model to serve; give --embed, --generate or --classify");
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
    const bool named = o.generate == "smollm2" || o.generate == "SmolLM2-135M-Instruct";
    const std::string path = io::require_smollm2_gguf(named ? "" : o.generate);
    models::LlamaOptions lo;
    lo.max_context = l.context;
    for (int64_t i = 0; i < o.generate_slots; ++i)
      s.slots.push_back(std::make_unique<models::LlamaModel>(models::LlamaModel::load(path, lo)));
    ATTN_CHECK(s.slots[0]->capacity() >= 16, "serve: the generation context holds only ",
               s.slots[0]->capacity(), " tokens");
    s.slot_pool.init(s.slots.size(), &s.metrics);
    std::string id = path;
    const std::size_t slash = id.find_last_of('/');
    if (slash != std::string::npos) id = id.substr(slash + 1);
    if (id.size() > 5 && id.compare(id.size() - 5, 5, ".gguf") == 0) id.resize(id.size() - 5);
    s.generate_id = named ? "SmolLM2-135M-Instruct" : id;
    s.log("loaded " + s.generate_id + " (generation, " + std::to_string(s.slots.size()) + " slot(s) of " +
          std::to_string(s.slots[0]->capacity()) + " tokens)");
  }
  s.loaded.store(true);
  s.metrics.set_ready(true);
}

void Server::stop() {
  Impl& s = *impl_;
  std::lock_guard<std::mutex> lk(s.stop_mu);
  if (s.stopped.load()) return;
  s.stopping.store(true);  // new requests for the models get 503 shutting_down from here on
  // Let the generation requests in flight finish first (those waiting for a slot included):
  // once httplib is stopped it no longer calls a stream's content provider.
  const auto limit = std::chrono::steady_clock::now() +
                     std::chrono::duration<double>(s.options.limits.max_queue_wait_s + 600);
  while (s.generations_in_flight.load() > 0 && std::chrono::steady_clock::now() < limit)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  if (s.started.load()) {
    s.http.stop();  // stops accepting; listen_after_bind returns once every connection's request is done
    if (s.listen_thread.joinable()) s.listen_thread.join();
  }
  if (s.embed_batcher) s.embed_batcher->stop();
  if (s.classify_batcher) s.classify_batcher->stop();
  s.stopped.store(true);
}

}  // namespace attn::serve
