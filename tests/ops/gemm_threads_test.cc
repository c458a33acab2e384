// ops_detail::sgemm_threaded (src/ops/gemm_threads.cc): a product split over attn's
// threads, one single-threaded sgemm call per block, against the reference gemm in
// double and against one unsplit single-threaded sgemm call. Bit for bit where attn's
// own fp32 kernel computes the product (kernels::cpu::sgemm_path): it is not split here,
// it threads itself, and its per-element arithmetic does not depend on the thread count or
// the split (gemm_f32.h). Where OpenBLAS computes the blocks, OpenBLAS's kernel (which
// depends on its CPU detection, OPENBLAS_CORETYPE) decides the summation order, and
// blocks of other sizes may take other code paths: a tolerance.
#include <attn/core/parallel.h>
#include <gtest/gtest.h>

#include <cstring>

#include "kernels/cpu/gemm.h"
#include "kernels/ref/gemm_ref.h"
#include "ops/op_util.h"
#include "testing/testing.h"
#include "testing/tolerances.h"

namespace attn {
namespace {

namespace tol = testing::tol;

struct SplitCase {
  bool ta, tb;
  int64_t M, N, K;
  int64_t pad;  // extra elements per stored row (lda/ldb/ldc > minimum)
  double beta;
  int threads;
};

void PrintTo(const SplitCase& c, std::ostream* os) {
  *os << (c.ta ? "T" : "N") << (c.tb ? "T" : "N") << " M" << c.M << " N" << c.N << " K" << c.K << " pad"
      << c.pad << " beta" << c.beta << " threads" << c.threads;
}

class GemmThreaded : public ::testing::TestWithParam<SplitCase> {
 protected:
  void SetUp() override { saved_ = num_threads(); }
  void TearDown() override { set_num_threads(saved_); }
  int saved_ = 1;
};

TEST_P(GemmThreaded, MatchesReferenceAndTheUnsplitProduct) {
  const SplitCase c = GetParam();
  set_num_threads(c.threads);
  // Stored shapes: A [M, K] or [K, M]; B [K, N] or [N, K]; C [M, N]; rows padded.
  const int64_t ar = c.ta ? c.K : c.M, ac = c.ta ? c.M : c.K;
  const int64_t br = c.tb ? c.N : c.K, bc = c.tb ? c.K : c.N;
  const int64_t lda = ac + c.pad, ldb = bc + c.pad, ldc = c.N + c.pad;
  const Tensor A = testing::random_uniform({ar, lda}, 11), B = testing::random_uniform({br, ldb}, 12);
  const Tensor C0 = testing::random_uniform({c.M, ldc}, 13);
  Tensor C = C0.clone();
  ops_detail::sgemm_threaded(c.ta, c.tb, c.M, c.N, c.K, 1.0f, A.data<float>(), lda, B.data<float>(), ldb,
                             static_cast<float>(c.beta), C.data<float>(), ldc);
  const Tensor A64 = A.to(DType::f64), B64 = B.to(DType::f64);
  Tensor C64 = C0.to(DType::f64);
  kernels::ref::gemm<double>(c.ta, c.tb, c.M, c.N, c.K, 1.0, A64.data<double>(), lda, B64.data<double>(), ldb,
                             c.beta, C64.data<double>(), ldc);
  EXPECT_ALL_CLOSE(C.slice(1, 0, c.N), C64.slice(1, 0, c.N), tol::kOpsFloatForward);
  if (c.pad > 0) {  // padding columns are never written
    EXPECT_EQ(C.slice(1, c.N, ldc).to_vector(), C0.slice(1, c.N, ldc).to_vector());
  }
  // Against one unsplit single-threaded call.
  set_num_threads(1);
  Tensor U = C0.clone();
  kernels::cpu::sgemm(c.ta, c.tb, c.M, c.N, c.K, 1.0f, A.data<float>(), lda, B.data<float>(), ldb,
                      static_cast<float>(c.beta), U.data<float>(), ldc);
  if (kernels::cpu::sgemm_path(c.M, c.N, c.tb) == kernels::cpu::SgemmPath::own_f32)
    EXPECT_EQ(std::memcmp(C.data<float>(), U.data<float>(), sizeof(float) * c.M * ldc), 0)
        << "attn's own kernel: 1 and " << c.threads << " threads must give the same bits";
  else
    EXPECT_ALL_CLOSE(C, U, tol::kOpsFloatForward);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, GemmThreaded,
    ::testing::Values(
        // split along M (M >= N), every layout, rows not a multiple of the block
        SplitCase{false, false, 203, 64, 96, 0, 0, 2}, SplitCase{true, false, 203, 64, 96, 3, 0, 2},
        SplitCase{false, true, 203, 64, 96, 1, 1, 2}, SplitCase{true, true, 203, 64, 96, 2, 1, 3},
        // split along N, every layout
        SplitCase{false, false, 40, 330, 64, 0, 0, 2}, SplitCase{true, false, 40, 330, 64, 1, 1, 2},
        SplitCase{false, true, 40, 330, 64, 2, 0, 3}, SplitCase{true, true, 40, 330, 64, 0, 1, 2},
        // dW-like accumulation (beta = 1, long K) and a linear-like product
        SplitCase{true, false, 128, 96, 520, 0, 1, 2}, SplitCase{false, true, 512, 256, 128, 0, 0, 2},
        // too small to split, or too few rows/columns to cut: one call
        SplitCase{false, false, 20, 20, 20, 0, 1, 2}, SplitCase{false, true, 24, 2000, 8, 1, 0, 2},
        // fewer than 32 rows or columns (OpenBLAS under ATTN_SGEMM=auto), split along the other
        SplitCase{false, false, 500, 20, 64, 1, 0, 2}, SplitCase{true, true, 500, 20, 64, 0, 1, 2},
        SplitCase{true, false, 16, 900, 40, 2, 1, 2}, SplitCase{false, false, 300, 300, 30, 0, 0, 1}));

}  // namespace
}  // namespace attn
