// AVX2 encoder row kernels (src/kernels/cpu/encoder_kernels.h): the AVX-512 file's add_bias, bias_gelu
// and residual_layer_norm with 8 lanes and a masked tail, for CPUs without AVX-512, where they ran the
// scalar oracle (bias + GELU through libm's erff: a tenth of MiniLM's 16-token latency). erf is
// avx2::erf_ps (vec_avx2.h: a division where the AVX-512 file takes a refined reciprocal estimate, so
// the last bits may differ from the AVX-512 kernel's). Row sums accumulate in 8 fp32 lanes; held to double by
// tests/kernels/encoder_kernels_test.cc like the AVX-512 versions. Only intrinsics, vec_avx2.h and this
// file's anonymous namespace are used here (no weak symbols: see scripts/check-isa-objects.sh).
#include <immintrin.h>
#include <math.h>

#include <algorithm>
#include <cstdint>

#include "kernels/cpu/encoder_kernels.h"
#include "kernels/cpu/vec_avx2.h"

namespace attn::kernels::cpu::detail {
namespace {

using avx2::erf_ps;
using avx2::hsum;
using avx2::lanes;
using avx2::load_n;
using avx2::store_n;

}  // namespace

void add_bias_avx2(float* x, const float* bias, int64_t rows, int64_t C) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < C; c += 8) {
      float* p = x + r * C + c;
      store_n(p, C - c, _mm256_add_ps(load_n(p, C - c), load_n(bias + c, C - c)));
    }
}

void bias_gelu_avx2(float* x, const float* bias, int64_t rows, int64_t C) {
  const __m256 half = _mm256_set1_ps(0.5f), one = _mm256_set1_ps(1.0f);
  const __m256 inv_sqrt2 = _mm256_set1_ps(0.70710678118654752f);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < C; c += 8) {
      float* p = x + r * C + c;
      __m256 u = load_n(p, C - c);
      if (bias) u = _mm256_add_ps(u, load_n(bias + c, C - c));
      const __m256 g =
          _mm256_mul_ps(_mm256_mul_ps(half, u), _mm256_add_ps(one, erf_ps(_mm256_mul_ps(u, inv_sqrt2))));
      store_n(p, C - c, g);
    }
}

void residual_layer_norm_avx2(float* h, const float* y, const float* bias, const float* w, const float* b,
                              int64_t rows, int64_t C, float eps) {
  for (int64_t r = 0; r < rows; ++r) {
    float* hr = h + r * C;
    const float* yr = y ? y + r * C : nullptr;
    __m256 s = _mm256_setzero_ps();
    for (int64_t c = 0; c < C; c += 8) {
      __m256 v = load_n(hr + c, C - c);  // lanes past C are 0
      if (yr) v = _mm256_add_ps(v, load_n(yr + c, C - c));
      if (bias) v = _mm256_add_ps(v, load_n(bias + c, C - c));
      store_n(hr + c, C - c, v);
      s = _mm256_add_ps(s, v);
    }
    const float mean = hsum(s) / static_cast<float>(C);
    const __m256 m = _mm256_set1_ps(mean);
    __m256 q = _mm256_setzero_ps();
    for (int64_t c = 0; c < C; c += 8) {
      const __m256 valid = _mm256_castsi256_ps(lanes(C - c));
      const __m256 d = _mm256_and_ps(valid, _mm256_sub_ps(load_n(hr + c, C - c), m));
      q = _mm256_fmadd_ps(d, d, q);
    }
    const float rstd = 1.0f / sqrtf(hsum(q) / static_cast<float>(C) + eps);
    const __m256 rs = _mm256_set1_ps(rstd);
    for (int64_t c = 0; c < C; c += 8) {
      const __m256 d = _mm256_mul_ps(_mm256_sub_ps(load_n(hr + c, C - c), m), rs);
      store_n(hr + c, C - c, _mm256_fmadd_ps(d, load_n(w + c, C - c), load_n(b + c, C - c)));
    }
  }
}

}  // namespace attn::kernels::cpu::detail

// ---- encoder attention (encoder_kernels.h) --------------------------------------------------------------
// encoder_attention_avx512's structure on 8 lanes and 16 registers: the valid keys transposed once per
// (sequence, head) by 8 × 8 register transposes (AVX-512 gathers them), then blocks of 6 query rows:
// scores 16 keys at a time, the softmax over the valid keys, P·V 16 value columns at a time. 6 × 2
// accumulators + 2 key (or value) vectors + 1 broadcast = 15 of the 16 registers. D a multiple of 8.
namespace attn::kernels::cpu::detail {
namespace {

constexpr int kAttRows = 6;

// c rows [R] (row stride ldc), columns [0, 8 NC) = row_scale[r] (1 when null) · Σ_{k < K} a[r, k] · b[k, :]
// (a: row r at a + r · lda; b: row k at b + k · ldb): the scores (a = q, b = the transposed keys) and
// P·V (a = the probabilities, b = the values, row_scale = 1 / row sums).
template <int R, int NC>
inline void att_block(const float* a, int64_t lda, const float* b, int64_t ldb, int64_t K,
                      const float* row_scale, float* c, int64_t ldc) {
  __m256 acc[R][NC];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 2
    for (int j = 0; j < NC; ++j) acc[r][j] = _mm256_setzero_ps();
  for (int64_t k = 0; k < K; ++k) {
    __m256 bv[NC];
#pragma GCC unroll 2
    for (int j = 0; j < NC; ++j) bv[j] = _mm256_loadu_ps(b + k * ldb + 8 * j);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m256 ab = _mm256_broadcast_ss(a + r * lda + k);
#pragma GCC unroll 2
      for (int j = 0; j < NC; ++j) acc[r][j] = _mm256_fmadd_ps(ab, bv[j], acc[r][j]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    const __m256 sc = _mm256_set1_ps(row_scale ? row_scale[r] : 1.0f);
#pragma GCC unroll 2
    for (int j = 0; j < NC; ++j)
      _mm256_storeu_ps(c + r * ldc + 8 * j, row_scale ? _mm256_mul_ps(acc[r][j], sc) : acc[r][j]);
  }
}

// exp(scale · (s − max)) over the n valid columns of each of R rows (zero past n, up to ldk);
// inv[r] = 1 / row sum.
inline void att_softmax(float* s, int64_t ldk, int R, int64_t n, float scale, float* inv) {
  const __m256 sc = _mm256_set1_ps(scale);
  for (int r = 0; r < R; ++r) {
    float* row = s + r * ldk;
    __m256 mx = _mm256_set1_ps(-INFINITY);
    for (int64_t j = 0; j < n; j += 8) mx = _mm256_max_ps(mx, avx2::load_or(row + j, n - j, -INFINITY));
    const __m256 m = _mm256_set1_ps(avx2::hmax(mx));
    __m256 z = _mm256_setzero_ps();
    for (int64_t j = 0; j < n; j += 8) {
      const __m256 valid = _mm256_castsi256_ps(lanes(n - j));
      const __m256 e =
          _mm256_and_ps(valid, avx2::exp_ps(_mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(row + j), m), sc)));
      _mm256_storeu_ps(row + j, e);
      z = _mm256_add_ps(z, e);
    }
    inv[r] = 1.0f / hsum(z);
  }
}

template <int R>
void att_rows(const float* q, int64_t ldq, const float* kt, int64_t ldk, const float* v, int64_t n, int64_t D,
              float scale, float* s, float* o, int64_t ldo) {
  int64_t c0 = 0;  // scores: s [R, ldk] = q [R, D] · kt [D, ldk]
  for (; c0 + 16 <= ldk; c0 += 16) att_block<R, 2>(q, ldq, kt + c0, ldk, D, nullptr, s + c0, ldk);
  if (c0 < ldk) att_block<R, 1>(q, ldq, kt + c0, ldk, D, nullptr, s + c0, ldk);
  float inv[kAttRows];
  att_softmax(s, ldk, R, n, scale, inv);
  int64_t d0 = 0;  // o [R, D] = inv · p [R, n] · v [n, D]
  for (; d0 + 16 <= D; d0 += 16) att_block<R, 2>(s, ldk, v + d0, ldq, n, inv, o + d0, ldo);
  if (d0 < D) att_block<R, 1>(s, ldk, v + d0, ldq, n, inv, o + d0, ldo);
}

}  // namespace

void encoder_attention_avx2(const float* qkv, const int64_t* lengths, float* ctx, int64_t L, int64_t Lq,
                            int64_t H, int64_t D, float scale, int64_t b, int64_t h, float* scratch) {
  using RowsFn = void (*)(const float*, int64_t, const float*, int64_t, const float*, int64_t, int64_t, float,
                          float*, float*, int64_t);
  static constexpr RowsFn table[kAttRows] = {&att_rows<1>, &att_rows<2>, &att_rows<3>,
                                             &att_rows<4>, &att_rows<5>, &att_rows<6>};
  const int64_t C = H * D, ld = 3 * C, n = lengths[b];
  const int64_t ldk = (n + 7) / 8 * 8;
  const float* q = qkv + b * L * ld + h * D;  // q: row i at q + i · ld; k, v likewise
  const float* k = q + C;
  const float* v = q + 2 * C;
  float* kt = scratch;           // kt: [D, ldk], the valid keys transposed, zero columns up to ldk
  float* s = scratch + D * ldk;  // s: [kAttRows, ldk] scores, then probabilities
  for (int64_t j0 = 0; j0 < ldk; j0 += 8)
    for (int64_t d0 = 0; d0 < D; d0 += 8) {
      __m256 r[8];
#pragma GCC unroll 8
      for (int t = 0; t < 8; ++t)
        r[t] = j0 + t < n ? _mm256_loadu_ps(k + (j0 + t) * ld + d0) : _mm256_setzero_ps();
      avx2::transpose8(r);
#pragma GCC unroll 8
      for (int t = 0; t < 8; ++t) _mm256_storeu_ps(kt + (d0 + t) * ldk + j0, r[t]);
    }
  float* o = ctx + b * L * C + h * D;
  for (int64_t i = 0; i < Lq; i += kAttRows) {
    const int64_t r = std::min<int64_t>(kAttRows, Lq - i);
    table[r - 1](q + i * ld, ld, kt, ldk, v, n, D, scale, s, o + i * C, C);
  }
}

}  // namespace attn::kernels::cpu::detail
