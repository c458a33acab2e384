// `attn serve`: an OpenAI-compatible HTTP server over the library's tasks (docs/serve.md).
//
// Endpoints (OpenAI's wire format, so the official `openai` client and curl work unchanged):
//   POST /v1/embeddings        {model, input: string | [string] | [int] | [[int]], encoding_format}
//   POST /v1/chat/completions  {model, messages, max_tokens, temperature, top_p, stop, seed, stream}
//   POST /v1/completions       {model, prompt, ...the same}
//   POST /v1/classify          {model, input: string | [string]} -> [[{label, score}], ...]
//   POST /v1/attention         {model, input: string} -> the attention export (docs/viewer.md)
//   POST /v1/rerank            {model, query, documents: [string], top_n, return_documents, raw_scores,
//                              truncate} -> {results: [{index, relevance_score, document?}], usage}
//   GET  /v1/models, /health (503 until the models are loaded), /metrics (Prometheus text),
//   GET  /  the attention viewer: type a text, see the model's attention (GET /view?model=&text=)
//   GET  /explain  the explainer page; POST /v1/explain {model, input, layer, head} -> its stages
// Any request may add "attention": {"layers": [...], "heads": [...]} (numbered from 0; absent or
// empty: all) and gets the exact attention weights captured from the kernels, in the viewer's
// export layout (attn/viz/export.h), filtered to those layers and heads.
//
// Embedding and classification requests are batched dynamically: a batch closes when it holds
// max_batch_tokens tokens or max_wait_ms after its first input arrived. Generation runs on ONE model
// instance with continuous batching (models/runtime/scheduler.h): up to `generate_slots` sequences
// share every step (decoding ones one token each, prompts in chunks of prefill_chunk), their KV in one
// paged cache of kv_cache_bytes whose full prompt blocks are shared between requests (the prefix
// cache); further requests wait in a bounded queue, admitted by KV memory, first come first served.
// All model compute goes through one first-come-first-served gate (a batch, one generation step at a
// time), so streams and batches interleave and never oversubscribe the cores.
//
// Errors are OpenAI-style bodies {"error": {"message", "type", "param", "code"}}: 413 body too
// large, 400 malformed JSON or UTF-8 and every limit (the message names it), 401 a missing or
// wrong API key, 403 a foreign Host or a cross-site form post, 404 unknown model or path, 408 a
// request that arrives too slowly, 411/414/415/431 framing and size limits, 429 (queue full) and
// 503 (loading, draining, queue wait too long) with Retry-After. No request can end the process.
#pragma once

#include <attn/ops/paged_attention.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace attn::serve {

namespace detail {
struct Impl;
}

struct Limits {
  int64_t max_body_bytes = 8 << 20;        // request bodies (413 beyond)
  int64_t max_inputs = 2048;               // inputs per embedding / classification request
  int64_t max_input_bytes = 1 << 20;       // bytes of one text input
  int64_t max_batch_tokens = 8192;         // tokens per embedding / classification batch
  double max_wait_ms = 3;                  // how long a batch waits for more inputs
  int64_t max_queued_inputs = 16384;       // embedding / classification inputs waiting (429 beyond)
  int64_t max_tokens = 512;                // largest max_tokens of a generation request
  int64_t default_max_tokens = 128;        // when the request gives none
  int64_t context = 2048;                  // positions of one generation sequence: prompt + completion
  int64_t max_queued_generations = 64;     // generation requests waiting for room in the batch (429 beyond)
  double max_queue_wait_s = 120;           // a generation waiting longer gets 503
  int64_t max_attention_tokens = 256;      // tokens of a text whose attention is captured
  int64_t max_attention_values = 4 << 20;  // numbers in one attention export (layers x heads x N x N)
  int64_t http_threads = 64;               // requests handled at once (more wait, already read)
  int64_t max_connections = 1024;          // open connections (503 beyond)
  int64_t max_header_bytes = 32 << 10;     // a request's head: request line and headers (431 beyond)
  int64_t max_headers = 100;               // header fields of a request (431 beyond)
  int64_t max_request_line = 8192;         // the request line (414 beyond)
  double header_timeout_s = 10;            // from a request's first byte to the end of its head (408)
  double read_timeout_s = 30;              // from a request's first byte to the end of its body (408)
  double keep_alive_s = 5;                 // an idle connection between requests is closed
  double write_timeout_s = 30;             // a client that does not read its response
};

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;       // 0: an ephemeral port (Server::port() says which)
  std::string embed;     // "" none; "minilm", or a BERT folder (tasks::find_encoder)
  std::string generate;  // "" none; "smollm2", "gemma3", a .gguf file or a Hugging Face decoder folder
  // "" or "none"; "q8_0" / "q4_0": the generate model on the runtime's decoder with its f32 / f16 /
  // bf16 matrices converted at load (models/runtime/decoder.h: LoadQuant), whatever its architecture.
  std::string generate_quantize;
  std::string classify;  // "" none; a model file from `attn train classify`
  // The explainer page (GET /explain, POST /v1/explain; docs/explainer.md): the models it steps
  // through, of teach::kStageModels ("e5", "smollm2", "gemma3"); loaded at start, apart from the above.
  std::vector<std::string> explain;
  std::string rerank;           // "" none; a cross-encoder folder (models/bert_rerank.h)
  int64_t generate_slots = 16;  // generation sequences in one batch (decoded together)
  // The paged KV cache of generation: 0 = room for generate_slots × context / 2 positions (at least
  // one full context); f16 halves the bytes per position and q8 (int8 rows, an f32 scale each)
  // takes (D + 4) / 4D of them (the default f32 keeps the text the same as `attn generate`'s).
  int64_t kv_cache_bytes = 0;
  ops::KvDtype kv_cache_type = ops::KvDtype::f32;
  int64_t prefill_chunk = 256;  // prompt tokens of one sequence per step (running streams wait at most that)
  bool prefix_cache = true;     // share full prompt blocks between requests
  Limits limits;
  // Every endpoint but /health (and /metrics with public_metrics) then needs
  // "Authorization: Bearer KEY" (or HTTP Basic auth with KEY as the password, for the page);
  // compared in constant time. Empty: no key.
  std::string api_key;
  bool public_metrics = false;
  // Host names a request's Host header may carry besides the loopback names and the bound address.
  // When the server binds to a loopback address, any other Host is refused (403), so a web page
  // that rebinds its DNS name to 127.0.0.1 cannot read replies. Bound elsewhere: every Host is
  // accepted ("--host opens it").
  std::vector<std::string> allowed_hosts;
  // Log lines for people (a model loaded, a request failed on the server's side); none by default.
  std::function<void(const std::string&)> log;
};

class Server {
 public:
  explicit Server(ServerOptions options);
  ~Server();  // stops (as stop()) when still running
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Binds the socket (throws attn::Error naming host and port when it cannot) and starts serving
  // on background threads; /health answers 503 until load_models() has finished. Ignores SIGPIPE
  // for the process (a client that goes away must not kill the server).
  void start();
  int port() const;         // the bound port (after start)
  std::string url() const;  // "http://HOST:PORT"

  // Loads the models named in the options (throws attn::Error naming the one that failed).
  void load_models();
  bool ready() const;

  // Stops accepting connections, lets every request in flight finish (streams included), then
  // stops the batchers. Safe to call more than once and from any thread but a handler's.
  void stop();

 private:
  std::unique_ptr<detail::Impl> impl_;
};

}  // namespace attn::serve
