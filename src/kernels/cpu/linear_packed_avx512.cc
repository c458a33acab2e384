// AVX-512 body of the pre-packed small-M linear (src/kernels/cpu/linear_packed.h).
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <utility>

#include "kernels/cpu/linear_packed.h"
#include "kernels/cpu/vec_avx512.h"

namespace attn::kernels::cpu::detail {
namespace {

using avx512::tail_mask;

// Rows [0, R) of x times one packed panel (K x 32): 2 x R accumulators, the panel's two
// vectors per k loaded once for all R rows, one broadcast of x per row and k.
// PF lines of the next panel prefetched per k from pf (0: none; 1: one line, the block fetches half a
// panel; 2: two lines, a whole panel). A template argument rather than a run-time test: the loop then
// carries no branch and no spilled pointer (the kernel alone, 32 rows from L2: ~104 -> ~110 GFLOP/s).
template <int R, int PF>
void packed_block(const float* x, int64_t ldx, const float* panel, const float* bias, float* y, int64_t ldy,
                  int64_t K, __mmask16 k0, __mmask16 k1, const float* pf) {
  const __m512 b0 = bias ? _mm512_maskz_loadu_ps(k0, bias) : _mm512_setzero_ps();
  const __m512 b1 = bias ? _mm512_maskz_loadu_ps(k1, bias + 16) : _mm512_setzero_ps();
  __m512 acc0[R], acc1[R];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) acc0[r] = b0, acc1[r] = b1;
  for (int64_t k = 0; k < K; ++k, panel += 32) {
    if constexpr (PF >= 1) _mm_prefetch(reinterpret_cast<const char*>(pf + k * 16 * PF), _MM_HINT_T0);
    if constexpr (PF >= 2) _mm_prefetch(reinterpret_cast<const char*>(pf + k * 32 + 16), _MM_HINT_T0);
    const __m512 w0 = _mm512_load_ps(panel);
    const __m512 w1 = _mm512_load_ps(panel + 16);
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const __m512 xr = _mm512_set1_ps(x[r * ldx + k]);
      acc0[r] = _mm512_fmadd_ps(xr, w0, acc0[r]);
      acc1[r] = _mm512_fmadd_ps(xr, w1, acc1[r]);
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
    _mm512_mask_storeu_ps(y + r * ldy, k0, acc0[r]);
    _mm512_mask_storeu_ps(y + r * ldy + 16, k1, acc1[r]);
  }
}

// One row of x times one packed panel (decoding at batch 1: the product streams the weights, so
// what counts is keeping loads in flight): four k per iteration into 4 x 2 independent
// accumulators, summed pairwise at the end, the bias added last.
void packed_row(const float* x, const float* panel, const float* bias, float* y, int64_t K, __mmask16 k0,
                __mmask16 k1) {
  __m512 a0 = _mm512_setzero_ps(), a1 = a0, b0 = a0, b1 = a0, c0 = a0, c1 = a0, d0 = a0, d1 = a0;
  int64_t k = 0;
  for (; k + 4 <= K; k += 4, panel += 4 * 32) {
    const __m512 x0 = _mm512_set1_ps(x[k]), x1 = _mm512_set1_ps(x[k + 1]);
    const __m512 x2 = _mm512_set1_ps(x[k + 2]), x3 = _mm512_set1_ps(x[k + 3]);
    a0 = _mm512_fmadd_ps(x0, _mm512_load_ps(panel), a0);
    a1 = _mm512_fmadd_ps(x0, _mm512_load_ps(panel + 16), a1);
    b0 = _mm512_fmadd_ps(x1, _mm512_load_ps(panel + 32), b0);
    b1 = _mm512_fmadd_ps(x1, _mm512_load_ps(panel + 48), b1);
    c0 = _mm512_fmadd_ps(x2, _mm512_load_ps(panel + 64), c0);
    c1 = _mm512_fmadd_ps(x2, _mm512_load_ps(panel + 80), c1);
    d0 = _mm512_fmadd_ps(x3, _mm512_load_ps(panel + 96), d0);
    d1 = _mm512_fmadd_ps(x3, _mm512_load_ps(panel + 112), d1);
  }
  for (; k < K; ++k, panel += 32) {
    const __m512 x0 = _mm512_set1_ps(x[k]);
    a0 = _mm512_fmadd_ps(x0, _mm512_load_ps(panel), a0);
    a1 = _mm512_fmadd_ps(x0, _mm512_load_ps(panel + 16), a1);
  }
  __m512 s0 = _mm512_add_ps(_mm512_add_ps(a0, b0), _mm512_add_ps(c0, d0));
  __m512 s1 = _mm512_add_ps(_mm512_add_ps(a1, b1), _mm512_add_ps(c1, d1));
  if (bias) {
    s0 = _mm512_add_ps(s0, _mm512_maskz_loadu_ps(k0, bias));
    s1 = _mm512_add_ps(s1, _mm512_maskz_loadu_ps(k1, bias + 16));
  }
  _mm512_mask_storeu_ps(y, k0, s0);
  _mm512_mask_storeu_ps(y + 16, k1, s1);
}

// dst rows [0, 16) (row stride ldd) = the transpose of src's 16 x 16 block (row stride lds), with
// non-temporal stores: a pack writes megabytes that the next product reads once from memory anyway,
// and streaming them skips reading each destination line before it is overwritten.
inline void transpose16_stream(const float* src, int64_t lds, float* dst, int64_t ldd) {
  // The zero-masking forms with every lane set are the same instructions; the plain forms start from
  // _mm512_undefined_ps(), which GCC 12 reports as uninitialized once this is inlined in a loop.
  const __mmask16 all = 0xffff;
  __m512 r[16], t[16];
#pragma GCC unroll 16
  for (int i = 0; i < 16; ++i) r[i] = _mm512_loadu_ps(src + i * lds);
    // Pairs of rows interleaved, then 4-row groups, then 128-bit blocks across 8 and 16 rows.
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_maskz_unpacklo_ps(all, r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_maskz_unpackhi_ps(all, r[2 * i], r[2 * i + 1]);
  }
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {
    r[4 * i + 0] = _mm512_maskz_shuffle_ps(all, t[4 * i + 0], t[4 * i + 2], 0x44);
    r[4 * i + 1] = _mm512_maskz_shuffle_ps(all, t[4 * i + 0], t[4 * i + 2], 0xEE);
    r[4 * i + 2] = _mm512_maskz_shuffle_ps(all, t[4 * i + 1], t[4 * i + 3], 0x44);
    r[4 * i + 3] = _mm512_maskz_shuffle_ps(all, t[4 * i + 1], t[4 * i + 3], 0xEE);
  }
#pragma GCC unroll 2
  for (int i = 0; i < 2; ++i)
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) {
      t[8 * i + j] = _mm512_maskz_shuffle_f32x4(all, r[8 * i + j], r[8 * i + 4 + j], 0x88);
      t[8 * i + 4 + j] = _mm512_maskz_shuffle_f32x4(all, r[8 * i + j], r[8 * i + 4 + j], 0xDD);
    }
#pragma GCC unroll 8
  for (int j = 0; j < 8; ++j) {
    r[j] = _mm512_maskz_shuffle_f32x4(all, t[j], t[8 + j], 0x88);
    r[8 + j] = _mm512_maskz_shuffle_f32x4(all, t[j], t[8 + j], 0xDD);
  }
#pragma GCC unroll 16
  for (int i = 0; i < 16; ++i) _mm512_stream_ps(dst + i * ldd, r[i]);
}

constexpr int kRows = 12;  // 2 x 12 accumulators + 2 panel vectors + 1 broadcast of the 32 registers

using BlockFn = void (*)(const float*, int64_t, const float*, const float*, float*, int64_t, int64_t,
                         __mmask16, __mmask16, const float*);

// table<PF>[R - 1] = packed_block<R, PF>
template <int PF, int... Rs>
constexpr std::array<BlockFn, sizeof...(Rs)> block_table(std::integer_sequence<int, Rs...>) {
  return {&packed_block<Rs + 1, PF>...};
}

}  // namespace

void linear_packed_avx512(const float* x, int64_t ldx, const float* packed, const float* bias, float* y,
                          int64_t ldy, int64_t M, int64_t N, int64_t K, int64_t p0, int64_t p1,
                          bool same_rows) {
  static constexpr std::array<std::array<BlockFn, kRows>, 3> table = {
      block_table<0>(std::make_integer_sequence<int, kRows>{}),
      block_table<1>(std::make_integer_sequence<int, kRows>{}),
      block_table<2>(std::make_integer_sequence<int, kRows>{})};
  if (M == 1 && !same_rows) {
    for (int64_t p = p0; p < p1; ++p) {
      const int64_t n = p * kPackedPanel;
      packed_row(x, packed + p * K * kPackedPanel, bias ? bias + n : nullptr, y + n, K, tail_mask(N - n),
                 tail_mask(N - n - 16));
    }
    return;
  }
  const int64_t nb = (M + kRows - 1) / kRows;  // balanced row blocks
  for (int64_t p = p0; p < p1; ++p) {
    const int64_t n = p * kPackedPanel;
    const __mmask16 k0 = tail_mask(N - n), k1 = tail_mask(N - n - 16);
    const float* panel = packed + p * K * kPackedPanel;
    // The first block reads the panel from memory or L3, the others from L2: while they run, fetch the
    // next panel (K lines per block over the first two, or all 2K in a lone block), so that its first
    // block starts warm (decode_bench batch 32: ~10% on the products out of L2).
    const float* next = p + 1 < p1 ? panel + K * kPackedPanel : nullptr;
    for (int64_t i = 0, m = 0; i < nb; ++i) {
      const int64_t r = M / nb + (i < M % nb ? 1 : 0);
      const bool fetch = next != nullptr && i < 2;
      const std::size_t pf_lines = fetch ? (nb == 1 ? 2 : 1) : 0;
      table[pf_lines][static_cast<std::size_t>(r - 1)](x + m * ldx, ldx, panel, bias ? bias + n : nullptr,
                                                       y + m * ldy + n, ldy, K, k0, k1,
                                                       fetch ? next + i * K * 16 : nullptr);
      m += r;
    }
  }
}

void pack_panel_avx512(const float* w, int64_t K, float* dst) {
  for (int64_t k = 0; k < K; k += 16)
    for (int64_t h = 0; h < kPackedPanel; h += 16)
      transpose16_stream(w + h * K + k, K, dst + k * kPackedPanel + h, kPackedPanel);
  _mm_sfence();  // the streamed lines are visible before any thread reads the panel
}

}  // namespace attn::kernels::cpu::detail
