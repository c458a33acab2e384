// kernels/cpu/qscreen.h with AVX-512 VNNI: a panel of 16 rows at a time, one lane per row: per 8 k one
// 64-byte load of nibbles unpacked into two registers (low, high), the fifth bits added as 16 under byte
// masks, two vpdpbusd against 4 broadcast activation bytes each; per block one scaling FMA for 16 rows.
#pragma GCC push_options
#pragma GCC target("avx512vnni")
// GCC 12 reports the intrinsics' deliberately undefined pass-through operands as (maybe-)uninitialized.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/cpu/qscreen.h"

namespace attn::kernels::cpu::detail {

bool qscreen_build_avx512(const std::byte* w, int64_t n0, int64_t n1, int64_t K, const int32_t* cols,
                          std::byte* screen) {
  const int64_t nb = K / 32;
  alignas(64) uint8_t u[4096];
  uint16_t shs[128];
  int8_t corr[kScreenOutliers];
  const __m512 half = _mm512_set1_ps(0.5f), sign = _mm512_set1_ps(-0.0f);
  const __m512i i16 = _mm512_set1_epi32(16), i0 = _mm512_setzero_si512(), i31 = _mm512_set1_epi32(31);
  for (int64_t n = n0; n < n1; ++n) {
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
      shs[b] = sh;
    }
    uint16_t th;
    if (!qscreen_outliers(w, n, K, cols, u, shs, corr, &th)) return false;
    qscreen_store_row(screen, n, K, u, shs, corr, th);
  }
  return true;
}

namespace {
// R activation rows against one panel (R <= 8): the nibbles and fifth bits unpacked once per 8 k and
// multiplied into R integer sums (two chains per row for R <= 2, added before the conversion: integers
// are exact, so the sum is the same), then the same f32 operations for each row whatever R: every row
// gets the bits it gets alone.
template <int R>
void panel_rows(const std::byte* panel, int64_t nb, const ScreenX* xs, __m512* val, __m512* bnd) {
  const __m512i lo4 = _mm512_set1_epi8(0x0f), b16 = _mm512_set1_epi8(0x10);
  const int32_t* xq[R];
  for (int r = 0; r < R; ++r) {
    xq[r] = reinterpret_cast<const int32_t*>(xs[r].xq);
    val[r] = _mm512_setzero_ps(), bnd[r] = _mm512_setzero_ps();
  }
  for (int64_t b = 0; b < nb; ++b) {
    constexpr bool two = R <= 2;
    __m512i acc[R], acc2[R];
    for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_si512(), acc2[r] = _mm512_setzero_si512();
    for (int s = 0; s < 4; ++s) {
      const __m512i z = _mm512_loadu_si512(reinterpret_cast<const void*>(panel + qscreen_nib(b, s)));
      // the copy is streamed faster than the hardware prefetchers fetch it (they stop at 4 KiB pages):
      // two lines 4 KiB ahead per step (Gemma 3, one stream: +25%)
      __builtin_prefetch(panel + qscreen_nib(b, s) + 4096);
      __builtin_prefetch(panel + qscreen_nib(b, s) + 4096 + 64);
      __m512i lo = _mm512_and_si512(z, lo4), hi = _mm512_and_si512(_mm512_srli_epi16(z, 4), lo4);
      __mmask64 mlo, mhi;
      std::memcpy(&mlo, panel + qscreen_bits(b, s), 8);
      std::memcpy(&mhi, panel + qscreen_bits(b, s) + 8, 8);
      lo = _mm512_mask_add_epi8(lo, mlo, lo, b16);
      hi = _mm512_mask_add_epi8(hi, mhi, hi, b16);
      for (int r = 0; r < R; ++r) {
        acc[r] = _mm512_dpbusd_epi32(acc[r], lo, _mm512_set1_epi32(xq[r][8 * b + 2 * s]));
        __m512i& h = two ? acc2[r] : acc[r];
        h = _mm512_dpbusd_epi32(h, hi, _mm512_set1_epi32(xq[r][8 * b + 2 * s + 1]));
      }
    }
    const __m512 sv =
        _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(panel + qscreen_scales(b))));
    for (int r = 0; r < R; ++r) {
      const __m512 f = _mm512_fmadd_ps(_mm512_cvtepi32_ps(two ? _mm512_add_epi32(acc[r], acc2[r]) : acc[r]),
                                       _mm512_set1_ps(xs[r].d[b]), _mm512_set1_ps(xs[r].g[b]));
      val[r] = _mm512_fmadd_ps(sv, f, val[r]);
      bnd[r] = _mm512_fmadd_ps(sv, _mm512_set1_ps(xs[r].hb[b]), bnd[r]);
    }
  }
  const std::byte* corr = panel + 352 * nb;
  const __m512 t = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(corr + 256)));
  for (int r = 0; r < R; ++r) {
    __m512 ca = _mm512_setzero_ps();
    for (int j = 0; j < kScreenOutliers; ++j)
      ca = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(
                               _mm_loadu_si128(reinterpret_cast<const __m128i*>(corr + 16 * j)))),
                           _mm512_set1_ps(xs[r].xo[j]), ca);
    val[r] = _mm512_fmadd_ps(t, ca, val[r]);
    bnd[r] = _mm512_fmadd_ps(t, _mm512_set1_ps(xs[r].ho), bnd[r]);
  }
}
// panel_rows<m> for m in [1, R].
template <int R>
void panel_rows_n(int m, const std::byte* panel, int64_t nb, const ScreenX* xs, __m512* val, __m512* bnd) {
  if (m == R)
    panel_rows<R>(panel, nb, xs, val, bnd);
  else if constexpr (R > 1)
    panel_rows_n<R - 1>(m, panel, nb, xs, val, bnd);
}
}  // namespace

void qscreen_rows_vnni(const std::byte* screen, int64_t n0, int64_t n1, const ScreenX& x, float* value,
                       float* bound) {
  qscreen_rows_multi_vnni(screen, n0, n1, &x, 1, value, bound, 0);
}

void qscreen_rows_multi_vnni(const std::byte* screen, int64_t n0, int64_t n1, const ScreenX* xs, int64_t R,
                             float* value, float* bound, int64_t ld) {
  if (n0 >= n1 || R <= 0) return;
  const int64_t nb = xs[0].K / 32, pbytes = qscreen_panel_bytes(xs[0].K);
  for (int64_t p = n0 / kScreenPanel; p * kScreenPanel < n1; ++p) {
    const std::byte* panel = screen + p * pbytes;  // read from memory once, then from L1 for every group
    const int64_t r0 = p * kScreenPanel, lo = std::max(n0, r0), hi = std::min(n1, r0 + kScreenPanel);
    const __mmask16 keep = static_cast<__mmask16>(((1u << (hi - r0)) - 1) & ~((1u << (lo - r0)) - 1));
    for (int64_t g = 0; g < R; g += 8) {
      __m512 val[8], bnd[8];
      const int64_t m = std::min<int64_t>(8, R - g);
      panel_rows_n<8>(static_cast<int>(m), panel, nb, xs + g, val, bnd);
      for (int64_t r = 0; r < m; ++r) {
        _mm512_mask_storeu_ps(value + (g + r) * ld + r0, keep, val[r]);
        _mm512_mask_storeu_ps(bound + (g + r) * ld + r0, keep, bnd[r]);
      }
    }
  }
}

float qscreen_lower_avx512(const float* value, const float* bound, int64_t N, float lower) {
  __m512 acc = _mm512_set1_ps(lower);
  int64_t n = 0;
  for (; n + 16 <= N; n += 16)  // max(d, acc): acc where d is NaN
    acc = _mm512_max_ps(_mm512_sub_ps(_mm512_loadu_ps(value + n), _mm512_loadu_ps(bound + n)), acc);
  if (n < N) {
    const auto m = static_cast<__mmask16>((1u << (N - n)) - 1);
    const __m512 d = _mm512_sub_ps(_mm512_maskz_loadu_ps(m, value + n), _mm512_maskz_loadu_ps(m, bound + n));
    acc = _mm512_mask_max_ps(acc, m, d, acc);
  }
  return _mm512_reduce_max_ps(acc);
}

int64_t qscreen_select_avx512(const float* value, const float* bound, int64_t N, float lower, int64_t* rows) {
  const __m512 lo = _mm512_set1_ps(lower);
  const __m512i step = _mm512_set_epi64(7, 6, 5, 4, 3, 2, 1, 0);
  int64_t c = 0;
  for (int64_t n = 0; n < N; n += 16) {
    const auto in =
        N - n >= 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << (N - n)) - 1);
    const __m512 s =
        _mm512_add_ps(_mm512_maskz_loadu_ps(in, value + n), _mm512_maskz_loadu_ps(in, bound + n));
    // !(s < lower): kept when s >= lower or s is NaN
    const __mmask16 keep = _mm512_mask_cmp_ps_mask(in, s, lo, _CMP_NLT_UQ);
    if (keep == 0) continue;
    const __m512i i0 = _mm512_add_epi64(_mm512_set1_epi64(n), step);
    const __m512i i1 = _mm512_add_epi64(i0, _mm512_set1_epi64(8));
    const auto k0 = static_cast<__mmask8>(keep & 0xff), k1 = static_cast<__mmask8>(keep >> 8);
    _mm512_mask_compressstoreu_epi64(rows + c, k0, i0);
    c += __builtin_popcount(k0);
    _mm512_mask_compressstoreu_epi64(rows + c, k1, i1);
    c += __builtin_popcount(k1);
  }
  return c;
}
}  // namespace attn::kernels::cpu::detail
#pragma GCC diagnostic pop
#pragma GCC pop_options
