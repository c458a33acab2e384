// Integer dot products of block-quantized weights with 8-bit quantized activations, the way
// llama.cpp's CPU backend multiplies at batch 1: the activation row is quantized once per product
// to 8-bit blocks, and each weight block's 32 products are summed exactly in int32 (AVX512-VNNI
// vpdpbusd: one 512-bit instruction per pair of blocks) before one float scale per block.
//
// Activations (Q8 row, per block b of 32 values x[32b .. 32b+31]):
//   d[b] = f16(max|x| / 127)           (0 for an all-zero block)
//   q[i] = round_even(x[i] · 127 / max|x|)  in [-127, 127]
//   sum[b] = Σ q                        (exact, stored as float)
//   s[b]   = f16(d_unrounded · sum[b])  (ggml's Q8_1 "s", used against Q4_1's offset m)
// Weights are repacked once (at model load) from the GGUF blocks into a row layout made for these
// kernels: the f16 scales of a row first, then the quants, blocks in pairs (A, B):
//   Q4_1 row: f16 d[nbp], f16 m[nbp], then per pair 32 bytes: byte j = wA[j] | wB[j] << 4
//             (wX[j] the 4-bit quant of element j of block X)
//   Q8_0 row: f16 d[nbp], then per block 32 bytes: q[j] + 128 as u8 (vpdpbusd multiplies u8 · s8; the
//             +128 is taken out again with 128 · sum[b])
// nbp = nb rounded up to even; a padding block has d = m = 0 and zero quants.
// The products, with dw, mw the weight block's scale and offset:
//   Q4_1: y = Σ_b dw·d[b]·Σ_i wq[i]·q[i] + mw·s[b]
//   Q8_0: y = Σ_b dw·d[b]·Σ_i wq[i]·q[i]
#pragma once

#include <attn/core/f16.h>

#include <cstddef>
#include <cstdint>

#include "kernels/cpu/qmatmul.h"

namespace attn::kernels {

inline constexpr int64_t q8_padded_blocks(int64_t K) { return (K / kQBlock + 1) / 2 * 2; }
// Bytes of one repacked weight row of K elements.
inline constexpr int64_t qdot_row_bytes(QFormat f, int64_t K) {
  return q8_padded_blocks(K) * qformat_block_bytes(f);
}

// One or more quantized activation rows: row m at q + m·ldq (ldq >= 32·nbp, the padding zero) and
// d/s/sum + m·ldb (ldb >= nbp).
struct Q8Rows {
  int8_t* q;   // [M, ldq]
  float* d;    // [M, ldb]
  float* s;    // [M, ldb]
  float* sum;  // [M, ldb]
  int64_t ldq, ldb;
};
struct Q8RowsConst {
  const int8_t* q;
  const float* d;
  const float* s;
  const float* sum;
  int64_t ldq, ldb;
  Q8RowsConst(const Q8Rows& r) : q(r.q), d(r.d), s(r.s), sum(r.sum), ldq(r.ldq), ldb(r.ldb) {}  // NOLINT
  Q8RowsConst(const int8_t* q_, const float* d_, const float* s_, const float* sum_, int64_t ldq_,
              int64_t ldb_)
      : q(q_), d(d_), s(s_), sum(sum_), ldq(ldq_), ldb(ldb_) {}
};

// Repacks N GGUF rows (w: [N, K / 32 blocks], K a multiple of 32) into out: [N, qdot_row_bytes(f, K)].
void qdot_pack(QFormat f, const std::byte* w, int64_t N, int64_t K, std::byte* out);
// Back to f32 (the values ggml's dequantize gives), for tests: w: packed [N, ...] → out [N, K].
void qdot_unpack(QFormat f, const std::byte* packed, int64_t N, int64_t K, float* out);

namespace ref {
// The oracle: products of the packed weights and the quantized rows in double (the integer sums
// are exact). packed: [N, row bytes], y: [M, N] (row stride ldy).
void qdot_matmul(QFormat f, const std::byte* packed, int64_t N, int64_t K, Q8RowsConst x, int64_t M, float* y,
                 int64_t ldy);
}  // namespace ref

namespace cpu {
// True when the AVX512-VNNI kernels run (the active ISA is avx512 and the CPU has avx512_vnni).
bool qdot_vnni_active();
// Which products run: the VNNI kernel, the AVX2 one (vpmaddubsw; also on AVX-512 CPUs without VNNI),
// or the portable loops.
enum class QdotKernel { scalar, avx2, vnni };
QdotKernel qdot_kernel();

// Quantizes M rows x: [M, ldx] of K values (K a multiple of 32) into out (padding zeroed).
void quantize_q8(const float* x, int64_t M, int64_t K, int64_t ldx, Q8Rows out);

// Rows [n0, n1) of the product, single-threaded: y[m, n] = (accumulate ? y[m, n] : 0) + Σ w·x.
// packed: [N, qdot_row_bytes(f, K)], x: M quantized rows of K, y: [M, ldy]
void qdot_rows(QFormat f, const std::byte* packed, int64_t n0, int64_t n1, int64_t K, Q8RowsConst x,
               int64_t M, float* y, int64_t ldy, bool accumulate);
// The whole product, rows split over attn's thread pool.
void qdot_matmul(QFormat f, const std::byte* packed, int64_t N, int64_t K, Q8RowsConst x, int64_t M, float* y,
                 int64_t ldy, bool accumulate);

namespace detail {
void quantize_q8_scalar(const float* x, int64_t K, int8_t* q, float* d, float* s, float* sum);
void quantize_q8_avx512(const float* x, int64_t K, int8_t* q, float* d, float* s, float* sum);
void quantize_q8_avx2(const float* x, int64_t K, int8_t* q, float* d, float* s, float* sum);
void qdot_rows_scalar(QFormat f, const std::byte* packed, int64_t n0, int64_t n1, int64_t K, Q8RowsConst x,
                      int64_t M, float* y, int64_t ldy, bool accumulate);
void qdot_rows_vnni(QFormat f, const std::byte* packed, int64_t n0, int64_t n1, int64_t K, Q8RowsConst x,
                    int64_t M, float* y, int64_t ldy, bool accumulate);
void qdot_rows_avx2(QFormat f, const std::byte* packed, int64_t n0, int64_t n1, int64_t K, Q8RowsConst x,
                    int64_t M, float* y, int64_t ldy, bool accumulate);
// The kernel's rows, chosen by qdot_kernel().
void qdot_rows_with(QdotKernel k, QFormat f, const std::byte* packed, int64_t n0, int64_t n1, int64_t K,
                    Q8RowsConst x, int64_t M, float* y, int64_t ldy, bool accumulate);
}  // namespace detail
}  // namespace cpu
}  // namespace attn::kernels
