// fp32 GEMM of the op front-ends split over attn's thread pool (src/ops/op_util.h).
//
// OpenBLAS's own worker threads poll (sched_yield) for about 0.1 s after every
// threaded call, so during a training step they compete with attn's pool for
// the same cores (9–14% of a step's CPU samples were in sched_yield and the
// scheduler). Instead, a large product is cut into one block of rows (or
// columns) per attn thread, and each block is one single-threaded OpenBLAS
// call on its own thread (kernels::cpu::sgemm runs OpenBLAS with 1 thread
// inside a parallel_for, see sync_threads()). Each element of C is computed by the same kernel with the
// same K order however it is split, so results do not depend on the split.
// ATTN_GEMM_THREADS=blas hands the whole product to OpenBLAS's threads instead.
// Products that kernels::cpu::sgemm gives attn's own fp32 GEMM or the bf16 kernel are not split
// here: those kernels thread themselves over the pool and share one packed op(B) between threads.
#include <attn/core/config.h>
#include <attn/core/parallel.h>

#include <algorithm>
#include <cstdlib>
#include <string>

#include "kernels/cpu/gemm.h"
#include "ops/op_util.h"

namespace attn::ops_detail {
namespace {

// Below this many multiply-adds OpenBLAS (0.3.21) runs single-threaded anyway
// (its interface/gemm.c threshold), and so does this split.
constexpr int64_t kMinSplitWork = int64_t{1} << 18;
// Blocks are cut at multiples of this many rows or columns (the kernels' unroll).
constexpr int64_t kAlign = 16;

bool split_enabled() {
  static const bool on = runtime_config().gemm_threads == GemmThreads::attn;
  return on;
}

}  // namespace

void sgemm_threaded(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
                    int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  const int T = num_threads();
  // Split the larger of M and N: each block packs the whole of the other operand,
  // and that duplicated packing is the smaller one.
  const bool split_m = M >= N;
  const int64_t along = split_m ? M : N;
  const kernels::cpu::SgemmPath path = kernels::cpu::sgemm_path(M, N, tb);
  if (!split_enabled() || T == 1 || path == kernels::cpu::SgemmPath::bf16 ||
      path == kernels::cpu::SgemmPath::own_f32 || in_parallel_for() || M * N * K < kMinSplitWork ||
      along < 2 * kAlign) {
    kernels::cpu::sgemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    return;
  }
  const int64_t parts = std::min<int64_t>(T, along / kAlign);
  const int64_t block = (along / parts + kAlign - 1) / kAlign * kAlign;
  const int64_t nblocks = (along + block - 1) / block;
  parallel_for(nblocks, 1, [&](int64_t b0, int64_t b1, int) {
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t s = b * block, n = std::min(block, along - s);
      if (split_m) {                                // rows s.. of op(A) and of C
        const float* a = ta ? A + s : A + s * lda;  // op(A) = A^T: column s of the stored [K, M]
        kernels::cpu::sgemm(ta, tb, n, N, K, alpha, a, lda, B, ldb, beta, C + s * ldc, ldc);
      } else {                                       // columns s.. of op(B) and of C
        const float* bp = tb ? B + s * ldb : B + s;  // op(B) = B^T: row s of the stored [N, K]
        kernels::cpu::sgemm(ta, tb, M, n, K, alpha, A, lda, bp, ldb, beta, C + s, ldc);
      }
    }
  });
}

}  // namespace attn::ops_detail
