// SmolLM2-135M-Instruct (GGUF) speed: prompt tokens/s (one prefill pass over a P-token prompt) and
// generated tokens/s (greedy, one token per step with the KV cache). The llama.cpp peer
// (bench/peers/llama_cpp_peer.py) runs the same prompt ids; bench/run_llama.py runs both and prints
// the ratios. Prints one JSON line per configuration.
//
//   llama_bench [--model FILE] [--prompt-tokens 512] [--gen 128] [--reps 3] [--threads 2]
//               [--forms default,quantized,f32-on-load]   weight handling, one run each:
//     default      the library's choice: prompt passes expand each matrix to f32 per pass + sgemm,
//                  decode steps quantize the activations to 8 bits and multiply with int8 dot products
//                  (AVX512-VNNI) in one parallel region per token
//     f32-act      as default, but decode steps keep the activations f32 (no 8-bit quantization,
//                  one thread dispatch per product instead of one parallel region per token)
//     kv-f32       as default, but decode steps read the f32 KV cache instead of its f16 copy
//     quantized    both phases in block form
//     f32-on-load  every matrix expanded to f32 once at load, both phases sgemm
//     runtime      the runtime's decoder (models/text_decoder.h), what every command runs since
//                  2026-12-07: one prompt pass and one-token steps as batches of one
//                  (runtime::SingleSequence)
#include <attn/core/parallel.h>
#include <attn/io/model_files.h>
#include <attn/models/llama.h>
#include <attn/models/llama_tuning.h>
#include <attn/models/runtime/batch.h>
#include <attn/models/text_decoder.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
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

// Best of `reps`: one prompt pass over ids, then G greedy one-token steps; one JSON line. m: clear(),
// prefill(ids) and step(id), each returning the last logits (LlamaModel, runtime::SingleSequence).
template <class Model>
void measure(const std::string& form, Model& m, const std::vector<int32_t>& ids, int64_t G, int64_t reps,
             int64_t threads, double load_s) {
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

// The runtime's decoder on the same prompt ids (the same tokenizer), timed as the engine.
void run_runtime(const std::string& path, int64_t P, int64_t G, int64_t reps, int64_t threads) {
  const double tl = attn::bench::now_s();
  attn::models::TextDecoder m = attn::models::TextDecoder::load(path, {.max_context = P + G + 8});
  const double load_s = attn::bench::now_s() - tl;
  const std::vector<int32_t> ids = prompt_ids([&](const std::string& t) { return m.encode_text(t); }, P);
  attn::models::runtime::SingleSequence seq(m.decoder());
  measure("runtime", seq, ids, G, reps, threads, load_s);
}
}  // namespace

int main(int argc, char** argv) {
  std::string model_path, forms = "default";
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
      if (f == "runtime") {
        run_runtime(path, P, G, reps, threads);
        continue;
      }
      attn::models::LlamaTuning o;
      if (f == "quantized") {
        o.prefill = o.decode = attn::models::WeightForm::quantized;
      } else if (f == "f32-on-load") {
        o.prefill = o.decode = attn::models::WeightForm::f32;
        o.expand_on_load = true;
      } else if (f == "f32-act") {
        o.q8_activations = false;
      } else if (f == "kv-f32") {
        o.decode_kv_f16 = false;
      } else if (f != "default") {
        throw attn::Error(
            "--forms: expected default, runtime, f32-act, kv-f32, quantized or f32-on-load, got " + f);
      }
      attn::models::LlamaOptions lo;
      lo.max_context = P + G + 8;
      const double tl = attn::bench::now_s();
      attn::models::LlamaModel m = attn::models::LlamaModel::load(path, lo, o);
      const double load_s = attn::bench::now_s() - tl;
      const std::vector<int32_t> ids =
          prompt_ids([&](const std::string& t) { return m.tokenizer().encode(t); }, P);
      measure(f, m, ids, G, reps, threads, load_s);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "llama_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
