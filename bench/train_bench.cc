// Training throughput of the encoder-decoder Transformer (models::EncoderDecoder,
// post-norm, ReLU, sinusoidal positions, shared + tied + scaled embeddings):
// one step = forward, cross-entropy with label smoothing, backward, AdamW
// update, on random token batches of a fixed shape. Counts target tokens per
// step (batch × tgt_len), the same count bench/peers/torch_train.py uses.
//
//   build/release/bench/train_bench [--threads 2] [--steps 20] [--warmup 3] [--batch 32]
//                                   [--src-len 64] [--tgt-len 64] [--vocab 8000] [--d-model 256]
//                                   [--heads 4] [--d-ff 1024] [--layers 2] [--dropout 0.1]
//                                   [--precision fp32|bf16] [--bursts]
// (--precision bf16: matrix products on bf16 operands with fp32 accumulation, attn/core/precision.h)
// --bursts (for bench/compare_train.py --interleave): after the warm-up, --steps is ignored; the program
// prints READY, then reads one number K per line from standard input, runs K more steps, and prints for them
//   BURST tokens_per_s=<x> step_ms=<wall ms per step> cpu_ms=<process CPU ms per step>
// (flushed), until the input ends; the summary below then covers every burst's steps.
//
// Prints the step phases (forward, backward, optimizer), which kernel ran the step's matrix products
// (kernels::cpu::sgemm_counts: attn's own fp32 GEMM, OpenBLAS sgemm / sgemv, bf16; calls and GFLOP per
// timed step; the attention and other fused kernels make no sgemm call), and ends with one
// machine-readable line (bench/compare_train.py reads it):
//   RESULT tokens_per_s=<x> step_ms=<wall ms per step> cpu_ms=<process CPU ms per step>
// (CPU time counts every thread, including BLAS threads that spin while waiting).
#include <attn/core/autograd.h>
#include <attn/core/parallel.h>
#include <attn/core/precision.h>
#include <attn/models/transformer.h>
#include <attn/train/optim.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>

#include "bench_util.h"
#include "kernels/cpu/gemm.h"

using namespace attn;

namespace {

struct Args {
  int threads = 2, steps = 20, warmup = 3;
  int64_t batch = 32, src_len = 64, tgt_len = 64, vocab = 8000, d_model = 256, heads = 4, d_ff = 1024,
          layers = 2;
  double dropout = 0.1;
  MatmulPrecision precision = MatmulPrecision::highest;
  bool bursts = false;
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    auto next = [&]() -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "train_bench: %s needs a value\n", k.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (k == "--threads")
      a.threads = std::atoi(next());
    else if (k == "--steps")
      a.steps = std::atoi(next());
    else if (k == "--warmup")
      a.warmup = std::atoi(next());
    else if (k == "--batch")
      a.batch = std::atoll(next());
    else if (k == "--src-len")
      a.src_len = std::atoll(next());
    else if (k == "--tgt-len")
      a.tgt_len = std::atoll(next());
    else if (k == "--vocab")
      a.vocab = std::atoll(next());
    else if (k == "--d-model")
      a.d_model = std::atoll(next());
    else if (k == "--heads")
      a.heads = std::atoll(next());
    else if (k == "--d-ff")
      a.d_ff = std::atoll(next());
    else if (k == "--layers")
      a.layers = std::atoll(next());
    else if (k == "--dropout")
      a.dropout = std::atof(next());
    else if (k == "--precision")
      a.precision = parse_matmul_precision(next());
    else if (k == "--bursts")
      a.bursts = true;
    else {
      std::fprintf(stderr, "train_bench: unknown flag %s\n", k.c_str());
      std::exit(2);
    }
  }
  return a;
}

// ids: [B, L], uniform in [1, V) (0 is the padding id, which the loss ignores).
Tensor random_ids(int64_t B, int64_t L, int64_t V, uint64_t& state) {
  Tensor t = Tensor::empty({B, L}, DType::i64);
  for (int64_t i = 0; i < B * L; ++i) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    t.data<int64_t>()[i] = 1 + static_cast<int64_t>((state >> 33) % static_cast<uint64_t>(V - 1));
  }
  return t;
}

}  // namespace

int main(int argc, char** argv) {
  const Args a = parse(argc, argv);
  set_num_threads(a.threads);
  set_matmul_precision(a.precision);
  models::TransformerConfig c = models::TransformerConfig::preset("small");
  c.src_vocab = c.tgt_vocab = a.vocab;
  c.d_model = a.d_model;
  c.heads = a.heads;
  c.d_ff = a.d_ff;
  c.encoder_layers = c.decoder_layers = a.layers;
  c.dropout = a.dropout;
  c.label_smoothing = 0.1;
  c.max_len = std::max<int64_t>(a.src_len, a.tgt_len);
  c.seed = 1;
  models::EncoderDecoder model(c);
  model.train();
  train::AdamWOptions ao;
  ao.lr = 1e-4;
  ao.weight_decay = 0.01;
  train::AdamW opt(model.named_parameters(), ao);

  std::printf(
      "attn train_bench: threads %d, B %lld, Ls %lld, Lt %lld, V %lld, d_model %lld, heads %lld, "
      "d_ff %lld, layers %lld+%lld, dropout %.2f, params %lld, matmul precision %s\n",
      num_threads(), (long long)a.batch, (long long)a.src_len, (long long)a.tgt_len, (long long)a.vocab,
      (long long)a.d_model, (long long)a.heads, (long long)a.d_ff, (long long)a.layers, (long long)a.layers,
      a.dropout, (long long)model.num_parameters(), matmul_precision_name(matmul_precision()));
  uint64_t rng = 12345;
  const int64_t tokens = a.batch * a.tgt_len;
  std::vector<double> step_s, fwd_s, bwd_s, opt_s;
  double cpu_s = 0;  // process CPU time of the timed steps (all threads)
  double loss_first = 0, loss_last = 0;
  int s = 0;  // steps run so far, warm-up included
  auto step_once = [&] {
    const Tensor src = random_ids(a.batch, a.src_len, a.vocab, rng);
    const Tensor tgt = random_ids(a.batch, a.tgt_len + 1, a.vocab, rng);
    const Tensor tgt_in = tgt.slice(1, 0, a.tgt_len).contiguous();
    const Tensor tgt_out = tgt.slice(1, 1, a.tgt_len + 1).contiguous();
    if (s == a.warmup) kernels::cpu::reset_sgemm_counts();  // count the timed steps only
    const double c0 = bench::process_cpu_s();
    const double t0 = bench::now_s();
    opt.zero_grad(/*set_to_none=*/true);  // as torch's optimizer.zero_grad() in the peer
    models::ModelOutput out = model.forward(src, {}, tgt_in, tgt_out);
    const double t1 = bench::now_s();
    out.loss.backward();
    const double t2 = bench::now_s();
    opt.step();
    const double t3 = bench::now_s();
    if (s >= a.warmup) cpu_s += bench::process_cpu_s() - c0;
    const double loss = out.loss.to_vector()[0];
    if (s == a.warmup) loss_first = loss;
    loss_last = loss;
    if (s >= a.warmup) {
      step_s.push_back(t3 - t0);
      fwd_s.push_back(t1 - t0);
      bwd_s.push_back(t2 - t1);
      opt_s.push_back(t3 - t2);
    }
    ++s;
  };
  while (s < a.warmup) step_once();
  if (!a.bursts) {
    while (s < a.warmup + a.steps) step_once();
  } else {
    std::printf("READY\n");  // warmed up: compare_train.py starts the next program or the bursts
    std::fflush(stdout);
    long long k = 0;
    while (std::scanf("%lld", &k) == 1) {
      if (k < 1) {
        std::fprintf(stderr, "train_bench --bursts: expected a number of steps >= 1 per line; got %lld\n", k);
        return 2;
      }
      const size_t first = step_s.size();
      const double cpu_before = cpu_s;
      for (long long i = 0; i < k; ++i) step_once();
      double wall = 0;
      for (size_t i = first; i < step_s.size(); ++i) wall += step_s[i];
      const double per = wall / static_cast<double>(k);
      std::printf("BURST tokens_per_s=%.1f step_ms=%.2f cpu_ms=%.2f\n", static_cast<double>(tokens) / per,
                  per * 1e3, (cpu_s - cpu_before) / static_cast<double>(k) * 1e3);
      std::fflush(stdout);
    }
  }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0.0 : v[v.size() / 2];
  };
  double total = 0;
  for (double t : step_s) total += t;
  const double step = total / static_cast<double>(std::max<size_t>(step_s.size(), 1));
  std::printf("loss %.4f (first timed step) -> %.4f (last)\n", loss_first, loss_last);
  std::printf("step: mean %.1f ms, median %.1f ms (forward %.1f, backward %.1f, optimizer %.1f; medians)\n",
              step * 1e3, median(step_s) * 1e3, median(fwd_s) * 1e3, median(bwd_s) * 1e3,
              median(opt_s) * 1e3);
  {
    const kernels::cpu::SgemmCounts n = kernels::cpu::sgemm_counts();
    const double steps = static_cast<double>(std::max<size_t>(step_s.size(), 1));
    auto one = [&](const char* what, const kernels::cpu::SgemmPathCount& c) {
      std::printf(" %s %.1f (%.2f GFLOP)", what, static_cast<double>(c.calls) / steps,
                  c.flops / steps * 1e-9);
    };
    std::printf("matrix products per step (sgemm calls, GFLOP):");
    one("own fp32", n.own_f32);
    one("OpenBLAS sgemm", n.blas);
    one("OpenBLAS sgemv", n.blas_gemv);
    one("bf16", n.bf16);
    std::printf("\n");
  }
  const double cpu_step = cpu_s / static_cast<double>(std::max<size_t>(step_s.size(), 1));
  std::printf("RESULT tokens_per_s=%.1f step_ms=%.2f cpu_ms=%.2f\n", static_cast<double>(tokens) / step,
              step * 1e3, cpu_step * 1e3);
  return 0;
}
