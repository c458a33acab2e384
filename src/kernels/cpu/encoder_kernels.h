// Fused row kernels of Transformer-encoder inference (BERT: src/models/bert.cc, through the entry
// points of include/attn/ops/inference.h and linear.h).
// Raw contiguous fp32 pointers; each call splits rows over attn::parallel_for and
// picks the AVX-512 version when active_isa() allows it, else the scalar one (add_bias,
// bias_gelu, residual_layer_norm and encoder_attention have an AVX2 version too; the small-M
// linears do not).
// The scalar versions read like the formula and are the oracle of the tests
// (tests/kernels/encoder_kernels_test.cc compares both against double).
#pragma once

#include <cstdint>

namespace attn::kernels::cpu {

// x: [rows, C] in place; bias: [C].   x = x + bias
void add_bias(float* x, const float* bias, int64_t rows, int64_t C);

// x: [rows, C] in place; bias: [C] or null.   x = gelu(x + bias), the exact (erf) form:
// gelu(u) = 0.5 u (1 + erf(u / √2)). The AVX-512 erf has absolute error < 2e-7.
void bias_gelu(float* x, const float* bias, int64_t rows, int64_t C);

// h: [rows, C] in place (the residual stream); y: [rows, C] or null; bias, w, b: [C] (bias may be null).
//   h = LayerNorm(h + y + bias) · w + b   (biased variance, eps inside the square root)
void residual_layer_norm(float* h, const float* y, const float* bias, const float* w, const float* b,
                         int64_t rows, int64_t C, float eps);

// Small-M linear layer, for short inputs where BLAS spends most of its time packing the
// weight matrix: y = x · wt + bias with the weight stored transposed (wt: [K, N], the
// layout BLAS's NN product reads too), so no copy of the weights is ever made.
//   x: [M, K] (row stride ldx), wt: [K, N], bias: [N] or null, y: [M, N] (row stride ldy).
// Threads split the columns into 32-wide panels; each panel of wt is streamed once per 12 rows.
void linear_small_m(const float* x, int64_t ldx, const float* wt, const float* bias, float* y, int64_t ldy,
                    int64_t M, int64_t N, int64_t K);
// The same product with the weight in nn::Linear's layout, read in place: y = x · wᵀ + bias.
//   x: [M, K] (row stride ldx), w: [N, K] contiguous, bias: [N] or null, y: [M, N] (row stride ldy).
// Threads split the weight rows into 32-row panels; each output is a K-long dot product
// (6 rows of x x 4 rows of w per register block). Used by ops::linear in inference mode.
void linear_small_m_nt(const float* x, int64_t ldx, const float* w, const float* bias, float* y, int64_t ldy,
                       int64_t M, int64_t N, int64_t K);
// True when linear_small_m / linear_small_m_nt have a vectorised body on this CPU (else it runs the scalar
// loop, and callers should prefer BLAS).
bool linear_small_m_fast();

// Self-attention of a BERT layer read straight from the fused QKV projection and written with the
// heads merged, so no head split or merge copies are made. For each sequence b, head h and row i < L:
//   ctx[b, i, h, :] = Σ_{j < len_b} softmax_j(scale · q_i · k_j) · v_j
// with q_i = qkv[b, i, 0, h, :], k_j = qkv[b, j, 1, h, :], v_j = qkv[b, j, 2, h, :]: keys past the
// sequence's length (padding) are masked; padding query rows are computed like real ones.
//   qkv: [B, L, 3, H, D] contiguous, lengths: [B] each in [1, L], ctx: [B, L, H, D] contiguous.
// Threads split the B · H (sequence, head) pairs. Callers check encoder_attention_fast(D) first and
// otherwise use attn::attention (the scalar body is the test oracle, not a fast path).
// queries in [1, L] (-1: L): only rows i < queries of each sequence are computed and written (a model
// that reads only the first token's output of its last layer); each row's arithmetic is the same for any
// count, so those rows carry the same bits as a full call's.
void encoder_attention(const float* qkv, const int64_t* lengths, float* ctx, int64_t B, int64_t L, int64_t H,
                       int64_t D, float scale, int64_t queries = -1);
// True when encoder_attention has a vectorised body for head size D on this CPU (AVX-512 with D a
// multiple of 16, AVX2 with D a multiple of 8).
bool encoder_attention_fast(int64_t D);

// The per-row-range bodies, for the dispatch and the tests (no threads).
namespace detail {
// Floats of scratch one (sequence, head) pair needs (encoder_attention_*'s `scratch`).
int64_t encoder_attention_scratch(int64_t L, int64_t D);
// The (b, h) pair of encoder_attention, its query rows [0, Lq).
void encoder_attention_scalar(const float* qkv, const int64_t* lengths, float* ctx, int64_t L, int64_t Lq,
                              int64_t H, int64_t D, float scale, int64_t b, int64_t h, float* scratch);
void encoder_attention_avx512(const float* qkv, const int64_t* lengths, float* ctx, int64_t L, int64_t Lq,
                              int64_t H, int64_t D, float scale, int64_t b, int64_t h, float* scratch);
void encoder_attention_avx2(const float* qkv, const int64_t* lengths, float* ctx, int64_t L, int64_t Lq,
                            int64_t H, int64_t D, float scale, int64_t b, int64_t h, float* scratch);
// Columns [n0, n1) of the small-M product.
void linear_small_m_scalar(const float* x, int64_t ldx, const float* wt, const float* bias, float* y,
                           int64_t ldy, int64_t M, int64_t N, int64_t K, int64_t n0, int64_t n1);
void linear_small_m_avx512(const float* x, int64_t ldx, const float* wt, const float* bias, float* y,
                           int64_t ldy, int64_t M, int64_t N, int64_t K, int64_t n0, int64_t n1);
// Weight rows [n0, n1) of the transposed-weight (nn::Linear layout) product.
void linear_small_m_nt_scalar(const float* x, int64_t ldx, const float* w, const float* bias, float* y,
                              int64_t ldy, int64_t M, int64_t K, int64_t n0, int64_t n1);
void linear_small_m_nt_avx512(const float* x, int64_t ldx, const float* w, const float* bias, float* y,
                              int64_t ldy, int64_t M, int64_t K, int64_t n0, int64_t n1);
void add_bias_scalar(float* x, const float* bias, int64_t rows, int64_t C);
void bias_gelu_scalar(float* x, const float* bias, int64_t rows, int64_t C);
void residual_layer_norm_scalar(float* h, const float* y, const float* bias, const float* w, const float* b,
                                int64_t rows, int64_t C, float eps);
void add_bias_avx512(float* x, const float* bias, int64_t rows, int64_t C);
void bias_gelu_avx512(float* x, const float* bias, int64_t rows, int64_t C);
void residual_layer_norm_avx512(float* h, const float* y, const float* bias, const float* w, const float* b,
                                int64_t rows, int64_t C, float eps);
void add_bias_avx2(float* x, const float* bias, int64_t rows, int64_t C);
void bias_gelu_avx2(float* x, const float* bias, int64_t rows, int64_t C);
void residual_layer_norm_avx2(float* h, const float* y, const float* bias, const float* w, const float* b,
                              int64_t rows, int64_t C, float eps);
}  // namespace detail

}  // namespace attn::kernels::cpu
