// sgemm_bf16's AVX-512 building blocks: packing with bf16 rounding in integer lanes (the
// same round-to-nearest-even and NaN rule as attn::bf16, so denormals are rounded too) and
// the 12×32 register block on vdpbf16ps with the A pair broadcast from memory.
// GCC 12 reports the intrinsics' deliberately undefined pass-through operands as maybe-uninitialized.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include "kernels/cpu/gemm_bf16_kernels.h"

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

ATTN_INLINE __mmask16 first_n(int n) {
  return n >= 16 ? __mmask16(0xffff) : n <= 0 ? __mmask16(0) : __mmask16((1u << n) - 1);
}

// Pairs of two k-rows: lane c of the result is bf16(lo[c]) | bf16(hi[c]) << 16.
ATTN_INLINE __m512i pair_rows(__m512i lo, __m512i hi) {
  return _mm512_or_si512(_mm512_srli_epi32(round_bf16(lo), 16),
                         _mm512_and_si512(round_bf16(hi), _mm512_set1_epi32(int(0xffff0000u))));
}

// Panels in a row: for each pair of k-rows, every panel takes its W columns of the two rows,
// so the rows are read once, front to back (panel by panel would revisit them at a large stride).
void pack_rows(const float* src, int64_t ld, int kc, int w, int W, uint32_t* out) {
  const int kp = (kc + 1) / 2, npanels = (w + W - 1) / W;
  for (int p = 0; p < kp; ++p) {
    const float* r0 = src + int64_t{2 * p} * ld;
    const bool has_hi = 2 * p + 1 < kc;
    for (int q = 0; q < npanels; ++q) {
      const int c0 = q * W;
      uint32_t* o = out + (int64_t{q} * kp + p) * W;
      for (int c = 0; c < W; c += 16) {
        const __mmask16 m = first_n(w - c0 - c);
        const __m512i lo = _mm512_maskz_loadu_epi32(m, r0 + c0 + c);
        const __m512i hi = has_hi ? _mm512_maskz_loadu_epi32(m, r0 + ld + c0 + c) : _mm512_setzero_si512();
        _mm512_mask_storeu_epi32(o + c, first_n(W - c), pair_rows(lo, hi));
      }
    }
  }
}

void pack_cols(const float* src, int64_t ld, int kc, int w, int W, uint32_t* out) {
  const int kp = (kc + 1) / 2, npanels = (w + W - 1) / W;
  alignas(64) uint32_t pairs[8];
  for (int c = 0; c < npanels * W; ++c) {
    uint32_t* o = out + int64_t{c / W} * kp * W + c % W;
    if (c >= w) {
      for (int p = 0; p < kp; ++p) o[int64_t{p} * W] = 0;
      continue;
    }
    const float* col = src + int64_t{c} * ld;
    for (int k = 0; k < kc; k += 16) {
      // 16 values of k → 8 pairs: in each 64-bit lane (x[k], x[k+1]) → bf16 | bf16 << 16.
      const __m512i r = round_bf16(_mm512_maskz_loadu_epi32(first_n(kc - k), col + k));
      const __m512i q =
          _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi64(r, 16), _mm512_set1_epi64(0xffff)),
                          _mm512_and_si512(_mm512_srli_epi64(r, 32), _mm512_set1_epi64(0xffff0000)));
      _mm256_store_si256(reinterpret_cast<__m256i*>(pairs), _mm512_cvtepi64_epi32(q));
      const int p0 = k / 2, np = kp - p0 < 8 ? kp - p0 : 8;
      for (int t = 0; t < np; ++t) o[int64_t{p0 + t} * W] = pairs[t];
    }
  }
}

void block(int kp, const uint32_t* a, const uint32_t* b, float* c, int64_t ldc, int m, int n, float alpha,
           float beta) {
  constexpr int R = kBf16Mr;
  __m512 acc[R][2];
#pragma GCC unroll 12
  for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
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
  const __mmask16 m0 = first_n(n), m1 = first_n(n - 16);
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
