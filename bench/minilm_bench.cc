// all-MiniLM-L6-v2 sentence embeddings: throughput (sentences per second at a
// fixed sequence length and batch) and single-sentence latency, from token ids
// to unit-length embeddings (BERT forward + mean pooling + L2 normalisation).
// The peers (bench/peers/minilm_peers.py) run the same token ids through
// sentence-transformers on PyTorch and through ONNX Runtime; bench/run_minilm.py
// runs all three and prints the ratios (docs/benchmarks-log/2026-11-29.md, "MiniLM").
//
//   minilm_bench [--threads 2] [--batch 32] [--seq 128] [--latency-seqs 16,128]
//                [--min-time 2] [--model DIR] [--clock wall|thread|process] [--profile] [--precision
//                fp32|bf16]
//                [--fused | --unfused] [--ab]
//
// --profile: instead of the timings, runs the batch × seq forward for --min-time seconds and prints
// one JSON object per stage (BertModel::forward_profiled): ms per forward, share of the forward, and
// GFLOP/s for the four matrix products and the attention.
// --fused / --unfused: BertRunOptions::fuse_layers true (the default: each layer in two regions over
// groups of sequences; with --profile a layer is then one stage, fused_layer) or false (each step over
// the whole batch: --profile shows every stage). --ab: instead of the timings, fused and unfused
// batch forwards alternated in one process for --min-time seconds; prints the best and the median
// sentences per second of each (with --clock thread at 1 thread, or --clock process).
//
// --precision bf16: matrix products on bf16 operands with fp32 accumulation (attn/core/precision.h).
// --clock thread measures the calling thread's CPU time (use with --threads 1: the
// kernels then run on the caller), which other processes on a busy machine do not inflate.
// Prints one JSON object per measurement. Token ids: bench_ids() below (the peer
// script computes the same formula).
#include <attn/core/parallel.h>
#include <attn/core/precision.h>
#include <attn/models/bert.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "bench_util.h"

namespace {

// [CLS] w_1 .. w_{seq-2} [SEP] with w_j = 1996 + (i · 7919 + j · 104729) mod 20000 (ordinary word pieces).
std::vector<std::vector<int32_t>> bench_ids(int64_t batch, int64_t seq) {
  std::vector<std::vector<int32_t>> out;
  for (int64_t i = 0; i < batch; ++i) {
    std::vector<int32_t> s = {101};
    for (int64_t j = 1; j < seq - 1; ++j)
      s.push_back(static_cast<int32_t>(1996 + (i * 7919 + j * 104729) % 20000));
    s.push_back(102);
    out.push_back(std::move(s));
  }
  return out;
}

// Mean pooling + L2 normalisation, as SentenceEncoder::embed does.
void pool(const attn::models::BertOutput& r, std::vector<float>& out) {
  const int64_t B = r.hidden.size(0), L = r.hidden.size(1), C = r.hidden.size(2);
  out.assign(static_cast<std::size_t>(B * C), 0.0f);
  const float* h = r.hidden.data<float>();
  for (int64_t b = 0; b < B; ++b) {
    const int64_t n = r.lengths[static_cast<std::size_t>(b)];
    double norm = 0;
    std::vector<double> acc(static_cast<std::size_t>(C), 0.0);
    for (int64_t l = 0; l < n; ++l)
      for (int64_t c = 0; c < C; ++c) acc[static_cast<std::size_t>(c)] += h[(b * L + l) * C + c];
    for (double& a : acc) {
      a /= static_cast<double>(n);
      norm += a * a;
    }
    for (int64_t c = 0; c < C; ++c)
      out[static_cast<std::size_t>(b * C + c)] =
          static_cast<float>(acc[static_cast<std::size_t>(c)] / std::sqrt(norm));
  }
}

// Stage breakdown of the batch × seq forward (--profile).
int profile(const attn::models::SentenceEncoder& enc, const attn::models::BertInput& in,
            const attn::models::BertRunOptions& opt, double min_time) {
  const attn::models::BertConfig& c = enc.model().config();
  std::vector<float> sink;
  attn::models::BertProfile prof;
  pool(enc.model().forward(in, opt), sink);  // warm-up: allocations, BLAS buffers
  double pool_s = 0, total = 0;
  while (total < min_time || prof.calls < 3) {
    const double t0 = attn::bench::now_s();
    const attn::models::BertOutput r = enc.model().forward_profiled(in, opt, prof);
    const double t1 = attn::bench::now_s();
    pool(r, sink);
    const double t2 = attn::bench::now_s();
    pool_s += t2 - t1;
    total += t2 - t0;
  }
  const double n = static_cast<double>(prof.calls);
  const double T = static_cast<double>(in.ids.size() * in.ids[0].size());
  const double L = static_cast<double>(in.ids[0].size());
  const double C = static_cast<double>(c.hidden_size), F = static_cast<double>(c.intermediate_size);
  const double layers = static_cast<double>(c.num_layers);
  auto gflop = [&](const std::string& stage) -> double {
    if (stage == "qkv_gemm") return 2 * T * C * 3 * C * layers;
    if (stage == "o_gemm") return 2 * T * C * C * layers;
    if (stage == "ffn_up_gemm" || stage == "ffn_down_gemm") return 2 * T * C * F * layers;
    if (stage == "attention") return 4 * T * L * C * layers;  // QKᵀ and PV, padding included
    if (stage == "fused_layer") return (2 * T * C * 4 * C + 4 * T * C * F + 4 * T * L * C) * layers;
    return 0;
  };
  auto row = [&](const std::string& stage, double s) {
    const double f = gflop(stage);
    std::printf("{\"stage\": \"%s\", \"ms\": %.3f, \"share\": %.4f", stage.c_str(), s / n * 1e3, s / total);
    if (f > 0) std::printf(", \"gflops\": %.1f", f / (s / n) / 1e9);
    std::printf("}\n");
  };
  double staged = 0;
  for (const auto& [stage, s] : prof.seconds) {
    row(stage, s);
    staged += s;
  }
  row("pooling", pool_s);
  row("other", total - staged - pool_s);
  std::printf("{\"stage\": \"total\", \"ms\": %.3f, \"forwards\": %lld, \"sentences_per_s\": %.2f}\n",
              total / n * 1e3, static_cast<long long>(prof.calls),
              static_cast<double>(in.ids.size()) * n / total);
  return 0;
}

// attn::bench::time_median, or under --clock process the median of the process CPU time per thread.
double time_call(const std::function<void()>& fn, double min_time, int min_reps) {
  if (attn::bench::use_process_clock()) return attn::bench::time_median_process(fn, min_time, min_reps);
  return attn::bench::time_median(fn, min_time, min_reps);
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 2;
  int64_t batch = 32, seq = 128;
  std::vector<int64_t> latency_seqs = {16, 128};
  double min_time = 2.0;
  std::string model;
  bool want_profile = false;
  bool want_ab = false;
  attn::models::BertRunOptions run_opt;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "minilm_bench: %s needs a value\n", a.c_str());
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
    else if (a == "--profile")
      want_profile = true;
    else if (a == "--fused")
      run_opt.fuse_layers = true;
    else if (a == "--unfused")
      run_opt.fuse_layers = false;
    else if (a == "--ab")
      want_ab = true;
    else if (a == "--clock") {
      const std::string c = next();
      attn::bench::use_thread_clock() = c == "thread";
      attn::bench::use_process_clock() = c == "process";
    } else if (a == "--precision")
      attn::set_matmul_precision(attn::parse_matmul_precision(next()));
    else if (a == "--latency-seqs")
      latency_seqs = attn::bench::parse_list(next());
    else {
      std::fprintf(
          stderr,
          "usage: minilm_bench [--threads N] [--batch B] [--seq L] [--latency-seqs 16,128] "
          "[--min-time S] [--model DIR] [--clock wall|thread|process] [--profile] [--precision fp32|bf16] "
          "[--fused | --unfused] [--ab]\n");
      return 2;
    }
  }
  attn::set_num_threads(threads);
  const attn::models::SentenceEncoder enc = attn::models::SentenceEncoder::load(model);
  std::vector<float> sink;
  attn::models::BertInput in;
  in.ids = bench_ids(batch, seq);
  if (want_profile) return profile(enc, in, run_opt, min_time);
  if (want_ab) {
    // Fused and unfused forwards alternated in this process; the best and the median of each.
    attn::models::BertRunOptions fused_opt, plain_opt;
    fused_opt.fuse_layers = true;
    plain_opt.fuse_layers = false;
    pool(enc.model().forward(in, fused_opt), sink);
    pool(enc.model().forward(in, plain_opt), sink);
    std::vector<double> tf, tp;
    const auto clock = attn::bench::clock_now_s;
    const double start = attn::bench::now_s();
    while (attn::bench::now_s() - start < min_time || tf.size() < 3) {
      double a = clock();
      pool(enc.model().forward(in, fused_opt), sink);
      tf.push_back(clock() - a);
      a = clock();
      pool(enc.model().forward(in, plain_opt), sink);
      tp.push_back(clock() - a);
    }
    std::sort(tf.begin(), tf.end());
    std::sort(tp.begin(), tp.end());
    std::printf(
        "{\"ab\": \"fused/unfused\", \"threads\": %d, \"clock\": \"%s\", \"pairs\": %zu, \"fused_best\": "
        "%.2f, "
        "\"unfused_best\": %.2f, \"fused_median\": %.2f, \"unfused_median\": %.2f}\n",
        threads, attn::bench::clock_name(), tf.size(), static_cast<double>(batch) / tf[0],
        static_cast<double>(batch) / tp[0], static_cast<double>(batch) / tf[tf.size() / 2],
        static_cast<double>(batch) / tp[tp.size() / 2]);
    return 0;
  }
  const double t = time_call([&] { pool(enc.model().forward(in, run_opt), sink); }, min_time, 3);
  std::printf(
      "{\"engine\": \"attn\", \"case\": \"throughput\", \"batch\": %lld, \"seq\": %lld, \"threads\": %d, "
      "\"clock\": \"%s\", \"seconds\": %.6f, \"sentences_per_s\": %.2f}\n",
      static_cast<long long>(batch), static_cast<long long>(seq), threads, attn::bench::clock_name(), t,
      static_cast<double>(batch) / t);
  for (int64_t ls : latency_seqs) {
    attn::models::BertInput one;
    one.ids = bench_ids(1, ls);
    const double tl = time_call([&] { pool(enc.model().forward(one, run_opt), sink); }, min_time / 2, 5);
    std::printf(
        "{\"engine\": \"attn\", \"case\": \"latency\", \"batch\": 1, \"seq\": %lld, \"threads\": %d, "
        "\"clock\": \"%s\", \"seconds\": %.6f, \"ms\": %.3f}\n",
        static_cast<long long>(ls), threads, attn::bench::clock_name(), tl, tl * 1e3);
  }
  std::fflush(stdout);
  return 0;
}
