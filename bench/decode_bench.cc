// Greedy decoding throughput of an EncoderDecoder with the KV cache
// (models/generate.h), the model of the training benchmark: 2+2 layers,
// d_model 256, 4 heads, d_ff 1024, vocab 8000 (post-norm, ReLU, sinusoidal,
// shared/tied/scaled embeddings). Every source gets exactly --new tokens
// (eos disabled), so the work is the same as the peer's.
//
//   decode_bench [--batch 1,32] [--src 32] [--new 64] [--vocab 8000] [--threads 2]
//                [--min-time 2] [--clock wall|thread] [--weights FILE] [--ids FILE]
//
// --clock thread measures the calling thread's CPU time (use with --threads 1: then
// every kernel runs on the calling thread), which a busy machine disturbs far less.
// --weights writes the model's parameters as safetensors (with the config in
// the metadata) so bench/peers/torch_decode.py can load identical weights;
// --ids writes the sources and the generated ids of every batch size (JSON) so
// the peer can check that it decodes the same tokens. Prints one JSON object
// per batch size: {"engine": "attn", "batch", "tokens_per_s", "ms_per_step", ...}.
#include <attn/core/autograd.h>
#include <attn/core/parallel.h>
#include <attn/core/random.h>
#include <attn/io/safetensors.h>
#include <attn/models/generate.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "bench_util.h"

namespace {

std::vector<std::vector<int64_t>> make_sources(int64_t B, int64_t L, int64_t V, uint64_t seed) {
  attn::Rng rng(seed);
  std::vector<std::vector<int64_t>> s(static_cast<std::size_t>(B), std::vector<int64_t>(L));
  for (auto& row : s)
    for (auto& x : row) x = 6 + static_cast<int64_t>(rng.below(static_cast<uint64_t>(V - 6)));
  return s;
}

std::string ids_json(const std::vector<std::vector<int64_t>>& rows) {
  std::string s = "[";
  for (std::size_t i = 0; i < rows.size(); ++i) {
    s += i ? ",[" : "[";
    for (std::size_t j = 0; j < rows[i].size(); ++j) {
      if (j) s += ",";
      s += std::to_string(rows[i][j]);
    }
    s += "]";
  }
  return s + "]";
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int64_t> batches = {1, 32};
  int64_t src_len = 32, new_tokens = 64, vocab = 8000, threads = 2;
  double min_time = 2.0;
  std::string weights_path, ids_path;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "decode_bench: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--batch") {
      batches = attn::bench::parse_list(next());
    } else if (a == "--src") {
      src_len = std::atoll(next().c_str());
    } else if (a == "--new") {
      new_tokens = std::atoll(next().c_str());
    } else if (a == "--vocab") {
      vocab = std::atoll(next().c_str());
    } else if (a == "--threads") {
      threads = std::atoll(next().c_str());
    } else if (a == "--min-time") {
      min_time = std::atof(next().c_str());
    } else if (a == "--clock") {
      const std::string c = next();
      if (c != "wall" && c != "thread") {
        std::fprintf(stderr, "decode_bench: --clock must be wall or thread\n");
        return 2;
      }
      attn::bench::use_thread_clock() = c == "thread";
    } else if (a == "--weights") {
      weights_path = next();
    } else if (a == "--ids") {
      ids_path = next();
    } else {
      std::fprintf(stderr, "decode_bench: unknown option %s\n", a.c_str());
      return 2;
    }
  }
  attn::set_num_threads(static_cast<int>(threads));
  attn::models::TransformerConfig cfg = attn::models::TransformerConfig::preset("small");
  cfg.src_vocab = cfg.tgt_vocab = vocab;
  cfg.dropout = 0.0;
  cfg.seed = 1;
  attn::models::EncoderDecoder model(cfg);
  model.eval();
  if (!weights_path.empty()) {
    attn::io::Metadata meta;
    meta["config"] = attn::json::dump(cfg.to_json());
    attn::io::save_safetensors(weights_path, model.named_parameters(), meta);
  }
  attn::models::GenerateOptions o;
  o.max_new_tokens = new_tokens;
  o.eos_id = -1;
  std::string ids_out = "{";
  for (int64_t B : batches) {
    const auto sources = make_sources(B, src_len, vocab, 7 + static_cast<uint64_t>(B));
    std::vector<attn::models::Generated> out;
    const double t =
        attn::bench::time_median([&] { out = attn::models::generate(model, sources, o); }, min_time);
    std::vector<std::vector<int64_t>> gen;
    for (const auto& g : out) gen.push_back(g.ids);
    if (!ids_path.empty()) {
      ids_out += std::string(ids_out.size() > 1 ? "," : "") + "\"" + std::to_string(B) +
                 "\": {\"sources\": " + ids_json(sources) + ", \"generated\": " + ids_json(gen) + "}";
    }
    std::printf(
        "{\"engine\": \"attn\", \"batch\": %lld, \"src\": %lld, \"new\": %lld, \"vocab\": %lld, \"threads\": "
        "%lld, \"seconds\": %.6f, \"tokens_per_s\": %.1f, \"ms_per_step\": %.3f}\n",
        static_cast<long long>(B), static_cast<long long>(src_len), static_cast<long long>(new_tokens),
        static_cast<long long>(vocab), static_cast<long long>(threads), t,
        static_cast<double>(B * new_tokens) / t, 1e3 * t / static_cast<double>(new_tokens));
    std::fflush(stdout);
  }
  if (!ids_path.empty()) std::ofstream(ids_path) << ids_out << "}\n";
  return 0;
}
