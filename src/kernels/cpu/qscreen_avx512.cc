// kernels/cpu/qscreen.h with AVX-512 VNNI: a pair of blocks (64 weights) per 512-bit step: the nibbles
// unpacked in one register, the fifth bits added as 16 under a byte mask, one vpdpbusd against the
// reordered activations, the pair's two scales spread to their lanes by one permute.
#pragma GCC push_options
#pragma GCC target("avx512vnni")
#include <immintrin.h>

#include <cmath>
#include <cstring>

#include "kernels/cpu/qscreen.h"

namespace attn::kernels::cpu::detail {

namespace {
// One pair (blocks 2p, 2p+1 of the row) into acc: the nibbles broadcast to both halves and the upper half
// shifted by 4 (vpsrlvw), the fifth bits added as 16 under a byte mask loaded straight from memory.
inline __m512 pair_step(const std::byte* row, const std::byte* bits, int64_t p, const int8_t* xq, __m512 c,
                        __m512i idx, __m512 acc) {
  const __m512i lo4 = _mm512_set1_epi8(0x0f), b16 = _mm512_set1_epi8(0x10);
  const __m512i sh = _mm512_setr_epi64(0, 0, 0, 0, 0x0004000400040004LL, 0x0004000400040004LL,
                                       0x0004000400040004LL, 0x0004000400040004LL);
  __m512i z = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 32 * p)));
  z = _mm512_and_si512(_mm512_srlv_epi16(z, sh), lo4);
  z = _mm512_mask_add_epi8(
      z, _load_mask64(reinterpret_cast<__mmask64*>(const_cast<std::byte*>(bits + 8 * p))), z, b16);
  const __m512i is = _mm512_dpbusd_epi32(_mm512_setzero_si512(), z,
                                         _mm512_loadu_si512(reinterpret_cast<const void*>(xq + 64 * p)));
  return _mm512_fmadd_ps(_mm512_cvtepi32_ps(is), _mm512_permutexvar_ps(idx, c), acc);
}
}  // namespace

bool qscreen_build_avx512(const std::byte* w, int64_t n0, int64_t n1, int64_t K, const int32_t* cols,
                          std::byte* screen) {
  const int64_t nb = K / 32, rb = qscreen_row_bytes(K);
  alignas(64) uint8_t u[4096];
  const __m512 half = _mm512_set1_ps(0.5f), sign = _mm512_set1_ps(-0.0f);
  const __m512i i16 = _mm512_set1_epi32(16), i0 = _mm512_setzero_si512(), i31 = _mm512_set1_epi32(31);
  for (int64_t n = n0; n < n1; ++n) {
    std::byte* row = screen + n * rb;
    for (int64_t b = 0; b < nb; ++b) {
      const std::byte* src = w + (n * nb + b) * 34;
      uint16_t dh;
      std::memcpy(&dh, src, 2);
      const float dw = _cvtsh_ss(dh);
      if (!(std::fabs(dw) <= 3.4028235e38f)) return false;
      // v = dw · q (exact), as the portable loop
      __m512 v[2];
      for (int h = 0; h < 2; ++h)
        v[h] = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(
                                 _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 2 + 16 * h)))),
                             _mm512_set1_ps(dw));
      const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(v[0]), _mm512_abs_ps(v[1])));
      uint16_t sh = 0;
      float s = 0;
      if (amax > 0) {
        sh = qscreen_f16_at_least(static_cast<double>(amax) / 15.5);
        s = _cvtsh_ss(sh);
        if (!(s <= 3.4028235e38f)) return false;
      }
      const __m512 inv = _mm512_set1_ps(s > 0 ? 1.0f / s : 0.0f);
      for (int h = 0; h < 2; ++h) {
        const __m512 r = _mm512_mul_ps(v[h], inv);
        // r + (r >= 0 ? 0.5 : -0.5), truncated: -0.0 takes -0.5 here and +0.5 there, both truncate to 0
        const __m512 rr = _mm512_add_ps(r, _mm512_or_ps(half, _mm512_and_ps(r, sign)));
        __m512i q = _mm512_add_epi32(_mm512_cvttps_epi32(rr), i16);
        q = _mm512_min_epi32(_mm512_max_epi32(q, i0), i31);
        _mm_storeu_si128(reinterpret_cast<__m128i*>(u + 32 * b + 16 * h), _mm512_cvtepi32_epi8(q));
      }
      std::memcpy(row + 20 * nb + 2 * b, &sh, 2);
    }
    for (int64_t p = 0; p < nb / 2; ++p) {
      // the pair's unpacked order: 16-byte chunks 0, 2, 1, 3 of its 64 element-ordered bytes
      const __m512i e = _mm512_loadu_si512(reinterpret_cast<const void*>(u + 64 * p));
      const __m512i P = _mm512_shuffle_i64x2(e, e, 0xd8);
      const __mmask64 bits = _mm512_test_epi8_mask(P, _mm512_set1_epi8(0x10));
      std::memcpy(row + 16 * nb + 8 * p, &bits, 8);
      const __m256i lo = _mm256_and_si256(_mm512_castsi512_si256(P), _mm256_set1_epi8(0x0f));
      const __m256i hi = _mm256_and_si256(_mm512_extracti64x4_epi64(P, 1), _mm256_set1_epi8(0x0f));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(row + 32 * p),
                          _mm256_or_si256(lo, _mm256_slli_epi16(hi, 4)));
    }
    if (!qscreen_outliers(w, n, K, cols, u, row)) return false;
  }
  return true;
}

void qscreen_rows_vnni(const std::byte* screen, int64_t n0, int64_t n1, const ScreenX& x, float* value,
                       float* bound) {
  const int64_t nb = x.K / 32, rb = qscreen_row_bytes(x.K);
  // lanes of pair pp (blocks 2pp, 2pp+1 of a chunk of 16): [2pp x4, 2pp+1 x4, 2pp x4, 2pp+1 x4]
  __m512i idx[8];
  for (int pp = 0; pp < 8; ++pp) {
    const int a = 2 * pp, b = 2 * pp + 1;
    idx[pp] = _mm512_setr_epi32(a, a, a, a, b, b, b, b, a, a, a, a, b, b, b, b);
  }
  const __m512 xo = _mm512_loadu_ps(x.xo);
  auto one_row = [&](int64_t n, __m512* vacc, __m512* vbnd) {
    const std::byte* row = screen + n * rb;
    const std::byte* bits = row + 16 * nb;
    const std::byte* sc = row + 20 * nb;
    const std::byte* corr = row + 22 * nb;
    __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps(), vb = _mm512_setzero_ps();
    for (int64_t c0 = 0; c0 < nb; c0 += 16) {
      const int m = static_cast<int>(nb - c0 < 16 ? nb - c0 : 16);
      const __mmask16 mk = static_cast<__mmask16>((1u << m) - 1);
      const __m512 s = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(mk, sc + 2 * c0));
      const __m512 c = _mm512_mul_ps(s, _mm512_maskz_loadu_ps(mk, x.d + c0));
      acc1 = _mm512_fmadd_ps(s, _mm512_maskz_loadu_ps(mk, x.g + c0), acc1);
      vb = _mm512_fmadd_ps(s, _mm512_maskz_loadu_ps(mk, x.hb + c0), vb);
      const int64_t p0 = c0 / 2;
      int pp = 0;
      for (; pp + 2 <= m / 2; pp += 2) {
        acc0 = pair_step(row, bits, p0 + pp, x.xq, c, idx[pp], acc0);
        acc1 = pair_step(row, bits, p0 + pp + 1, x.xq, c, idx[pp + 1], acc1);
      }
      if (pp < m / 2) acc0 = pair_step(row, bits, p0 + pp, x.xq, c, idx[pp], acc0);
    }
    uint16_t th;
    std::memcpy(&th, corr + kScreenOutliers, 2);
    const __m512 t = _mm512_set1_ps(_cvtsh_ss(th));
    const __m512 cj =
        _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(corr))));
    acc0 = _mm512_fmadd_ps(cj, _mm512_mul_ps(t, xo), acc0);
    *vacc = _mm512_add_ps(acc0, acc1);
    // bound lanes: the block part, and t·ho in lane 0
    *vbnd = _mm512_mask_mov_ps(vb, 1, _mm512_add_ps(vb, _mm512_mul_ps(t, _mm512_set1_ps(x.ho))));
  };
  int64_t n = n0;
  for (; n + 2 <= n1; n += 2) {  // two rows at a time: independent chains, one reduction of four vectors
    __m512 a0, b0, a1, b1;
    one_row(n, &a0, &b0);
    one_row(n + 1, &a1, &b1);
    // lanes: [a0 | b0 | a1 | b1] summed to 4 values with 256/128-bit folds
    const __m512 ab0 = _mm512_add_ps(_mm512_shuffle_f32x4(a0, b0, 0x44), _mm512_shuffle_f32x4(a0, b0, 0xee));
    const __m512 ab1 = _mm512_add_ps(_mm512_shuffle_f32x4(a1, b1, 0x44), _mm512_shuffle_f32x4(a1, b1, 0xee));
    // ab0 = [a0 (8 lanes) | b0 (8 lanes)] partial sums; the same for ab1
    const __m512 q =
        _mm512_add_ps(_mm512_shuffle_f32x4(ab0, ab1, 0x88), _mm512_shuffle_f32x4(ab0, ab1, 0xdd));
    // q = [a0 4 | b0 4 | a1 4 | b1 4]
    alignas(64) float o[16];
    _mm512_store_ps(o, q);
    value[n] = (o[0] + o[1]) + (o[2] + o[3]);
    bound[n] = (o[4] + o[5]) + (o[6] + o[7]);
    value[n + 1] = (o[8] + o[9]) + (o[10] + o[11]);
    bound[n + 1] = (o[12] + o[13]) + (o[14] + o[15]);
  }
  for (; n < n1; ++n) {
    __m512 a0, b0;
    one_row(n, &a0, &b0);
    value[n] = _mm512_reduce_add_ps(a0);
    bound[n] = _mm512_reduce_add_ps(b0);
  }
}
}  // namespace attn::kernels::cpu::detail
#pragma GCC pop_options
