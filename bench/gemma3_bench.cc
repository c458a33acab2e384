// Gemma 3 270M (GGUF Q4_K_M) speed: prompt tokens/s, generated tokens/s, and generated tokens/s at a
// long context with the KV-cache memory (sliding-window ring buffers vs a full cache). One JSON line
// per case; bench/run_gemma3.py runs llama.cpp (llama-cpp-python) on the same file, same threads,
// side by side.
//
//   gemma3_bench [--model PATH] [--threads N] [--int8-rows R] [--kv-f16 1] greedy "PROMPT" N
//                                          greedy continuation (text + ids; --logits 1: also the top-two
//                                          logit margin at every step)
//   --int8-rows R: products over fewer than R tokens use 8-bit activations (default the model's, 16;
//   0 = f32 activations everywhere); --kv-f16 1: K and V rounded to f16 before caching;
//   --int8-gemm 0: prompt passes unpack the weights to f32 for ops::gemm instead of the 8-bit GEMM
//   gemma3_bench ... prompt N [reps]       prefill of N tokens: tokens/s (best of reps; first_*: the first
//                                          pass, with the one-time repack; --warm-up 1: a 16-token pass
//                                          before them, timed apart)
//   gemma3_bench ... decode N              N generated tokens after a 16-token prompt: tokens/s
//                                          (full logits + argmax, then the same N steps again through
//                                          the screened greedy path, step_greedy: "screened_*" fields,
//                                          candidate rows per step, and whether the tokens agree;
//                                          context: with --screened-context 1)
//   gemma3_bench ... decode_ab N [block]   the same, the two paths interleaved `block` steps at a time on
//                                          two models (g19c: an A/B that a changing load hits alike)
//   gemma3_bench ... context CTX N [full]  N generated tokens after CTX tokens of context
//   gemma3_bench ... screen [reps] [rows]  the vocabulary product alone (first `rows` rows): full Q8_0
//                                          against the screen pass and the screened argmax (g19b)
//   gemma3_bench [--threads N] bandwidth [MiB]  the read bandwidth (GB/s) over a MiB buffer (1024)
#include <attn/core/parallel.h>
#include <attn/io/gguf.h>
#include <attn/io/model_files.h>
#include <attn/models/gemma3.h>
#include <attn/ops/quantized.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <functional>
#include <string>
#include <vector>

using namespace attn;

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
// A deterministic stream of ordinary token ids (no control tokens) for long contexts.
std::vector<int32_t> filler(const models::Gemma3Model& m, int64_t n) {
  const std::string text =
      "The history of the city goes back many centuries. 这座城市的历史可以追溯到许多世纪以前。 ";
  std::vector<int32_t> one = m.tokenizer().encode(text, false, false), out = {m.tokenizer().bos_id()};
  while (static_cast<int64_t>(out.size()) < n) out.insert(out.end(), one.begin(), one.end());
  out.resize(n);
  return out;
}
}  // namespace

int main(int argc, char** argv) {
  std::string model_path;
  models::Gemma3Options base;
  base.greedy_screen = true;  // measured beside the full logits (off by default in the model)
  bool margins = false, screened_context = false, warm_up = false;
  int a = 1;
  for (; a + 1 < argc && std::strncmp(argv[a], "--", 2) == 0; a += 2) {
    if (!std::strcmp(argv[a], "--model")) model_path = argv[a + 1];
    if (!std::strcmp(argv[a], "--threads")) set_num_threads(std::atoi(argv[a + 1]));
    if (!std::strcmp(argv[a], "--int8-rows")) base.int8_max_rows = std::atoll(argv[a + 1]);
    if (!std::strcmp(argv[a], "--int8-gemm")) base.int8_gemm = std::atoi(argv[a + 1]) != 0;
    if (!std::strcmp(argv[a], "--kv-f16")) base.kv_f16 = std::atoi(argv[a + 1]) != 0;
    if (!std::strcmp(argv[a], "--greedy-screen")) base.greedy_screen = std::atoi(argv[a + 1]) != 0;
    if (!std::strcmp(argv[a], "--screened-context")) screened_context = std::atoi(argv[a + 1]) != 0;
    if (!std::strcmp(argv[a], "--logits")) margins = std::atoi(argv[a + 1]) != 0;
    if (!std::strcmp(argv[a], "--warm-up")) warm_up = std::atoi(argv[a + 1]) != 0;
  }
  auto opts = [&](int64_t ctx, bool full) {
    models::Gemma3Options o = base;
    o.max_context = ctx;
    o.full_kv_cache = full;
    return o;
  };
  if (a >= argc) {
    std::fprintf(stderr,
                 "usage: gemma3_bench [--model PATH] [--threads N] greedy|prompt|decode|context ...\n");
    return 2;
  }
  const std::string mode = argv[a];
  const std::string path = io::require_gemma3_gguf(model_path);
  try {
    if (mode == "greedy") {
      models::Gemma3Model m = models::Gemma3Model::load(path, opts(4096, false));
      const std::vector<int32_t> ids = m.tokenizer().encode(argv[a + 1], true, true);
      const int n = std::atoi(argv[a + 2]);
      std::span<const float> l = m.prefill(ids);
      std::vector<int32_t> out;
      std::vector<float> gaps;
      for (int i = 0; i < n; ++i) {
        out.push_back(argmax(l));
        std::vector<float> top(l.begin(), l.end());
        std::partial_sort(top.begin(), top.begin() + 2, top.end(), std::greater<float>());
        gaps.push_back(top[0] - top[1]);
        if (out.back() == m.tokenizer().eos_id()) break;
        l = m.step(out.back());
      }
      std::printf("%s\n", m.tokenizer().decode(out).c_str());
      for (int32_t id : out) std::printf("%d ", id);
      std::printf("\n");
      if (margins) {
        for (float g : gaps) std::printf("%.4f ", g);
        std::printf("\n");
      }
    } else if (mode == "bandwidth") {
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
    } else if (mode == "screen") {
      // g19b: the vocabulary product alone on the last hidden vector of a short prompt: the full Q8_0
      // product (ops::quant_dot_rows over every row, as a decode step runs it) against the screen pass
      // (ops::GreedyScreen::screen) and the whole screened argmax; best of reps, wall and CPU.
      const int reps = a + 1 < argc ? std::atoi(argv[a + 1]) : 10;
      const int64_t rows = a + 2 < argc ? std::atoll(argv[a + 2]) : 0;  // the first rows only (0: all)
      models::Gemma3Model m = models::Gemma3Model::load(path, opts(64, false));
      m.prefill(filler(m, 16));
      const std::vector<float> h(m.last_hidden().begin(), m.last_hidden().end());
      io::GgufFile f = io::GgufFile::open(path);
      const int64_t V = rows > 0 ? std::min(rows, m.config().vocab) : m.config().vocab, C = m.config().dim;
      const ops::QuantMatrix w(ops::QuantFormat::q8_0, f.view("token_embd.weight").data, V, C);
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
            parallel_for(V, 2048, [&](int64_t b, int64_t e, int) {
              ops::quant_dot_rows(w, b, e, x, y.data(), V, false);
            });
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
          "%.3f}\n",
          num_threads(), tf * 1e3, cf * 1e3, ts * 1e3, cs * 1e3, tg * 1e3, cg * 1e3,
          static_cast<long long>(p.candidates), p.index == full_pick ? "true" : "false",
          static_cast<double>(V * w.row_bytes()) / 1e6, static_cast<double>(screen.bytes()) / 1e6, build);
    } else if (mode == "prompt") {
      const int64_t n = std::atoll(argv[a + 1]);
      const int reps = a + 2 < argc ? std::atoi(argv[a + 2]) : 3;
      models::Gemma3Model m = models::Gemma3Model::load(path, opts(n, false));
      const std::vector<int32_t> ids = filler(m, n);
      double best = 1e30, best_cpu = 1e30, first = 0, first_cpu = 0, warm = 0, warm_cpu = 0;
      if (warm_up) {  // g19c: a 16-token pass first (the repack and the first touch of every weight)
        const double t0 = now(), c0 = cpu_now();
        m.prefill(std::span<const int32_t>(ids).subspan(0, std::min<std::size_t>(16, ids.size())));
        warm = now() - t0, warm_cpu = cpu_now() - c0;
      }
      for (int r = 0; r < reps; ++r) {
        m.clear();
        const double t0 = now(), c0 = cpu_now();
        m.prefill(ids);
        if (r == 0) first = now() - t0, first_cpu = cpu_now() - c0;  // with the one-time int8 repack
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
    } else if (mode == "decode_ab") {
      // g19c: the full product and the screened greedy path interleaved, `block` steps of each in turn on
      // two models (both after the same 16-token prompt, the screen built before timing), so that a load
      // that comes and goes falls on both alike: wall and CPU time per path, and whether the tokens agree.
      const int64_t n = std::atoll(argv[a + 1]);
      const int64_t block = a + 2 < argc ? std::max<int64_t>(1, std::atoll(argv[a + 2])) : 8;
      models::Gemma3Model mf = models::Gemma3Model::load(path, opts(16 + n + 1, false));
      models::Gemma3Model ms = models::Gemma3Model::load(path, opts(16 + n + 1, false));
      const std::vector<int32_t> ids = filler(mf, 16);
      std::span<const float> l = mf.prefill(ids);
      int32_t next = ms.prefill_greedy(ids);
      ms.prepare_greedy_screen();
      std::vector<int32_t> tf = {argmax(l)}, ts = {next};
      double wf = 0, cf = 0, ws = 0, cs = 0;
      for (int64_t done = 0; done < n; done += block) {
        const int64_t k = std::min(block, n - done);
        double t0 = now(), c0 = cpu_now();
        for (int64_t i = 0; i < k; ++i) {
          l = mf.step(tf.back());
          tf.push_back(argmax(l));
        }
        wf += now() - t0, cf += cpu_now() - c0;
        t0 = now(), c0 = cpu_now();
        for (int64_t i = 0; i < k; ++i) ts.push_back(ms.step_greedy(ts.back()));
        ws += now() - t0, cs += cpu_now() - c0;
      }
      std::printf(
          "{\"engine\": \"attn\", \"case\": \"decode_ab\", \"generated\": %lld, \"block\": %lld, "
          "\"threads\": %d, "
          "\"screened\": %s, \"full_tokens_per_s\": %.2f, \"full_tokens_per_cpu_s\": %.2f, "
          "\"screened_tokens_per_s\": %.2f, \"screened_tokens_per_cpu_s\": %.2f, \"same_tokens\": %s}\n",
          static_cast<long long>(n), static_cast<long long>(block), num_threads(),
          ms.greedy_screened() ? "true" : "false", n / wf, n / cf, n / ws, n / cs,
          tf == ts ? "true" : "false");
    } else if (mode == "decode" || mode == "context") {
      const bool ctx = mode == "context";
      const int64_t context = ctx ? std::atoll(argv[a + 1]) : 16;
      const int64_t n = std::atoll(argv[a + (ctx ? 2 : 1)]);
      const bool full = ctx && a + 3 < argc && !std::strcmp(argv[a + 3], "full");
      models::Gemma3Model m = models::Gemma3Model::load(path, opts(context + n + 1, full));
      const std::vector<int32_t> ids = filler(m, context);
      const double p0 = now(), q0 = cpu_now();
      std::span<const float> l = m.prefill(ids);
      const double prefill = now() - p0, prefill_cpu = cpu_now() - q0;
      const double t0 = now(), c0 = cpu_now();
      std::vector<int32_t> full_ids;
      for (int64_t i = 0; i < n; ++i) {
        full_ids.push_back(argmax(l));
        l = m.step(full_ids.back());
      }
      const double dt = now() - t0, dc = cpu_now() - c0;
      // The same steps through the screened greedy path (g19b); the screen is built on the first call,
      // outside the timing.
      // (context: only with --screened-context 1, as it fills the context a second time)
      const bool run_screened = !ctx || screened_context;
      double build = 0;
      int32_t next = 0;
      if (run_screened) {
        m.clear();
        const double b0 = now();
        next = m.prefill_greedy(ids);
        m.prepare_greedy_screen();  // built now, outside the timing (else at the 128th greedy call)
        build = now() - b0;
      }
      const bool screened = run_screened && m.greedy_screened();
      bool same = run_screened && next == full_ids[0];
      int64_t cand_sum = 0, cand_max = 0;
      const double s0 = now(), sc0 = cpu_now();
      for (int64_t i = 0; run_screened && i < n; ++i) {
        next = m.step_greedy(next);
        cand_sum += m.greedy_candidates();
        cand_max = std::max(cand_max, m.greedy_candidates());
        if (i + 1 < n) same = same && next == full_ids[i + 1];
      }
      const double sdt = now() - s0, sdc = cpu_now() - sc0;
      std::printf(
          "{\"engine\": \"attn\", \"case\": \"%s\", \"context\": %lld, \"generated\": %lld, \"threads\": %d, "
          "\"seconds\": %.4f, \"tokens_per_s\": %.2f, \"cpu_seconds\": %.4f, \"tokens_per_cpu_s\": %.2f, "
          "\"kv_cache_mib\": %.1f, \"full_cache\": %s, \"prefill_seconds\": %.2f, \"prefill_cpu_seconds\": "
          "%.2f, \"screened\": %s, \"screened_seconds\": %.4f, \"screened_tokens_per_s\": %.2f, "
          "\"screened_cpu_seconds\": %.4f, \"screened_tokens_per_cpu_s\": %.2f, \"candidates_mean\": %.1f, "
          "\"candidates_max\": %lld, \"screened_same_tokens\": %s, \"prefill_and_screen_build_seconds\": "
          "%.2f}\n",
          mode.c_str(), static_cast<long long>(context), static_cast<long long>(n), num_threads(), dt, n / dt,
          dc, n / dc, static_cast<double>(m.kv_cache_bytes()) / (1 << 20), full ? "true" : "false", prefill,
          prefill_cpu, screened ? "true" : "false", sdt, screened ? n / sdt : 0.0, sdc,
          screened ? n / sdc : 0.0, static_cast<double>(cand_sum) / static_cast<double>(n),
          static_cast<long long>(cand_max), same ? "true" : "false", build);
    } else {
      std::fprintf(stderr, "unknown mode %s\n", mode.c_str());
      return 2;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
