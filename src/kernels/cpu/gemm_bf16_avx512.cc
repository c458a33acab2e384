// sgemm_bf16's AVX-512 building blocks: packing with bf16 rounding in integer lanes (the
// same round-to-nearest-even and NaN rule as attn::bf16, so denormals are rounded too) and
// the 12×32 register block on vdpbf16ps with the A pair broadcast from memory.
// GCC 12 reports the intrinsics' deliberately undefined pass-through operands as maybe-uninitialized.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include "kernels/cpu/gemm_bf16_kernels.h"
#include "kernels/cpu/vec_avx512.h"

namespace attn::kernels::cpu::detail {
namespace {

#define ATTN_INLINE inline __attribute__((always_inline))

// 16 fp32 (as bits) → 16 uint32 whose upper halves are the bf16 values.
ATTN_INLINE __m512i round_bf16(__m512i u) {
  const __m512i abs = _mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff));
  const __mmask16 nan = _mm512_cmpgt_epi32_mask(abs, _mm512_set1_epi32(0x7f800000));
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  const __m512i r = _mm512_add_epi32(u, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff)));
  return _mm512_mask_mov_epi32(r, nan, _mm512_or_si512(u, _mm512_set1_epi32(0x00400000)));
}

using avx512::tail_mask;

// Pairs of two k-rows: lane c of the result is bf16(lo[c]) | bf16(hi[c]) << 16.
ATTN_INLINE __m512i pair_rows(__m512i lo, __m512i hi) {
  return _mm512_or_si512(_mm512_srli_epi32(round_bf16(lo), 16),
                         _mm512_and_si512(round_bf16(hi), _mm512_set1_epi32(int(0xffff0000u))));
}

// Panels in a row: for each pair of k-rows, every panel takes its W columns of the two rows,
// so the rows are read once, front to back (panel by panel would revisit them at a large stride).
void pack_rows(const float* src, int64_t ld, int kc, int w, int W, uint32_t* out) {
  const int kp = (kc + 1) / 2, npanels = (w + W - 1) / W;
  constexpr int kAhead = 4;  // pairs of rows fetched ahead (they are a large stride apart)
  for (int p = 0; p < kp; ++p) {
    const float* r0 = src + int64_t{2 * p} * ld;
    const bool has_hi = 2 * p + 1 < kc;
    if (2 * (p + kAhead) + 1 < kc) {
      const float* f = r0 + int64_t{2 * kAhead} * ld;
      for (int c = 0; c < w; c += 16) {
        _mm_prefetch(reinterpret_cast<const char*>(f + c), _MM_HINT_T0);
        _mm_prefetch(reinterpret_cast<const char*>(f + ld + c), _MM_HINT_T0);
      }
    }
    for (int q = 0; q < npanels; ++q) {
      const int c0 = q * W;
      uint32_t* o = out + (int64_t{q} * kp + p) * W;
      for (int c = 0; c < W; c += 16) {
        const __mmask16 m = tail_mask(w - c0 - c);
        const __m512i lo = _mm512_maskz_loadu_epi32(m, r0 + c0 + c);
        const __m512i hi = has_hi ? _mm512_maskz_loadu_epi32(m, r0 + ld + c0 + c) : _mm512_setzero_si512();
        _mm512_mask_storeu_epi32(o + c, tail_mask(W - c), pair_rows(lo, hi));
      }
    }
  }
}

// Columns contiguous over k: 32 values of k of one column become its 16 pairs (the upper halves
// of the rounded values, in order), 16 columns at a time (12 for 12-wide panels) are transposed
// in registers and stored as rows of pairs.
void pack_cols(const float* src, int64_t ld, int kc, int w, int W, uint32_t* out) {
  const int kp = (kc + 1) / 2, npanels = (w + W - 1) / W, G = W < 16 ? W : 16;
  const __mmask16 store = tail_mask(G);
  // Word 2i + 1 of (lo, hi): the bf16 halves of 32 rounded values, in order.
  alignas(64) static constexpr int16_t kOdd[32] = {1,  3,  5,  7,  9,  11, 13, 15, 17, 19, 21,
                                                   23, 25, 27, 29, 31, 33, 35, 37, 39, 41, 43,
                                                   45, 47, 49, 51, 53, 55, 57, 59, 61, 63};
  const __m512i odd = _mm512_load_si512(kOdd);
  for (int c0 = 0; c0 < npanels * W; c0 += G) {
    uint32_t* o = out + int64_t{c0 / W} * kp * W + c0 % W;
    for (int k0 = 0; k0 < kc; k0 += 32) {
      const __mmask16 m0 = tail_mask(kc - k0), m1 = tail_mask(kc - k0 - 16);
      __m512i r[16];
#pragma GCC unroll 16
      for (int i = 0; i < 16; ++i) {
        if (i < G && c0 + i < w) {
          const float* col = src + int64_t{c0 + i} * ld + k0;
          const __m512i lo = round_bf16(_mm512_maskz_loadu_epi32(m0, col));
          const __m512i hi = round_bf16(_mm512_maskz_loadu_epi32(m1, col + 16));
          r[i] = _mm512_permutex2var_epi16(lo, odd, hi);
        } else {
          r[i] = _mm512_setzero_si512();
        }
      }
      avx512::transpose16(r);
      const int p0 = k0 / 2, np = kp - p0 < 16 ? kp - p0 : 16;
      for (int t = 0; t < np; ++t) _mm512_mask_storeu_epi32(o + int64_t{p0 + t} * W, store, r[t]);
    }
  }
}

void block(int kp, const uint32_t* a, const uint32_t* b, float* c, int64_t ldc, int m, int n, float alpha,
           float beta) {
  constexpr int R = kBf16Mr;
  __m512 acc[R][2];
#pragma GCC unroll 12
  for (int r = 0; r < R; ++r) {
    acc[r][0] = acc[r][1] = _mm512_setzero_ps();
    // C is read (beta != 0) or written after the k loop: start fetching it now, so that the
    // loop hides the misses (C tiles of later k blocks come from far away).
    if (r < m) {
      _mm_prefetch(reinterpret_cast<const char*>(c + r * ldc), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(c + r * ldc + 31), _MM_HINT_T0);
    }
  }
  for (int p = 0; p < kp; ++p) {
    const __m512bh b0 = (__m512bh)_mm512_load_si512(b);
    const __m512bh b1 = (__m512bh)_mm512_load_si512(b + 16);
    _mm_prefetch(reinterpret_cast<const char*>(b + 8 * 32), _MM_HINT_T0);
#pragma GCC unroll 12
    for (int r = 0; r < R; ++r) {
      const __m512bh ar = (__m512bh)_mm512_set1_epi32(static_cast<int>(a[r]));
      acc[r][0] = _mm512_dpbf16_ps(acc[r][0], b0, ar);
      acc[r][1] = _mm512_dpbf16_ps(acc[r][1], b1, ar);
    }
    a += R;
    b += 32;
  }
  const __mmask16 m0 = tail_mask(n), m1 = tail_mask(n - 16);
  const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
#pragma GCC unroll 12
  for (int r = 0; r < R; ++r) {
    if (r >= m) break;
    float* row = c + r * ldc;
    __m512 v0 = _mm512_mul_ps(acc[r][0], va), v1 = _mm512_mul_ps(acc[r][1], va);
    if (beta != 0) {
      v0 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m0, row), vb, v0);
      v1 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m1, row + 16), vb, v1);
    }
    _mm512_mask_storeu_ps(row, m0, v0);
    _mm512_mask_storeu_ps(row + 16, m1, v1);
  }
}

constexpr Bf16GemmKernels kKernels{pack_rows, pack_cols, block};

#undef ATTN_INLINE

}  // namespace

const Bf16GemmKernels& bf16_gemm_avx512_kernels() { return kKernels; }

}  // namespace attn::kernels::cpu::detail
#pragma GCC diagnostic pop
