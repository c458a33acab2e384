// Integer products of ggml block-quantized weights with 8-bit activations, llama.cpp-style (issue 19:
// the formats of Gemma 3's Q4_K_M GGUF), working on the GGUF bytes as stored (no repacked copy).
//
//   Y[m, n] = Σ_k X[m, k] · W[n, k]      W [N, K] stored rows of blocks, X quantized once per product
//
// Activations (Q8KRows): per row K signed bytes in [-127, 127] with one scale per block and the sum of
// the bytes of every group of 16:
//   q8_0 kind, blocks of 32 (for Q4_0, Q4_1, Q5_0, Q8_0): d = f16(max|x| / 127), q = round(x / d)
//   q8_k kind, blocks of 256 (for Q4_K, Q5_K, Q6_K):       d = max|x| / 127 (f32), q = round(x / d)
// A weight block's quants are unsigned (Q4_0 q in [0, 15], value d·(q - 8); Q4_1 q in [0, 15], value
// d·q + m; Q5_0 q in [0, 31], value d·(q - 16); Q4_K q in [0, 15], value d·sc·q - dmin·m; Q6_K q in
// [0, 63], value d·sc·(q - 32)) or, for Q8_0, signed. The kernels form the exact integer sums Σ q·xq
// per group of 16 or 32 (AVX-512 VNNI vpdpbusd, unsigned × signed, or AVX2 vpmaddubsw + vpmaddwd; Q8_0
// takes |w| and x·sign(w)), remove the offset (8, 16, 32) or the minimum through the activation group
// sums, and scale in f32. ref::q8k_dot_rows is the oracle:
// the same integer sums, the scaling in double.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cpu/kquant.h"

namespace attn::kernels {

enum class Q8Kind { q8_0, q8_k };
// The activation kind a weight format multiplies with (q8_0 for Q5_0 / Q8_0, q8_k for the K-quants).
Q8Kind q8k_kind_for(KFormat f);
// Elements per activation scale: 32 or 256.
int64_t q8k_block(Q8Kind k);
// True for the weight formats these kernels take: Q4_0, Q4_1, Q5_0, Q8_0, Q4_K, Q5_K, Q6_K.
bool q8k_supported(KFormat f);

// M rows of K quantized activations: q [M, ldq], d [M, ldd] (one per block), bsum [M, ldb] (one per 16).
struct Q8KRows {
  Q8Kind kind = Q8Kind::q8_0;
  int64_t M = 0, K = 0;
  const int8_t* q = nullptr;
  const float* d = nullptr;
  const int32_t* bsum = nullptr;
  int64_t ldq = 0, ldd = 0, ldb = 0;
};

namespace detail {
// One weight row as stored integers q[K] and per-group-of-16 coefficients: the row's value at k is
// sw[k/16]·q[k] - tw[k/16] (so the product with x is Σ_g dx_g·(sw_g·Σ q·xq - tw_g·Σ xq)). Q8_0 gives
// the signed quants, the others the unsigned ones with the offset in tw.
void q8k_unpack_int(KFormat f, const std::byte* row, int64_t K, int32_t* q, double* sw, double* tw);
}  // namespace detail

namespace cpu {
// x [M, K] (row stride ldx) -> q [M, K], d [M, K / block], bsum [M, K / 16]; K a positive multiple of
// the block. AVX-512 when active (the rounding is std::round's on every ISA), else portable code.
void q8k_quantize(Q8Kind kind, const float* x, int64_t M, int64_t K, int64_t ldx, int8_t* q, float* d,
                  int32_t* bsum);
// Rows [n0, n1) of Y (columns n0..n1-1), single-threaded: AVX-512 VNNI when the active ISA is avx512 and
// the CPU has VNNI, AVX2 when avx2 (or avx512 without VNNI), else the oracle. x.kind must be
// q8k_kind_for(f) and x.K == K. accumulate: y += the product, else y = it.
void q8k_dot_rows(KFormat f, const std::byte* w, int64_t n0, int64_t n1, int64_t K, const Q8KRows& x,
                  float* y, int64_t ldy, bool accumulate);
// True when q8k_dot_rows runs a vector kernel (avx2 or better active).
bool q8k_fast();
// The rows rows[0..count) of W against one activation row (x.M == 1): y[rows[i]] = the product, the
// value q8k_dot_rows(f, w, n, n + 1, ...) gives for row n on this ISA (the same row kernel), each
// row's bytes prefetched a few rows ahead (g19b: the exact logits of GreedyScreen's candidates).
void q8k_dot_row_list(KFormat f, const std::byte* w, const int64_t* rows, int64_t count, int64_t K,
                      const Q8KRows& x, float* y);

namespace detail {
// Σ over R <= 4 activation rows m0.. of one weight row: out[r]. f supported, K a multiple of 256 for
// the K-quants, 32 otherwise.
void q8k_row_avx2(KFormat f, const std::byte* row, int64_t K, const Q8KRows& x, int64_t m0, int R,
                  float* out);
void q8k_row_vnni(KFormat f, const std::byte* row, int64_t K, const Q8KRows& x, int64_t m0, int R,
                  float* out);
// Rows [n0, n1) of W (row stride rb) against the single activation row of x (x.M == 1): y[n] (+)=.
void q8k_rows_m1_avx2(KFormat f, const std::byte* w, int64_t rb, int64_t n0, int64_t n1, int64_t K,
                      const Q8KRows& x, float* y, bool accumulate);
// q8k_quantize on AVX-512 (the same values bit for bit); false when a value is not finite.
bool q8k_quantize_avx512(Q8Kind kind, const float* x, int64_t M, int64_t K, int64_t ldx, int8_t* q, float* d,
                         int32_t* bsum);
void q8k_rows_m1_vnni(KFormat f, const std::byte* w, int64_t rb, int64_t n0, int64_t n1, int64_t K,
                      const Q8KRows& x, float* y, bool accumulate);
void q8k_row_list_avx2(KFormat f, const std::byte* w, int64_t rb, const int64_t* rows, int64_t count,
                       int64_t K, const Q8KRows& x, float* y);
void q8k_row_list_vnni(KFormat f, const std::byte* w, int64_t rb, const int64_t* rows, int64_t count,
                       int64_t K, const Q8KRows& x, float* y);
}  // namespace detail
}  // namespace cpu

namespace ref {
// The oracle: exact integer sums per group of 16, scales and offsets applied in double.
void q8k_dot_rows(KFormat f, const std::byte* w, int64_t n0, int64_t n1, int64_t K, const Q8KRows& x,
                  float* y, int64_t ldy, bool accumulate);
}  // namespace ref
}  // namespace attn::kernels
