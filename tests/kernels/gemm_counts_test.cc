// kernels::cpu::sgemm_counts (gemm.h): every sgemm call is counted once, on the path sgemm_path chose
// for it, with its 2·M·N·K flops; empty products are not counted; reset_sgemm_counts clears them.
#include <attn/core/parallel.h>
#include <gtest/gtest.h>

#include <vector>

#include "kernels/cpu/gemm.h"

namespace attn {
namespace {

using kernels::cpu::SgemmCounts;
using kernels::cpu::SgemmPath;
using kernels::cpu::SgemmPathCount;

const SgemmPathCount& of(const SgemmCounts& c, SgemmPath p) {
  switch (p) {
    case SgemmPath::own_f32:
      return c.own_f32;
    case SgemmPath::blas:
      return c.blas;
    case SgemmPath::blas_gemv:
      return c.blas_gemv;
    case SgemmPath::bf16:
      break;
  }
  return c.bf16;
}

void product(bool tb, int64_t M, int64_t N, int64_t K) {
  std::vector<float> A(static_cast<size_t>(M * K) + 1, 0.5f), B(static_cast<size_t>(K * N) + 1, 0.25f),
      C(static_cast<size_t>(M * N) + 1, 0.f);
  kernels::cpu::sgemm(false, tb, M, N, K, 1.f, A.data(), K, B.data(), tb ? K : N, 0.f, C.data(), N);
  if (M > 0 && N > 0) {
    EXPECT_FLOAT_EQ(C[0], 0.125f * static_cast<float>(K));  // the product ran
  }
}

TEST(SgemmCounts, EachCallCountedOnItsPathWithItsFlops) {
  set_num_threads(2);
  struct Case {
    bool tb;
    int64_t M, N, K;
  };
  // A product each path takes here (the paths depend on ATTN_SGEMM and the CPU; sgemm_path says which).
  const Case cases[] = {
      {true, 64, 48, 20}, {false, 40, 33, 7}, {true, 4, 40, 9}, {true, 1, 30, 11}, {false, 17, 1, 5}};
  for (const Case& c : cases) {
    kernels::cpu::reset_sgemm_counts();
    const SgemmPath path = kernels::cpu::sgemm_path(c.M, c.N, c.tb);
    product(c.tb, c.M, c.N, c.K);
    product(c.tb, c.M, c.N, c.K);
    const SgemmCounts n = kernels::cpu::sgemm_counts();
    for (const SgemmPath p : {SgemmPath::own_f32, SgemmPath::blas, SgemmPath::blas_gemv, SgemmPath::bf16}) {
      const SgemmPathCount& got = of(n, p);
      if (p == path) {
        EXPECT_EQ(got.calls, 2u) << c.M << " x " << c.N << " x " << c.K;
        EXPECT_EQ(got.flops, 2.0 * 2.0 * static_cast<double>(c.M * c.N * c.K)) << c.M << " x " << c.N;
      } else {
        EXPECT_EQ(got.calls, 0u) << "another path counted " << c.M << " x " << c.N << " x " << c.K;
        EXPECT_EQ(got.flops, 0.0);
      }
    }
  }
  // The matrix-vector products are OpenBLAS's sgemv on every configuration.
  EXPECT_EQ(kernels::cpu::sgemm_path(1, 30, true), SgemmPath::blas_gemv);
}

TEST(SgemmCounts, EmptyProductsAreNotCountedAndResetClears) {
  kernels::cpu::reset_sgemm_counts();
  product(true, 0, 8, 8);
  product(true, 8, 8, 0);  // K = 0: C = beta · C, no product
  SgemmCounts n = kernels::cpu::sgemm_counts();
  EXPECT_EQ(n.own_f32.calls + n.blas.calls + n.blas_gemv.calls + n.bf16.calls, 0u);
  product(true, 64, 64, 8);
  n = kernels::cpu::sgemm_counts();
  EXPECT_EQ(n.own_f32.calls + n.blas.calls + n.blas_gemv.calls + n.bf16.calls, 1u);
  kernels::cpu::reset_sgemm_counts();
  n = kernels::cpu::sgemm_counts();
  EXPECT_EQ(n.own_f32.calls + n.blas.calls + n.blas_gemv.calls + n.bf16.calls, 0u);
  EXPECT_EQ(n.own_f32.flops + n.blas.flops + n.blas_gemv.flops + n.bf16.flops, 0.0);
}

}  // namespace
}  // namespace attn
