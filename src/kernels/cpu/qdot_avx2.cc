// Int8-activation dot products on AVX2 (kernels/cpu/qdot.h), as llama.cpp's AVX2 path multiplies:
// each block's 32 products are summed exactly in integers by vpmaddubsw (u8 · s8 pairs into i16) and
// vpmaddwd (pairs of i16 into i32), then converted to float and scaled by dw·dx of the block.
//   Q4_1: the 4-bit quants are u8 in [0, 15]: vpmaddubsw(w, x) directly (|pair| <= 2·15·127).
//   Q8_0: the packed quants are q + 128; xor 0x80 gives q as s8 again, and vpmaddubsw(|q|, sign(x, q))
//         multiplies signed by signed (|pair| <= 2·128·127 < 2^15), so no 128·Σx correction is needed.
// The integer sums equal the oracle's; only the float accumulation order differs.
#include <immintrin.h>

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
  float side[R];
  const int8_t* xq[R];
  const float *xd[R], *xs[R];
  for (int r = 0; r < R; ++r) {
    acc0[r] = acc1[r] = _mm256_setzero_ps();
    side[r] = 0.0f;
    xq[r] = x.q + (m0 + r) * x.ldq;
    xd[r] = x.d + (m0 + r) * x.ldb;
    xs[r] = x.s + (m0 + r) * x.ldb;
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
    float ma = 0.0f, mb = 0.0f;
    if constexpr (F == QFormat::q4_1) ma = half(dw[nbp + b]), mb = half(dw[nbp + b + 1]);
    for (int r = 0; r < R; ++r) {
      const __m256i xa = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq[r] + b * 32));
      const __m256i xb = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq[r] + b * 32 + 32));
      acc0[r] =
          _mm256_fmadd_ps(_mm256_cvtepi32_ps(block_dot<F>(wa, xa)), _mm256_set1_ps(da * xd[r][b]), acc0[r]);
      acc1[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(block_dot<F>(wb, xb)), _mm256_set1_ps(db * xd[r][b + 1]),
                                acc1[r]);
      if constexpr (F == QFormat::q4_1) side[r] += ma * xs[r][b] + mb * xs[r][b + 1];
    }
  }
  for (int r = 0; r < R; ++r) out[r] = hsum(_mm256_add_ps(acc0[r], acc1[r])) + side[r];
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

void qdot_rows_avx2(QFormat f, const std::byte* packed, int64_t n0, int64_t n1, int64_t K, Q8RowsConst x,
                    int64_t M, float* y, int64_t ldy, bool accumulate) {
  if (f == QFormat::q4_1)
    rows<QFormat::q4_1>(packed, n0, n1, K, x, M, y, ldy, accumulate);
  else
    rows<QFormat::q8_0>(packed, n0, n1, K, x, M, y, ldy, accumulate);
}

}  // namespace attn::kernels::cpu::detail
