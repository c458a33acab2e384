// Elementwise and reduction loops shared by the differentiable ops. Raw
// pointers with element strides; T is float or double; threads via
// attn::parallel_for. Every loop reads like the formula it computes.
#pragma once

#include <attn/core/parallel.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "kernels/cpu/column_sums.h"
#include "kernels/cpu/isa.h"

namespace attn::kernels::cpu {

// out[i] = f(x[i]) for a contiguous range of n elements.
template <typename T, typename F>
void unary_map(int64_t n, const T* x, T* out, F f) {
  parallel_for(n, 16384, [&](int64_t b, int64_t e, int) {
    for (int64_t i = b; i < e; ++i) out[i] = f(x[i]);
  });
}

// out[i] = f(a[i], b[i]) for contiguous ranges of n elements.
template <typename T, typename F>
void binary_map(int64_t n, const T* a, const T* b, T* out, F f) {
  parallel_for(n, 16384, [&](int64_t s, int64_t e, int) {
    for (int64_t i = s; i < e; ++i) out[i] = f(a[i], b[i]);
  });
}

// Broadcasting binary op. out: contiguous [shape] (rank >= 1); a and b are
// read with element strides sa, sb over the same shape (0 on broadcast dims).
template <typename T, typename F>
void binary_strided(const std::vector<int64_t>& shape, const T* a, const std::vector<int64_t>& sa, const T* b,
                    const std::vector<int64_t>& sb, T* out, F f) {
  const int64_t r = static_cast<int64_t>(shape.size());
  const int64_t inner = shape[r - 1];
  int64_t rows = 1;
  for (int64_t d = 0; d < r - 1; ++d) rows *= shape[d];
  if (rows * inner == 0) return;
  const int64_t ia = sa[r - 1], ib = sb[r - 1];
  parallel_for(rows, std::max<int64_t>(1, 16384 / inner), [&](int64_t r0, int64_t r1, int) {
    for (int64_t row = r0; row < r1; ++row) {
      int64_t oa = 0, ob = 0, rem = row;
      for (int64_t d = r - 2; d >= 0; --d) {
        const int64_t idx = rem % shape[d];
        rem /= shape[d];
        oa += idx * sa[d];
        ob += idx * sb[d];
      }
      const T* pa = a + oa;
      const T* pb = b + ob;
      T* po = out + row * inner;
      if (ia == 1 && ib == 1) {
        for (int64_t j = 0; j < inner; ++j) po[j] = f(pa[j], pb[j]);
      } else {
        for (int64_t j = 0; j < inner; ++j) po[j] = f(pa[j * ia], pb[j * ib]);
      }
    }
  });
}

// out[o] = sum of x over the dims where the target is broadcast. x: contiguous
// [shape]; out is read and written with strides so (0 on summed dims) over
// the same shape; out must hold zeros on entry. Accumulates in double.
template <typename T>
void sum_to_strided(const std::vector<int64_t>& shape, const T* x, T* out, const std::vector<int64_t>& so,
                    int64_t out_numel) {
  const int64_t r = static_cast<int64_t>(shape.size());
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  std::vector<double> acc(static_cast<std::size_t>(out_numel), 0.0);
  // so addresses out, which is contiguous in its own (un-broadcast) shape, so
  // offsets index acc directly.
  std::vector<int64_t> idx(r, 0);
  int64_t off = 0;
  for (int64_t i = 0; i < n; ++i) {
    acc[off] += x[i];
    for (int64_t d = r - 1; d >= 0; --d) {
      if (++idx[d] < shape[d]) {
        off += so[d];
        break;
      }
      off -= so[d] * (shape[d] - 1);
      idx[d] = 0;
    }
  }
  for (int64_t i = 0; i < out_numel; ++i) out[i] = static_cast<T>(acc[i]);
}

// x viewed as [outer, n, inner] (contiguous): out[o, i] = sum_k x[o, k, i], in double, k in order.
// One matrix (outer = 1, e.g. linear's bias gradient db[o] = sum_r g[r, o]) is split over threads by
// blocks of columns instead, 8 columns per instruction on AVX-512 and 4 on AVX2: the same double sums.
template <typename T>
void sum_dim(const T* x, T* out, int64_t outer, int64_t n, int64_t inner) {
  if (outer == 1 && inner > 1) {
    constexpr int64_t kBlock = kColumnSumsBlock;
    const Isa isa = active_isa();
    const auto simd = !std::is_same_v<T, float> ? nullptr
                      : isa == Isa::avx512      ? &column_sums_block_avx512
                      : isa == Isa::avx2        ? &column_sums_block_avx2
                                                : nullptr;
    parallel_for((inner + kBlock - 1) / kBlock, 1, [&](int64_t b0, int64_t b1, int) {
      double acc[kBlock];
      for (int64_t b = b0; b < b1; ++b) {
        const int64_t c0 = b * kBlock, w = std::min(kBlock, inner - c0);
        if constexpr (std::is_same_v<T, float>) {
          if (simd) {
            simd(x + c0, n, inner, w, out + c0);
            continue;
          }
        }
        std::fill(acc, acc + w, 0.0);
        for (int64_t k = 0; k < n; ++k) {
          const T* xk = x + k * inner + c0;
          for (int64_t j = 0; j < w; ++j) acc[j] += xk[j];
        }
        for (int64_t j = 0; j < w; ++j) out[c0 + j] = static_cast<T>(acc[j]);
      }
    });
    return;
  }
  parallel_for(outer, std::max<int64_t>(1, 16384 / std::max<int64_t>(1, n * inner)),
               [&](int64_t o0, int64_t o1, int) {
                 std::vector<double> acc(static_cast<std::size_t>(inner));
                 for (int64_t o = o0; o < o1; ++o) {
                   std::fill(acc.begin(), acc.end(), 0.0);
                   const T* p = x + o * n * inner;
                   for (int64_t k = 0; k < n; ++k)
                     for (int64_t i = 0; i < inner; ++i) acc[i] += p[k * inner + i];
                   for (int64_t i = 0; i < inner; ++i) out[o * inner + i] = static_cast<T>(acc[i]);
                 }
               });
}

}  // namespace attn::kernels::cpu
