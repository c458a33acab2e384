// A Hugging Face encoder folder (sentence encoder) or cross-encoder folder (reranker): throughput
// (sequences per second at a fixed batch and length) and the latency of one sequence, from token ids to
// what the user gets: the pooled, normalised vectors (SentenceEncoder::embed_ids) or one logit per pair
// (CrossEncoder::logits). bench/encoder_arch_bench.py writes bge-small-zh-shaped folders with random
// weights, runs this program and ONNX Runtime on the same ids and prints the ratios (docs/benchmarks.md).
//
//   encoder_bench --model DIR [--threads 2] [--batch 32] [--seq 128] [--latency-seqs 64]
//                 [--query 16] [--min-time 2] [--clock wall|thread|process]
//
// The folder's config.json decides: an architecture ending in ForSequenceClassification is timed as a
// reranker, anything else as a sentence encoder. Ids (the peer computes the same formula, ids_for()):
//   sentence  [CLS] w_1 .. w_{L-2} [SEP]
//   pair      [CLS] w_1 .. w_q [SEP] w_{q+1} .. w_{L-3} [SEP], token types 0 .. 0 1 .. 1
// with w_j = 1000 + (i · 7919 + j · 104729) mod (vocab − 1000), [CLS] 101 and [SEP] 102 (BERT's
// vocabulary layout, which the script's vocab.txt keeps). Prints this CPU's measured FMA peak on the threads
// (bench_util.h), one JSON object per measurement, and the
// outputs (the first sequence's vector, or every pair's logit) for the script to compare with its peer's.
#include <attn/core/parallel.h>
#include <attn/models/bert.h>
#include <attn/models/bert_rerank.h>

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "bench_util.h"

namespace {

int32_t word(int64_t i, int64_t j, int64_t vocab) {
  return static_cast<int32_t>(1000 + (i * 7919 + j * 104729) % (vocab - 1000));
}

std::vector<std::vector<int32_t>> sentence_ids(int64_t batch, int64_t seq, int64_t vocab) {
  std::vector<std::vector<int32_t>> out;
  for (int64_t i = 0; i < batch; ++i) {
    std::vector<int32_t> s = {101};
    for (int64_t j = 1; j < seq - 1; ++j) s.push_back(word(i, j, vocab));
    s.push_back(102);
    out.push_back(std::move(s));
  }
  return out;
}

std::vector<attn::models::PairEncoding> pair_ids(int64_t batch, int64_t seq, int64_t query, int64_t vocab) {
  std::vector<attn::models::PairEncoding> out;
  for (int64_t i = 0; i < batch; ++i) {
    attn::models::PairEncoding p;
    p.ids = {101};
    for (int64_t j = 1; j <= seq - 3; ++j) {
      p.ids.push_back(word(i, j, vocab));
      if (j == query) p.ids.push_back(102);
    }
    p.ids.push_back(102);
    p.type_ids.assign(p.ids.size(), 0);
    for (std::size_t k = static_cast<std::size_t>(query) + 2; k < p.ids.size(); ++k) p.type_ids[k] = 1;
    out.push_back(std::move(p));
  }
  return out;
}

// The output of the batch's first sequence (the vector) or of every pair (the logits), for the peer script
// to check that both engines computed the same function.
void print_values(const char* kind, const float* v, std::size_t n) {
  std::printf("{\"engine\": \"attn\", \"kind\": \"%s\", \"case\": \"values\", \"values\": [", kind);
  for (std::size_t i = 0; i < n; ++i) std::printf("%s%.7g", i ? ", " : "", static_cast<double>(v[i]));
  std::printf("]}\n");
}

void report(const char* kind, const char* c, int64_t batch, int64_t seq, int threads, double t) {
  std::printf(
      "{\"engine\": \"attn\", \"kind\": \"%s\", \"case\": \"%s\", \"batch\": %lld, \"seq\": %lld, "
      "\"threads\": %d, \"clock\": \"%s\", \"seconds\": %.6f, \"per_s\": %.2f, \"ms\": %.3f}\n",
      kind, c, static_cast<long long>(batch), static_cast<long long>(seq), threads, attn::bench::clock_name(),
      t, static_cast<double>(batch) / t, t * 1e3);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 2;
  int64_t batch = 32, seq = 128, query = 16;
  std::vector<int64_t> latency_seqs = {64};
  double min_time = 2.0;
  std::string model;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "encoder_bench: %s needs a value\n", a.c_str());
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
    else if (a == "--query")
      query = std::atoll(next().c_str());
    else if (a == "--min-time")
      min_time = std::atof(next().c_str());
    else if (a == "--model")
      model = next();
    else if (a == "--latency-seqs")
      latency_seqs = attn::bench::parse_list(next());
    else if (a == "--clock") {
      const std::string c = next();
      attn::bench::use_thread_clock() = c == "thread";
      attn::bench::use_process_clock() = c == "process";
    } else {
      std::fprintf(stderr,
                   "usage: encoder_bench --model DIR [--threads N] [--batch B] [--seq L] [--latency-seqs 64] "
                   "[--query Q] [--min-time S] [--clock wall|thread|process]\n");
      return 2;
    }
  }
  if (model.empty() || seq < 4 || query < 1 || query > seq - 4 || batch < 1) {
    std::fprintf(stderr, "encoder_bench: --model DIR is required; --seq >= 4, 1 <= --query <= seq - 4\n");
    return 2;
  }
  for (int64_t ls : latency_seqs)
    if (ls < 4 || query > ls - 4) {
      std::fprintf(stderr, "encoder_bench: a latency length must be >= max(4, query + 4)\n");
      return 2;
    }
  attn::set_num_threads(threads);
  std::printf("{\"engine\": \"attn\", \"case\": \"peak\", \"threads\": %d, \"fma_peak_gflops\": %.1f}\n",
              threads, attn::bench::measure_fma_peak_gflops());
  const attn::models::HfEncoderFolder folder = attn::models::open_hf_encoder(model);
  bool rerank = false;
  for (const std::string& arch : folder.architectures)
    rerank = rerank || arch.find("ForSequenceClassification") != std::string::npos;
  const int64_t vocab = folder.config.vocab_size;
  const auto time_call = [&](const std::function<void()>& fn, double t, int reps) {
    return attn::bench::use_process_clock() ? attn::bench::time_median_process(fn, t, reps)
                                            : attn::bench::time_median(fn, t, reps);
  };
  if (rerank) {
    const attn::models::CrossEncoder ce = attn::models::CrossEncoder::load(model);
    std::vector<float> sink;
    const auto pairs = pair_ids(batch, seq, query, vocab);
    report("rerank", "throughput", batch, seq, threads,
           time_call([&] { sink = ce.logits(pairs, batch); }, min_time, 3));
    print_values("rerank", sink.data(), sink.size());
    for (int64_t ls : latency_seqs) {
      const auto one = pair_ids(1, ls, query, vocab);
      report("rerank", "latency", 1, ls, threads,
             time_call([&] { sink = ce.logits(one, 1); }, min_time / 2, 5));
    }
  } else {
    const attn::models::SentenceEncoder enc = attn::models::SentenceEncoder::load(model);
    attn::models::EmbedOptions opt;
    opt.batch_size = batch;
    attn::models::Embeddings sink;
    const auto ids = sentence_ids(batch, seq, vocab);
    report("embed", "throughput", batch, seq, threads,
           time_call([&] { sink = enc.embed_ids(ids, opt); }, min_time, 3));
    print_values("embed", sink.vectors.data<float>(), static_cast<std::size_t>(enc.dim()));
    for (int64_t ls : latency_seqs) {
      const auto one = sentence_ids(1, ls, vocab);
      report("embed", "latency", 1, ls, threads,
             time_call([&] { sink = enc.embed_ids(one, opt); }, min_time / 2, 5));
    }
  }
  return 0;
}
