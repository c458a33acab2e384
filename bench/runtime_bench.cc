// The runtime's decoder on a GGUF file (models/runtime/decoder.h): aggregate decode tokens/s of N
// sequences generated together (one runtime::Scheduler, greedy, one batched step per token), against
// one sequence alone, for each N; and the prompt pass in tokens/s. Each phase is timed on its own: the
// first step prefills every prompt, each later one decodes a token of every sequence. A measurement
// of attn's own batched step across architectures; the comparison with llama-server is
// bench/serve/serve_concurrency_bench.py.
//
//   runtime_bench [--model smollm2|gemma3|FILE.gguf] [--streams 1,4,16] [--gen 64] [--prompt 48]
//                 [--threads N] [--repeat R] [--quantize none|q8_0|q4_0] [--kv f32|f16|q8] [--agree 0|1]
//
// --kv: the KV cache's type; --agree 1: then each sequence's greedy tokens against an f32 cache's.
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
  ops::KvDtype kv = ops::KvDtype::f32;
  bool agree = false;
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
    else if (a == "--kv")
      kv = ops::parse_kv_dtype(v);
    else if (a == "--agree")
      agree = v == "1";
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
  std::printf("# %s (%s), %d threads, prompt %lld, gen %lld, quantize %s, kv %s, weights %.1f MiB\n",
              path.c_str(), dec->config().arch.c_str(), num_threads(), static_cast<long long>(prompt),
              static_cast<long long>(gen), models::runtime::load_quant_name(quant), ops::kv_dtype_name(kv),
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
    // One scheduler, stepped here: the first step prefills every prompt (and samples each first
    // token); every later step decodes one token of each sequence. Each phase is timed on its own.
    // Returns false (with a message) when a sequence did not get its tokens; `ids` gets them.
    auto run = [&](ops::KvDtype type, double* prefill_s, double* decode_s,
                   std::vector<std::vector<int32_t>>* ids) {
      models::runtime::KvCacheConfig kc = dec->kv_layout();
      kc.dtype = type;
      kc.pool_bytes = n * (prompt + gen + kc.block_tokens) * kc.layers *
                      ops::kv_position_bytes(type, kc.kv_heads, kc.head_dim);
      models::runtime::PagedKvCache cache(kc);
      models::runtime::Scheduler sched(*dec, cache, so);
      int64_t tokens = 0;
      ids->assign(static_cast<std::size_t>(n), {});
      for (int64_t s = 0; s < n; ++s) {
        models::runtime::SequenceRequest q;
        q.prompt = ps[static_cast<std::size_t>(s)];
        q.options = g;
        q.on_event = [&tokens, ids, s](const models::runtime::SequenceEvent& e) {
          if (e.kind != models::runtime::SequenceEvent::Kind::token) return;
          ++tokens;
          (*ids)[static_cast<std::size_t>(s)].push_back(static_cast<int32_t>(e.token));
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
        return false;
      }
      *prefill_s = t1 - t0;
      *decode_s = t2 - t1;
      return true;
    };
    double best_decode = 0, best_prefill = 0;
    std::vector<std::vector<int32_t>> ids, ref_ids;
    for (int64_t r = 0; r < repeat; ++r) {
      double pre = 0, dec_s = 0;
      if (!run(kv, &pre, &dec_s, &ids)) return 1;
      best_prefill = std::max(best_prefill, static_cast<double>(n * prompt) / pre);
      best_decode = std::max(best_decode, static_cast<double>(n * (gen - 1)) / dec_s);
    }
    if (agree) {  // each sequence's greedy tokens against an f32 cache's: how many agree before the first
                  // difference, and how many sequences agree throughout
      double pre = 0, dec_s = 0;
      if (!run(ops::KvDtype::f32, &pre, &dec_s, &ref_ids)) return 1;
      int64_t total = 0, whole = 0, shortest = gen;
      for (int64_t s = 0; s < n; ++s) {
        const auto& a = ids[static_cast<std::size_t>(s)];
        const auto& b = ref_ids[static_cast<std::size_t>(s)];
        int64_t k = 0;
        while (k < gen && a[static_cast<std::size_t>(k)] == b[static_cast<std::size_t>(k)]) ++k;
        total += k;
        whole += k == gen;
        shortest = std::min(shortest, k);
      }
      std::printf(
          "# %lld streams: %s against f32, greedy tokens before the first difference: mean %.1f, "
          "least %lld of %lld; %lld of %lld sequences identical\n",
          static_cast<long long>(n), ops::kv_dtype_name(kv), static_cast<double>(total) / n,
          static_cast<long long>(shortest), static_cast<long long>(gen), static_cast<long long>(whole),
          static_cast<long long>(n));
    }
    std::printf("%lld,%.1f,%.1f,%lld\n", static_cast<long long>(n), best_decode, best_prefill,
                static_cast<long long>(repeat));
    std::fflush(stdout);
  }
  return 0;
}
