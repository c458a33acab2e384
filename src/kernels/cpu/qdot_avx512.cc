// Int8-activation dot products, AVX-512: the activation quantization (F/BW) and the VNNI products.
// GCC 12 reports the intrinsics' deliberately undefined pass-through operands as (maybe-)uninitialized.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include <algorithm>

#include "kernels/cpu/qdot.h"

namespace attn::kernels::cpu::detail {

void quantize_q8_avx512(const float* x, int64_t K, int8_t* q, float* d, float* s, float* sum) {
  const int64_t nb = K / kQBlock, nbp = q8_padded_blocks(K);
  const __m512 sign = _mm512_set1_ps(-0.0f);
  for (int64_t b = 0; b < nb; ++b) {
    const __m512 v0 = _mm512_loadu_ps(x + b * kQBlock), v1 = _mm512_loadu_ps(x + b * kQBlock + 16);
    const __m512 a = _mm512_max_ps(_mm512_andnot_ps(sign, v0), _mm512_andnot_ps(sign, v1));
    const float amax = _mm512_reduce_max_ps(a);
    const float db = amax / 127.0f, id = amax != 0.0f ? 127.0f / amax : 0.0f;
    const __m512 idv = _mm512_set1_ps(id);
    // Round to nearest even (the default MXCSR mode), as std::nearbyint in the portable path.
    const __m512i q0 = _mm512_cvtps_epi32(_mm512_mul_ps(v0, idv));
    const __m512i q1 = _mm512_cvtps_epi32(_mm512_mul_ps(v1, idv));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q + b * kQBlock), _mm512_cvtsepi32_epi8(q0));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q + b * kQBlock + 16), _mm512_cvtsepi32_epi8(q1));
    const int32_t isum = _mm512_reduce_add_epi32(_mm512_add_epi32(q0, q1));
    d[b] = round_to_f16(db);
    s[b] = round_to_f16(db * static_cast<float>(isum));
    sum[b] = static_cast<float>(isum);
  }
  for (int64_t b = nb; b < nbp; ++b) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + b * kQBlock), _mm256_setzero_si256());
    d[b] = s[b] = sum[b] = 0.0f;
  }
}

#pragma GCC push_options
#pragma GCC target("avx512vnni")

namespace {

// R packed weight rows (row r at row0 + r·rb) against one quantized activation row; out[r] = the R
// sums. Each block is one 256-bit vpdpbusd (Zen 4 runs 512-bit operations as two 256-bit halves, so
// 256-bit ones cost half): its 8 lanes are converted to float and scaled by the block's dw·dx, 16 block
// scales computed per row at a time. The R rows share the activation loads and the loop overhead, and
// their sums are reduced together (R = 4: one hadd tree).
template <QFormat F, int R>
inline void rows_dot(const std::byte* row0, int64_t rb, int64_t nbp, const int8_t* xq, const float* xd,
                     const float* xs, const float* xsum, float* out) {
  const int64_t qoff = (F == QFormat::q4_1 ? 4 : 2) * nbp;
  const __m256i nib = _mm256_set1_epi8(0x0f);
  __m256 acc[R];
  __m512 side[R];
  for (int r = 0; r < R; ++r) {
    acc[r] = _mm256_setzero_ps();
    side[r] = _mm512_setzero_ps();
  }
  alignas(64) float sc[R][16];
  for (int64_t g = 0; g < nbp; g += 16) {
    const int64_t cnt = std::min<int64_t>(16, nbp - g);
    const __mmask16 mask = static_cast<__mmask16>((1u << cnt) - 1u);
    const __m512 dx = _mm512_maskz_loadu_ps(mask, xd + g);
    const __m512 sx = F == QFormat::q4_1
                          ? _mm512_maskz_loadu_ps(mask, xs + g)
                          : _mm512_mul_ps(_mm512_maskz_loadu_ps(mask, xsum + g), _mm512_set1_ps(128.0f));
    for (int r = 0; r < R; ++r) {
      const auto* dw = reinterpret_cast<const uint16_t*>(row0 + r * rb);
      const __m512 scv = _mm512_mul_ps(_mm512_cvtph_ps(_mm256_maskz_loadu_epi16(mask, dw + g)), dx);
      _mm512_store_ps(sc[r], scv);
      if constexpr (F == QFormat::q4_1)
        side[r] = _mm512_fmadd_ps(_mm512_cvtph_ps(_mm256_maskz_loadu_epi16(mask, dw + nbp + g)), sx, side[r]);
      else
        side[r] = _mm512_fnmadd_ps(scv, sx, side[r]);
    }
    for (int64_t p = 0; p < cnt / 2; ++p) {
      const int64_t pr = g / 2 + p;
      const __m256i xa = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq + pr * 64));
      const __m256i xb = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq + pr * 64 + 32));
      for (int r = 0; r < R; ++r) {
        const uint8_t* qs = reinterpret_cast<const uint8_t*>(row0 + r * rb) + qoff;
        __m256i wa, wb;
        if constexpr (F == QFormat::q4_1) {
          const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs + pr * 32));
          wa = _mm256_and_si256(v, nib);
          wb = _mm256_and_si256(_mm256_srli_epi16(v, 4), nib);
        } else {
          wa = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs + pr * 64));
          wb = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs + pr * 64 + 32));
        }
        const __m256i da = _mm256_dpbusd_epi32(_mm256_setzero_si256(), wa, xa);
        const __m256i db = _mm256_dpbusd_epi32(_mm256_setzero_si256(), wb, xb);
        acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(da), _mm256_set1_ps(sc[r][2 * p]), acc[r]);
        acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(db), _mm256_set1_ps(sc[r][2 * p + 1]), acc[r]);
      }
    }
  }
  __m256 t[R];
  for (int r = 0; r < R; ++r)
    t[r] = _mm256_add_ps(acc[r],
                         _mm256_add_ps(_mm512_castps512_ps256(side[r]), _mm512_extractf32x8_ps(side[r], 1)));
  if constexpr (R == 4) {
    const __m256 h = _mm256_hadd_ps(_mm256_hadd_ps(t[0], t[1]), _mm256_hadd_ps(t[2], t[3]));
    _mm_storeu_ps(out, _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1)));
  } else {
    for (int r = 0; r < R; ++r) {
      const __m128 h = _mm_add_ps(_mm256_castps256_ps128(t[r]), _mm256_extractf128_ps(t[r], 1));
      const __m128 h2 = _mm_add_ps(h, _mm_movehl_ps(h, h));
      out[r] = _mm_cvtss_f32(_mm_add_ss(h2, _mm_movehdup_ps(h2)));
    }
  }
}

template <QFormat F>
void rows(const std::byte* packed, int64_t n0, int64_t n1, int64_t K, Q8RowsConst x, int64_t M, float* y,
          int64_t ldy, bool accumulate) {
  const int64_t nbp = q8_padded_blocks(K), rb = qdot_row_bytes(F, K);
  for (int64_t m = 0; m < M; ++m) {
    const int8_t* xq = x.q + m * x.ldq;
    const float *xd = x.d + m * x.ldb, *xs = x.s + m * x.ldb, *xsum = x.sum + m * x.ldb;
    float* ym = y + m * ldy;
    float v[4];
    int64_t n = n0;
    for (; n + 4 <= n1; n += 4) {
      rows_dot<F, 4>(packed + n * rb, rb, nbp, xq, xd, xs, xsum, v);
      for (int r = 0; r < 4; ++r) ym[n + r] = accumulate ? ym[n + r] + v[r] : v[r];
    }
    for (; n < n1; ++n) {
      rows_dot<F, 1>(packed + n * rb, rb, nbp, xq, xd, xs, xsum, v);
      ym[n] = accumulate ? ym[n] + v[0] : v[0];
    }
  }
}

}  // namespace

void qdot_rows_vnni(QFormat f, const std::byte* packed, int64_t n0, int64_t n1, int64_t K, Q8RowsConst x,
                    int64_t M, float* y, int64_t ldy, bool accumulate) {
  if (f == QFormat::q4_1)
    rows<QFormat::q4_1>(packed, n0, n1, K, x, M, y, ldy, accumulate);
  else
    rows<QFormat::q8_0>(packed, n0, n1, K, x, M, y, ldy, accumulate);
}

#pragma GCC pop_options

}  // namespace attn::kernels::cpu::detail

#pragma GCC diagnostic pop
