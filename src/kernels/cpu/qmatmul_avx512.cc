// Quantized-weight matrix product, AVX-512: each 32-weight block is unpacked
// once into two 16-lane float vectors (d·q + m in one FMA) and used for a tile
// of up to 8 rows of X, one accumulator vector per row.
// GCC 12 reports the intrinsics' deliberately undefined pass-through operands as maybe-uninitialized.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>

#include "kernels/cpu/qmatmul.h"

namespace attn::kernels::cpu::detail {
namespace {

inline float load_half(const std::byte* p) {
  uint16_t h;
  __builtin_memcpy(&h, p, 2);
  return _cvtsh_ss(h);
}

// The 32 weights of one block as lo (elements 0..15) and hi (16..31).
template <QFormat F>
inline void unpack(const std::byte* blk, __m512& lo, __m512& hi) {
  const __m512 d = _mm512_set1_ps(load_half(blk));
  if constexpr (F == QFormat::q4_1) {
    const __m512 m = _mm512_set1_ps(load_half(blk + 2));
    const __m128i qs = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 4));
    const __m128i mask = _mm_set1_epi8(0x0f);
    const __m128i ql = _mm_and_si128(qs, mask);
    const __m128i qh = _mm_and_si128(_mm_srli_epi16(qs, 4), mask);
    lo = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(ql)), d, m);
    hi = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(qh)), d, m);
  } else {
    const __m128i q0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 2));
    const __m128i q1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 18));
    lo = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q0)), d);
    hi = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q1)), d);
  }
}

// Rows [n0, n1) of W against R rows of X (x points at the first of them).
template <QFormat F, int R>
void tile(const std::byte* w, int64_t n0, int64_t n1, int64_t nb, const float* x, int64_t ldx, float* y,
          int64_t ldy) {
  constexpr int64_t bb = qformat_block_bytes(F);
  for (int64_t n = n0; n < n1; ++n) {
    const std::byte* row = w + n * nb * bb;
    __m512 acc[R];
    for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; ++b) {
      __m512 lo, hi;
      unpack<F>(row + b * bb, lo, hi);
      const float* xb = x + b * kQBlock;
      for (int r = 0; r < R; ++r) {
        acc[r] = _mm512_fmadd_ps(lo, _mm512_loadu_ps(xb + r * ldx), acc[r]);
        acc[r] = _mm512_fmadd_ps(hi, _mm512_loadu_ps(xb + r * ldx + 16), acc[r]);
      }
    }
    for (int r = 0; r < R; ++r) y[r * ldy + n] = _mm512_reduce_add_ps(acc[r]);
  }
}

template <QFormat F>
void rows(const std::byte* w, int64_t n0, int64_t n1, int64_t K, const float* x, int64_t M, int64_t ldx,
          float* y, int64_t ldy) {
  const int64_t nb = K / kQBlock;
  // Rows of X in chunks that stay in L2 while every W row of [n0, n1) passes over them.
  const int64_t chunk = std::max<int64_t>(8, (256 * 1024 / 4) / K / 8 * 8);
  for (int64_t m0 = 0; m0 < M; m0 += chunk) {
    const int64_t m1 = std::min(M, m0 + chunk);
    // Weight rows in groups of 16, so one group's blocks stay in L1 across the row tiles.
    for (int64_t g0 = n0; g0 < n1; g0 += 16) {
      const int64_t g1 = std::min(n1, g0 + 16);
      int64_t m = m0;
      for (; m + kQTileRows <= m1; m += kQTileRows)
        tile<F, kQTileRows>(w, g0, g1, nb, x + m * ldx, ldx, y + m * ldy, ldy);
      const float* xm = x + m * ldx;
      float* ym = y + m * ldy;
      switch (m1 - m) {
        case 7:
          tile<F, 7>(w, g0, g1, nb, xm, ldx, ym, ldy);
          break;
        case 6:
          tile<F, 6>(w, g0, g1, nb, xm, ldx, ym, ldy);
          break;
        case 5:
          tile<F, 5>(w, g0, g1, nb, xm, ldx, ym, ldy);
          break;
        case 4:
          tile<F, 4>(w, g0, g1, nb, xm, ldx, ym, ldy);
          break;
        case 3:
          tile<F, 3>(w, g0, g1, nb, xm, ldx, ym, ldy);
          break;
        case 2:
          tile<F, 2>(w, g0, g1, nb, xm, ldx, ym, ldy);
          break;
        case 1:
          tile<F, 1>(w, g0, g1, nb, xm, ldx, ym, ldy);
          break;
        default:
          break;
      }
    }
  }
}

}  // namespace

void qmatmul_rows_avx512(QFormat f, const std::byte* w, int64_t n0, int64_t n1, int64_t K, const float* x,
                         int64_t M, int64_t ldx, float* y, int64_t ldy) {
  if (f == QFormat::q4_1)
    rows<QFormat::q4_1>(w, n0, n1, K, x, M, ldx, y, ldy);
  else
    rows<QFormat::q8_0>(w, n0, n1, K, x, M, ldx, y, ldy);
}

}  // namespace attn::kernels::cpu::detail

#pragma GCC diagnostic pop
