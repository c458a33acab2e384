// The 8-bit-activation GEMM for the formats of kernels/cpu/q8k.h (issue 19: Gemma 3's prompt pass),
// many tokens against one weight: the weight is repacked once into int8 panels of 16 rows, and a tile
// of 16 weight rows x up to 12 tokens is multiplied with exact integer sums per group of 16 or 32
// (AVX-512 VNNI vpdpbusd, one instruction per 16 rows x 4 k per token, or AVX2 vpmaddubsw + vpmaddwd),
// each weight byte loaded once per tile and used for every token in it.
//
//   Y[m, n] = Σ_k X[m, k] · W[n, k]     X quantized as q8k_quantize gives it (Q8KRows, the same kind
//                                       the decode product q8k_dot_rows takes)
//
// Panel layout (Q8Panels), per 16 weight rows (rows past N zero; q8k_gemm_layout gives the offsets):
//   q  per 4-k step of 64 values (value i: row i / 4, k i % 4):
//        Q8_0: 64 unsigned bytes (the signed quant + 128), value i in byte i
//        Q4_0 / Q4_1 / Q4_K (q8k_gemm_nibbles): 32 bytes, value i in the low nibble of byte i (i < 32)
//          or the high nibble of byte i - 32
//        Q5_0 / Q5_K (q8k_gemm_five_bits): those 32 bytes of low nibbles, then 8 bytes of fifth bits
//          (value i's in bit i % 8 of byte 32 + i / 8)
//        Q6_K (q8k_gemm_six_bits): the 32 bytes of low nibbles, then 16 bytes of high bit pairs (value
//          i's in byte 32 + i % 16, bits 2 (i / 16) and up)
//   s  [G][16] the weight scale of group g (G = K / gs; gs = 16 for Q6_K, else 32): f16 for Q8_0 /
//      Q4_0 / Q4_1 / Q5_0 (q8k_gemm_half_scales: their blocks' d); the blocks' integer scales as bytes
//      for Q4_K / Q5_K (6-bit) and Q6_K (int8) (q8k_gemm_int_scales), with their f16 d per 256
//   o  [G][16] Q4_1 / Q4_K / Q5_K only (q8k_gemm_has_mins): the group's min (Q4_1: -m as f16; the
//      K-quants' 6-bit mins as bytes with their f16 dmin per 256)
// Bytes per weight: 0.5625 (Q4_0), 0.625 (Q4_1), 0.6875 (Q5_0) as stored; 0.578 (Q4_K), 0.703 (Q5_K),
// 0.820 (Q6_K); 1.0625 (Q8_0).
// Every weight value is s · (q - c) - o with a per-format integer offset c (Q8_0: 128, the signed
// quant moved to [0, 255]; Q4_0: 8; Q5_0: 16; Q6_K: 32; Q4_1, Q4_K, Q5_K: 0). The offset is taken out exactly
// in the integers through the activation group sums (Σ q·x - c·Σ x), the min through them in f32. The scalar
// oracle is ref::q8k_dot_rows on the stored blocks (the same integer sums; tests compare).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/cpu/kquant.h"
#include "kernels/cpu/q8k.h"

namespace attn::kernels {

inline constexpr int64_t kQ8PanelRows = 16;

// Elements per scale group of the panels of format f: 16 (Q6_K) or 32.
int64_t q8k_gemm_group(KFormat f);
// Whether f's panels hold the groups' mins (Q4_1, Q4_K, Q5_K).
bool q8k_gemm_has_mins(KFormat f);
// Whether f's panels hold their scales (and mins) as f16 (Q8_0, Q4_0, Q4_1, Q5_0).
bool q8k_gemm_half_scales(KFormat f);
// Whether f's panels hold their quants as nibbles (Q4_0, Q4_1, Q4_K: values 0..15).
bool q8k_gemm_nibbles(KFormat f);
// Whether f's panels hold 6-bit quants as nibbles and a plane of high bit pairs (Q6_K).
bool q8k_gemm_six_bits(KFormat f);
// Whether f's panels hold 5-bit quants as nibbles and a plane of fifth bits (Q5_0, Q5_K).
bool q8k_gemm_five_bits(KFormat f);
// Whether f's panels hold the blocks' integer scales (and mins) with f16 multipliers per 256 (Q4_K,
// Q5_K, Q6_K) rather than the products as f32.
bool q8k_gemm_int_scales(KFormat f);
// Where the regions of one panel of 16 rows for K columns start (bytes from the panel's start), as
// q8k_gemm_pack writes them and the tiles read them: the quants at 0, then the scales [G][16] (f32, f16
// for q8k_gemm_half_scales, bytes for q8k_gemm_int_scales), the mins [G][16] of the same type
// (q8k_gemm_has_mins), and for int scales their f16 multipliers d and dmin [K / 256][16]; `bytes` is
// the whole panel.
struct Q8PanelLayout {
  int64_t scales, mins, d, dmin, bytes;
};
Q8PanelLayout q8k_gemm_layout(KFormat f, int64_t K);
// Bytes of one panel of 16 rows for K columns (q8k_gemm_layout(f, K).bytes).
int64_t q8k_gemm_panel_bytes(KFormat f, int64_t K);

namespace cpu {
// Panels [p0, p1) of W [N, K] (stored blocks, row stride K / block_elems · block_bytes) -> out, panel p
// at out + (p - p0) · q8k_gemm_panel_bytes(f, K). f must be q8k_supported.
void q8k_gemm_pack(KFormat f, const std::byte* w, int64_t N, int64_t K, int64_t p0, int64_t p1,
                   std::byte* out);

// Per-token, per-group terms of the activations for format f, for the active ISA (made once per
// product; M x G each):
//   off[m, g] = -c · Σ_group xq (int32)   dx[m, g] = the activation scale of g's block
//   mn[m, g]  = dx · Σ_group xq (f32, multiplies the weight's min; Q4_1 / Q4_K / Q5_K)
struct Q8GemmTerms {
  std::vector<int32_t> off;
  std::vector<float> dx, mn;
  int64_t G = 0;
  bool signed_q8 = false;  // Q8_0 for the AVX2 kernel: c = 0 (the kernel takes the quants as signed)
};
void q8k_gemm_terms(KFormat f, const Q8KRows& x, Q8GemmTerms* t);

// Y rows [0, x.M), columns of panels [p0, p1) (the last panel clipped at N), single-threaded, on the
// active ISA (VNNI on avx512 with VNNI, AVX2 otherwise; the scalar ISA runs ref::q8k_dot_rows on
// w_blocks). panels: the packing of panels [p0, p1) (as q8k_gemm_pack writes them); terms from
// q8k_gemm_terms(f, x). accumulate: y += the product, else y = it.
void q8k_gemm_panels(KFormat f, const std::byte* panels, const std::byte* w_blocks, int64_t N, int64_t K,
                     int64_t p0, int64_t p1, const Q8KRows& x, const Q8GemmTerms& terms, float* y,
                     int64_t ldy, bool accumulate);

namespace detail {
struct Q8GemmArgs {
  KFormat f;
  const std::byte* panels;            // panel p0
  int64_t panel_bytes, np, N, n0, K;  // np panels, the first at output column n0; N clips the last
  const Q8KRows* x;
  const Q8GemmTerms* t;
  float* y;
  int64_t ldy;
  bool accumulate;
};
void q8k_gemm_vnni(const Q8GemmArgs& a);
void q8k_gemm_avx2(const Q8GemmArgs& a);
}  // namespace detail
}  // namespace cpu
}  // namespace attn::kernels
