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
template <int R>
void packed_block(const float* x, int64_t ldx, const float* panel, const float* bias, float* y, int64_t ldy,
                  int64_t K, __mmask16 k0, __mmask16 k1) {
  const __m512 b0 = bias ? _mm512_maskz_loadu_ps(k0, bias) : _mm512_setzero_ps();
  const __m512 b1 = bias ? _mm512_maskz_loadu_ps(k1, bias + 16) : _mm512_setzero_ps();
  __m512 acc0[R], acc1[R];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) acc0[r] = b0, acc1[r] = b1;
  for (int64_t k = 0; k < K; ++k, panel += 32) {
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

constexpr int kRows = 12;  // 2 x 12 accumulators + 2 panel vectors + 1 broadcast of the 32 registers

using BlockFn = void (*)(const float*, int64_t, const float*, const float*, float*, int64_t, int64_t,
                         __mmask16, __mmask16);

template <int... Rs>
constexpr std::array<BlockFn, sizeof...(Rs)> block_table(std::integer_sequence<int, Rs...>) {
  return {&packed_block<Rs + 1>...};
}

}  // namespace

void linear_packed_avx512(const float* x, int64_t ldx, const float* packed, const float* bias, float* y,
                          int64_t ldy, int64_t M, int64_t N, int64_t K, int64_t p0, int64_t p1) {
  static constexpr auto table = block_table(std::make_integer_sequence<int, kRows>{});
  const int64_t nb = (M + kRows - 1) / kRows;  // balanced row blocks
  for (int64_t p = p0; p < p1; ++p) {
    const int64_t n = p * kPackedPanel;
    const __mmask16 k0 = tail_mask(N - n), k1 = tail_mask(N - n - 16);
    const float* panel = packed + p * K * kPackedPanel;
    for (int64_t i = 0, m = 0; i < nb; ++i) {
      const int64_t r = M / nb + (i < M % nb ? 1 : 0);
      table[static_cast<std::size_t>(r - 1)](x + m * ldx, ldx, panel, bias ? bias + n : nullptr,
                                             y + m * ldy + n, ldy, K, k0, k1);
      m += r;
    }
  }
}

}  // namespace attn::kernels::cpu::detail
