// `attn serve`: the OpenAI-compatible HTTP server (include/attn/serve/server.h, docs/serve.md).
// Flags -> serve::ServerOptions -> serve::Server; SIGINT / SIGTERM stop it gracefully.
#include <attn/core/error.h>
#include <attn/core/parallel.h>
#include <attn/serve/server.h>
#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <string>
#include <vector>

#include "args.h"
#include "commands.h"

namespace attn::cli {
namespace {

const std::vector<OptionSpec>& serve_options() {
  static const std::vector<OptionSpec> specs = {
      {"host", "ADDR", "address to listen on (default 127.0.0.1: this machine only)"},
      {"port", "N", "port (default 8080; 0: any free port, printed)"},
      {"embed", "MODEL",
       "serve embeddings: minilm (all-MiniLM-L6-v2), e5, or a BERT / XLM-RoBERTa sentence-encoder folder"},
      {"generate", "MODEL",
       "serve chat and completions: smollm2 (SmolLM2-135M-Instruct), gemma3 (Gemma 3 270M), a .gguf file\n"
       "(llama, qwen2, qwen3, phi3, gemma2, gemma3) or a Hugging Face decoder folder"},
      {"quantize", "TYPE",
       "with --generate: q8_0 or q4_0, the model's f32 / f16 / bf16 matrices converted at load\n"
       "(on the runtime's decoder, whatever the architecture; default none)"},
      {"classify", "FILE", "serve classification: a model file from 'attn train classify'"},
      {"explain", "MODELS",
       "the explainer page at /explain for these models, comma-separated: e5, smollm2, gemma3\n"
       "(attention step by step on the learner's sentence; docs/explainer.md)"},
      {"rerank", "DIR",
       "serve POST /v1/rerank: a cross-encoder folder (BertForSequenceClassification or "
       "XLMRobertaForSequenceClassification, one label: ms-marco MiniLM, bge-reranker)"},
      {"threads", "N", "compute threads (default: ATTN_NUM_THREADS or all cores)"},
      {"parallel", "N", "generation sequences decoded together in one batch (default 16)"},
      {"context", "N", "positions of one generation sequence, prompt + reply tokens (default 2048)"},
      {"kv-cache-mb", "MB",
       "the paged KV cache of every sequence (default: max(context, parallel x context / 2) positions)"},
      {"kv-cache-type", "TYPE",
       "f32 (default: the same text as 'attn generate'), f16 (half the bytes) or q8 (int8 rows with a scale "
       "each: 0.27 of the bytes at head size 64)"},
      {"prefill-chunk", "N",
       "prompt tokens of one sequence per step (default 256; streams wait at most that)"},
      {"no-prefix-cache", "", "do not share full prompt blocks between requests"},
      {"max-tokens", "N", "largest max_tokens a request may ask for (default 512)"},
      {"default-max-tokens", "N",
       "max_tokens of a request that gives none (default 128, at most --max-tokens)"},
      {"max-body-bytes", "N", "largest request body (default 8388608; 413 beyond)"},
      {"max-inputs", "N", "inputs per embedding or classification request (default 2048)"},
      {"max-input-bytes", "N", "bytes of one text input or prompt (default 1048576)"},
      {"max-batch-tokens", "N", "tokens per embedding or classification batch (default 8192)"},
      {"max-wait-ms", "MS", "how long a batch waits for more inputs (default 3)"},
      {"max-queued-inputs", "N", "embedding or classification inputs waiting (default 16384; 429 beyond)"},
      {"max-queued-generations", "N",
       "generation requests waiting for room in the batch (default 64; 429 beyond)"},
      {"max-queue-wait", "S",
       "seconds a generation request may wait for room in the batch (default 120; 503 beyond)"},
      {"max-attention-tokens", "N", "longest text whose attention a request may ask for (default 256)"},
      {"max-attention-values", "N",
       "numbers in one request's attention exports, layers x heads x N x N summed (default 4194304)"},
      {"http-threads", "N", "requests handled at once (default 64; slow clients hold none)"},
      {"max-connections", "N", "open connections (default 1024; 503 beyond)"},
      {"max-header-bytes", "N", "a request's head, request line and headers (default 32768; 431 beyond)"},
      {"header-timeout", "S", "seconds from a request's first byte to the end of its head (default 10; 408)"},
      {"read-timeout", "S", "seconds from a request's first byte to the end of its body (default 30; 408)"},
      {"write-timeout", "S", "seconds a client may stop reading its response (default 30)"},
      {"api-key", "KEY",
       "require 'Authorization: Bearer KEY' on every endpoint but /health (ATTN_API_KEY sets it too)"},
      {"api-key-file", "FILE", "the API key from the first line of FILE (kept out of the process list)"},
      {"public-metrics", "", "serve /metrics without the API key"},
      {"allowed-host", "NAMES",
       "comma-separated Host names accepted besides localhost when bound to loopback (a proxy's name)"},
      {"help", "", "this text"},
  };
  return specs;
}

std::string serve_help() {
  return "usage: attn serve [--embed minilm] [--generate smollm2] [--classify FILE] [--rerank DIR] [--port "
         "N]\n\n"
         "An OpenAI-compatible HTTP server: POST /v1/embeddings, /v1/chat/completions, /v1/completions,\n"
         "/v1/classify, /v1/rerank, /v1/attention; GET /v1/models, /health, /metrics, and / (the attention "
         "viewer);\n"
         "with --explain, GET /explain (attention step by step, in Chinese first) and POST /v1/explain.\n"
         "Any request may add \"attention\": {\"layers\": [...], \"heads\": [...]} for the exact attention\n"
         "weights. It listens on 127.0.0.1 unless --host says otherwise, prints its URL, answers /health\n"
         "with 503 until the models are loaded, and stops on SIGINT or SIGTERM after finishing the\n"
         "requests in flight. See docs/serve.md.\n\n"
         "Options:\n" +
         format_options(serve_options()) +
         "\nExamples:\n"
         "  attn serve --embed minilm --generate smollm2\n"
         "  curl -s localhost:8080/v1/embeddings -d '{\"input\": \"A man is eating food.\"}'\n";
}

// The first line of a key file, without its line end.
std::string read_key_file(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  ATTN_CHECK(f != nullptr, "--api-key-file: cannot open '", path, "'");
  char buf[4096];
  const std::size_t n = std::fread(buf, 1, sizeof buf, f);
  std::fclose(f);
  std::string key(buf, n);
  key = key.substr(0, key.find_first_of("\r\n"));
  ATTN_CHECK(!key.empty(), "--api-key-file: the first line of '", path, "' is empty; expected the key");
  return key;
}

serve::ServerOptions server_options(const Args& a) {
  serve::ServerOptions o;
  serve::Limits& l = o.limits;
  if (a.has("host")) o.host = a.str("host");
  if (a.has("port")) o.port = static_cast<int>(a.integer("port", 0, 65535));
  if (a.has("embed")) o.embed = a.str("embed");
  if (a.has("generate")) o.generate = a.str("generate");
  if (a.has("quantize")) o.generate_quantize = a.str("quantize");
  ATTN_CHECK(o.generate_quantize.empty() || !o.generate.empty(), "--quantize needs --generate MODEL");
  if (a.has("classify")) o.classify = a.str("classify");
  if (a.has("explain")) o.explain = a.words("explain", ',');
  if (a.has("rerank")) o.rerank = a.str("rerank");
  ATTN_CHECK(!o.embed.empty() || !o.generate.empty() || !o.classify.empty() || !o.explain.empty() ||
                 !o.rerank.empty(),
             "nothing to serve: give --embed minilm, --generate smollm2, --classify FILE, --rerank DIR or "
             "--explain e5");
  if (a.has("parallel")) o.generate_slots = a.integer("parallel", 1, 256);
  if (a.has("kv-cache-mb")) o.kv_cache_bytes = a.integer("kv-cache-mb", 1, int64_t{1} << 20) << 20;
  if (a.has("kv-cache-type")) o.kv_cache_type = ops::parse_kv_dtype(a.str("kv-cache-type"));
  if (a.has("prefill-chunk")) o.prefill_chunk = a.integer("prefill-chunk", 16, 8192);
  o.prefix_cache = !a.has("no-prefix-cache");
  if (a.has("context")) l.context = a.integer("context", 16, int64_t{1} << 20);
  if (a.has("max-tokens")) l.max_tokens = a.integer("max-tokens", 1, int64_t{1} << 20);
  if (a.has("default-max-tokens"))
    l.default_max_tokens = a.integer("default-max-tokens", 1, int64_t{1} << 20);
  l.default_max_tokens = std::min(l.default_max_tokens, l.max_tokens);
  if (a.has("max-body-bytes")) l.max_body_bytes = a.integer("max-body-bytes", 1024, int64_t{1} << 32);
  if (a.has("max-inputs")) l.max_inputs = a.integer("max-inputs", 1, 1 << 20);
  if (a.has("max-input-bytes")) l.max_input_bytes = a.integer("max-input-bytes", 1, int64_t{1} << 32);
  if (a.has("max-batch-tokens")) l.max_batch_tokens = a.integer("max-batch-tokens", 1, 1 << 24);
  if (a.has("max-wait-ms")) l.max_wait_ms = static_cast<double>(a.integer("max-wait-ms", 0, 1000));
  if (a.has("max-queued-inputs")) l.max_queued_inputs = a.integer("max-queued-inputs", 1, 1 << 24);
  if (a.has("max-queued-generations"))
    l.max_queued_generations = a.integer("max-queued-generations", 0, 1 << 20);
  if (a.has("max-attention-tokens")) l.max_attention_tokens = a.integer("max-attention-tokens", 1, 4096);
  if (a.has("max-attention-values"))
    l.max_attention_values = a.integer("max-attention-values", 1, int64_t{1} << 40);
  const auto seconds = [&a](const char* name, double lo, double hi) {
    const double s = parse_number(a.str(name), std::string("--") + name);
    ATTN_CHECK(s >= lo && s <= hi, "--", name, ": expected seconds in [", lo, ", ", hi, "]; got ",
               a.str(name));
    return s;
  };
  if (a.has("max-queue-wait")) l.max_queue_wait_s = seconds("max-queue-wait", 0, 86400);
  if (a.has("read-timeout")) l.read_timeout_s = seconds("read-timeout", 0.1, 3600);
  if (a.has("write-timeout")) l.write_timeout_s = seconds("write-timeout", 0.1, 3600);
  if (a.has("http-threads")) l.http_threads = a.integer("http-threads", 2, 4096);
  if (a.has("max-connections")) l.max_connections = a.integer("max-connections", 1, 1 << 20);
  if (a.has("max-header-bytes")) l.max_header_bytes = a.integer("max-header-bytes", 1024, 1 << 24);
  if (a.has("header-timeout")) l.header_timeout_s = seconds("header-timeout", 0.1, 3600);
  ATTN_CHECK(!(a.has("api-key") && a.has("api-key-file")), "give --api-key or --api-key-file, not both");
  if (a.has("api-key")) {
    o.api_key = a.str("api-key");
  } else if (a.has("api-key-file")) {
    o.api_key = read_key_file(a.str("api-key-file"));
  } else if (const char* env = std::getenv("ATTN_API_KEY"); env && *env) {
    o.api_key = env;
  }
  if (a.has("api-key") || a.has("api-key-file"))
    ATTN_CHECK(o.api_key.size() >= 8 && o.api_key.find_first_of(" \t\r\n") == std::string::npos,
               "the API key must be at least 8 characters with no white space; got ", o.api_key.size(),
               " characters");
  o.public_metrics = a.has("public-metrics");
  if (a.has("allowed-host")) o.allowed_hosts = a.words("allowed-host", ',');
  o.log = [](const std::string& line) {
    std::fprintf(stderr, "attn serve: %s\n", line.c_str());
    std::fflush(stderr);
  };
  return o;
}

volatile sig_atomic_t g_stop_signal = 0;
extern "C" void on_stop_signal(int sig) { g_stop_signal = sig; }

}  // namespace

int run_serve(const std::vector<std::string>& raw) {
  const Args a(raw, serve_options());
  if (a.has("help")) {
    std::fputs(serve_help().c_str(), stdout);
    return 0;
  }
  serve::ServerOptions o = server_options(a);
  if (a.has("threads")) set_num_threads(static_cast<int>(a.integer("threads", 1, 1024)));
  // SIGINT and SIGTERM set a flag that this thread polls. (Blocking them and waiting with sigwait
  // would not do: threads started before main, e.g. OpenBLAS's, do not block them, and a signal
  // delivered to one of those would end the process at once.)
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  serve::Server server(o);
  server.start();
  std::printf("attn serve: listening on %s\n", server.url().c_str());
  std::fflush(stdout);
  server.load_models();
  if (g_stop_signal == 0) {
    std::printf("attn serve: ready\n");
    std::fflush(stdout);
  }
  while (g_stop_signal == 0) {
    const timespec wait{0, 50 * 1000 * 1000};
    nanosleep(&wait, nullptr);
  }
  const int sig = g_stop_signal;
  std::fprintf(stderr, "attn serve: %s: finishing the requests in flight\n",
               sig == SIGINT ? "SIGINT" : "SIGTERM");
  server.stop();
  std::fprintf(stderr, "attn serve: stopped\n");
  return 0;
}

}  // namespace attn::cli
