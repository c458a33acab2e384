// attn serve's embeddings over HTTP against the same sentences embedded in-process.
//
// The server (serve::Server, the code behind `attn serve`) runs in this process on an ephemeral
// loopback port; C client threads (cpp-httplib, keep-alive) each send one-sentence requests
// (POST /v1/embeddings) back to back. For each concurrency: embeddings per second, p50 and p99
// latency, and the mean batch the server formed (from /metrics). The in-process side runs
// SentenceEncoder::embed over the same sentences in batches of that concurrency. ratio = server /
// in-process throughput (1.0 = no overhead); cpu_ratio = in-process / server CPU time per embedding
// (the server's includes the HTTP clients', all in this process), which a loaded machine distorts
// less than wall time. Prints one JSON object per measurement.
//
//   serve_embed_bench [--threads 2] [--concurrency 1,4,16] [--requests 600] [--rounds 3] [--wait-ms 3]
#include <attn/core/parallel.h>
#include <attn/serve/server.h>
#include <attn/tasks/embed.h>
#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "bench_util.h"

namespace {

using Clock = std::chrono::steady_clock;

std::vector<std::string> sentences(int n) {
  static const char* subjects[] = {"The cat",       "A man",         "My neighbour", "The committee",
                                   "A small robot", "The old train", "Our teacher",  "The river"};
  static const char* verbs[] = {"eats", "watches", "builds", "forgets", "paints", "follows", "answers"};
  static const char* objects[] = {"the red apple",          "a long letter",
                                  "the evening news",       "three quiet birds",
                                  "an unexpected question", "the bridge over the valley"};
  std::vector<std::string> out;
  for (int i = 0; i < n; ++i)
    out.push_back(std::string(subjects[i % 8]) + " " + verbs[(i / 8) % 7] + " " + objects[(i / 56) % 6] +
                  " on day " + std::to_string(i) + ".");
  return out;
}

double metric(const std::string& text, const std::string& name) {
  std::smatch m;
  if (!std::regex_search(text, m, std::regex(name + " ([0-9.e+-]+)"))) return 0;
  return std::stod(m[1]);
}

struct Served {
  double per_s = 0, p50_ms = 0, p99_ms = 0, mean_batch = 0;
  double cpu_ms = 0;  // process CPU time per embedding (server and the clients: all in this process)
};

Served run_clients(const std::string& url, const std::vector<std::string>& texts, int concurrency) {
  httplib::Client probe(url);
  const std::string before = probe.Get("/metrics")->body;
  std::vector<std::vector<double>> lat(static_cast<std::size_t>(concurrency));
  std::atomic<std::size_t> next{0};
  std::atomic<int> errors{0};
  const auto t0 = Clock::now();
  const double cpu0 = attn::bench::process_cpu_s();
  std::vector<std::thread> threads;
  for (int c = 0; c < concurrency; ++c)
    threads.emplace_back([&, c] {
      httplib::Client cli(url);
      cli.set_keep_alive(true);
      cli.set_tcp_nodelay(true);  // one request is two writes (headers, body): no Nagle wait between them
      while (true) {
        const std::size_t i = next.fetch_add(1);
        if (i >= texts.size()) return;
        const std::string body = "{\"input\": \"" + texts[i] + "\", \"encoding_format\": \"float\"}";
        const auto s = Clock::now();
        const auto r = cli.Post("/v1/embeddings", body, "application/json");
        lat[static_cast<std::size_t>(c)].push_back(
            std::chrono::duration<double, std::milli>(Clock::now() - s).count());
        if (!r || r->status != 200) {
          if (errors.fetch_add(1) < 3)
            std::fprintf(stderr, "serve_embed_bench: request %zu: %s\n", i,
                         r ? (std::to_string(r->status) + " " + r->body.substr(0, 200)).c_str()
                           : httplib::to_string(r.error()).c_str());
        }
      }
    });
  for (auto& t : threads) t.join();
  const double wall = std::chrono::duration<double>(Clock::now() - t0).count();
  const double cpu = attn::bench::process_cpu_s() - cpu0;
  const std::string after = probe.Get("/metrics")->body;
  if (errors.load()) std::fprintf(stderr, "serve_embed_bench: %d errors\n", errors.load());
  std::vector<double> all;
  for (const auto& l : lat) all.insert(all.end(), l.begin(), l.end());
  std::sort(all.begin(), all.end());
  Served s;
  s.per_s = static_cast<double>(texts.size()) / wall;
  s.cpu_ms = 1000 * cpu / static_cast<double>(texts.size());
  s.p50_ms = all[all.size() / 2];
  s.p99_ms = all[std::min(all.size() - 1, all.size() * 99 / 100)];
  const std::string sum = "attn_batch_inputs_sum\\{batcher=\"embeddings\"\\}";
  const std::string count = "attn_batch_inputs_count\\{batcher=\"embeddings\"\\}";
  const double batches = metric(after, count) - metric(before, count);
  s.mean_batch = batches > 0 ? (metric(after, sum) - metric(before, sum)) / batches : 0;
  return s;
}

struct InProcess {
  double per_s = 0, cpu_ms = 0;
};

InProcess in_process(const std::vector<std::string>& texts, int batch) {
  const attn::models::SentenceEncoder& enc = attn::tasks::load_encoder("");
  attn::models::EmbedOptions eo;
  eo.batch_size = batch;
  const auto t0 = Clock::now();
  const double cpu0 = attn::bench::process_cpu_s();
  for (std::size_t s = 0; s < texts.size(); s += static_cast<std::size_t>(batch)) {
    const std::vector<std::string> part(
        texts.begin() + static_cast<std::ptrdiff_t>(s),
        texts.begin() + static_cast<std::ptrdiff_t>(std::min(texts.size(), s + batch)));
    (void)enc.embed(part, eo);
  }
  const auto n = static_cast<double>(texts.size());
  return {n / std::chrono::duration<double>(Clock::now() - t0).count(),
          1000 * (attn::bench::process_cpu_s() - cpu0) / n};
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 2, requests = 600, rounds = 3;
  double wait_ms = 3;
  std::vector<int> conc = {1, 4, 16};
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i], v = argv[i + 1];
    if (a == "--threads")
      threads = std::atoi(v.c_str());
    else if (a == "--requests")
      requests = std::atoi(v.c_str());
    else if (a == "--rounds")
      rounds = std::atoi(v.c_str());
    else if (a == "--wait-ms")
      wait_ms = std::atof(v.c_str());
    else if (a == "--concurrency") {
      conc.clear();
      for (const int64_t x : attn::bench::parse_list(v)) conc.push_back(static_cast<int>(x));
    } else {
      std::fprintf(stderr, "unknown option %s\n", a.c_str());
      return 2;
    }
  }
  attn::set_num_threads(threads);
  attn::serve::ServerOptions o;
  o.host = "127.0.0.1";
  o.port = 0;
  o.embed = "minilm";
  o.limits.max_wait_ms = wait_ms;
  attn::serve::Server server(o);
  server.start();
  server.load_models();
  const std::vector<std::string> texts = sentences(requests);
  (void)run_clients(server.url(), std::vector<std::string>(texts.begin(), texts.begin() + 32), 4);  // warm up
  for (const int c : conc) {
    Served best;
    InProcess best_in;
    double best_cpu = 1e30, best_in_cpu = 1e30;
    for (int r = 0; r < rounds; ++r) {  // alternating, best of the rounds for each side
      const Served s = run_clients(server.url(), texts, c);
      if (s.per_s > best.per_s) best = s;
      best_cpu = std::min(best_cpu, s.cpu_ms);
      const InProcess in = in_process(texts, c);
      if (in.per_s > best_in.per_s) best_in = in;
      best_in_cpu = std::min(best_in_cpu, in.cpu_ms);
    }
    std::printf(
        "{\"concurrency\": %d, \"threads\": %d, \"server_emb_s\": %.1f, \"p50_ms\": %.2f, \"p99_ms\": %.2f, "
        "\"mean_batch\": %.1f, \"in_process_batch\": %d, \"in_process_emb_s\": %.1f, \"ratio\": %.3f, "
        "\"server_cpu_ms_per_emb\": %.2f, \"in_process_cpu_ms_per_emb\": %.2f, \"cpu_ratio\": %.3f}\n",
        c, threads, best.per_s, best.p50_ms, best.p99_ms, best.mean_batch, c, best_in.per_s,
        best.per_s / best_in.per_s, best_cpu, best_in_cpu, best_in_cpu / best_cpu);
    std::fflush(stdout);
  }
  server.stop();
  return 0;
}
