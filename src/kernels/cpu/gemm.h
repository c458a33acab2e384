// Single-precision matrix product: attn's own fp32 GEMM (gemm_f32.h) or OpenBLAS (cblas_sgemm,
// cblas_sgemv), chosen per product by sgemm_path below; the bf16 kernel under MatmulPrecision::bf16.
//
// Row-major: C = alpha · op(A) · op(B) + beta · C with op(A) [M, K], op(B) [K, N], C [M, N].
// Without a transpose A is stored [M, K] with row stride lda (>= K); with trans_a it is
// stored [K, M] (row stride lda >= M) and op(A) = Aᵀ. The same for B ([K, N] or [N, K]).
// beta = 0 ignores what C held (it may be uninitialised). The BLAS thread count
// follows attn::num_threads().
#pragma once

#include <cstdint>

namespace attn::kernels::cpu {

void sgemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
           int64_t lda,                         // A: [M, K] or, transposed, [K, M]
           const float* B, int64_t ldb,         // B: [K, N] or, transposed, [N, K]
           float beta, float* C, int64_t ldc);  // C: [M, N]

// True when sgemm sends an [M, N] product to the bf16 kernel (MatmulPrecision::bf16 is set, the CPU
// has AVX512_BF16, M >= 16 and N >= 2). That kernel splits the work over attn's pool itself.
bool sgemm_uses_bf16(int64_t M, int64_t N);

// Which kernel sgemm gives an [M, N] product with op(B) transposed or not (for the tests, explain
// and the benchmarks):
//   bf16      sgemm_uses_bf16(M, N);
//   blas_gemv M == 1 or N == 1 (OpenBLAS's sgemv streams the matrix once; nothing is packed);
//   own_f32   attn's own fp32 GEMM (gemm_f32.h) when its vectorised body runs here and, under
//             ATTN_SGEMM=auto (the default), N >= 32 and M >= 32, or M >= 8 when op(B) is not
//             transposed (read in place, not packed): where it measured as fast as OpenBLAS or
//             faster (bench/gemm/gemm_f32_bench.cc, docs/benchmarks-log/2026-12-01.md); ATTN_SGEMM=attn:
//             every product that is not a matrix-vector one;
//   blas      the rest (OpenBLAS cblas_sgemm: a few rows do not pay for packing op(B)), and
//             everything under ATTN_SGEMM=blas.
enum class SgemmPath { bf16, blas_gemv, own_f32, blas };
SgemmPath sgemm_path(int64_t M, int64_t N, bool trans_b);

// Products sgemm has run on each path since the process started (or the last reset_sgemm_counts), and
// their multiply-add work 2·M·N·K in flops: what a benchmark reports as "which products go to OpenBLAS"
// (bench/train_bench.cc prints them per step). Counted once per sgemm call, after the path is chosen;
// calls with M, N or K = 0 are not counted. ops::gemm_packed and sgemm_f32 called directly bypass
// sgemm and are not counted. Thread-safe (relaxed atomics: a snapshot taken while other threads call
// sgemm may be mid-update).
struct SgemmPathCount {
  uint64_t calls = 0;
  double flops = 0;
};
struct SgemmCounts {
  SgemmPathCount own_f32, blas, blas_gemv, bf16;
};
SgemmCounts sgemm_counts();
void reset_sgemm_counts();

// Name of the BLAS behind sgemm (for explain and benchmarks).
const char* blas_name();

}  // namespace attn::kernels::cpu
