// AVX-512 encoder kernels (src/kernels/cpu/encoder_kernels.h): 16 lanes at a
// time with a masked tail; row sums accumulate in fp32 lanes.
// GCC 12 reports -Wmaybe-uninitialized inside its own AVX-512 intrinsics (the
// _mm512_undefined_ps() pass-through of the unmasked forms), as in attention_bwd_avx512.cc.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
// _mm512_reduce_add_ps reads an _mm512_undefined_ps() lane too (-Wuninitialized).
#pragma GCC diagnostic ignored "-Wuninitialized"

#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <utility>

#include "kernels/cpu/encoder_kernels.h"
#include "kernels/cpu/vec_avx512.h"

namespace attn::kernels::cpu::detail {
namespace {

using avx512::tail_mask;

// erf(x) = sign(x) · (1 − (a1 t + a2 t² + a3 t³ + a4 t⁴ + a5 t⁵) · exp(−x²)), t = 1 / (1 + p|x|)
// (Abramowitz & Stegun 7.1.26, |error| <= 1.5e-7; fp32 evaluation adds a few ulp).
inline __m512 erf_ps(__m512 x) {
  const __m512 sign_bit = _mm512_set1_ps(-0.0f);
  // |x| clamped to 8: erf(8) rounds to 1 in fp32, and the reciprocal below stays finite for |x| = inf.
  const __m512 ax = _mm512_min_ps(_mm512_andnot_ps(sign_bit, x), _mm512_set1_ps(8.0f));
  // t = 1 / den with den in [1, ∞): the 14-bit reciprocal estimate plus one Newton step (relative
  // error ~1e-8, far below the formula's) is much cheaper than a 512-bit division.
  const __m512 den = _mm512_fmadd_ps(_mm512_set1_ps(0.3275911f), ax, _mm512_set1_ps(1.0f));
  const __m512 r0 = _mm512_rcp14_ps(den);
  const __m512 t = _mm512_mul_ps(r0, _mm512_fnmadd_ps(den, r0, _mm512_set1_ps(2.0f)));
  __m512 p = _mm512_set1_ps(1.061405429f);
  p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(-1.453152027f));
  p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(1.421413741f));
  p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(-0.284496736f));
  p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(0.254829592f));
  p = _mm512_mul_ps(p, t);
  const __m512 e = avx512::exp_ps(_mm512_mul_ps(_mm512_mul_ps(ax, ax), _mm512_set1_ps(-1.0f)));
  const __m512 y = _mm512_fnmadd_ps(p, e, _mm512_set1_ps(1.0f));
  return _mm512_or_ps(y, _mm512_and_ps(x, sign_bit));
}

}  // namespace

void add_bias_avx512(float* x, const float* bias, int64_t rows, int64_t C) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < C; c += 16) {
      const __mmask16 k = tail_mask(C - c);
      float* p = x + r * C + c;
      _mm512_mask_storeu_ps(p, k,
                            _mm512_add_ps(_mm512_maskz_loadu_ps(k, p), _mm512_maskz_loadu_ps(k, bias + c)));
    }
}

void bias_gelu_avx512(float* x, const float* bias, int64_t rows, int64_t C) {
  const __m512 half = _mm512_set1_ps(0.5f), one = _mm512_set1_ps(1.0f);
  const __m512 inv_sqrt2 = _mm512_set1_ps(0.70710678118654752f);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < C; c += 16) {
      const __mmask16 k = tail_mask(C - c);
      float* p = x + r * C + c;
      __m512 u = _mm512_maskz_loadu_ps(k, p);
      if (bias) u = _mm512_add_ps(u, _mm512_maskz_loadu_ps(k, bias + c));
      const __m512 g =
          _mm512_mul_ps(_mm512_mul_ps(half, u), _mm512_add_ps(one, erf_ps(_mm512_mul_ps(u, inv_sqrt2))));
      _mm512_mask_storeu_ps(p, k, g);
    }
}

void residual_layer_norm_avx512(float* h, const float* y, const float* bias, const float* w, const float* b,
                                int64_t rows, int64_t C, float eps) {
  for (int64_t r = 0; r < rows; ++r) {
    float* hr = h + r * C;
    const float* yr = y ? y + r * C : nullptr;
    __m512 s = _mm512_setzero_ps();
    for (int64_t c = 0; c < C; c += 16) {
      const __mmask16 k = tail_mask(C - c);
      __m512 v = _mm512_maskz_loadu_ps(k, hr + c);
      if (yr) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(k, yr + c));
      if (bias) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(k, bias + c));
      _mm512_mask_storeu_ps(hr + c, k, v);
      s = _mm512_add_ps(s, v);
    }
    const float mean = _mm512_reduce_add_ps(s) / static_cast<float>(C);
    const __m512 m = _mm512_set1_ps(mean);
    __m512 q = _mm512_setzero_ps();
    for (int64_t c = 0; c < C; c += 16) {
      const __mmask16 k = tail_mask(C - c);
      const __m512 d = _mm512_maskz_sub_ps(k, _mm512_maskz_loadu_ps(k, hr + c), m);
      q = _mm512_fmadd_ps(d, d, q);
    }
    const float rstd = 1.0f / std::sqrt(_mm512_reduce_add_ps(q) / static_cast<float>(C) + eps);
    const __m512 rs = _mm512_set1_ps(rstd);
    for (int64_t c = 0; c < C; c += 16) {
      const __mmask16 k = tail_mask(C - c);
      const __m512 d = _mm512_mul_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, hr + c), m), rs);
      const __m512 o = _mm512_fmadd_ps(d, _mm512_maskz_loadu_ps(k, w + c), _mm512_maskz_loadu_ps(k, b + c));
      _mm512_mask_storeu_ps(hr + c, k, o);
    }
  }
}

namespace {

// Rows [m0, m0 + R) x columns [n, n + 32) (masks k0, k1 for the two 16-wide halves).
template <int R>
inline void small_m_block(const float* x, int64_t ldx, const float* wt, const float* bias, float* y,
                          int64_t ldy, int64_t N, int64_t K, int64_t n, __mmask16 k0, __mmask16 k1) {
  __m512 acc0[R], acc1[R];
  const __m512 b0 = bias ? _mm512_maskz_loadu_ps(k0, bias + n) : _mm512_setzero_ps();
  const __m512 b1 = bias ? _mm512_maskz_loadu_ps(k1, bias + n + 16) : _mm512_setzero_ps();
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) acc0[r] = b0, acc1[r] = b1;
  const float* w = wt + n;
  for (int64_t k = 0; k < K; ++k, w += N) {
    const __m512 w0 = _mm512_maskz_loadu_ps(k0, w);
    const __m512 w1 = _mm512_maskz_loadu_ps(k1, w + 16);
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const __m512 xr = _mm512_set1_ps(x[r * ldx + k]);
      acc0[r] = _mm512_fmadd_ps(xr, w0, acc0[r]);
      acc1[r] = _mm512_fmadd_ps(xr, w1, acc1[r]);
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
    _mm512_mask_storeu_ps(y + r * ldy + n, k0, acc0[r]);
    _mm512_mask_storeu_ps(y + r * ldy + n + 16, k1, acc1[r]);
  }
}

template <int... Rs>
constexpr auto block_table(std::integer_sequence<int, Rs...>) {
  using Fn = void (*)(const float*, int64_t, const float*, const float*, float*, int64_t, int64_t, int64_t,
                      int64_t, __mmask16, __mmask16);
  return std::array<Fn, sizeof...(Rs)>{&small_m_block<Rs + 1>...};
}

constexpr int kRows = 12;  // 2 x 12 accumulators + 2 weight vectors + 1 broadcast of the 32 registers

}  // namespace

void linear_small_m_avx512(const float* x, int64_t ldx, const float* wt, const float* bias, float* y,
                           int64_t ldy, int64_t M, int64_t N, int64_t K, int64_t n0, int64_t n1) {
  static constexpr auto table = block_table(std::make_integer_sequence<int, kRows>{});
  for (int64_t n = n0; n < n1; n += 32) {
    const __mmask16 k0 = tail_mask(n1 - n);
    const __mmask16 k1 = tail_mask(n1 - n - 16);
    for (int64_t m = 0; m < M; m += kRows) {
      const int64_t r = std::min<int64_t>(kRows, M - m);
      table[static_cast<std::size_t>(r - 1)](x + m * ldx, ldx, wt, bias, y + m * ldy, ldy, N, K, n, k0, k1);
    }
  }
}

namespace {

// Rows [0, R) of x times weight rows [n, n + C) (w: [N, K], row stride ldw): each output is a
// dot product over K, accumulated in 16 fp32 lanes and reduced at the end.
template <int R, int C>
inline void small_m_nt_block(const float* x, int64_t ldx, const float* w, int64_t ldw, const float* bias,
                             float* y, int64_t ldy, int64_t K) {
  __m512 acc[R][C];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int c = 0; c < C; ++c) acc[r][c] = _mm512_setzero_ps();
  for (int64_t k = 0; k < K; k += 16) {
    const __mmask16 km = tail_mask(K - k);
    __m512 wv[C];
#pragma GCC unroll 4
    for (int c = 0; c < C; ++c) wv[c] = _mm512_maskz_loadu_ps(km, w + c * ldw + k);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m512 xv = _mm512_maskz_loadu_ps(km, x + r * ldx + k);
#pragma GCC unroll 4
      for (int c = 0; c < C; ++c) acc[r][c] = _mm512_fmadd_ps(xv, wv[c], acc[r][c]);
    }
  }
  if constexpr (C == 4) {
    // Four sums at once: fold 128-bit lanes pairwise, then the 4 floats of each lane.
    const __m128 b = bias ? _mm_loadu_ps(bias) : _mm_setzero_ps();
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m512 s01 = _mm512_add_ps(_mm512_shuffle_f32x4(acc[r][0], acc[r][1], 0x44),
                                       _mm512_shuffle_f32x4(acc[r][0], acc[r][1], 0xEE));
      const __m512 s23 = _mm512_add_ps(_mm512_shuffle_f32x4(acc[r][2], acc[r][3], 0x44),
                                       _mm512_shuffle_f32x4(acc[r][2], acc[r][3], 0xEE));
      // lane j (0..3) now holds 4 partial sums of column j
      __m512 t = _mm512_add_ps(_mm512_shuffle_f32x4(s01, s23, 0x88), _mm512_shuffle_f32x4(s01, s23, 0xDD));
      t = _mm512_add_ps(t, _mm512_permute_ps(t, 0xB1));
      t = _mm512_add_ps(t, _mm512_permute_ps(t, 0x4E));
      const __m128 sums = _mm512_castps512_ps128(_mm512_maskz_compress_ps(0x1111, t));
      _mm_storeu_ps(y + r * ldy, _mm_add_ps(sums, b));
    }
  } else {
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
      for (int c = 0; c < C; ++c) y[r * ldy + c] = _mm512_reduce_add_ps(acc[r][c]) + (bias ? bias[c] : 0.0f);
  }
}

constexpr int kNtRows = 6;  // 6 x 4 accumulators + 4 weight vectors + 1 row of x of the 32 registers
constexpr int kNtCols = 4;

using NtFn = void (*)(const float*, int64_t, const float*, int64_t, const float*, float*, int64_t, int64_t);

template <int R, int... Cs>
constexpr std::array<NtFn, sizeof...(Cs)> nt_row(std::integer_sequence<int, Cs...>) {
  return {&small_m_nt_block<R, Cs + 1>...};
}

template <int... Rs>
constexpr auto nt_table(std::integer_sequence<int, Rs...>) {
  return std::array<std::array<NtFn, kNtCols>, sizeof...(Rs)>{
      nt_row<Rs + 1>(std::make_integer_sequence<int, kNtCols>{})...};
}

}  // namespace

void linear_small_m_nt_avx512(const float* x, int64_t ldx, const float* w, const float* bias, float* y,
                              int64_t ldy, int64_t M, int64_t K, int64_t n0, int64_t n1) {
  static constexpr auto table = nt_table(std::make_integer_sequence<int, kNtRows>{});
  for (int64_t n = n0; n < n1; n += kNtCols) {
    const int64_t c = std::min<int64_t>(kNtCols, n1 - n);
    // Row blocks of balanced sizes (32 rows: 6,6,5,5,5,5 rather than 6 x 5 + 2).
    const int64_t nb = (M + kNtRows - 1) / kNtRows;
    for (int64_t i = 0, m = 0; i < nb; ++i) {
      const int64_t r = M / nb + (i < M % nb ? 1 : 0);
      table[static_cast<std::size_t>(r - 1)][static_cast<std::size_t>(c - 1)](
          x + m * ldx, ldx, w + n * K, K, bias ? bias + n : nullptr, y + m * ldy + n, ldy, K);
      m += r;
    }
  }
}

}  // namespace attn::kernels::cpu::detail

// ---- encoder attention (encoder_kernels.h) --------------------------------------------------------------
namespace attn::kernels::cpu::detail {
namespace {

constexpr int kAttRows = 6;  // query rows per block: 6 x 4 score accumulators + 4 key vectors + 1 broadcast

// s: [R, ldk] = q rows [R] (row stride ldq) · kt columns [c0, c0 + 16 NC) (kt: [D, ldk], the keys
// transposed).
template <int R, int NC>
inline void att_scores(const float* q, int64_t ldq, const float* kt, int64_t ldk, int64_t D, int64_t c0,
                       float* s) {
  __m512 acc[R][NC];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int c = 0; c < NC; ++c) acc[r][c] = _mm512_setzero_ps();
  for (int64_t d = 0; d < D; ++d) {
    __m512 kv[NC];
#pragma GCC unroll 4
    for (int c = 0; c < NC; ++c) kv[c] = _mm512_loadu_ps(kt + d * ldk + c0 + 16 * c);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m512 qb = _mm512_set1_ps(q[r * ldq + d]);
#pragma GCC unroll 4
      for (int c = 0; c < NC; ++c) acc[r][c] = _mm512_fmadd_ps(qb, kv[c], acc[r][c]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int c = 0; c < NC; ++c) _mm512_storeu_ps(s + r * ldk + c0 + 16 * c, acc[r][c]);
}

// o rows [R] (row stride ldo), columns [d0, d0 + 16 NC) = inv[r] · Σ_{j < n} p[r, j] · v[j, d0 ...]
// (p: [R, ldk], v: row j at v + j · ldv).
template <int R, int NC>
inline void att_pv(const float* p, int64_t ldk, const float* v, int64_t ldv, int64_t n, int64_t d0,
                   const float* inv, float* o, int64_t ldo) {
  __m512 acc[R][NC];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int c = 0; c < NC; ++c) acc[r][c] = _mm512_setzero_ps();
  for (int64_t j = 0; j < n; ++j) {
    __m512 vv[NC];
#pragma GCC unroll 4
    for (int c = 0; c < NC; ++c) vv[c] = _mm512_loadu_ps(v + j * ldv + d0 + 16 * c);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m512 pb = _mm512_set1_ps(p[r * ldk + j]);
#pragma GCC unroll 4
      for (int c = 0; c < NC; ++c) acc[r][c] = _mm512_fmadd_ps(pb, vv[c], acc[r][c]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    const __m512 s = _mm512_set1_ps(inv[r]);
#pragma GCC unroll 4
    for (int c = 0; c < NC; ++c) _mm512_storeu_ps(o + r * ldo + d0 + 16 * c, _mm512_mul_ps(acc[r][c], s));
  }
}

// exp(scale · (s − max)) over the n valid columns of each of R rows (zero past n); inv[r] = 1 / row sum.
inline void att_softmax(float* s, int64_t ldk, int R, int64_t n, float scale, float* inv) {
  const __m512 sc = _mm512_set1_ps(scale);
  for (int r = 0; r < R; ++r) {
    float* row = s + r * ldk;
    __m512 mx = _mm512_set1_ps(-INFINITY);
    for (int64_t j = 0; j < n; j += 16)
      mx = _mm512_mask_max_ps(mx, tail_mask(n - j), mx, _mm512_loadu_ps(row + j));
    const __m512 m = _mm512_set1_ps(_mm512_reduce_max_ps(mx));
    __m512 z = _mm512_setzero_ps();
    for (int64_t j = 0; j < n; j += 16) {
      const __mmask16 k = tail_mask(n - j);
      const __m512 e = _mm512_maskz_mov_ps(
          k, avx512::exp_ps(_mm512_mul_ps(_mm512_sub_ps(_mm512_loadu_ps(row + j), m), sc)));
      _mm512_storeu_ps(row + j, e);
      z = _mm512_add_ps(z, e);
    }
    inv[r] = 1.0f / _mm512_reduce_add_ps(z);
  }
}

template <int R>
void att_rows(const float* q, int64_t ldq, const float* kt, int64_t ldk, const float* v, int64_t n, int64_t D,
              float scale, float* s, float* o, int64_t ldo) {
  int64_t c0 = 0;
  for (; c0 + 64 <= ldk; c0 += 64) att_scores<R, 4>(q, ldq, kt, ldk, D, c0, s);
  switch ((ldk - c0) / 16) {
    case 3:
      att_scores<R, 3>(q, ldq, kt, ldk, D, c0, s);
      break;
    case 2:
      att_scores<R, 2>(q, ldq, kt, ldk, D, c0, s);
      break;
    case 1:
      att_scores<R, 1>(q, ldq, kt, ldk, D, c0, s);
      break;
    default:
      break;
  }
  float inv[kAttRows];
  att_softmax(s, ldk, R, n, scale, inv);
  int64_t d0 = 0;
  for (; d0 + 64 <= D; d0 += 64) att_pv<R, 4>(s, ldk, v, ldq, n, d0, inv, o, ldo);
  switch ((D - d0) / 16) {
    case 3:
      att_pv<R, 3>(s, ldk, v, ldq, n, d0, inv, o, ldo);
      break;
    case 2:
      att_pv<R, 2>(s, ldk, v, ldq, n, d0, inv, o, ldo);
      break;
    case 1:
      att_pv<R, 1>(s, ldk, v, ldq, n, d0, inv, o, ldo);
      break;
    default:
      break;
  }
}

}  // namespace

void encoder_attention_avx512(const float* qkv, const int64_t* lengths, float* ctx, int64_t L, int64_t Lq,
                              int64_t H, int64_t D, float scale, int64_t b, int64_t h, float* scratch) {
  using RowsFn = void (*)(const float*, int64_t, const float*, int64_t, const float*, int64_t, int64_t, float,
                          float*, float*, int64_t);
  static constexpr RowsFn table[kAttRows] = {&att_rows<1>, &att_rows<2>, &att_rows<3>,
                                             &att_rows<4>, &att_rows<5>, &att_rows<6>};
  const int64_t C = H * D, ld = 3 * C, n = lengths[b];
  const int64_t ldk = (n + 15) / 16 * 16;
  const float* q = qkv + b * L * ld + h * D;  // q: row i at q + i · ld; k, v likewise
  const float* k = q + C;
  const float* v = q + 2 * C;
  float* kt = scratch;           // kt: [D, ldk], the valid keys transposed, zero columns up to ldk
  float* s = scratch + D * ldk;  // s: [kAttRows, ldk] scores, then probabilities
  // Column d of 16 key rows per gather (rows past n read as zero); the row offsets fit in 32 bits
  // for any layout this kernel sees (16 rows of 3C floats).
  const __m512i rows =
      _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                         _mm512_set1_epi32(static_cast<int>(ld)));
  for (int64_t j0 = 0; j0 < ldk; j0 += 16) {
    const __mmask16 m = tail_mask(n - j0);
    const float* k0 = k + j0 * ld;
    for (int64_t d = 0; d < D; ++d)
      _mm512_storeu_ps(kt + d * ldk + j0, _mm512_mask_i32gather_ps(_mm512_setzero_ps(), m, rows, k0 + d, 4));
  }
  float* o = ctx + b * L * C + h * D;
  for (int64_t i = 0; i < Lq; i += kAttRows) {
    const int64_t r = std::min<int64_t>(kAttRows, Lq - i);
    table[r - 1](q + i * ld, ld, kt, ldk, v, n, D, scale, s, o + i * C, C);
  }
}

}  // namespace attn::kernels::cpu::detail
