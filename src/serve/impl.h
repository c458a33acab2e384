// The server's state and the handlers' shared helpers (include/attn/serve/server.h). Private to the
// serve floor.
#pragma once

#include <attn/io/json.h>
#include <attn/models/bert.h>
#include <attn/models/bert_rerank.h>
#include <attn/models/text_classifier.h>
#include <attn/serve/server.h>
#include <attn/teach/stages.h>
#include <attn/viz/export.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "serve/batcher.h"
#include "serve/engine.h"
#include "serve/gen_model.h"
#include "serve/http.h"
#include "serve/metrics.h"
#include "serve/util.h"

namespace attn::serve::detail {

// "attention": {"layers": [...], "heads": [...]} of a request (empty: all).
struct AttentionSpec {
  std::vector<int64_t> layers, heads;
};

// One embedding input, tokenized.
struct EmbedInput {
  std::vector<int32_t> ids;
};
using EmbedOutput = std::vector<float>;  // [dim]

struct ClassifyInput {
  std::string text;
};
struct ClassifyOutput {
  models::Classification c;
  std::string error;  // this input could not be classified (the others of its batch were)
};

// A parsed generation request (chat or completion).
struct GenRequest {
  bool chat = true;
  bool stream = false, include_usage = false;
  std::string id, model;
  int64_t created = 0;
  std::vector<int32_t> prompt_ids;
  std::string prompt_text;  // as templated (the attention export's text)
  int64_t max_tokens = 128;
  double temperature = 1, top_p = 1;
  int64_t top_k = 0;
  uint64_t seed = 0;
  std::vector<std::string> stop;
  std::optional<AttentionSpec> attention;
  std::vector<int64_t> row_layers, row_heads;  // stream_attention, resolved (empty: none)
};

struct GenResult {
  std::string text;
  std::vector<int32_t> ids;   // generated, without a stop token
  std::string finish_reason;  // "stop" or "length" ("cancelled": the client went away)
  std::string rows;           // stream_attention: rows not yet sent (tokens without a piece of text)
};
// A piece of text to the client with the attention rows of its tokens (JSON objects, or ""): false
// when the client went away.
using PieceSink = std::function<bool(const std::string& piece, const std::string& rows)>;

// Counts a generation request in flight for its lifetime (shared by the handler and its stream).
struct InFlight {
  explicit InFlight(std::atomic<int64_t>& n) : n_(n) { n_.fetch_add(1); }
  ~InFlight() { n_.fetch_sub(1); }
  InFlight(const InFlight&) = delete;
  InFlight& operator=(const InFlight&) = delete;

 private:
  std::atomic<int64_t>& n_;
};

struct Impl {
  explicit Impl(ServerOptions o) : options(std::move(o)) {}

  ServerOptions options;
  std::unique_ptr<http::Server> http;
  http::Router router;
  std::thread listen_thread;
  int port = 0;
  std::atomic<bool> started{false}, loaded{false}, stopping{false}, stopped{false};
  // Generation requests between their arrival and their last byte (streams included): stop() waits
  // for them before it stops the HTTP server.
  std::atomic<int64_t> generations_in_flight{0};
  std::mutex stop_mu;
  Metrics metrics;
  ComputeGate gate;

  // Embeddings.
  std::string embed_id;
  const models::SentenceEncoder* encoder = nullptr;
  std::unique_ptr<Batcher<EmbedInput, EmbedOutput>> embed_batcher;
  // Classification.
  std::string classify_id;
  std::unique_ptr<models::TextClassifier> classifier;
  std::unique_ptr<Batcher<ClassifyInput, ClassifyOutput>> classify_batcher;
  // Reranking (rerank.cc): pairs in, logits out.
  std::string rerank_id;
  std::unique_ptr<models::CrossEncoder> reranker;
  std::unique_ptr<Batcher<models::PairEncoding, float>> rerank_batcher;
  // Generation.
  std::string generate_id;
  std::vector<std::string> generate_aliases;  // other names a request may use for it
  std::unique_ptr<GenModel> gen_model;        // one instance for every generation request
  std::unique_ptr<GenEngine> engine;          // its continuous batching (serve/engine.h)
  // The explainer's models (explain.cc), by key; each runs under the compute gate.
  std::vector<std::pair<std::string, std::unique_ptr<teach::StagesModel>>> explainers;

  void log(const std::string& line) const {
    if (options.log) options.log(line);
  }
  void routes();
  void require_ready() const;
  // Every request: the Host, API-key and cross-origin checks, then the router (server.cc).
  void handle(http::Request& req, http::Response& res);
  // The checks before any route (guard.cc); each throws HttpError (403 or 401).
  void check_host(const http::Request& req) const;
  void check_key(const http::Request& req, http::Response& res) const;
  void check_origin(const http::Request& req) const;

  // Handlers (each may throw HttpError; the wrapper answers it).
  void embeddings(const http::Request& req, http::Response& res);
  void classify(const http::Request& req, http::Response& res);
  void rerank(const http::Request& req, http::Response& res);
  void completions(const http::Request& req, http::Response& res, bool chat);
  void attention(const http::Request& req, http::Response& res);
  void view(const http::Request& req, http::Response& res);
  void models_list(const http::Request& req, http::Response& res);
  void index_page(const http::Request& req, http::Response& res);
  void explain_page(const http::Request& req, http::Response& res);    // GET /explain
  void explain_stages(const http::Request& req, http::Response& res);  // POST /v1/explain
  void load_explainers();

  // The attention export of `text` under the model `model_id` (embed, generate or classify).
  viz::Export model_export(const std::string& model_id, const std::string& text, const AttentionSpec& spec);
  // on_piece gets each piece of text (false: the client went away); client_gone is asked after each
  // token (a reply that is sent whole at the end); either may be empty.
  // The request's stream (submitted, and admitted or finished) to its end.
  GenResult generate(GenStream& st, const GenRequest& r, const PieceSink& on_piece,
                     const std::function<bool()>& client_gone = nullptr);
};

// Loads options.rerank into reranker / rerank_batcher (rerank.cc).
void load_reranker(Impl& s);

// The metrics' endpoint label of a path (server.cc).
std::string endpoint_of(const std::string& path);
// True for 127.x.x.x, ::1 and localhost (guard.cc).
bool is_loopback_host(std::string_view host);
// True when the two strings are equal; the time taken depends only on their lengths (guard.cc).
bool equal_in_constant_time(std::string_view a, std::string_view b);

// ---- request helpers (request.cc) ----------------------------------------------------------------

// The body as a JSON object: 400 for malformed JSON, invalid UTF-8 or another type.
json::Value parse_body(const http::Request& req);
// At most the first max_bytes of `s` (cut before a UTF-8 character that would not fit) and its size:
// what an error message quotes of a request's input.
std::string excerpt(std::string_view s, std::size_t max_bytes = 40);
// Optional members with their types checked (400 naming the parameter); null counts as absent.
const json::Value* member(const json::Value& body, const char* name);
std::optional<std::string> opt_string(const json::Value& body, const char* name);
std::optional<int64_t> opt_integer(const json::Value& body, const char* name, int64_t lo, int64_t hi,
                                   const std::string& limit_note = "");
std::optional<double> opt_number(const json::Value& body, const char* name, double lo, double hi);
std::optional<bool> opt_bool(const json::Value& body, const char* name);
// body[name] ("attention" unless said): true, or {"layers": [...], "heads": [...]}.
std::optional<AttentionSpec> opt_attention(const json::Value& body, const std::string& name = "attention");
// The request's model: the given one if it is `id` or one of `aliases`, else 404 model_not_found.
std::string check_model(const json::Value& body, const std::string& what, const std::string& id,
                        const std::vector<std::string>& aliases);

// The numbers an export of `spec` holds for a model of `layers` x `heads` over a rows x cols attention
// matrix, from the request alone (before any compute): 400 naming a layer or head out of range.
int64_t attention_values(const AttentionSpec& spec, int64_t layers, int64_t heads, int64_t rows,
                         int64_t cols);
// 400 attention_too_large naming --max-attention-values when values > max_values; `what` qualifies
// the count in the message (e.g. "at most ").
void check_attention_values(int64_t values, int64_t max_values, const std::string& what);
// Filters the export to the spec's layers and heads (400 naming a layer or head out of range) and
// checks the numbers it holds against max_values (400 naming the limit).
viz::Export filter_export(viz::Export e, const AttentionSpec& spec, int64_t max_values);
json::Value export_value(const viz::Export& e);

// Responses.
void send_json(http::Response& res, int status, const std::string& body);
void send_error(http::Response& res, const HttpError& e);
std::string error_body(const HttpError& e);
std::string base64(const void* data, std::size_t n);
void append_float(std::string& out, float v);
int64_t unix_time();
std::string new_id(const char* prefix);

// The page at / (page.cc): a form that sends a text to /view.
std::string index_html(const std::vector<std::pair<std::string, std::string>>& models);

}  // namespace attn::serve::detail
