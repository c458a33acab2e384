// The inner step of the fused CPU attention backward (attention_bwd.cc): one
// key tile against one query tile, on operands the driver has already packed.
// Implemented once per instruction set (scalar in attention_bwd.cc, AVX-512 in
// attention_bwd_avx512.cc, AVX2 in attention_bwd_avx2.cc).
//
// This header holds declarations only: no inline function bodies, so that no
// code compiled with AVX-512 flags can be picked by the linker for the
// generic translation units (ODR-safe across ISA-specific files).
#pragma once

#include <cstdint>

namespace attn::kernels::cpu {

// Tile sizes of the fused backward. A key tile of kBwdBc keys keeps its dK and
// dV accumulators in scratch while query tiles of up to kBwdBr rows stream past.
inline constexpr int64_t kBwdBr = 64;  // query rows per tile
inline constexpr int64_t kBwdBc = 64;  // keys per tile (a multiple of 16)

struct BwdTile {
  int64_t D = 0;   // head size
  int64_t Dp = 0;  // D rounded up to a multiple of 16 (row stride of the packed [*, Dp] operands)
  int64_t nk = 0;  // keys in this tile, 1..kBwdBc
  int64_t nr = 0;  // query rows in this tile, 1..kBwdBr

  // Key side, packed once per key tile; columns/rows past nk and D are zero.
  const float* kt = nullptr;  // kt: [D, kBwdBc]   K tile transposed
  const float* vt = nullptr;  // vt: [D, kBwdBc]   V tile transposed
  const float* kp = nullptr;  // kp: [kBwdBc, Dp]  K tile row-major

  // Query side: rows of q and dout with row strides q_rs, dout_rs. When D is
  // a multiple of 16 these point into the caller's tensors; otherwise at
  // copies packed per query tile with zero columns D..Dp.
  const float* q = nullptr;     // q:    [nr, Dp] rows q_rs apart
  const float* dout = nullptr;  // dout: [nr, Dp] rows dout_rs apart
  int64_t q_rs = 0, dout_rs = 0;
  const float* lse = nullptr;   // lse:  [nr]  +inf for fully masked rows (so P = exp(s - lse) = 0)
  const float* di = nullptr;    // di:   [nr]  rowsum(dout ∘ out)
  const int32_t* lo = nullptr;  // lo:   [nr]  allowed keys [lo, hi) relative to the tile, in [0, nk]
  const int32_t* hi = nullptr;  // hi:   [nr]

  // Optional element masks, pointing at element (row 0, key 0) of the tile;
  // strides in elements (0 for a broadcast dimension).
  const uint8_t* allow = nullptr;  // allow: [nr, nk] view
  int64_t allow_r = 0, allow_c = 0;
  const float* bias = nullptr;  // bias: [nr, nk] view
  int64_t bias_r = 0, bias_c = 0;

  float scale = 1.f;
  float softcap = 0.f;  // > 0 enables c·tanh(s/c)

  // Dropout: element (r, j) is kept when
  //   mix64(drop_row[r] ^ (k0 + j)) >> 32 >= drop_threshold,
  // which equals dropout_hash(seed, b, h, i, k0 + j) (drop_row holds the hash
  // state after seed, b, h and i). Kept elements are scaled by drop_scale.
  bool dropout = false;
  const uint64_t* drop_row = nullptr;  // drop_row: [nr]
  int64_t k0 = 0;                      // absolute index of key 0 of the tile
  uint32_t drop_threshold = 0;
  float drop_scale = 1.f;

  // Scratch and accumulators.
  float* s = nullptr;   // s:  [kBwdBr, kBwdBc] scratch (S, then P')
  float* dp = nullptr;  // dp: [kBwdBr, kBwdBc] scratch (dP, then dS)
  float* dk = nullptr;  // dk: [kBwdBc, Dp] accumulated (+=)
  float* dv = nullptr;  // dv: [kBwdBc, Dp] accumulated (+=)
  float* dq = nullptr;  // dq: [nr, Dp] rows dq_rs apart: dS·K stored, or added when dq_add
  int64_t dq_rs = 0;
  bool dq_add = false;
};

// Computes, for the tile:
//   S = q·kᵀ·scale (softcap, bias, masks), P = exp(S − lse), P' = P·keep/(1−p)
//   dv += P'ᵀ dout,  dP = (dout·vᵀ)·keep/(1−p),  dS = P ∘ (dP − di) (· softcap′) · scale
//   dk += dSᵀ q,     dq = dS k  (dq += dS k when dq_add)
void bwd_tile_scalar(const BwdTile& t);
void bwd_tile_avx512(const BwdTile& t);
void bwd_tile_avx2(const BwdTile& t);

// The key tile transposed for the S and dP products: kt[d · kBwdBc + j] = k[j · k_rs + d] and
// vt[d · kBwdBc + j] = v[j · v_rs + d] for j < nk ≤ kBwdBc, d < D; other entries are left as they are.
// kt and vt are 64-byte aligned.
void bwd_pack_kv_scalar(const float* k, int64_t k_rs, const float* v, int64_t v_rs, int64_t nk, int64_t D,
                        float* kt, float* vt);
void bwd_pack_kv_avx512(const float* k, int64_t k_rs, const float* v, int64_t v_rs, int64_t nk, int64_t D,
                        float* kt, float* vt);
void bwd_pack_kv_avx2(const float* k, int64_t k_rs, const float* v, int64_t v_rs, int64_t nk, int64_t D,
                      float* kt, float* vt);

}  // namespace attn::kernels::cpu
