// sgemm_f32's AVX2 building blocks (gemm_f32.h): packing with fixed-size row copies and 8 × 8
// register transposes, and the 6 × 16 register block (12 ymm accumulators). Partial blocks are
// computed whole and only their valid part is written, with the same arithmetic per element.
#include <immintrin.h>

#include "kernels/cpu/gemm_f32.h"
#include "kernels/cpu/vec_avx2.h"

namespace attn::kernels::cpu::detail {
namespace {

constexpr int kMr = 6, kNr = 16;

// Copies the w <= W valid values of one panel row and zeroes the rest: whole 6- and 16-value rows (the
// panel widths mr and nr) with fixed-size moves, anything else element by element.
inline void copy_panel_row(const float* src, int w, int W, float* o) {
  if (w == W && W == kNr) {
    _mm256_storeu_ps(o, _mm256_loadu_ps(src));
    _mm256_storeu_ps(o + 8, _mm256_loadu_ps(src + 8));
  } else if (w == W && W == kMr) {
    _mm_storeu_ps(o, _mm_loadu_ps(src));
    _mm_storel_pi(reinterpret_cast<__m64*>(o + 4),
                  _mm_castpd_ps(_mm_load_sd(reinterpret_cast<const double*>(src + 4))));
  } else {
    for (int c = 0; c < w; ++c) o[c] = src[c];
    for (int c = w; c < W; ++c) o[c] = 0.f;
  }
}

// Rows of k contiguous over the columns: for each k, every panel takes its W columns of row k. Row
// k + 16 is fetched meanwhile, its last line too, as in the AVX-512 body (gemm_f32_avx512.cc says why).
constexpr int kPackRowsAhead = 16;

void pack_rows(const float* src, int64_t ld, int kc, int w, int W, float* out) {
  const int npanels = (w + W - 1) / W;
  for (int k = 0; k < kc; ++k) {
    const float* row = src + int64_t{k} * ld;
    if (k + kPackRowsAhead < kc) {
      const float* f = row + kPackRowsAhead * ld;
      for (int c = 0; c < w; c += 16) _mm_prefetch(reinterpret_cast<const char*>(f + c), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(f + w - 1), _MM_HINT_T0);
    }
    for (int q = 0; q < npanels; ++q) {
      const int c0 = q * W, n = w - c0 < W ? w - c0 : W;
      copy_panel_row(row + c0, n, W, out + (int64_t{q} * kc + k) * W);
    }
  }
}

// Columns contiguous over k: groups of up to 8 columns of one panel, 8 values of k at a time, transposed
// in registers and stored as rows of the panel (6 or 8 values each); a last run of fewer than 8 values
// of k element by element.
void pack_cols(const float* src, int64_t ld, int kc, int w, int W, float* out) {
  const int npanels = (w + W - 1) / W;
  const int kc8 = kc / 8 * 8;
  for (int q = 0; q < npanels; ++q)
    for (int g0 = 0; g0 < W; g0 += 8) {
      const int G = W - g0 < 8 ? W - g0 : 8, c0 = q * W + g0;
      const int valid = w - c0 < 0 ? 0 : w - c0 < G ? w - c0 : G;  // columns of the group inside w
      float* o = out + int64_t{q} * kc * W + g0;
      for (int k0 = 0; k0 < kc8; k0 += 8) {
        __m256 r[8];
#pragma GCC unroll 8
        for (int i = 0; i < 8; ++i) {
          r[i] = i < valid ? _mm256_loadu_ps(src + int64_t{c0 + i} * ld + k0) : _mm256_setzero_ps();
          // One stream per column, ld apart: 8 lines ahead of each, once per line (as the AVX-512 body).
          if (i < valid && (k0 & 15) == 0 && k0 + 128 < kc)
            _mm_prefetch(reinterpret_cast<const char*>(src + int64_t{c0 + i} * ld + k0 + 128), _MM_HINT_T0);
        }
        avx2::transpose8(r);
#pragma GCC unroll 8
        for (int t = 0; t < 8; ++t) {
          float* dst = o + int64_t{k0 + t} * W;
          if (G == 8) {
            _mm256_storeu_ps(dst, r[t]);
          } else if (G == 6) {
            _mm_storeu_ps(dst, _mm256_castps256_ps128(r[t]));
            _mm_storel_pi(reinterpret_cast<__m64*>(dst + 4), _mm256_extractf128_ps(r[t], 1));
          } else {
            alignas(32) float tmp[8];
            _mm256_store_ps(tmp, r[t]);
            for (int c = 0; c < G; ++c) dst[c] = tmp[c];
          }
        }
      }
      for (int k = kc8; k < kc; ++k)
        for (int c = 0; c < G; ++c) o[int64_t{k} * W + c] = c < valid ? src[int64_t{c0 + c} * ld + k] : 0.f;
    }
}

// kLdb 0: b is op(B) in place (row k at b + k · ldb, columns [0, n) read); else a packed panel with rows
// kLdb floats apart (16: this path's own panels; 32: the pre-packed weights of linear_packed.h).
template <int kLdb>
inline __attribute__((always_inline)) void block_impl(int kc, const float* a, const float* b, int64_t ldb,
                                                      float* c, int64_t ldc, int m, int n, float alpha,
                                                      float beta) {
  // Lanes [0, n) and [8, n) of the two column vectors (the strided loads read no further).
  const __m256i k0 = avx2::lanes(n), k1 = avx2::lanes(n - 8);
  __m256 acc[kMr][2];
#pragma GCC unroll 6
  for (int r = 0; r < kMr; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
  for (int k = 0; k < kc; ++k) {
    __m256 b0, b1;
    if constexpr (kLdb == 0) {
      b0 = _mm256_maskload_ps(b, k0);
      b1 = _mm256_maskload_ps(b + 8, k1);
      _mm_prefetch(reinterpret_cast<const char*>(b + 4 * ldb), _MM_HINT_T0);
    } else {
      b0 = _mm256_load_ps(b);
      b1 = _mm256_load_ps(b + 8);
      _mm_prefetch(reinterpret_cast<const char*>(b + 8 * kLdb), _MM_HINT_T0);
    }
#pragma GCC unroll 6
    for (int r = 0; r < kMr; ++r) {
      const __m256 ar = _mm256_broadcast_ss(a + r);
      acc[r][0] = _mm256_fmadd_ps(ar, b0, acc[r][0]);
      acc[r][1] = _mm256_fmadd_ps(ar, b1, acc[r][1]);
    }
    a += kMr;
    b += kLdb == 0 ? ldb : kLdb;
  }
  const __m256 va = _mm256_set1_ps(alpha), vb = _mm256_set1_ps(beta);
  if (m == kMr && n == kNr) {
#pragma GCC unroll 6
    for (int r = 0; r < kMr; ++r) {
      float* row = c + r * ldc;
      __m256 v0 = _mm256_mul_ps(acc[r][0], va), v1 = _mm256_mul_ps(acc[r][1], va);
      if (beta != 0) {
        v0 = _mm256_fmadd_ps(vb, _mm256_loadu_ps(row), v0);
        v1 = _mm256_fmadd_ps(vb, _mm256_loadu_ps(row + 8), v1);
      }
      _mm256_storeu_ps(row, v0);
      _mm256_storeu_ps(row + 8, v1);
    }
    return;
  }
  alignas(32) float t[kMr][kNr];
  // Unrolled, as every loop over acc: a loop over r left rolled indexes acc by a variable, and GCC then
  // keeps acc in memory, storing the 12 accumulators to the stack on every k step.
#pragma GCC unroll 6
  for (int r = 0; r < kMr; ++r) {
    _mm256_store_ps(t[r], _mm256_mul_ps(acc[r][0], va));
    _mm256_store_ps(t[r] + 8, _mm256_mul_ps(acc[r][1], va));
  }
  for (int r = 0; r < m; ++r)
    for (int j = 0; j < n; ++j) {
      float& out = c[r * ldc + j];
      out = beta == 0 ? t[r][j] : __builtin_fmaf(beta, out, t[r][j]);  // one vfmadd (no libm call)
    }
}

void block(int kc, const float* a, const float* b, float* c, int64_t ldc, int m, int n, float alpha,
           float beta) {
  block_impl<kNr>(kc, a, b, 0, c, ldc, m, n, alpha, beta);
}

void block_b(int kc, const float* a, const float* b, int64_t ldb, float* c, int64_t ldc, int m, int n,
             float alpha, float beta) {
  block_impl<0>(kc, a, b, ldb, c, ldc, m, n, alpha, beta);
}

void block_p32(int kc, const float* a, const float* b, float* c, int64_t ldc, int m, int n, float alpha,
               float beta) {
  block_impl<kF32PackedNr>(kc, a, b, 0, c, ldc, m, n, alpha, beta);
}

constexpr F32GemmKernels kKernels{kMr, kNr, pack_rows, pack_cols, block, block_b, block_p32};

}  // namespace

const F32GemmKernels& f32_gemm_avx2_kernels() { return kKernels; }

}  // namespace attn::kernels::cpu::detail
