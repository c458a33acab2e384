// SmolLM2-135M-Instruct (GGUF) speed: prompt tokens/s (one prefill pass over a P-token prompt) and
// generated tokens/s (greedy, one token per step with the KV cache). The llama.cpp peer
// (bench/peers/llama_cpp_peer.py) runs the same prompt ids; bench/run_llama.py runs both and prints
// the ratios. Prints one JSON line per configuration.
//
//   llama_bench [--model FILE] [--prompt-tokens 512] [--gen 128] [--reps 3] [--threads 2]
//               [--forms runtime,f32-act]   one run each:
//     runtime   the runtime's decoder (models/text_decoder.h), what every command runs: one prompt
//               pass and one-token steps as batches of one (runtime::SingleSequence), 8-bit
//               activations against the quantized weights where the CPU has the kernels
//               ("default" is accepted as its old name)
//     f32-act   the same decoder with f32 activations (runtime::DecoderOptions::activations_8bit =
//               false: the products read the blocks with f32 activations)
// (The former hand-written engine's forms — quantized, f32-on-load, kv-f32 — went with it; their
// results stay in docs/benchmarks.md as history.)
#include <attn/core/parallel.h>
#include <attn/io/gguf.h>
#include <attn/io/model_files.h>
#include <attn/models/runtime/batch.h>
#include <attn/models/runtime/decoder.h>
#include <attn/models/text_decoder.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <memory>
#include <string>
#include <vector>

#include "bench_util.h"

namespace {

// The benchmark prompt: this paragraph repeated, tokenized, cut to P tokens (the peer does the same).
const char* kText =
    "The history of computing is a story of abstraction. Early machines were programmed by rewiring "
    "panels; then came stored programs, assemblers, compilers and operating systems. Each layer hid "
    "the details of the one below it, so that people could think about larger problems. Today a "
    "language model runs on layers of libraries, kernels and hardware that few people see. ";

}  // namespace

namespace {
// The prompt: kText repeated until it encodes to P tokens, cut to P (the peer does the same).
template <class Encode>
std::vector<int32_t> prompt_ids(Encode encode, int64_t P) {
  std::string text;
  std::vector<int32_t> ids;
  while (static_cast<int64_t>(ids.size()) < P) {
    text += kText;
    ids = encode(text);
  }
  ids.resize(static_cast<std::size_t>(P));
  return ids;
}

// Best of `reps`: one prompt pass over ids, then G greedy one-token steps; one JSON line.
void measure(const std::string& form, attn::models::runtime::SingleSequence& m,
             const std::vector<int32_t>& ids, int64_t G, int64_t reps, int64_t threads, double load_s) {
  const auto P = static_cast<int64_t>(ids.size());
  double best_prefill = 1e30, best_decode = 1e30, best_decode_cpu = 1e30;
  for (int64_t r = 0; r < reps; ++r) {
    m.clear();
    const double t0 = attn::bench::now_s();
    std::span<const float> logits = m.prefill(ids);
    const double t1 = attn::bench::now_s();
    int32_t next = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    const double t2 = attn::bench::now_s(), c2 = attn::bench::process_cpu_s();
    for (int64_t g = 0; g < G; ++g) {
      logits = m.step(next);
      next = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    }
    const double t3 = attn::bench::now_s();
    best_decode_cpu = std::min(best_decode_cpu, attn::bench::process_cpu_s() - c2);
    best_prefill = std::min(best_prefill, t1 - t0);
    best_decode = std::min(best_decode, t3 - t2);
  }
  std::printf(
      "{\"engine\": \"attn\", \"form\": \"%s\", \"threads\": %lld, \"prompt_tokens\": %lld, "
      "\"gen_tokens\": %lld, \"load_s\": %.3f, \"prompt_tok_s\": %.1f, \"gen_tok_s\": %.1f, "
      "\"gen_cpu_tok_s\": %.1f}\n",
      form.c_str(), static_cast<long long>(threads), static_cast<long long>(P), static_cast<long long>(G),
      load_s, P / best_prefill, G / best_decode, G / best_decode_cpu);
  std::fflush(stdout);
}

// The runtime's decoder (8-bit activations or f32 ones) on the prompt ids of the file's tokenizer.
void run_runtime(const std::string& form, const std::string& path, int64_t P, int64_t G, int64_t reps,
                 int64_t threads) {
  const double tl = attn::bench::now_s();
  attn::models::TextDecoder text = attn::models::TextDecoder::load(path, {.max_context = P + G + 8});
  const attn::io::GgufFile file = attn::io::GgufFile::open(path);
  std::unique_ptr<attn::models::runtime::Decoder> f32;
  attn::models::runtime::BatchDecoder* d = &text.decoder();
  if (form == "f32-act") {
    f32 = attn::models::runtime::Decoder::load(file, {.max_context = P + G + 8, .activations_8bit = false});
    d = f32.get();
  }
  const double load_s = attn::bench::now_s() - tl;
  const std::vector<int32_t> ids = prompt_ids([&](const std::string& t) { return text.encode_text(t); }, P);
  attn::models::runtime::SingleSequence seq(*d);
  measure(form, seq, ids, G, reps, threads, load_s);
}
}  // namespace

int main(int argc, char** argv) {
  std::string model_path, forms = "runtime";
  int64_t P = 512, G = 128, reps = 3, threads = 2;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--model")
      model_path = v;
    else if (k == "--prompt-tokens")
      P = std::stoll(v);
    else if (k == "--gen")
      G = std::stoll(v);
    else if (k == "--reps")
      reps = std::stoll(v);
    else if (k == "--threads")
      threads = std::stoll(v);
    else if (k == "--forms")
      forms = v;
    else {
      std::fprintf(stderr, "unknown option %s\n", k.c_str());
      return 2;
    }
  }
  try {
    attn::set_num_threads(static_cast<int>(threads));
    const std::string path = attn::io::require_smollm2_gguf(model_path);
    std::vector<std::string> form_list;
    for (std::size_t a = 0; a <= forms.size();) {
      const std::size_t b = std::min(forms.find(',', a), forms.size());
      form_list.push_back(forms.substr(a, b - a));
      a = b + 1;
    }
    for (const std::string& f : form_list) {
      if (f == "runtime" || f == "default")
        run_runtime("runtime", path, P, G, reps, threads);
      else if (f == "f32-act")
        run_runtime(f, path, P, G, reps, threads);
      else
        throw attn::Error("--forms: expected runtime (or default) and f32-act, got " + f);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "llama_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
