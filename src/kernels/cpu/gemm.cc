#include "kernels/cpu/gemm.h"

#include <attn/core/config.h>
#include <attn/core/error.h>
#include <attn/core/parallel.h>
#include <attn/core/precision.h>
#include <cblas.h>

#include <algorithm>
#include <atomic>
#include <mutex>

#include "kernels/cpu/gemm_bf16.h"
#include "kernels/cpu/gemm_f32.h"

namespace attn::kernels::cpu {
namespace {

// OpenBLAS keeps a process-wide thread count; set it only when it changes. Inside
// attn's parallel_for (src/ops/gemm_threads.cc splits a product over the pool)
// every call is single-threaded: attn's threads already fill the cores, and
// OpenBLAS's workers, once woken, poll for ~0.1 s against them.
void sync_threads() {
  // `current` changes only after OpenBLAS has the new count, so no thread can call
  // into OpenBLAS believing the count is set while another is still setting it.
  static std::atomic<int> current{-1};
  static std::mutex mu;
  const int n = attn::in_parallel_for() ? 1 : attn::num_threads();
  if (current.load() == n) return;
  std::lock_guard<std::mutex> lk(mu);
  if (current.load() != n) {
    openblas_set_num_threads(n);
    current.store(n);
  }
}

// ---- t15: products per path (gemm.h sgemm_counts) ----
struct AtomicPathCount {
  std::atomic<uint64_t> calls{0};
  std::atomic<uint64_t> macs{0};  // M·N·K (integer, so that concurrent adds are exact)
};
AtomicPathCount g_counts[4];  // indexed by SgemmPath

void count(SgemmPath path, int64_t M, int64_t N, int64_t K) {
  AtomicPathCount& c = g_counts[static_cast<int>(path)];
  c.calls.fetch_add(1, std::memory_order_relaxed);
  c.macs.fetch_add(static_cast<uint64_t>(M) * static_cast<uint64_t>(N) * static_cast<uint64_t>(K),
                   std::memory_order_relaxed);
}

SgemmPathCount snapshot(SgemmPath path) {
  const AtomicPathCount& c = g_counts[static_cast<int>(path)];
  SgemmPathCount out;
  out.calls = c.calls.load(std::memory_order_relaxed);
  out.flops = 2.0 * static_cast<double>(c.macs.load(std::memory_order_relaxed));
  return out;
}

}  // namespace

SgemmCounts sgemm_counts() {
  SgemmCounts c;
  c.own_f32 = snapshot(SgemmPath::own_f32);
  c.blas = snapshot(SgemmPath::blas);
  c.blas_gemv = snapshot(SgemmPath::blas_gemv);
  c.bf16 = snapshot(SgemmPath::bf16);
  return c;
}

void reset_sgemm_counts() {
  for (AtomicPathCount& c : g_counts) {
    c.calls.store(0, std::memory_order_relaxed);
    c.macs.store(0, std::memory_order_relaxed);
  }
}

// Fewer rows than this stay on BLAS in bf16 precision too: packing B (and the 12-row
// register block) would cost more than bf16 saves (measured: M = 8 was 0.6x BLAS).
constexpr int64_t kBf16MinRows = 16;

bool sgemm_uses_bf16(int64_t M, int64_t N) {
  return M >= kBf16MinRows && N >= 2 && matmul_precision() == MatmulPrecision::bf16 && bf16_gemm_available();
}

// Under ATTN_SGEMM=auto, products with fewer rows than this stay on OpenBLAS: the own kernel packs
// all of op(B) on every call, which a few rows do not pay for (gemm_f32_bench, 1 thread, NT: M = 16
// at 0.64-0.92x OpenBLAS, M = 4 at 0.54-0.73x; M >= 32 at 0.95-1.17x on every shape measured).
// A non-transposed op(B) is read in place for up to kF32InPlaceBMaxRows rows, which measured
// 0.94-1.42x OpenBLAS from M = 8 (M = 4: 0.94x).
constexpr int64_t kOwnMinRows = 32, kOwnMinRowsInPlaceB = 8, kOwnMinCols = 32;

SgemmPath sgemm_path(int64_t M, int64_t N, bool trans_b) {
  if (sgemm_uses_bf16(M, N)) return SgemmPath::bf16;
  if (M == 1 || N == 1) return SgemmPath::blas_gemv;
  static const SgemmKernel choice = runtime_config().sgemm;
  if (choice == SgemmKernel::blas || !f32_gemm_fast()) return SgemmPath::blas;
  if (choice == SgemmKernel::attn) return SgemmPath::own_f32;
  const int64_t min_rows = trans_b ? kOwnMinRows : kOwnMinRowsInPlaceB;
  return M >= min_rows && N >= kOwnMinCols ? SgemmPath::own_f32 : SgemmPath::blas;
}

void sgemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
           int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  ATTN_CHECK(M >= 0 && N >= 0 && K >= 0, "sgemm: sizes must be >= 0; got M ", M, ", N ", N, ", K ", K);
  ATTN_CHECK(lda >= (trans_a ? M : K) && ldb >= (trans_b ? K : N) && ldc >= N,
             "sgemm: leading dimensions too small: lda ", lda, ", ldb ", ldb, ", ldc ", ldc, " for M ", M,
             ", N ", N, ", K ", K, (trans_a ? " (A transposed)" : ""), (trans_b ? " (B transposed)" : ""));
  constexpr int64_t kMax = (int64_t{1} << 31) - 1;
  ATTN_CHECK(M <= kMax && N <= kMax && K <= kMax && lda <= kMax && ldb <= kMax && ldc <= kMax,
             "sgemm: sizes must fit in a 32-bit BLAS int; got M ", M, ", N ", N, ", K ", K);
  if (M == 0 || N == 0) return;
  if (K == 0) {  // op(A)·op(B) is all zeros
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) C[i * ldc + j] = beta == 0 ? 0.f : beta * C[i * ldc + j];
    return;
  }
  // MatmulPrecision::bf16: products of at least kBf16MinRows rows go to the bf16 kernel (gemm_bf16.h);
  // matrix-vector products stay on sgemv below.
  const SgemmPath path = sgemm_path(M, N, trans_b);
  count(path, M, N, K);
  if (path == SgemmPath::bf16) {
    sgemm_bf16(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    return;
  }
  if (path == SgemmPath::own_f32) {  // threads itself over attn's pool (serially inside a parallel_for)
    sgemm_f32(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    return;
  }
  sync_threads();
  if (M == 1 || N == 1) {
    // A matrix-vector product (e.g. one decoding step through a vocabulary-sized
    // projection). sgemm would pack the whole matrix on every call; sgemv streams it
    // once. beta = 0 must not read C (it may be uninitialised): zero it first.
    const int64_t inc_c = M == 1 ? 1 : ldc;
    if (beta == 0)
      for (int64_t i = 0; i < std::max(M, N); ++i) C[i * inc_c] = 0.f;
    if (M == 1) {
      // c[1, N] = a[1, K] · op(B): a has stride 1 (row of A) or lda (column of the stored [K, 1] A).
      const int64_t inc_a = trans_a ? lda : 1;
      cblas_sgemv(CblasRowMajor, trans_b ? CblasNoTrans : CblasTrans, static_cast<int>(trans_b ? N : K),
                  static_cast<int>(trans_b ? K : N), alpha, B, static_cast<int>(std::max<int64_t>(ldb, 1)), A,
                  static_cast<int>(std::max<int64_t>(inc_a, 1)), beta, C, 1);
    } else {
      // c[M, 1] = op(A) · b[K, 1]: b has stride ldb (column of B) or 1 (row of the stored [1, K] B).
      const int64_t inc_b = trans_b ? 1 : ldb;
      cblas_sgemv(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, static_cast<int>(trans_a ? K : M),
                  static_cast<int>(trans_a ? M : K), alpha, A, static_cast<int>(std::max<int64_t>(lda, 1)), B,
                  static_cast<int>(std::max<int64_t>(inc_b, 1)), beta, C,
                  static_cast<int>(std::max<int64_t>(ldc, 1)));
    }
    return;
  }
  // BLAS wants lda >= 1 even when a dimension is 1.
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans,
              static_cast<int>(M), static_cast<int>(N), static_cast<int>(K), alpha, A,
              static_cast<int>(std::max<int64_t>(lda, 1)), B, static_cast<int>(std::max<int64_t>(ldb, 1)),
              beta, C, static_cast<int>(std::max<int64_t>(ldc, 1)));
}

const char* blas_name() { return "OpenBLAS"; }

}  // namespace attn::kernels::cpu
