// sgemm_f32's AVX-512 building blocks (gemm_f32.h): packing with masked loads and 16 × 16
// register transposes, and the 12 × 32 register block (24 zmm accumulators, the A value
// broadcast from memory into the FMA).
// GCC 12 reports the intrinsics' deliberately undefined pass-through operands as maybe-uninitialized.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include "kernels/cpu/gemm_f32.h"
#include "kernels/cpu/vec_avx512.h"

namespace attn::kernels::cpu::detail {
namespace {

#define ATTN_INLINE inline __attribute__((always_inline))

using avx512::tail_mask;
using avx512::transpose16;

constexpr int kMr = 12, kNr = 32;

// Rows of k contiguous over the columns: for each k, every panel takes its W columns of row k,
// so the rows are read once, front to back. Row k + 16 is fetched meanwhile, its last line too (a row of
// w columns starting mid-line spans one line more): with a long stride (op(A) of a dW product over a
// vocabulary, rows 32 KB apart, 64 MB in all) each row is a short run from memory that the hardware
// prefetcher does not fetch in time: 178-183 GFLOP/s there against 149-160 with row k + 4 and no last
// line (Zen 5, 1 thread; docs/benchmarks.md).
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
      const int c0 = q * W;
      float* o = out + (int64_t{q} * kc + k) * W;
      for (int c = 0; c < W; c += 16) {
        const __m512 v = _mm512_maskz_loadu_ps(tail_mask(w - c0 - c), row + c0 + c);
        _mm512_mask_storeu_ps(o + c, tail_mask(W - c), v);
      }
    }
  }
}

// Columns contiguous over k: groups of up to 16 columns of one panel, 16 values of k at a time,
// transposed in registers and stored as rows of the panel.
void pack_cols(const float* src, int64_t ld, int kc, int w, int W, float* out) {
  const int npanels = (w + W - 1) / W;
  for (int q = 0; q < npanels; ++q)
    for (int g0 = 0; g0 < W; g0 += 16) {
      const int G = W - g0 < 16 ? W - g0 : 16, c0 = q * W + g0;
      const __mmask16 store = tail_mask(G);
      float* o = out + int64_t{q} * kc * W + g0;
      for (int k0 = 0; k0 < kc; k0 += 16) {
        const __mmask16 m = tail_mask(kc - k0);
        __m512 r[16];
#pragma GCC unroll 16
        for (int i = 0; i < 16; ++i) {
          r[i] = i < G && c0 + i < w ? _mm512_maskz_loadu_ps(m, src + int64_t{c0 + i} * ld + k0)
                                     : _mm512_setzero_ps();
          // Each of the G columns is its own stream (ld apart): fetch 8 lines ahead of each, which the
          // hardware prefetcher does not keep up with once op(A) comes from memory (K 8000: 64 MB).
          if (i < G && c0 + i < w && k0 + 128 < kc)
            _mm_prefetch(reinterpret_cast<const char*>(src + int64_t{c0 + i} * ld + k0 + 128), _MM_HINT_T0);
        }
        transpose16(r);
        const int nk = kc - k0 < 16 ? kc - k0 : 16;
        for (int t = 0; t < nk; ++t) _mm512_mask_storeu_ps(o + int64_t{k0 + t} * W, store, r[t]);
      }
    }
}

// kStrided: b is op(B) in place (row k at b + k · ldb, columns [0, n) read); else a packed panel.
// R: the rows computed (m <= R; the a panel still holds kMr values per k). A panel of fewer than kMr
// valid rows (the last of a product whose M is not a multiple of 12, e.g. 128 = 10 · 12 + 8) runs only
// the FMAs of its rows; each row's sums are the same chain of FMAs whatever R is.
template <bool kStrided, int R = kMr>
ATTN_INLINE void block_impl(int kc, const float* a, const float* b, int64_t ldb, float* c, int64_t ldc, int m,
                            int n, float alpha, float beta) {
  const __mmask16 m0 = tail_mask(n), m1 = tail_mask(n - 16);
  __m512 acc[R][2];
#pragma GCC unroll 12
  for (int r = 0; r < R; ++r) {
    acc[r][0] = acc[r][1] = _mm512_setzero_ps();
    // C is read (beta != 0) or written after the k loop: start fetching it now.
    if (r < m) {
      _mm_prefetch(reinterpret_cast<const char*>(c + r * ldc), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(c + r * ldc + 31), _MM_HINT_T0);
    }
  }
  for (int k = 0; k < kc; ++k) {
    __m512 b0, b1;
    if constexpr (kStrided) {
      b0 = _mm512_maskz_loadu_ps(m0, b);
      b1 = _mm512_maskz_loadu_ps(m1, b + 16);
      _mm_prefetch(reinterpret_cast<const char*>(b + 4 * ldb), _MM_HINT_T0);
    } else {
      b0 = _mm512_load_ps(b);
      b1 = _mm512_load_ps(b + 16);
      _mm_prefetch(reinterpret_cast<const char*>(b + 8 * kNr), _MM_HINT_T0);
    }
#pragma GCC unroll 12
    for (int r = 0; r < R; ++r) {
      const __m512 ar = _mm512_set1_ps(a[r]);
      acc[r][0] = _mm512_fmadd_ps(ar, b0, acc[r][0]);
      acc[r][1] = _mm512_fmadd_ps(ar, b1, acc[r][1]);
    }
    a += kMr;
    b += kStrided ? ldb : kNr;
  }
  const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
#pragma GCC unroll 12
  for (int r = 0; r < R; ++r) {
    if (r >= m) break;
    float* row = c + r * ldc;
    __m512 v0 = _mm512_mul_ps(acc[r][0], va), v1 = _mm512_mul_ps(acc[r][1], va);
    if (beta != 0) {
      v0 = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m0, row), v0);
      v1 = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m1, row + 16), v1);
    }
    _mm512_mask_storeu_ps(row, m0, v0);
    _mm512_mask_storeu_ps(row + 16, m1, v1);
  }
}

// Full panels take the 12-row body; a short last panel the body of its rows rounded up to 4, 8 or 12.
template <bool kStrided>
void block_rows(int kc, const float* a, const float* b, int64_t ldb, float* c, int64_t ldc, int m, int n,
                float alpha, float beta) {
  if (m > 8)
    block_impl<kStrided, 12>(kc, a, b, ldb, c, ldc, m, n, alpha, beta);
  else if (m > 4)
    block_impl<kStrided, 8>(kc, a, b, ldb, c, ldc, m, n, alpha, beta);
  else
    block_impl<kStrided, 4>(kc, a, b, ldb, c, ldc, m, n, alpha, beta);
}

void block(int kc, const float* a, const float* b, float* c, int64_t ldc, int m, int n, float alpha,
           float beta) {
  block_rows<false>(kc, a, b, 0, c, ldc, m, n, alpha, beta);
}

void block_b(int kc, const float* a, const float* b, int64_t ldb, float* c, int64_t ldc, int m, int n,
             float alpha, float beta) {
  block_rows<true>(kc, a, b, ldb, c, ldc, m, n, alpha, beta);
}

static_assert(kNr == kF32PackedNr,
              "the pre-packed panels are this block's own: block reads them as they are");
constexpr F32GemmKernels kKernels{kMr, kNr, pack_rows, pack_cols, block, block_b, block};

#undef ATTN_INLINE

}  // namespace

const F32GemmKernels& f32_gemm_avx512_kernels() { return kKernels; }

}  // namespace attn::kernels::cpu::detail
#pragma GCC diagnostic pop
