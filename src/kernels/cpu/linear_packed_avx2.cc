// AVX2 body of the pre-packed small-M linear (src/kernels/cpu/linear_packed.h): each 32-column
// panel is done as two halves of 16 columns, up to 6 rows at a time (12 ymm accumulators, the
// half-panel's 2 vectors per k loaded once for all rows, one broadcast of x per row and k).
#include <immintrin.h>

#include <array>
#include <cstdint>
#include <utility>

#include "kernels/cpu/linear_packed.h"
#include "kernels/cpu/vec_avx2.h"

namespace attn::kernels::cpu::detail {
namespace {

using avx2::lanes;  // lanes [0, n) of 8 as a maskload/maskstore mask

// Rows [0, R) of x times 16 columns of a packed panel (row stride 32 floats); `cols` of them valid.
// pf (PF true): the same half of the panel read next, one line per k fetched into L2 alongside (into L1 it
// was evicted before use: the half being read and the half fetched are 2 x 16 KiB at K = 256).
template <int R, bool PF>
void half_block(const float* x, int64_t ldx, const float* panel, const float* bias, float* y, int64_t ldy,
                int64_t K, int64_t cols, const float* pf) {
  const __m256i k0 = lanes(cols), k1 = lanes(cols - 8);
  const __m256 b0 = bias ? _mm256_maskload_ps(bias, k0) : _mm256_setzero_ps();
  const __m256 b1 = bias ? _mm256_maskload_ps(bias + 8, k1) : _mm256_setzero_ps();
  __m256 acc0[R], acc1[R];
#pragma GCC unroll 6
  for (int r = 0; r < R; ++r) acc0[r] = b0, acc1[r] = b1;
  for (int64_t k = 0; k < K; ++k, panel += kPackedPanel) {
    if constexpr (PF) _mm_prefetch(reinterpret_cast<const char*>(pf + k * kPackedPanel), _MM_HINT_T1);
    const __m256 w0 = _mm256_load_ps(panel), w1 = _mm256_load_ps(panel + 8);
#pragma GCC unroll 6
    for (int r = 0; r < R; ++r) {
      const __m256 xr = _mm256_broadcast_ss(x + r * ldx + k);
      acc0[r] = _mm256_fmadd_ps(xr, w0, acc0[r]);
      acc1[r] = _mm256_fmadd_ps(xr, w1, acc1[r]);
    }
  }
#pragma GCC unroll 6
  for (int r = 0; r < R; ++r) {
    _mm256_maskstore_ps(y + r * ldy, k0, acc0[r]);
    _mm256_maskstore_ps(y + r * ldy + 8, k1, acc1[r]);
  }
}

// Rows [0, R) of x (R <= 2) times a whole panel in one pass: 4 x R accumulators, each output one FMA chain
// over k from its bias, as half_block's (the same bits), but each line of the panel read once, which is
// what counts where the panels stream from memory (one or two rows through a large matrix: 1.3-1.4x
// half_block's bytes per second there; one row 0.8x packed_row's, whose two chains per output sum
// differently).
template <int R, bool PF>
void full_block(const float* x, int64_t ldx, const float* panel, const float* bias, float* y, int64_t ldy,
                int64_t K, int64_t cols, const float* pf) {
  __m256i m[4];
  __m256 acc[R][4];
#pragma GCC unroll 4
  for (int c = 0; c < 4; ++c) {
    m[c] = lanes(cols - 8 * c);
    const __m256 b = bias ? _mm256_maskload_ps(bias + 8 * c, m[c]) : _mm256_setzero_ps();
#pragma GCC unroll 2
    for (int r = 0; r < R; ++r) acc[r][c] = b;
  }
  for (int64_t k = 0; k < K; ++k, panel += kPackedPanel) {
    if constexpr (PF) {  // both lines of the next panel's row k
      _mm_prefetch(reinterpret_cast<const char*>(pf + k * kPackedPanel), _MM_HINT_T1);
      _mm_prefetch(reinterpret_cast<const char*>(pf + k * kPackedPanel + 16), _MM_HINT_T1);
    }
    __m256 w[4];
#pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) w[c] = _mm256_load_ps(panel + 8 * c);
#pragma GCC unroll 2
    for (int r = 0; r < R; ++r) {
      const __m256 xr = _mm256_broadcast_ss(x + r * ldx + k);
#pragma GCC unroll 4
      for (int c = 0; c < 4; ++c) acc[r][c] = _mm256_fmadd_ps(xr, w[c], acc[r][c]);
    }
  }
#pragma GCC unroll 2
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) _mm256_maskstore_ps(y + r * ldy + 8 * c, m[c], acc[r][c]);
}

// One row of x times a whole packed panel (decoding at batch 1, where the product streams the
// weights): the panel is read once, two k per iteration into 2 x 4 independent accumulators.
void packed_row(const float* x, const float* panel, const float* bias, float* y, int64_t K, int64_t cols) {
  __m256 a[4], b[4];
#pragma GCC unroll 4
  for (int c = 0; c < 4; ++c) a[c] = _mm256_setzero_ps(), b[c] = _mm256_setzero_ps();
  int64_t k = 0;
  for (; k + 2 <= K; k += 2, panel += 2 * kPackedPanel) {
    const __m256 x0 = _mm256_broadcast_ss(x + k), x1 = _mm256_broadcast_ss(x + k + 1);
#pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) {
      a[c] = _mm256_fmadd_ps(x0, _mm256_load_ps(panel + 8 * c), a[c]);
      b[c] = _mm256_fmadd_ps(x1, _mm256_load_ps(panel + kPackedPanel + 8 * c), b[c]);
    }
  }
  if (k < K) {
    const __m256 x0 = _mm256_broadcast_ss(x + k);
#pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) a[c] = _mm256_fmadd_ps(x0, _mm256_load_ps(panel + 8 * c), a[c]);
  }
#pragma GCC unroll 4
  for (int c = 0; c < 4; ++c) {
    const __m256i m = lanes(cols - 8 * c);
    __m256 s = _mm256_add_ps(a[c], b[c]);
    if (bias) s = _mm256_add_ps(s, _mm256_maskload_ps(bias + 8 * c, m));
    _mm256_maskstore_ps(y + 8 * c, m, s);
  }
}

constexpr int kRows = 6;  // 2 x 6 accumulators + 2 panel vectors + 1 broadcast of the 16 registers

using HalfFn = void (*)(const float*, int64_t, const float*, const float*, float*, int64_t, int64_t, int64_t,
                        const float*);

template <bool PF, int... Rs>
constexpr std::array<HalfFn, sizeof...(Rs)> half_table(std::integer_sequence<int, Rs...>) {
  return {&half_block<Rs + 1, PF>...};
}

}  // namespace

void linear_packed_avx2(const float* x, int64_t ldx, const float* packed, const float* bias, float* y,
                        int64_t ldy, int64_t M, int64_t N, int64_t K, int64_t p0, int64_t p1,
                        bool same_rows) {
  static constexpr auto table = half_table<false>(std::make_integer_sequence<int, kRows>{});
  static constexpr auto table_pf = half_table<true>(std::make_integer_sequence<int, kRows>{});
  if (M == 1 && !same_rows) {
    for (int64_t p = p0; p < p1; ++p) {
      const int64_t n = p * kPackedPanel;
      packed_row(x, packed + p * K * kPackedPanel, bias ? bias + n : nullptr, y + n, K, N - n);
    }
    return;
  }
  if (M <= 2) {  // each panel in one pass, the next one fetched into L2 alongside
    for (int64_t p = p0; p < p1; ++p) {
      const int64_t n = p * kPackedPanel;
      const float* panel = packed + p * K * kPackedPanel;
      const float* b = bias ? bias + n : nullptr;
      if (p + 1 < p1)
        (M == 1 ? full_block<1, true> : full_block<2, true>)(x, ldx, panel, b, y + n, ldy, K, N - n,
                                                             panel + K * kPackedPanel);
      else
        (M == 1 ? full_block<1, false> : full_block<2, false>)(x, ldx, panel, b, y + n, ldy, K, N - n,
                                                               nullptr);
    }
    return;
  }
  const int64_t nb = (M + kRows - 1) / kRows;  // balanced row blocks
  // The first row block's pass over each half of a panel also fetches that half of the next panel of the
  // range into L2 (the passes after it read the half from L1): without it every panel's first pass waited
  // on memory. ATTN_ISA=avx2, 1 thread, alternated: decode_bench --batch 32 4,436-5,966 -> 5,706-7,195
  // tokens/s, MiniLM 1 x 16 7.6-8.4 -> 5.1-6.3 ms (into L1 instead: within the spread).
  for (int64_t p = p0; p < p1; ++p) {
    const float* panel = packed + p * K * kPackedPanel;
    const float* next = p + 1 < p1 ? panel + K * kPackedPanel : nullptr;
    for (int64_t h = 0; h < kPackedPanel; h += 16) {
      const int64_t n = p * kPackedPanel + h;
      if (n >= N) break;
      for (int64_t i = 0, m = 0; i < nb; ++i) {
        const int64_t r = M / nb + (i < M % nb ? 1 : 0);
        const bool pf = i == 0 && next != nullptr;
        (pf ? table_pf : table)[static_cast<std::size_t>(r - 1)](x + m * ldx, ldx, panel + h,
                                                                 bias ? bias + n : nullptr, y + m * ldy + n,
                                                                 ldy, K, N - n, pf ? next + h : nullptr);
        m += r;
      }
    }
  }
}

}  // namespace attn::kernels::cpu::detail
