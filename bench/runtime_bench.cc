// The runtime's decoder on a GGUF file (models/runtime/decoder.h): aggregate decode tokens/s of N
// sequences generated together (one runtime::Scheduler, greedy, one batched step per token), against
// one sequence alone, for each N; and the prompt pass in tokens/s. Each phase is timed on its own: the
// first step prefills every prompt, each later one decodes a token of every sequence. A measurement
// of attn's own batched step across architectures; the comparison with llama-server is
// bench/serve/serve_concurrency_bench.py.
//
//   runtime_bench [--model smollm2|gemma3|FILE.gguf] [--streams 1,4,16] [--gen 64] [--prompt 48]
//                 [--threads N] [--repeat R] [--quantize none|q8_0|q4_0]
#include <attn/core/parallel.h>
#include <attn/io/gguf.h>
#include <attn/io/model_files.h>
#include <attn/models/runtime/decoder.h>
#include <attn/models/runtime/scheduler.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "bench_util.h"

using namespace attn;

int main(int argc, char** argv) {
  std::string model = "smollm2", streams = "1,4,16";
  int64_t gen = 64, prompt = 48, repeat = 2;
  models::runtime::LoadQuant quant = models::runtime::LoadQuant::none;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i], v = argv[i + 1];
    if (a == "--model")
      model = v;
    else if (a == "--streams")
      streams = v;
    else if (a == "--gen")
      gen = std::stoll(v);
    else if (a == "--prompt")
      prompt = std::stoll(v);
    else if (a == "--threads")
      set_num_threads(std::stoi(v));
    else if (a == "--repeat")
      repeat = std::stoll(v);
    else if (a == "--quantize")
      quant = models::runtime::parse_load_quant(v);
    else {
      std::fprintf(stderr, "unknown option %s\n", a.c_str());
      return 2;
    }
  }
  const std::string path = model == "smollm2"  ? io::require_smollm2_gguf()
                           : model == "gemma3" ? io::require_gemma3_gguf()
                                               : model;
  const io::GgufFile f = io::GgufFile::open(path);
  models::runtime::DecoderOptions o;
  o.max_context = prompt + gen + 16;
  o.quantize = quant;
  auto dec = models::runtime::Decoder::load(f, o);
  const int64_t V = dec->batch_vocab();
  std::printf("# %s (%s), %d threads, prompt %lld, gen %lld, quantize %s, weights %.1f MiB\n", path.c_str(),
              dec->config().arch.c_str(), num_threads(), static_cast<long long>(prompt),
              static_cast<long long>(gen), models::runtime::load_quant_name(quant),
              static_cast<double>(dec->weight_bytes()) / (1 << 20));
  std::printf("streams,decode_tok_s,prefill_tok_s,best_of\n");
  for (const int64_t n : bench::parse_list(streams)) {
    std::vector<std::vector<int32_t>> ps;
    for (int64_t s = 0; s < n; ++s) {
      std::vector<int32_t> p;
      for (int64_t i = 0; i < prompt; ++i)
        p.push_back(static_cast<int32_t>(100 + (s * 7919 + i * 104729) % (V - 200)));
      ps.push_back(std::move(p));
    }
    models::GenerateOptions g;
    g.max_new_tokens = gen;
    g.eos_id = -1;
    models::runtime::SchedulerOptions so;
    so.max_sequences = n;
    so.max_batch_tokens = std::max<int64_t>(256, n * prompt);  // every prompt in the first step
    so.prefill_chunk = prompt;
    so.prefix_cache = false;
    double best_decode = 0, best_prefill = 0;
    for (int64_t r = 0; r < repeat; ++r) {
      // One scheduler, stepped here: the first step prefills every prompt (and samples each first
      // token); every later step decodes one token of each sequence. Each phase is timed on its own.
      models::runtime::KvCacheConfig kc = dec->kv_layout();
      kc.pool_bytes = n * (prompt + gen + kc.block_tokens) * kc.layers * 2 * kc.kv_heads * kc.head_dim * 4;
      models::runtime::PagedKvCache cache(kc);
      models::runtime::Scheduler sched(*dec, cache, so);
      int64_t tokens = 0;
      for (int64_t s = 0; s < n; ++s) {
        models::runtime::SequenceRequest q;
        q.prompt = ps[static_cast<std::size_t>(s)];
        q.options = g;
        q.on_event = [&tokens](const models::runtime::SequenceEvent& e) {
          tokens += e.kind == models::runtime::SequenceEvent::Kind::token;
        };
        sched.submit(std::move(q));
      }
      const double t0 = bench::now_s();
      sched.step();
      const double t1 = bench::now_s();
      const int64_t first = tokens;
      while (sched.step()) {
      }
      const double t2 = bench::now_s();
      if (first != n || tokens != n * gen) {
        std::fprintf(stderr, "expected %lld first tokens and %lld in all, got %lld and %lld\n",
                     static_cast<long long>(n), static_cast<long long>(n * gen),
                     static_cast<long long>(first), static_cast<long long>(tokens));
        return 1;
      }
      best_prefill = std::max(best_prefill, static_cast<double>(n * prompt) / (t1 - t0));
      best_decode = std::max(best_decode, static_cast<double>(tokens - first) / (t2 - t1));
    }
    std::printf("%lld,%.1f,%.1f,%lld\n", static_cast<long long>(n), best_decode, best_prefill,
                static_cast<long long>(repeat));
    std::fflush(stdout);
  }
  return 0;
}
