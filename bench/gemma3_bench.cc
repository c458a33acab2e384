// Gemma 3 270M (GGUF Q4_K_M) speed on the runtime's decoder (models/runtime/decoder.h, what every
// command runs): prompt tokens/s, generated tokens/s, and generated tokens/s at a long context with
// the KV-cache memory (the paged cache's reserved bytes: the sliding layers give back the blocks that
// leave their window). One JSON line per case; bench/run_gemma3.py runs llama.cpp (llama-cpp-python)
// on the same file, same threads, side by side.
//
//   gemma3_bench [--model PATH] [--threads N] [--f32-act 1] [--kv-f16 1] greedy "PROMPT" N
//                                          greedy continuation (text + ids; --logits 1: also the top-two
//                                          logit margin at every step)
//   --f32-act 1: f32 activations against the quantized weights (runtime::DecoderOptions::
//   activations_8bit = false); --kv-f16 1: the KV cache in f16; --screen-anywhere 1: the greedy
//   picks' screen also where ops would not use it (no AVX-512 VNNI), to measure it there
//   gemma3_bench ... prompt N [reps]       prefill of N tokens: tokens/s (best of reps; first_*: the first
//                                          pass; --warm-up 1: a 16-token pass before them, timed apart)
//   gemma3_bench ... decode N              N generated tokens after a 16-token prompt: tokens/s with
//                                          every logit + argmax, then the same N steps again as greedy
//                                          picks (BatchEntry::greedy: ops::GreedyPicker, the screened
//                                          product where ops says it applies and pays, built before
//                                          the timing): "screened_*" fields, candidate rows per step,
//                                          whether the tokens agree (context: with --screened-context 1)
//   gemma3_bench ... context CTX N         N generated tokens after CTX tokens of context
//   gemma3_bench ... screen [reps] [rows]  the vocabulary product alone (first `rows` rows): full Q8_0
//                                          against the screen pass and the screened argmax (g19b), on a
//                                          hidden vector of a 16-token prompt (the last layer's FFN
//                                          input, runtime::Decoder::layer_trace)
//   gemma3_bench [--threads N] bandwidth [MiB]  the read bandwidth (GB/s) over a MiB buffer (1024)
// (The former hand-written engine's cases went with it: decode_ab, its int8-GEMM and full-cache
// options; their results stay in docs/benchmarks.md as history.)
#include <attn/core/parallel.h>
#include <attn/io/gguf.h>
#include <attn/io/model_files.h>
#include <attn/models/runtime/decoder.h>
#include <attn/models/text_decoder.h>
#include <attn/ops/quantized.h>
#include <attn/ops/weight_matrix.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <functional>
#include <memory>
#include <string>
#include <vector>

using namespace attn;
using models::runtime::BatchEntry;
using models::runtime::Decoder;
using models::runtime::PagedKvCache;

namespace {
double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
// CPU time of the whole process (every thread): on a loaded machine the wall clock counts the time
// other processes held the cores.
double cpu_now() {
  timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}
int32_t argmax(std::span<const float> l) {
  return static_cast<int32_t>(std::max_element(l.begin(), l.end()) - l.begin());
}

struct Options {
  bool f32_act = false, kv_f16 = false;
  bool screen_anywhere = false;  // the greedy picks' screen also where it does not pay (no AVX-512 VNNI)
};

// The model: the file's tokenizer (TextDecoder) and the decoder the options ask for.
struct Model {
  models::TextDecoder text;
  io::GgufFile file;
  std::unique_ptr<Decoder> own;  // with f32 activations
  Decoder* dec = nullptr;
  Model(const std::string& path, int64_t ctx, const Options& o)
      : text(models::TextDecoder::load(path, {.max_context = ctx})), file(io::GgufFile::open(path)) {
    dec = &text.decoder();
    if (o.f32_act) {
      own = Decoder::load(file, {.max_context = ctx, .activations_8bit = false, .greedy_screen_after = 0});
      dec = own.get();
    }
  }
};

// One sequence on its own paged cache (f32 or f16), as runtime::SingleSequence, with its bytes.
class Seq {
 public:
  Seq(Decoder& d, int64_t positions, bool f16)
      : d_(d),
        cache_([&] {
          models::runtime::KvCacheConfig k = models::runtime::one_sequence_pool(d.kv_layout(), positions);
          if (f16) {
            k.dtype = ops::KvDtype::f16;
            k.pool_bytes /= 2;
          }
          return k;
        }()),
        logits_(static_cast<std::size_t>(d.batch_vocab())) {
    seq_ = cache_.create();
  }
  std::span<const float> prefill(std::span<const int32_t> ids) {
    run(ids, logits_.data(), nullptr);
    return logits_;
  }
  std::span<const float> step(int32_t id) { return prefill({&id, 1}); }
  // The greedy pick after ids (BatchEntry::greedy).
  int32_t pick(std::span<const int32_t> ids) {
    int64_t t = -1;
    run(ids, nullptr, &t);
    return static_cast<int32_t>(t);
  }
  void clear() {
    cache_ = PagedKvCache(cache_.config());
    seq_ = cache_.create();
  }
  int64_t reserved_bytes() const { return cache_.accounting().reserved; }

 private:
  void run(std::span<const int32_t> ids, float* logits, int64_t* greedy) {
    const auto n = static_cast<int64_t>(ids.size());
    if (!cache_.append(seq_, ids.data(), n)) throw Error("gemma3_bench: the cache is full");
    BatchEntry e{seq_, ids.data(), n, logits, nullptr};
    e.greedy = greedy;
    d_.forward_batch(cache_, {&e, 1});
  }
  Decoder& d_;
  PagedKvCache cache_;
  PagedKvCache::SeqId seq_ = 0;
  std::vector<float> logits_;
};

// A deterministic stream of ordinary token ids (no control tokens) for long contexts.
std::vector<int32_t> filler(const models::TextDecoder& m, int64_t n) {
  const std::string text =
      "The history of the city goes back many centuries. 这座城市的历史可以追溯到许多世纪以前。 ";
  const std::vector<int32_t> one = m.tokenizer().encode(text, false, false);
  std::vector<int32_t> out = {m.tokenizer().bos_id()};
  while (static_cast<int64_t>(out.size()) < n) out.insert(out.end(), one.begin(), one.end());
  out.resize(static_cast<std::size_t>(n));
  return out;
}

// The command line's switches besides Options; every case below takes the same arguments (argv[a] is
// the case's name, its own arguments follow).
struct Flags {
  bool margins = false, screened_context = false, warm_up = false;
};

void run_greedy(const Options& opt, const Flags& flags, const std::string& model_path,
                const std::string& mode, int argc, char** argv, int a) {
  Model m(io::require_gemma3_gguf(model_path), 4096, opt);
  const std::vector<int32_t> ids = m.text.encode_text(argv[a + 1]);
  const int n = std::atoi(argv[a + 2]);
  Seq seq(*m.dec, 4096, opt.kv_f16);
  std::span<const float> l = seq.prefill(ids);
  std::vector<int32_t> out;
  std::vector<float> gaps;
  for (int i = 0; i < n; ++i) {
    out.push_back(argmax(l));
    std::vector<float> top(l.begin(), l.end());
    std::partial_sort(top.begin(), top.begin() + 2, top.end(), std::greater<float>());
    gaps.push_back(top[0] - top[1]);
    if (out.back() == m.text.tokenizer().eos_id()) break;
    l = seq.step(out.back());
  }
  std::printf("%s\n", m.text.decode(out).c_str());
  for (int32_t id : out) std::printf("%d ", id);
  std::printf("\n");
  if (flags.margins) {
    for (float g : gaps) std::printf("%.4f ", g);
    std::printf("\n");
  }
}

void run_bandwidth(const Options& opt, const Flags& flags, const std::string& model_path,
                   const std::string& mode, int argc, char** argv, int a) {
  // The machine's read bandwidth (a STREAM-like sum over a buffer far larger than the caches, each
  // thread its own contiguous part): the roofline of a decode step, which reads every weight once.
  const int64_t mib = a + 1 < argc ? std::atoll(argv[a + 1]) : 1024;
  const int64_t n = mib * (1 << 20) / 8;
  std::vector<uint64_t> buf(static_cast<std::size_t>(n));
  parallel_for(n, 1 << 16, [&](int64_t b, int64_t e, int) {
    for (int64_t i = b; i < e; ++i) buf[i] = static_cast<uint64_t>(i) * 2654435761u;
  });
  const int T = num_threads();
  std::vector<uint64_t> part(T * 8);
  double best = 1e30;
  for (int r = 0; r < 5; ++r) {
    const double t0 = now();
    parallel_for(n, (n + T - 1) / T, [&](int64_t b, int64_t e, int t) {
      uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
      int64_t i = b;
      for (; i + 4 <= e; i += 4) s0 += buf[i], s1 += buf[i + 1], s2 += buf[i + 2], s3 += buf[i + 3];
      for (; i < e; ++i) s0 += buf[i];
      part[t * 8] += s0 + s1 + s2 + s3;
    });
    best = std::min(best, now() - t0);
  }
  uint64_t check = 0;
  for (uint64_t v : part) check ^= v;
  std::printf(
      "{\"engine\": \"attn\", \"case\": \"bandwidth\", \"mib\": %lld, \"threads\": %d, \"seconds\": "
      "%.4f, "
      "\"read_gb_per_s\": %.2f, \"check\": %llu}\n",
      static_cast<long long>(mib), T, best, static_cast<double>(n * 8) / best / 1e9,
      static_cast<unsigned long long>(check & 0xff));
}

void run_screen(const Options& opt, const Flags& flags, const std::string& model_path,
                const std::string& mode, int argc, char** argv, int a) {
  // g19b: the vocabulary product alone on a hidden vector of a short prompt: the full Q8_0 product
  // (ops::quant_dot_rows over every row, as a decode step runs it) against the screen pass
  // (ops::GreedyScreen::screen) and the whole screened argmax; best of reps, wall and CPU.
  const int reps = a + 1 < argc ? std::atoi(argv[a + 1]) : 10;
  const int64_t rows = a + 2 < argc ? std::atoll(argv[a + 2]) : 0;  // the first rows only (0: all)
  Model m(io::require_gemma3_gguf(model_path), 64, opt);
  const std::vector<int32_t> ids = filler(m.text, 16);
  const int64_t L = m.dec->config().layers, C = m.dec->config().dim;
  const models::AttentionLayerTrace t = m.dec->layer_trace(ids, L - 1);
  const std::vector<float> h(t.normed_after.end() - C, t.normed_after.end());
  const int64_t V = rows > 0 ? std::min(rows, m.dec->config().vocab) : m.dec->config().vocab;
  const ops::QuantMatrix w(ops::QuantFormat::q8_0, m.file.view("token_embd.weight").data, V, C);
  ops::QuantActivations x;
  x.quantize(ops::QuantFormat::q8_0, h.data(), 1, C, C);
  double b0 = now();
  ops::GreedyScreen screen(w, h);
  const double build = now() - b0;
  std::vector<float> y(V), value(V), bound(V);
  auto best = [&](const std::function<void()>& fn, double* cpu) {
    double wbest = 1e30;
    *cpu = 1e30;
    for (int r = 0; r < reps; ++r) {
      const double t0 = now(), c0 = cpu_now();
      fn();
      wbest = std::min(wbest, now() - t0), *cpu = std::min(*cpu, cpu_now() - c0);
    }
    return wbest;
  };
  double cf, cs, cg;
  const double tf = best(
      [&] {
        parallel_for(V, 2048,
                     [&](int64_t b, int64_t e, int) { ops::quant_dot_rows(w, b, e, x, y.data(), V, false); });
      },
      &cf);
  const double ts = best([&] { screen.screen(x, value.data(), bound.data()); }, &cs);
  ops::GreedyScreen::Pick p;
  const double tg = best([&] { p = screen.argmax(w, x); }, &cg);
  const int64_t full_pick = std::max_element(y.begin(), y.end()) - y.begin();
  std::printf(
      "{\"engine\": \"attn\", \"case\": \"screen\", \"threads\": %d, \"full_ms\": %.3f, \"full_cpu_ms\": "
      "%.3f, "
      "\"screen_ms\": %.3f, \"screen_cpu_ms\": %.3f, \"greedy_ms\": %.3f, \"greedy_cpu_ms\": %.3f, "
      "\"candidates\": %lld, \"same_pick\": %s, \"full_mb\": %.1f, \"screen_mb\": %.1f, \"build_s\": "
      "%.3f, \"screen_fast\": %s}\n",
      num_threads(), tf * 1e3, cf * 1e3, ts * 1e3, cs * 1e3, tg * 1e3, cg * 1e3,
      static_cast<long long>(p.candidates), p.index == full_pick ? "true" : "false",
      static_cast<double>(V * w.row_bytes()) / 1e6, static_cast<double>(screen.bytes()) / 1e6, build,
      ops::greedy_screen_fast() ? "true" : "false");
}

void run_prompt(const Options& opt, const Flags& flags, const std::string& model_path,
                const std::string& mode, int argc, char** argv, int a) {
  const int64_t n = std::atoll(argv[a + 1]);
  const int reps = a + 2 < argc ? std::atoi(argv[a + 2]) : 3;
  Model m(io::require_gemma3_gguf(model_path), n, opt);
  const std::vector<int32_t> ids = filler(m.text, n);
  Seq seq(*m.dec, n, opt.kv_f16);
  double best = 1e30, best_cpu = 1e30, first = 0, first_cpu = 0, warm = 0, warm_cpu = 0;
  if (flags.warm_up) {  // a 16-token pass first (the first touch of every weight)
    const double t0 = now(), c0 = cpu_now();
    seq.prefill(std::span<const int32_t>(ids).subspan(0, std::min<std::size_t>(16, ids.size())));
    warm = now() - t0, warm_cpu = cpu_now() - c0;
  }
  for (int r = 0; r < reps; ++r) {
    seq.clear();
    const double t0 = now(), c0 = cpu_now();
    seq.prefill(ids);
    if (r == 0) first = now() - t0, first_cpu = cpu_now() - c0;
    best = std::min(best, now() - t0);
    best_cpu = std::min(best_cpu, cpu_now() - c0);
  }
  std::printf(
      "{\"engine\": \"attn\", \"case\": \"prompt\", \"tokens\": %lld, \"threads\": %d, \"seconds\": "
      "%.4f, "
      "\"tokens_per_s\": %.1f, \"cpu_seconds\": %.4f, \"tokens_per_cpu_s\": %.1f, \"first_seconds\": "
      "%.4f, \"first_cpu_seconds\": %.4f, \"warm_up_seconds\": %.4f, \"warm_up_cpu_seconds\": %.4f}\n",
      static_cast<long long>(n), num_threads(), best, n / best, best_cpu, n / best_cpu, first, first_cpu,
      warm, warm_cpu);
}

void run_decode(const Options& opt, const Flags& flags, const std::string& model_path,
                const std::string& mode, int argc, char** argv, int a) {
  const bool ctx = mode == "context";
  const int64_t context = ctx ? std::atoll(argv[a + 1]) : 16;
  const int64_t n = std::atoll(argv[a + (ctx ? 2 : 1)]);
  // The greedy picks' screen from the first pick (built before the timing below).
  const std::string path = io::require_gemma3_gguf(model_path);
  Model m(path, context + n + 1, opt);
  const io::GgufFile pf = io::GgufFile::open(path);
  const auto picker = Decoder::load(pf, {.max_context = context + n + 1,
                                         .activations_8bit = !opt.f32_act,
                                         .greedy_screen_after = 0,
                                         .greedy_screen_only_where_fast = !opt.screen_anywhere});
  const std::vector<int32_t> ids = filler(m.text, context);
  Seq seq(*m.dec, context + n + 1, opt.kv_f16);
  const double p0 = now(), q0 = cpu_now();
  std::span<const float> l = seq.prefill(ids);
  const double prefill = now() - p0, prefill_cpu = cpu_now() - q0;
  const double kv_mib = static_cast<double>(seq.reserved_bytes()) / (1 << 20);
  const double t0 = now(), c0 = cpu_now();
  std::vector<int32_t> full_ids;
  for (int64_t i = 0; i < n; ++i) {
    full_ids.push_back(argmax(l));
    l = seq.step(full_ids.back());
  }
  const double dt = now() - t0, dc = cpu_now() - c0;
  // The same steps as greedy picks (context: only with --screened-context 1, as it fills the
  // context a second time). The screen is built by the prompt's pick, outside the timing.
  const bool run_screened = !ctx || flags.screened_context;
  double build = 0;
  int32_t next = 0;
  Seq ps(*picker, context + n + 1, opt.kv_f16);
  if (run_screened) {
    const double b0 = now();
    next = ps.pick(ids);
    build = now() - b0;
  }
  const bool did_screen = run_screened && picker->greedy_candidates() < picker->config().vocab;
  bool same = run_screened && next == full_ids[0];
  int64_t cand_sum = 0, cand_max = 0;
  const double s0 = now(), sc0 = cpu_now();
  for (int64_t i = 0; run_screened && i < n; ++i) {
    next = ps.pick({&next, 1});
    cand_sum += picker->greedy_candidates();
    cand_max = std::max(cand_max, picker->greedy_candidates());
    if (i + 1 < n) same = same && next == full_ids[static_cast<std::size_t>(i + 1)];
  }
  const double sdt = now() - s0, sdc = cpu_now() - sc0;
  std::printf(
      "{\"engine\": \"attn\", \"case\": \"%s\", \"context\": %lld, \"generated\": %lld, \"threads\": %d, "
      "\"seconds\": %.4f, \"tokens_per_s\": %.2f, \"cpu_seconds\": %.4f, \"tokens_per_cpu_s\": %.2f, "
      "\"kv_cache_mib\": %.1f, \"prefill_seconds\": %.2f, \"prefill_cpu_seconds\": "
      "%.2f, \"screened\": %s, \"screened_seconds\": %.4f, \"screened_tokens_per_s\": %.2f, "
      "\"screened_cpu_seconds\": %.4f, \"screened_tokens_per_cpu_s\": %.2f, \"candidates_mean\": %.1f, "
      "\"candidates_max\": %lld, \"screened_same_tokens\": %s, \"prefill_and_screen_build_seconds\": "
      "%.2f}\n",
      mode.c_str(), static_cast<long long>(context), static_cast<long long>(n), num_threads(), dt, n / dt, dc,
      n / dc, kv_mib, prefill, prefill_cpu, did_screen ? "true" : "false", sdt, did_screen ? n / sdt : 0.0,
      sdc, did_screen ? n / sdc : 0.0,
      run_screened ? static_cast<double>(cand_sum) / static_cast<double>(n) : 0.0,
      static_cast<long long>(cand_max), same ? "true" : "false", build);
}

}  // namespace

int main(int argc, char** argv) {
  std::string model_path;
  Options opt;
  Flags flags;
  int a = 1;
  for (; a + 1 < argc && std::strncmp(argv[a], "--", 2) == 0; a += 2) {
    if (!std::strcmp(argv[a], "--model")) model_path = argv[a + 1];
    if (!std::strcmp(argv[a], "--threads")) set_num_threads(std::atoi(argv[a + 1]));
    if (!std::strcmp(argv[a], "--f32-act")) opt.f32_act = std::atoi(argv[a + 1]) != 0;
    if (!std::strcmp(argv[a], "--kv-f16")) opt.kv_f16 = std::atoi(argv[a + 1]) != 0;
    if (!std::strcmp(argv[a], "--screen-anywhere")) opt.screen_anywhere = std::atoi(argv[a + 1]) != 0;
    if (!std::strcmp(argv[a], "--screened-context")) flags.screened_context = std::atoi(argv[a + 1]) != 0;
    if (!std::strcmp(argv[a], "--logits")) flags.margins = std::atoi(argv[a + 1]) != 0;
    if (!std::strcmp(argv[a], "--warm-up")) flags.warm_up = std::atoi(argv[a + 1]) != 0;
  }
  if (a >= argc) {
    std::fprintf(
        stderr,
        "usage: gemma3_bench [--model PATH] [--threads N] greedy|prompt|decode|context|screen|bandwidth "
        "...\n");
    return 2;
  }
  const std::string mode = argv[a];
  try {
    if (mode == "greedy")
      run_greedy(opt, flags, model_path, mode, argc, argv, a);
    else if (mode == "bandwidth")
      run_bandwidth(opt, flags, model_path, mode, argc, argv, a);
    else if (mode == "screen")
      run_screen(opt, flags, model_path, mode, argc, argv, a);
    else if (mode == "prompt")
      run_prompt(opt, flags, model_path, mode, argc, argv, a);
    else if (mode == "decode" || mode == "context")
      run_decode(opt, flags, model_path, mode, argc, argv, a);
    else {
      std::fprintf(stderr, "unknown mode %s\n", mode.c_str());
      return 2;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
