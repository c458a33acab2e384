#include "kernels/cpu/linear_packed.h"

#include <attn/core/parallel.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "kernels/cpu/isa.h"

namespace attn::kernels::cpu {

int64_t linear_packed_size(int64_t N, int64_t K) {
  return (N + kPackedPanel - 1) / kPackedPanel * K * kPackedPanel;
}

void pack_linear_weight(const float* w, int64_t N, int64_t K, float* packed) {
  // w: [N, K] -> packed: [P, K, 32]
  const int64_t P = (N + kPackedPanel - 1) / kPackedPanel;
  // Full panels by 16 x 16 transposes where AVX-512 runs (the same values: a pack only moves floats).
  const bool fast =
      active_isa() == Isa::avx512 && K % 16 == 0 && reinterpret_cast<uintptr_t>(packed) % 64 == 0;
  parallel_for(P, 1, [&](int64_t p0, int64_t p1, int) {
    for (int64_t p = p0; p < p1; ++p) {
      float* dst = packed + p * K * kPackedPanel;
      const int64_t cols = std::min(kPackedPanel, N - p * kPackedPanel);
      if (fast && cols == kPackedPanel) {
        detail::pack_panel_avx512(w + p * kPackedPanel * K, K, dst);
        continue;
      }
      if (cols < kPackedPanel)
        std::memset(dst, 0, sizeof(float) * static_cast<std::size_t>(K * kPackedPanel));
      for (int64_t j = 0; j < cols; ++j) {
        const float* src = w + (p * kPackedPanel + j) * K;
        for (int64_t k = 0; k < K; ++k) dst[k * kPackedPanel + j] = src[k];
      }
    }
  });
}

void pack_linear_weight_t(const float* wt, int64_t K, int64_t N, float* packed) {
  // wt: [K, N] -> packed: [P, K, 32]; each panel row is one run of up to 32 floats of a row of wt.
  const int64_t P = (N + kPackedPanel - 1) / kPackedPanel;
  parallel_for(P, 1, [&](int64_t p0, int64_t p1, int) {
    for (int64_t p = p0; p < p1; ++p) {
      float* dst = packed + p * K * kPackedPanel;
      const int64_t n0 = p * kPackedPanel, cols = std::min(kPackedPanel, N - n0);
      for (int64_t k = 0; k < K; ++k) {
        float* d = dst + k * kPackedPanel;
        std::memcpy(d, wt + k * N + n0, sizeof(float) * static_cast<std::size_t>(cols));
        if (cols < kPackedPanel)
          std::memset(d + cols, 0, sizeof(float) * static_cast<std::size_t>(kPackedPanel - cols));
      }
    }
  });
}

void unpack_linear_weight_t(const float* packed, int64_t K, int64_t N, float* wt, int64_t ldw) {
  const int64_t P = (N + kPackedPanel - 1) / kPackedPanel;
  parallel_for(K, 64, [&](int64_t k0, int64_t k1, int) {
    for (int64_t k = k0; k < k1; ++k)
      for (int64_t p = 0; p < P; ++p) {
        const int64_t n0 = p * kPackedPanel, cols = std::min(kPackedPanel, N - n0);
        std::memcpy(wt + k * ldw + n0, packed + (p * K + k) * kPackedPanel,
                    sizeof(float) * static_cast<std::size_t>(cols));
      }
  });
}

namespace detail {

void linear_packed_scalar(const float* x, int64_t ldx, const float* packed, const float* bias, float* y,
                          int64_t ldy, int64_t M, int64_t N, int64_t K, int64_t p0, int64_t p1,
                          bool /*same_rows: every row is one chain here*/) {
  for (int64_t p = p0; p < p1; ++p) {
    const float* panel = packed + p * K * kPackedPanel;
    const int64_t n0 = p * kPackedPanel, cols = std::min(kPackedPanel, N - n0);
    for (int64_t m = 0; m < M; ++m)
      for (int64_t j = 0; j < cols; ++j) {
        float s = 0.0f;
        for (int64_t k = 0; k < K; ++k) s += x[m * ldx + k] * panel[k * kPackedPanel + j];
        y[m * ldy + n0 + j] = s + (bias ? bias[n0 + j] : 0.0f);
      }
  }
}

}  // namespace detail

void linear_packed(const float* x, int64_t ldx, const float* packed, const float* bias, float* y, int64_t ldy,
                   int64_t M, int64_t N, int64_t K, bool same_rows) {
  const Isa isa = active_isa();
  const auto body = isa == Isa::avx512 ? detail::linear_packed_avx512
                    : isa == Isa::avx2 ? detail::linear_packed_avx2
                                       : detail::linear_packed_scalar;
  const int64_t P = (N + kPackedPanel - 1) / kPackedPanel;
  // At least ~kMinChunkWork multiply-adds per chunk: a one-row product through a d×d weight is a few
  // microseconds of work, and waking the pool for it cost more than it saved (decode_bench batch 1 on
  // 2 threads: 1,419 tokens/s with one panel per chunk against 2,414 on the old path).
  constexpr int64_t kMinChunkWork = int64_t{1} << 18;
  const int64_t grain = std::max<int64_t>(1, kMinChunkWork / std::max<int64_t>(1, M * K * kPackedPanel));
  // On one thread (or inside another parallel_for) the whole range is one call, not one call per
  // grain: the body prefetches the next panel only within its range, and a grain of one panel (32 rows
  // through K = 256) left every panel cold (decode_bench batch 32, 1 thread: no prefetch at all).
  if (num_threads() == 1 || in_parallel_for()) {
    body(x, ldx, packed, bias, y, ldy, M, N, K, 0, P, same_rows);
    return;
  }
  // Threads: chunks of at least half a thread's share, so that most panels are prefetched by
  // the one before them in the same chunk.
  const int64_t T = num_threads();
  const int64_t share = std::max<int64_t>(grain, (P + 2 * T - 1) / (2 * T));
  parallel_for(P, share, [&](int64_t p0, int64_t p1, int) {
    body(x, ldx, packed, bias, y, ldy, M, N, K, p0, p1, same_rows);
  });
}

}  // namespace attn::kernels::cpu
