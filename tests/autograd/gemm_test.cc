// The BLAS sgemm wrapper against the reference gemm computed in double, and
// the reference gemm against a direct triple loop.
#include "kernels/cpu/gemm.h"

#include <gtest/gtest.h>

#include <vector>

#include "kernels/ref/gemm_ref.h"
#include "testing/testing.h"
#include "testing/tolerances.h"

namespace attn {
namespace {

namespace tol = testing::tol;

struct GemmCase {
  bool ta, tb;
  int64_t M, N, K;
  int64_t pad;  // extra elements per stored row (lda/ldb/ldc > minimum)
  double alpha, beta;
};

void PrintTo(const GemmCase& c, std::ostream* os) {
  *os << (c.ta ? "T" : "N") << (c.tb ? "T" : "N") << " M" << c.M << " N" << c.N << " K" << c.K << " pad"
      << c.pad << " alpha" << c.alpha << " beta" << c.beta;
}

class Gemm : public ::testing::TestWithParam<GemmCase> {};

TEST_P(Gemm, SgemmMatchesDoubleReference) {
  const GemmCase c = GetParam();
  // Stored shapes: A [M, K] or [K, M]; B [K, N] or [N, K]; C [M, N]; rows padded.
  const int64_t ar = c.ta ? c.K : c.M, ac = c.ta ? c.M : c.K;
  const int64_t br = c.tb ? c.N : c.K, bc = c.tb ? c.K : c.N;
  const int64_t lda = ac + c.pad, ldb = bc + c.pad, ldc = c.N + c.pad;
  const Tensor A = testing::random_uniform({ar, lda}, 1), B = testing::random_uniform({br, ldb}, 2);
  const Tensor C0 = testing::random_uniform({c.M, ldc}, 3);
  Tensor C = C0.clone();
  kernels::cpu::sgemm(c.ta, c.tb, c.M, c.N, c.K, static_cast<float>(c.alpha), A.data<float>(), lda,
                      B.data<float>(), ldb, static_cast<float>(c.beta), C.data<float>(), ldc);
  // The reference in double from the same float values.
  const Tensor A64 = A.to(DType::f64), B64 = B.to(DType::f64);
  Tensor C64 = C0.to(DType::f64);
  kernels::ref::gemm<double>(c.ta, c.tb, c.M, c.N, c.K, c.alpha, A64.data<double>(), lda, B64.data<double>(),
                             ldb, c.beta, C64.data<double>(), ldc);
  EXPECT_ALL_CLOSE(C.slice(1, 0, c.N), C64.slice(1, 0, c.N), tol::kOpsFloatForward);
  // Padding columns are never written.
  if (c.pad > 0) {
    EXPECT_EQ(C.slice(1, c.N, ldc).to_vector(), C0.slice(1, c.N, ldc).to_vector());
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, Gemm,
    ::testing::Values(
        GemmCase{false, false, 1, 1, 1, 0, 1, 0}, GemmCase{false, false, 7, 5, 3, 0, 1, 0},
        GemmCase{true, false, 7, 5, 3, 2, 1, 0}, GemmCase{false, true, 7, 5, 3, 1, 1, 0},
        GemmCase{true, true, 7, 5, 3, 3, 1, 0}, GemmCase{false, false, 33, 17, 65, 0, 0.5, 1.0},
        GemmCase{false, true, 64, 48, 96, 5, 1, 1.0}, GemmCase{true, false, 130, 3, 200, 0, -2, 0.25},
        GemmCase{false, false, 4, 6, 0, 1, 1, 0.5}, GemmCase{true, true, 1, 257, 31, 0, 1, 0},
        // matrix-vector products (M == 1 or N == 1 go to sgemv), every layout
        GemmCase{false, true, 1, 300, 64, 0, 1, 0}, GemmCase{false, false, 1, 300, 64, 3, 0.5, 1.0},
        GemmCase{true, true, 1, 45, 20, 2, 1, 0.5}, GemmCase{true, false, 1, 45, 20, 1, -1, 0},
        GemmCase{false, false, 300, 1, 64, 0, 1, 0}, GemmCase{false, true, 300, 1, 64, 3, 2, 1.0},
        GemmCase{true, false, 45, 1, 20, 2, 1, 0.5}, GemmCase{true, true, 45, 1, 20, 1, 1, 0}));

TEST(GemmRef, MatchesTripleLoop) {
  const int64_t M = 5, N = 4, K = 3;
  const Tensor A = testing::random_uniform({M, K}, 4, -1, 1, DType::f64);
  const Tensor B = testing::random_uniform({K, N}, 5, -1, 1, DType::f64);
  Tensor C = Tensor::zeros({M, N}, DType::f64);
  kernels::ref::gemm<double>(false, false, M, N, K, 1.0, A.data<double>(), K, B.data<double>(), N, 0.0,
                             C.data<double>(), N);
  Tensor E = Tensor::zeros({M, N}, DType::f64);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double s = 0;
      for (int64_t p = 0; p < K; ++p) s += A.at({i, p}) * B.at({p, j});
      E.set({i, j}, s);
    }
  EXPECT_ALL_CLOSE(C, E, tol::kTorchParityF64);
}

TEST(Gemm, RejectsTooSmallLeadingDimension) {
  std::vector<float> a(12), b(12), c(12);
  EXPECT_THROW(kernels::cpu::sgemm(false, false, 3, 4, 3, 1, a.data(), 2, b.data(), 4, 0, c.data(), 4),
               Error);
}

}  // namespace
}  // namespace attn
