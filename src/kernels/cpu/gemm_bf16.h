// Single-precision matrix product on bf16-rounded operands (AVX512_BF16 vdpbf16ps).
//
// sgemm_bf16 has exactly the semantics of kernels::cpu::sgemm (gemm.h): row-major,
// C = alpha · op(A) · op(B) + beta · C, fp32 in and out, all four transpose combinations,
// any leading dimensions, beta = 0 never reads C. The one difference: every element of
// op(A) and op(B) is rounded to bf16 (round to nearest even, as attn::bf16) while it is
// packed, and the products (exact in fp32) are accumulated in fp32. It is what
// MatmulPrecision::bf16 (attn/core/precision.h) sends sgemm to.
//
// Goto-style blocking: B is packed once per (k, n) block into panels of 32 columns whose
// elements are k-pairs (two bf16 in a uint32), shared by all threads; each thread packs
// 12-row panels of A the same way and runs a 12×32 register block (24 accumulators), one
// vdpbf16ps per (row, 16 columns, k-pair).
#pragma once

#include <cstdint>

namespace attn::kernels::cpu {

void sgemm_bf16(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
                int64_t lda,                         // A: [M, K] or, transposed, [K, M]
                const float* B, int64_t ldb,         // B: [K, N] or, transposed, [N, K]
                float beta, float* C, int64_t ldc);  // C: [M, N]

// True when sgemm_bf16 runs the AVX-512 kernel: the active instruction set is AVX-512 and
// the CPU has AVX512_BF16. Otherwise sgemm_bf16 still works (scalar path), only slowly.
bool bf16_gemm_available();

namespace detail {

enum class Bf16GemmPath { scalar, avx512 };

// sgemm_bf16 through one path (tests compare both with the reference). avx512 throws
// attn::Error when bf16_gemm_available() is false.
void sgemm_bf16_path(Bf16GemmPath path, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K,
                     float alpha, const float* A, int64_t lda,  // A: [M, K] or, transposed, [K, M]
                     const float* B, int64_t ldb,               // B: [K, N] or, transposed, [N, K]
                     float beta, float* C, int64_t ldc);        // C: [M, N]

// The packing and register-block functions of one path (gemm_bf16_kernels.h).
struct Bf16GemmKernels;
const Bf16GemmKernels& bf16_gemm_scalar_kernels();
const Bf16GemmKernels& bf16_gemm_avx512_kernels();  // only call when the CPU has AVX512_BF16

}  // namespace detail
}  // namespace attn::kernels::cpu
