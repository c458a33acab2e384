// Shared helpers of the differentiable op front-ends (src/ops/*.cc).
#pragma once

#include <attn/core/autograd.h>
#include <attn/core/tensor.h>

#include <cstdint>
#include <string>
#include <type_traits>

#include "kernels/cpu/gemm.h"
#include "kernels/ref/gemm_ref.h"

namespace attn::ops_detail {

// Checks that `t` is defined and f32 or f64 ("<op>: <name> must be ...").
void check_float(const Tensor& t, const char* op, const char* name);
// Checks that b has a's dtype.
void check_same_dtype(const Tensor& a, const Tensor& b, const char* op, const char* na, const char* nb);
// Wraps a possibly negative dim into [0, rank).
int64_t wrap_dim(int64_t dim, int64_t rank, const char* op);

// Tensor::contiguous() and Tensor::reshape() with a fast copy for strided
// inputs (memcpy of unit-stride inner rows, typed loops otherwise) instead of
// the element-by-element conversion of Tensor::copy_from. Same results: a
// view without history when possible, else a new contiguous tensor.
Tensor contiguous_fast(const Tensor& t);
Tensor reshape_fast(const Tensor& t, const Shape& shape);

// Calls fn(T{}) with T = float or double after the tensor's dtype.
template <typename Fn>
decltype(auto) dispatch_float(DType t, Fn&& fn) {
  if (t == DType::f64) return fn(double{});
  return fn(float{});
}

// kernels::cpu::sgemm, with a large product split over attn's threads, one
// single-threaded BLAS call per block (src/ops/gemm_threads.cc).
void sgemm_threaded(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
                    int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc);

// C = alpha · op(A) · op(B) + beta · C: BLAS for float, the reference for double.
template <typename T>
void gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, double alpha, const T* A, int64_t lda,
          const T* B, int64_t ldb, double beta, T* C, int64_t ldc) {
  if constexpr (std::is_same_v<T, float>) {
    sgemm_threaded(ta, tb, M, N, K, static_cast<float>(alpha), A, lda, B, ldb, static_cast<float>(beta), C,
                   ldc);
  } else {
    kernels::ref::gemm<T>(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  }
}

// Rows to hand one thread at a time so that a chunk holds about 16K elements.
inline int64_t row_grain(int64_t row_len) {
  return std::max<int64_t>(1, 16384 / std::max<int64_t>(1, row_len));
}

}  // namespace attn::ops_detail
