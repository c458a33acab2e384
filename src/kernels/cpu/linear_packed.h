// Small-M linear from a pre-packed weight, for decoding (models::generate): every step
// multiplies M = batch rows by the same weights, so the weight is copied once into
// 32-column panels and each step streams the panels contiguously (no repacking per call,
// as BLAS does, and no horizontal sums, as the in-place dot-product kernel needs).
//
// Packed layout of a weight w [N, K] (nn::Linear's [out, in]): panel p (columns 32p..32p+31
// of y) is K x 32 floats, packed[p * K * 32 + k * 32 + j] = w[32p + j, k], zero past N.
// Raw pointers; linear_packed splits panels over attn::parallel_for and picks the AVX-512 or the
// AVX2 body as active_isa() allows, else the scalar one (the tests' oracle with double).
#pragma once

#include <cstdint>

namespace attn::kernels::cpu {

constexpr int64_t kPackedPanel = 32;

// Floats of the packed form of a [N, K] weight: ceil(N / 32) * K * 32.
int64_t linear_packed_size(int64_t N, int64_t K);

// w: [N, K] contiguous -> packed: [ceil(N / 32), K, 32].
void pack_linear_weight(const float* w, int64_t N, int64_t K, float* packed);

// The same packed layout from a weight stored transposed, wt: [K, N] contiguous (in -> out, the B of
// an NN product; models/bert.cc packs its projections once at load):
//   packed[p * K * 32 + k * 32 + j] = wt[k, 32p + j], zero past N.
void pack_linear_weight_t(const float* wt, int64_t K, int64_t N, float* packed);
// The inverse: packed -> wt [K, N] with row stride ldw >= N (for products that need the plain layout).
void unpack_linear_weight_t(const float* packed, int64_t K, int64_t N, float* wt, int64_t ldw);

// y = x · wᵀ + bias with w given packed.
//   x: [M, K] (row stride ldx), packed: see above, bias: [N] or null, y: [M, N] (row stride ldy).
// Register block: up to 12 rows x 32 columns of fp32 accumulators; the rows of x are split
// into balanced blocks (32 rows: 11, 11, 10), so a panel is read ceil(M / 12) times.
// same_rows: every row through the multi-row body, so row m's values are the same bits for any M (each
// output a single FMA chain over k from its bias, whatever the row block); false lets one row take the
// faster one-row body (two chains over even and odd k, summed), whose values differ in the last bits.
void linear_packed(const float* x, int64_t ldx, const float* packed, const float* bias, float* y, int64_t ldy,
                   int64_t M, int64_t N, int64_t K, bool same_rows = false);

namespace detail {
// Panels [p0, p1) (no threads), for the dispatch and the tests.
void linear_packed_scalar(const float* x, int64_t ldx, const float* packed, const float* bias, float* y,
                          int64_t ldy, int64_t M, int64_t N, int64_t K, int64_t p0, int64_t p1,
                          bool same_rows = false);
void linear_packed_avx512(const float* x, int64_t ldx, const float* packed, const float* bias, float* y,
                          int64_t ldy, int64_t M, int64_t N, int64_t K, int64_t p0, int64_t p1,
                          bool same_rows = false);
// One full panel of pack_linear_weight: w is the panel's first row (32 rows of K floats, row stride K),
// dst is 64-byte aligned and K a multiple of 16 (16 x 16 transposes, streamed stores).
void pack_panel_avx512(const float* w, int64_t K, float* dst);
void linear_packed_avx2(const float* x, int64_t ldx, const float* packed, const float* bias, float* y,
                        int64_t ldy, int64_t M, int64_t N, int64_t K, int64_t p0, int64_t p1,
                        bool same_rows = false);
}  // namespace detail

}  // namespace attn::kernels::cpu
