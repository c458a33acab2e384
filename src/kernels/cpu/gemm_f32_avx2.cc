// sgemm_f32's AVX2 building blocks (gemm_f32.h): plain packing loops (vectorised by the
// compiler for AVX2) and the 6 × 16 register block (12 ymm accumulators). Partial blocks are
// computed whole and only their valid part is written, with the same arithmetic per element.
#include <immintrin.h>

#include "kernels/cpu/gemm_f32.h"

namespace attn::kernels::cpu::detail {
namespace {

constexpr int kMr = 6, kNr = 16;

void pack_rows(const float* src, int64_t ld, int kc, int w, int W, float* out) {
  const int npanels = (w + W - 1) / W;
  for (int k = 0; k < kc; ++k) {
    const float* row = src + int64_t{k} * ld;
    for (int q = 0; q < npanels; ++q) {
      const int c0 = q * W, n = w - c0 < W ? w - c0 : W;
      float* o = out + (int64_t{q} * kc + k) * W;
      for (int c = 0; c < n; ++c) o[c] = row[c0 + c];
      for (int c = n; c < W; ++c) o[c] = 0.f;
    }
  }
}

void pack_cols(const float* src, int64_t ld, int kc, int w, int W, float* out) {
  const int npanels = (w + W - 1) / W;
  for (int q = 0; q < npanels; ++q) {
    float* o = out + int64_t{q} * kc * W;
    for (int c = 0; c < W; ++c) {
      const int col = q * W + c;
      if (col < w) {
        const float* s = src + int64_t{col} * ld;
        for (int k = 0; k < kc; ++k) o[int64_t{k} * W + c] = s[k];
      } else {
        for (int k = 0; k < kc; ++k) o[int64_t{k} * W + c] = 0.f;
      }
    }
  }
}

// kStrided: b is op(B) in place (row k at b + k · ldb, columns [0, n) read); else a packed panel.
template <bool kStrided>
inline __attribute__((always_inline)) void block_impl(int kc, const float* a, const float* b, int64_t ldb,
                                                      float* c, int64_t ldc, int m, int n, float alpha,
                                                      float beta) {
  // Lanes [0, n) and [8, n) of the two column vectors (the strided loads read no further).
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256i k0 = _mm256_cmpgt_epi32(_mm256_set1_epi32(n), lane);
  const __m256i k1 = _mm256_cmpgt_epi32(_mm256_set1_epi32(n - 8), lane);
  __m256 acc[kMr][2];
#pragma GCC unroll 6
  for (int r = 0; r < kMr; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
  for (int k = 0; k < kc; ++k) {
    __m256 b0, b1;
    if constexpr (kStrided) {
      b0 = _mm256_maskload_ps(b, k0);
      b1 = _mm256_maskload_ps(b + 8, k1);
      _mm_prefetch(reinterpret_cast<const char*>(b + 4 * ldb), _MM_HINT_T0);
    } else {
      b0 = _mm256_load_ps(b);
      b1 = _mm256_load_ps(b + 8);
      _mm_prefetch(reinterpret_cast<const char*>(b + 8 * kNr), _MM_HINT_T0);
    }
#pragma GCC unroll 6
    for (int r = 0; r < kMr; ++r) {
      const __m256 ar = _mm256_broadcast_ss(a + r);
      acc[r][0] = _mm256_fmadd_ps(ar, b0, acc[r][0]);
      acc[r][1] = _mm256_fmadd_ps(ar, b1, acc[r][1]);
    }
    a += kMr;
    b += kStrided ? ldb : kNr;
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
  block_impl<false>(kc, a, b, 0, c, ldc, m, n, alpha, beta);
}

void block_b(int kc, const float* a, const float* b, int64_t ldb, float* c, int64_t ldc, int m, int n,
             float alpha, float beta) {
  block_impl<true>(kc, a, b, ldb, c, ldc, m, n, alpha, beta);
}

constexpr F32GemmKernels kKernels{kMr, kNr, pack_rows, pack_cols, block, block_b};

}  // namespace

const F32GemmKernels& f32_gemm_avx2_kernels() { return kKernels; }

}  // namespace attn::kernels::cpu::detail
