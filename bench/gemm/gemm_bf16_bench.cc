// gemm_bf16_bench: GFLOP/s of sgemm (fp32, OpenBLAS) and sgemm_bf16 (bf16 operands, fp32
// accumulation, AVX512_BF16) on the shapes of the training step (2048 tokens, d 256, d_ff
// 1024, vocabulary 8000: forward NT, backward dX NN and dW TN) and of MiniLM (4096 tokens,
// 384/1536). Both are measured back to back per shape; the ratio is what to read on a
// loaded machine. The bf16 result is checked against the fp32 one first.
//
//   gemm_bf16_bench [--threads 2] [--min-time 0.5] [--shapes all|training|minilm|<name prefix>]
//                   [--shape M,N,K,OP]
//                   [--clock wall|thread]
// Prints one JSON object per shape.
#include <attn/core/parallel.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "../bench_util.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/gemm_bf16.h"

namespace {

struct Shape {
  const char* what;
  int M, N, K;
  bool ta, tb;
};

const Shape kShapes[] = {
    // training step: forward X[2048, in] · W[out, in]ᵀ
    {"train fwd qkv/out", 2048, 256, 256, false, true},
    {"train fwd ff1", 2048, 1024, 256, false, true},
    {"train fwd ff2", 2048, 256, 1024, false, true},
    {"train fwd vocab", 2048, 8000, 256, false, true},
    // backward dX = dY[2048, out] · W[out, in]
    {"train dX ff1", 2048, 256, 1024, false, false},
    {"train dX ff2", 2048, 1024, 256, false, false},
    {"train dX vocab", 2048, 256, 8000, false, false},
    // backward dW = dY[2048, out]ᵀ · X[2048, in]
    {"train dW ff1", 1024, 256, 2048, true, false},
    {"train dW ff2", 256, 1024, 2048, true, false},
    {"train dW vocab", 8000, 256, 2048, true, false},
    // MiniLM (4096 tokens)
    {"minilm qkv/out", 4096, 384, 384, false, true},
    {"minilm ff1", 4096, 1536, 384, false, true},
    {"minilm ff2", 4096, 384, 1536, false, true},
    // few rows, wide output (decoding a batch through the vocabulary)
    {"small-M vocab", 32, 8000, 256, false, true},
};

}  // namespace

int main(int argc, char** argv) {
  using namespace attn;
  int threads = 2;
  double min_time = 0.5;
  std::string which = "all";
  std::vector<Shape> shapes(std::begin(kShapes), std::end(kShapes));
  Shape custom{};
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--threads")
      threads = std::atoi(argv[i + 1]);
    else if (a == "--min-time")
      min_time = std::atof(argv[i + 1]);
    else if (a == "--shapes")
      which = argv[i + 1];
    else if (a == "--shape") {  // one custom shape: M,N,K,OP with OP one of NN, NT, TN, TT
      int m = 0, n = 0, k = 0;
      char op[3] = {};
      if (std::sscanf(argv[i + 1], "%d,%d,%d,%2s", &m, &n, &k, op) != 4) {
        std::fprintf(stderr, "--shape wants M,N,K,OP (e.g. 2048,256,1024,NT)\n");
        return 2;
      }
      custom = Shape{"custom", m, n, k, op[0] == 'T', op[1] == 'T'};
      which = "custom";
    } else if (a == "--clock")  // thread: CPU time of the calling thread (use with --threads 1)
      attn::bench::use_thread_clock() = std::string(argv[i + 1]) == "thread";
    else {
      std::fprintf(stderr, "unknown flag %s\n", a.c_str());
      return 2;
    }
  }
  set_num_threads(threads);
  if (!kernels::cpu::bf16_gemm_available())
    std::fprintf(stderr, "warning: no AVX512_BF16 here; sgemm_bf16 runs its scalar path\n");
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> dist(-1, 1);
  if (which == "custom") shapes = {custom};
  for (const Shape& s : shapes) {
    const std::string what = s.what;
    if (which != "all" && what.rfind(which == "training" ? "train" : which, 0) != 0) continue;
    const int M = s.M, N = s.N, K = s.K;
    // A: [M, K] or [K, M]; B: [K, N] or [N, K]; both dense (lda = width).
    const int lda = s.ta ? M : K, ldb = s.tb ? K : N;
    std::vector<float> A(size_t(M) * K), B(size_t(K) * N), C32(size_t(M) * N), C16(size_t(M) * N);
    for (float& x : A) x = dist(rng);
    for (float& x : B) x = dist(rng);
    auto fp32 = [&] {
      kernels::cpu::sgemm(s.ta, s.tb, M, N, K, 1.f, A.data(), lda, B.data(), ldb, 0.f, C32.data(), N);
    };
    auto bf16 = [&] {
      kernels::cpu::sgemm_bf16(s.ta, s.tb, M, N, K, 1.f, A.data(), lda, B.data(), ldb, 0.f, C16.data(), N);
    };
    fp32();
    bf16();
    // Operands in [-1, 1] rounded to bf16 (relative error <= 2^-9 each): |error| <~ 2^-8 · sqrt(K) / 3.
    double max_err = 0;
    for (size_t i = 0; i < C32.size(); ++i) max_err = std::max(max_err, double(std::abs(C32[i] - C16[i])));
    if (!(max_err < 0.02 * std::sqrt(double(K)))) {
      std::fprintf(stderr, "%s: bf16 result too far from fp32: max |diff| %g\n", s.what, max_err);
      return 1;
    }
    const double flop = 2.0 * M * N * K;
    const double t32 = bench::time_median(fp32, min_time), t16 = bench::time_median(bf16, min_time);
    std::printf(
        "{\"shape\":\"%s\",\"M\":%d,\"N\":%d,\"K\":%d,\"op\":\"%s%s\",\"threads\":%d,\"fp32_gflops\":%.1f,"
        "\"bf16_gflops\":%.1f,\"ratio\":%.2f,\"max_abs_diff\":%.3g}\n",
        s.what, M, N, K, s.ta ? "T" : "N", s.tb ? "T" : "N", threads, flop / t32 / 1e9, flop / t16 / 1e9,
        t32 / t16, max_err);
    std::fflush(stdout);
  }
  return 0;
}
