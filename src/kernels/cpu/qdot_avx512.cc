// Int8-activation dot products, AVX-512: the activation quantization (F/BW) and the VNNI products.
// A pair of blocks (64 weights) is one vpdpbusd: lanes 0-7 hold block A's partial sums, lanes 8-15
// block B's; they are converted to float once and scaled by dw·dx of their block (one permute of the
// 16 block scales computed per group of 16 blocks).
// GCC 12 reports the intrinsics' deliberately undefined pass-through operands as maybe-uninitialized.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
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

// One packed weight row against one quantized activation row.
template <QFormat F>
inline float row_dot(const std::byte* row, int64_t nbp, const int8_t* xq, const float* xd, const float* xs,
                     const float* xsum) {
  const auto* dw = reinterpret_cast<const uint16_t*>(row);
  const uint8_t* qs = reinterpret_cast<const uint8_t*>(row) + (F == QFormat::q4_1 ? 4 : 2) * nbp;
  const __m512i pair_idx = _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
  const __m256i nib = _mm256_set1_epi8(0x0f);
  __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps(), side = _mm512_setzero_ps();
  for (int64_t g = 0; g < nbp; g += 16) {
    const int64_t cnt = std::min<int64_t>(16, nbp - g);
    const __mmask16 mask = static_cast<__mmask16>((1u << cnt) - 1u);
    const __m512 sc = _mm512_mul_ps(_mm512_cvtph_ps(_mm256_maskz_loadu_epi16(mask, dw + g)),
                                    _mm512_maskz_loadu_ps(mask, xd + g));
    if constexpr (F == QFormat::q4_1) {
      const __m512 mw = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(mask, dw + nbp + g));
      side = _mm512_fmadd_ps(mw, _mm512_maskz_loadu_ps(mask, xs + g), side);
    } else {
      side = _mm512_fnmadd_ps(
          sc, _mm512_mul_ps(_mm512_maskz_loadu_ps(mask, xsum + g), _mm512_set1_ps(128.0f)), side);
    }
    for (int64_t p = 0; p < cnt / 2; ++p) {
      const int64_t pr = g / 2 + p;
      __m512i w;
      if constexpr (F == QFormat::q4_1) {
        const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs + pr * 32));
        const __m256i lo = _mm256_and_si256(v, nib), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), nib);
        w = _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
      } else {
        w = _mm512_loadu_si512(qs + pr * 64);
      }
      const __m512i xv = _mm512_loadu_si512(xq + pr * 64);
      const __m512i dot = _mm512_dpbusd_epi32(_mm512_setzero_si512(), w, xv);
      const __m512 scp = _mm512_permutexvar_ps(_mm512_add_epi32(pair_idx, _mm512_set1_epi32(2 * p)), sc);
      if (p & 1)
        acc1 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), scp, acc1);
      else
        acc0 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), scp, acc0);
    }
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(acc0, acc1), side));
}

template <QFormat F>
void rows(const std::byte* packed, int64_t n0, int64_t n1, int64_t K, Q8RowsConst x, int64_t M, float* y,
          int64_t ldy, bool accumulate) {
  const int64_t nbp = q8_padded_blocks(K), rb = qdot_row_bytes(F, K);
  for (int64_t n = n0; n < n1; ++n) {
    const std::byte* row = packed + n * rb;
    for (int64_t m = 0; m < M; ++m) {
      const float v =
          row_dot<F>(row, nbp, x.q + m * x.ldq, x.d + m * x.ldb, x.s + m * x.ldb, x.sum + m * x.ldb);
      float& out = y[m * ldy + n];
      out = accumulate ? out + v : v;
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
