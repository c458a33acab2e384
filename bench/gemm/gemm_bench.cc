// gemm_bench: sgemm GFLOP/s of one BLAS, to choose the library attn uses for
// plain matrix products (Linear layers, projections). Built once per BLAS found
// (gemm_bench_openblas, gemm_bench_blis, gemm_bench_onednn); each checks its
// result against a naive product first.
//
//   gemm_bench_<blas> [--threads 2] [--min-time 0.5]
// Prints one JSON object per shape: {"blas":..., "M":..., "N":..., "K":..., "gflops":...}.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "../bench_util.h"

#if defined(ATTN_GEMM_OPENBLAS)
#include <cblas.h>
extern "C" void openblas_set_num_threads(int);
static const char* kName = "openblas";
static void set_threads(int n) { openblas_set_num_threads(n); }
static void sgemm(int M, int N, int K, const float* A, const float* B, float* C) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, N, K, 1.f, A, K, B, N, 0.f, C, N);
}
#elif defined(ATTN_GEMM_BLIS)
#include <blis.h>
static const char* kName = "blis";
static void set_threads(int n) { bli_thread_set_num_threads(n); }
static void sgemm(int M, int N, int K, const float* A, const float* B, float* C) {
  float one = 1.f, zero = 0.f;
  bli_sgemm(BLIS_NO_TRANSPOSE, BLIS_NO_TRANSPOSE, M, N, K, &one, const_cast<float*>(A), K, 1,
            const_cast<float*>(B), N, 1, &zero, C, N, 1);
}
#elif defined(ATTN_GEMM_ONEDNN)
#include <omp.h>
#include <oneapi/dnnl/dnnl.h>
static const char* kName = "onednn";
static void set_threads(int n) { omp_set_num_threads(n); }
static void sgemm(int M, int N, int K, const float* A, const float* B, float* C) {
  dnnl_sgemm('N', 'N', M, N, K, 1.f, A, K, B, N, 0.f, C, N);
}
#endif

int main(int argc, char** argv) {
  int threads = 2;
  double min_time = 0.5;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--threads")
      threads = std::atoi(argv[i + 1]);
    else if (a == "--min-time")
      min_time = std::atof(argv[i + 1]);
  }
  set_threads(threads);
  // Square sizes plus the shapes Transformer layers use: tokens × d_model × d_ff.
  const int shapes[][3] = {{256, 256, 256},   {512, 512, 512},   {1024, 1024, 1024}, {2048, 2048, 2048},
                           {4096, 384, 384},  {4096, 1536, 384}, {4096, 384, 1536},  {2048, 512, 512},
                           {2048, 2048, 512}, {2048, 512, 2048}, {32, 512, 512},     {1, 2048, 512}};
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> dist(-1, 1);
  for (const auto& s : shapes) {
    const int M = s[0], N = s[1], K = s[2];
    std::vector<float> A(static_cast<size_t>(M) * K), B(static_cast<size_t>(K) * N),
        C(static_cast<size_t>(M) * N);
    for (float& x : A) x = dist(rng);
    for (float& x : B) x = dist(rng);
    sgemm(M, N, K, A.data(), B.data(), C.data());
    // Check a few entries against a naive product.
    for (int t = 0; t < 16; ++t) {
      const int i = (t * 7919) % M, j = (t * 104729) % N;
      double ref = 0;
      for (int k = 0; k < K; ++k)
        ref += static_cast<double>(A[static_cast<size_t>(i) * K + k]) * B[static_cast<size_t>(k) * N + j];
      if (std::abs(ref - C[static_cast<size_t>(i) * N + j]) > 1e-3 * K) {
        std::fprintf(stderr, "%s: wrong result at (%d, %d): %g vs %g\n", kName, i, j,
                     C[static_cast<size_t>(i) * N + j], ref);
        return 1;
      }
    }
    const double sec =
        attn::bench::time_median([&] { sgemm(M, N, K, A.data(), B.data(), C.data()); }, min_time);
    std::printf("{\"blas\":\"%s\",\"threads\":%d,\"M\":%d,\"N\":%d,\"K\":%d,\"gflops\":%.4g}\n", kName,
                threads, M, N, K, 2.0 * M * N * K / sec / 1e9);
    std::fflush(stdout);
  }
  return 0;
}
