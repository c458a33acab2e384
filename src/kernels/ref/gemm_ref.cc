#include "kernels/ref/gemm_ref.h"

#include <attn/core/parallel.h>

#include <algorithm>

namespace attn::kernels::ref {

template <typename T>
void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, double alpha, const T* A, int64_t lda,
          const T* B, int64_t ldb, double beta, T* C, int64_t ldc) {
  const int64_t grain = std::max<int64_t>(1, 4096 / std::max<int64_t>(1, N * K));
  parallel_for(M, grain, [&](int64_t i0, int64_t i1, int) {
    for (int64_t i = i0; i < i1; ++i) {
      for (int64_t j = 0; j < N; ++j) {
        double acc = 0;
        for (int64_t p = 0; p < K; ++p) {
          const double a = trans_a ? A[p * lda + i] : A[i * lda + p];
          const double b = trans_b ? B[j * ldb + p] : B[p * ldb + j];
          acc += a * b;
        }
        T& c = C[i * ldc + j];
        c = static_cast<T>(beta == 0 ? alpha * acc : alpha * acc + beta * static_cast<double>(c));
      }
    }
  });
}

template void gemm<float>(bool, bool, int64_t, int64_t, int64_t, double, const float*, int64_t, const float*,
                          int64_t, double, float*, int64_t);
template void gemm<double>(bool, bool, int64_t, int64_t, int64_t, double, const double*, int64_t,
                           const double*, int64_t, double, double*, int64_t);

}  // namespace attn::kernels::ref
