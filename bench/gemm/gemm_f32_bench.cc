// gemm_f32_bench: GFLOP/s of OpenBLAS's cblas_sgemm against attn's own fp32 GEMM
// (kernels::cpu::sgemm_f32, gemm_f32.h) on the shapes of the training step (2048 tokens, d 256,
// d_ff 1024, vocabulary 8000: forward NT, backward dX NN and dW TN), of MiniLM (batch 32 × 128
// = 4096 tokens; one sentence of 16 and 128 tokens; weights stored [in, out], so NN), of decoding
// (few rows through d × d and the vocabulary) — measured back to back per shape, alternating,
// best of --reps medians: the ratio is what to read on a loaded machine. Run it with and without
// OPENBLAS_CORETYPE=Haswell to see how much OpenBLAS's speed depends on its CPU detection.
//
//   gemm_f32_bench [--threads 2] [--min-time 0.2] [--reps 3] [--shapes all|<name prefix>]
//                  [--shape M,N,K,OP] [--path avx512|avx2|scalar] [--clock wall|thread]
// Prints one JSON object per shape (own_over_blas > 1: attn's own is faster).
#include <attn/core/parallel.h>
#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "../bench_util.h"
#include "kernels/cpu/encoder_kernels.h"
#include "kernels/cpu/gemm_f32.h"
#include "kernels/cpu/isa.h"

extern "C" char* openblas_get_corename(void);

namespace {

struct Shape {
  const char* what;
  int M, N, K;
  bool ta, tb;
};

const Shape kShapes[] = {
    {"train fwd qkv/out", 2048, 256, 256, false, true}, {"train fwd ff1", 2048, 1024, 256, false, true},
    {"train fwd ff2", 2048, 256, 1024, false, true},    {"train fwd vocab", 2048, 8000, 256, false, true},
    {"train dX ff1", 2048, 256, 1024, false, false},    {"train dX ff2", 2048, 1024, 256, false, false},
    {"train dX vocab", 2048, 256, 8000, false, false},  {"train dW ff1", 1024, 256, 2048, true, false},
    {"train dW ff2", 256, 1024, 2048, true, false},     {"train dW vocab", 8000, 256, 2048, true, false},
    {"train attn scores", 256, 256, 64, false, true},   {"minilm b32 qkv", 4096, 1152, 384, false, false},
    {"minilm b32 out", 4096, 384, 384, false, false},   {"minilm b32 ff1", 4096, 1536, 384, false, false},
    {"minilm b32 ff2", 4096, 384, 1536, false, false},  {"minilm 1x128 qkv", 128, 1152, 384, false, false},
    {"minilm 1x128 ff1", 128, 1536, 384, false, false}, {"minilm 1x128 ff2", 128, 384, 1536, false, false},
    {"minilm 1x16 qkv", 16, 1152, 384, false, false},   {"minilm 1x16 ff1", 16, 1536, 384, false, false},
    {"minilm 1x16 ff2", 16, 384, 1536, false, false},   {"decode b32 d256", 32, 256, 256, false, true},
    {"decode b32 d1024", 32, 1024, 256, false, true},   {"decode b8 d256", 8, 256, 256, false, true},
    {"decode b32 vocab", 32, 8000, 256, false, true},   {"decode b4 vocab", 4, 8000, 256, false, true},
};

}  // namespace

int main(int argc, char** argv) {
  using namespace attn;
  using kernels::cpu::detail::F32GemmPath;
  int threads = 2, reps = 3;
  double min_time = 0.2;
  std::string which = "all";
  const kernels::cpu::Isa isa = kernels::cpu::active_isa();
  F32GemmPath path = isa == kernels::cpu::Isa::avx512 ? F32GemmPath::avx512
                     : isa == kernels::cpu::Isa::avx2 ? F32GemmPath::avx2
                                                      : F32GemmPath::scalar;
  std::vector<Shape> shapes(std::begin(kShapes), std::end(kShapes));
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i], v = argv[i + 1];
    if (a == "--threads")
      threads = std::atoi(v.c_str());
    else if (a == "--min-time")
      min_time = std::atof(v.c_str());
    else if (a == "--reps")
      reps = std::atoi(v.c_str());
    else if (a == "--shapes")
      which = v;
    else if (a ==
             "--clock")  // thread: CPU time of the calling thread (use with --threads 1 on a loaded machine)
      bench::use_thread_clock() = v == "thread";
    else if (a == "--path")
      path = v == "avx512" ? F32GemmPath::avx512 : v == "avx2" ? F32GemmPath::avx2 : F32GemmPath::scalar;
    else if (a == "--shape") {
      int m = 0, n = 0, k = 0;
      char op[3] = {};
      if (std::sscanf(v.c_str(), "%d,%d,%d,%2s", &m, &n, &k, op) != 4) {
        std::fprintf(stderr, "--shape wants M,N,K,OP (e.g. 2048,256,1024,NT)\n");
        return 2;
      }
      shapes = {Shape{"custom", m, n, k, op[0] == 'T', op[1] == 'T'}};
    } else {
      std::fprintf(stderr, "unknown flag %s\n", a.c_str());
      return 2;
    }
  }
  set_num_threads(threads);
  openblas_set_num_threads(threads);
  std::fprintf(stderr, "OpenBLAS core: %s, own path: %s, %d threads\n", openblas_get_corename(),
               path == F32GemmPath::avx512 ? "avx512"
               : path == F32GemmPath::avx2 ? "avx2"
                                           : "scalar",
               threads);
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> dist(-1, 1);
  for (const Shape& s : shapes) {
    const std::string what = s.what;
    if (which != "all" && what.rfind(which, 0) != 0) continue;
    const int M = s.M, N = s.N, K = s.K;
    const int lda = s.ta ? M : K, ldb = s.tb ? K : N;
    std::vector<float> A(size_t(M) * K), B(size_t(K) * N), Cb(size_t(M) * N), Co(size_t(M) * N);
    for (float& x : A) x = dist(rng);
    for (float& x : B) x = dist(rng);
    auto blas = [&] {
      cblas_sgemm(CblasRowMajor, s.ta ? CblasTrans : CblasNoTrans, s.tb ? CblasTrans : CblasNoTrans, M, N, K,
                  1.f, A.data(), lda, B.data(), ldb, 0.f, Cb.data(), N);
    };
    auto own = [&] {
      kernels::cpu::detail::sgemm_f32_path(path, s.ta, s.tb, M, N, K, 1.f, A.data(), lda, B.data(), ldb, 0.f,
                                           Co.data(), N);
    };
    blas();
    own();
    double max_err = 0;
    for (size_t i = 0; i < Cb.size(); ++i) max_err = std::max(max_err, double(std::abs(Cb[i] - Co[i])));
    if (!(max_err < 1e-4 * std::sqrt(double(K)))) {
      std::fprintf(stderr, "%s: own result too far from OpenBLAS's: max |diff| %g\n", s.what, max_err);
      return 1;
    }
    double tb = 1e30, to = 1e30;
    for (int r = 0; r < reps; ++r) {
      tb = std::min(tb, bench::time_median(blas, min_time));
      to = std::min(to, bench::time_median(own, min_time));
    }
    // BERT's small-M kernel (kernels/cpu/encoder_kernels.h, T <= 256 tokens) on the NN shapes it takes.
    double ts = 0;
    if (!s.ta && !s.tb && M <= 256 && kernels::cpu::linear_small_m_fast()) {
      std::vector<float> Cs(size_t(M) * N);
      auto small = [&] {
        kernels::cpu::linear_small_m(A.data(), K, B.data(), nullptr, Cs.data(), N, M, N, K);
      };
      ts = 1e30;
      for (int r = 0; r < reps; ++r) ts = std::min(ts, bench::time_median(small, min_time));
    }
    const double flop = 2.0 * M * N * K;
    if (ts > 0) std::fprintf(stderr, "%s: linear_small_m %.1f GFLOP/s\n", s.what, flop / ts / 1e9);
    std::printf(
        "{\"shape\":\"%s\",\"M\":%d,\"N\":%d,\"K\":%d,\"op\":\"%s%s\",\"threads\":%d,\"openblas\":\"%s\","
        "\"blas_gflops\":%.1f,\"own_gflops\":%.1f,\"own_over_blas\":%.2f}\n",
        s.what, M, N, K, s.ta ? "T" : "N", s.tb ? "T" : "N", threads, openblas_get_corename(),
        flop / tb / 1e9, flop / to / 1e9, tb / to);
    std::fflush(stdout);
  }
  return 0;
}
