// The building blocks of sgemm_bf16 (gemm_bf16.cc drives them; gemm_bf16_avx512.cc and
// the scalar oracle in gemm_bf16.cc implement them).
//
// Packed layout: a panel of W "columns" (W = 32 for op(B), kMr rows for op(A)) over kc
// values of k is ceil(kc / 2) k-pairs; pair p of column c is the uint32
//   out[p * W + c] = bf16(x[2p, c]) | bf16(x[2p + 1, c]) << 16
// (bf16 = round to nearest even, as attn::bf16; 0 past kc and for columns c >= w).
#pragma once

#include <cstdint>

#include "kernels/cpu/gemm_bf16.h"

namespace attn::kernels::cpu::detail {

inline constexpr int kBf16Nr = 32;  // columns of a B panel / the register block
inline constexpr int kBf16Mr = 12;  // rows of an A panel / the register block

struct Bf16GemmKernels {
  // Both pack the w columns from src as ceil(w / W) panels, panel q at out + q · ceil(kc/2) · W.
  // Element (k, c) at src[k * ld + c] (rows of k are contiguous over c).
  // src: [kc, ld] from (k0, c0)  out: [ceil(w/W), ceil(kc/2), W]
  void (*pack_rows)(const float* src, int64_t ld, int kc, int w, int W, uint32_t* out);
  // Element (k, c) at src[c * ld + k] (each column is contiguous over k).
  // src: [w, ld] from (c0, k0)  out: [ceil(w/W), ceil(kc/2), W]
  void (*pack_cols)(const float* src, int64_t ld, int kc, int w, int W, uint32_t* out);
  // The kMr × 32 block: acc = Σ_p a-pair · b-pair over kp pairs, then for the m × n valid
  // part C = alpha · acc + beta · C (beta = 0: C is not read).
  // a: [kp, kMr]  b: [kp, 32]  c: [m, n] with row stride ldc
  void (*block)(int kp, const uint32_t* a, const uint32_t* b, float* c, int64_t ldc, int m, int n,
                float alpha, float beta);
};

}  // namespace attn::kernels::cpu::detail
