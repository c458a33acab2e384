// Int8-activation dot products on AVX2 (kernels/cpu/qdot.h), as llama.cpp's AVX2 path multiplies:
// each block's 32 products are summed exactly in integers by vpmaddubsw (u8 · s8 pairs into i16) and
// vpmaddwd (pairs of i16 into i32), then converted to float and scaled by dw·dx of the block.
//   Q4_1: the 4-bit quants are u8 in [0, 15]: vpmaddubsw(w, x) directly (|pair| <= 2·15·127).
//   Q8_0: the packed quants are q + 128; xor 0x80 gives q as s8 again, and vpmaddubsw(|q|, sign(x, q))
//         multiplies signed by signed (|pair| <= 2·128·127 < 2^15), so no 128·Σx correction is needed.
// The integer sums equal the oracle's; only the float accumulation order differs.
#include <immintrin.h>

#include <algorithm>

#include "kernels/cpu/qdot.h"

namespace attn::kernels::cpu::detail {
namespace {

inline float half(uint16_t h) { return _cvtsh_ss(h); }

inline float hsum(__m256 v) {
  const __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 t = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(t, _mm_shuffle_ps(t, t, 1)));
}

// One block's 32 products as 8 i32 lanes.
template <QFormat F>
inline __m256i block_dot(__m256i w, __m256i x) {
  const __m256i ones = _mm256_set1_epi16(1);
  if constexpr (F == QFormat::q4_1) return _mm256_madd_epi16(_mm256_maddubs_epi16(w, x), ones);
  return _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_sign_epi8(w, w), _mm256_sign_epi8(x, w)), ones);
}

// One packed weight row against R quantized activation rows (m0 .. m0 + R - 1): each weight block is
// unpacked and its scale read once for the R rows. Every row's sum is formed the same way for any R
// (two accumulators: even and odd blocks), so a row's result does not depend on its neighbours.
template <QFormat F, int R>
inline void row_dots(const std::byte* row, int64_t nbp, const Q8RowsConst& x, int64_t m0, float* out) {
  const auto* dw = reinterpret_cast<const uint16_t*>(row);
  const uint8_t* qs = reinterpret_cast<const uint8_t*>(row) + (F == QFormat::q4_1 ? 4 : 2) * nbp;
  const __m256i nib = _mm256_set1_epi8(0x0f), bias = _mm256_set1_epi8(static_cast<char>(0x80));
  __m256 acc0[R], acc1[R];
  const int8_t* xq[R];
  const float* xd[R];
  for (int r = 0; r < R; ++r) {
    acc0[r] = acc1[r] = _mm256_setzero_ps();
    xq[r] = x.q + (m0 + r) * x.ldq;
    xd[r] = x.d + (m0 + r) * x.ldb;
  }
  for (int64_t b = 0; b < nbp; b += 2) {  // nbp is even: blocks in pairs
    __m256i wa, wb;
    if constexpr (F == QFormat::q4_1) {
      const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs + b * 16));
      wa = _mm256_and_si256(v, nib);
      wb = _mm256_and_si256(_mm256_srli_epi16(v, 4), nib);
    } else {
      wa = _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs + b * 32)), bias);
      wb = _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs + b * 32 + 32)), bias);
    }
    const float da = half(dw[b]), db = half(dw[b + 1]);
    for (int r = 0; r < R; ++r) {
      const __m256i xa = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq[r] + b * 32));
      const __m256i xb = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq[r] + b * 32 + 32));
      acc0[r] =
          _mm256_fmadd_ps(_mm256_cvtepi32_ps(block_dot<F>(wa, xa)), _mm256_set1_ps(da * xd[r][b]), acc0[r]);
      acc1[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(block_dot<F>(wb, xb)), _mm256_set1_ps(db * xd[r][b + 1]),
                                acc1[r]);
    }
  }
  for (int r = 0; r < R; ++r) {
    float side = 0.0f;
    if constexpr (F == QFormat::q4_1) {  // Σ_b m_w[b] · s_x[b], 8 blocks per FMA
      const float* xs = x.s + (m0 + r) * x.ldb;
      __m256 sv = _mm256_setzero_ps();
      int64_t b = 0;
      for (; b + 8 <= nbp; b += 8)
        sv = _mm256_fmadd_ps(_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(dw + nbp + b))),
                             _mm256_loadu_ps(xs + b), sv);
      side = hsum(sv);
      for (; b < nbp; ++b) side += half(dw[nbp + b]) * xs[b];
    }
    out[r] = hsum(_mm256_add_ps(acc0[r], acc1[r])) + side;
  }
}

template <QFormat F>
void rows(const std::byte* packed, int64_t n0, int64_t n1, int64_t K, Q8RowsConst x, int64_t M, float* y,
          int64_t ldy, bool accumulate) {
  const int64_t nbp = q8_padded_blocks(K), rb = qdot_row_bytes(F, K);
  float v[4];
  for (int64_t n = n0; n < n1; ++n) {
    const std::byte* row = packed + n * rb;
    int64_t m = 0;
    const auto put = [&](int count) {
      for (int r = 0; r < count; ++r) {
        float& o = y[(m + r) * ldy + n];
        o = accumulate ? o + v[r] : v[r];
      }
    };
    for (; m + 4 <= M; m += 4) {
      row_dots<F, 4>(row, nbp, x, m, v);
      put(4);
    }
    for (; m < M; ++m) {
      row_dots<F, 1>(row, nbp, x, m, v);
      put(1);
    }
  }
}

}  // namespace

// The activation quantization of quantize_q8_scalar on 8 lanes: the same values bit for bit
// (max |x| exactly, x · (127 / max) rounded to nearest even by cvtps, as std::nearbyint).
void quantize_q8_avx2(const float* x, int64_t K, int8_t* q, float* d, float* s, float* sum) {
  const int64_t nb = K / kQBlock, nbp = q8_padded_blocks(K);
  const __m256 sign = _mm256_set1_ps(-0.0f);
  for (int64_t b = 0; b < nb; ++b) {
    const float* xb = x + b * kQBlock;
    __m256 v[4];
    __m256 a = _mm256_setzero_ps();
    for (int i = 0; i < 4; ++i) {
      v[i] = _mm256_loadu_ps(xb + 8 * i);
      a = _mm256_max_ps(a, _mm256_andnot_ps(sign, v[i]));
    }
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_shuffle_ps(m, m, 1));
    const float amax = _mm_cvtss_f32(m);
    const float db = amax / 127.0f, id = amax != 0.0f ? 127.0f / amax : 0.0f;
    const __m256 idv = _mm256_set1_ps(id);
    __m256i qi[4];
    __m256i isum = _mm256_setzero_si256();
    for (int i = 0; i < 4; ++i) {
      qi[i] = _mm256_cvtps_epi32(_mm256_mul_ps(v[i], idv));
      isum = _mm256_add_epi32(isum, qi[i]);
    }
    // 32 i32 -> 32 i8 (values in [-127, 127]: the saturating packs keep them), back in order.
    const __m256i p01 = _mm256_packs_epi32(qi[0], qi[1]), p23 = _mm256_packs_epi32(qi[2], qi[3]);
    const __m256i p = _mm256_packs_epi16(p01, p23);
    const __m256i ordered = _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + b * kQBlock), ordered);
    __m128i t = _mm_add_epi32(_mm256_castsi256_si128(isum), _mm256_extracti128_si256(isum, 1));
    t = _mm_add_epi32(t, _mm_shuffle_epi32(t, 0x4e));
    t = _mm_add_epi32(t, _mm_shuffle_epi32(t, 0xb1));
    const int32_t total = _mm_cvtsi128_si32(t);
    d[b] = _cvtsh_ss(_cvtss_sh(db, 0));
    s[b] = _cvtsh_ss(_cvtss_sh(db * static_cast<float>(total), 0));
    sum[b] = static_cast<float>(total);
  }
  for (int64_t b = nb; b < nbp; ++b) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + b * kQBlock), _mm256_setzero_si256());
    d[b] = s[b] = sum[b] = 0.0f;
  }
}

void qdot_rows_avx2(QFormat f, const std::byte* packed, int64_t n0, int64_t n1, int64_t K, Q8RowsConst x,
                    int64_t M, float* y, int64_t ldy, bool accumulate) {
  if (f == QFormat::q4_1)
    rows<QFormat::q4_1>(packed, n0, n1, K, x, M, y, ldy, accumulate);
  else
    rows<QFormat::q8_0>(packed, n0, n1, K, x, M, y, ldy, accumulate);
}

}  // namespace attn::kernels::cpu::detail
