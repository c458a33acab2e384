// Reference matrix product: three loops, accumulated in double. The oracle for
// the BLAS wrapper (kernels/cpu/gemm.h, same argument conventions) and the
// path f64 tensors take.
#pragma once

#include <cstdint>

namespace attn::kernels::ref {

template <typename T>
void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, double alpha, const T* A,
          int64_t lda,                      // A: [M, K] or, transposed, [K, M]
          const T* B, int64_t ldb,          // B: [K, N] or, transposed, [N, K]
          double beta, T* C, int64_t ldc);  // C: [M, N]

}  // namespace attn::kernels::ref
