// Matrix products with a weight matrix kept in a ggml block-quantized format.
//
//   Y[m, n] = sum_k X[m, k] · W[n, k]        X f32 [M, K] (row stride ldx), Y f32 [M, N] (row stride ldy)
//
// W is N rows of K / 32 blocks, each row contiguous (the layout of a GGUF
// tensor of shape [N, K]). Block formats (32 elements; d, m IEEE halves):
//   Q4_1 (20 bytes): d, m, u8 qs[16];  w[i] = d·lo(qs[i]) + m,  w[i+16] = d·hi(qs[i]) + m
//   Q8_0 (34 bytes): d, i8 q[32];      w[i] = d·q[i]
// The weights are never expanded to memory: each block is unpacked in
// registers and used for a tile of up to kQTileRows rows of X, so decoding
// (M = 1) reads every weight byte once and prefill reads it once per tile.
// Activations stay f32 (no activation quantization).
#pragma once

#include <cstddef>
#include <cstdint>

namespace attn::kernels {

enum class QFormat { q4_1, q8_0 };

inline constexpr int64_t kQBlock = 32;
inline constexpr int64_t qformat_block_bytes(QFormat f) { return f == QFormat::q4_1 ? 20 : 34; }
inline constexpr int64_t kQTileRows = 8;

namespace ref {
// The oracle: each weight dequantized exactly (d, m widened to double), products summed in double.
// w: [N, K / 32 blocks], x: [M, K], y: [M, N]
void qmatmul(QFormat f, const std::byte* w, int64_t N, int64_t K, const float* x, int64_t M, int64_t ldx,
             float* y, int64_t ldy);
}  // namespace ref

namespace cpu {
// Rows [n0, n1) of W only, single-threaded, on the active ISA (AVX-512 when
// available, else a portable scalar loop in float). K must be a multiple of 32.
// w: [N, K / 32 blocks], x: [M, K], y: [M, N]
void qmatmul_rows(QFormat f, const std::byte* w, int64_t n0, int64_t n1, int64_t K, const float* x, int64_t M,
                  int64_t ldx, float* y, int64_t ldy);
// The whole product, rows of W split over attn's thread pool.
void qmatmul(QFormat f, const std::byte* w, int64_t N, int64_t K, const float* x, int64_t M, int64_t ldx,
             float* y, int64_t ldy);

namespace detail {
void qmatmul_rows_scalar(QFormat f, const std::byte* w, int64_t n0, int64_t n1, int64_t K, const float* x,
                         int64_t M, int64_t ldx, float* y, int64_t ldy);
void qmatmul_rows_avx512(QFormat f, const std::byte* w, int64_t n0, int64_t n1, int64_t K, const float* x,
                         int64_t M, int64_t ldx, float* y, int64_t ldy);
}  // namespace detail
}  // namespace cpu
}  // namespace attn::kernels
