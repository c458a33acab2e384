// Attention of ONE query row per (batch, head) over a KV cache, for decoding steps
// (nn::MultiHeadAttention with a cache and Lq = 1 in inference mode): no causal mask is needed
// (the query is the last position), nothing is materialised but a per-thread row of L scores.
//
//   o[b, h, :] = Σ_{j < len_b} softmax_j(scale · q[b, h, :] · k[b, g, j, :]) · v[b, g, j, :]
//   with g = h / (H / Hkv) (grouped-query attention) and len_b = lengths[b] or L.
//
// A row with len_b = 0 gets o = 0. Raw pointers with element strides; the last (D) dimension
// has stride 1 everywhere. decode_attention splits the B·H rows over attn::parallel_for and
// picks the AVX-512 or AVX2 body when active_isa() allows it, else the scalar one (the tests' oracle
// together with a double reference).
#pragma once

#include <cstdint>

namespace attn::kernels::cpu {

struct DecodeAttnArgs {
  const float* q = nullptr;          // q: [B, H, D], strides (sqb, sqh, 1)
  const float* k = nullptr;          // k: [B, Hkv, L, D], strides (skb, skh, skl, 1)
  const float* v = nullptr;          // v: [B, Hkv, L, D], strides (svb, svh, svl, 1)
  float* o = nullptr;                // o: [B, H, D], strides (sob, soh, 1)
  const int64_t* lengths = nullptr;  // [B] keys per row (each in [0, L]), or null: all L
  int64_t B = 0, H = 0, Hkv = 0, L = 0, D = 0;
  int64_t sqb = 0, sqh = 0;
  int64_t skb = 0, skh = 0, skl = 0;
  int64_t svb = 0, svh = 0, svl = 0;
  int64_t sob = 0, soh = 0;
  float scale = 1.0f;
};

void decode_attention(const DecodeAttnArgs& a);

namespace detail {
// Rows r = b·H + h in [r0, r1), no threads. scores: scratch of at least L floats.
void decode_attention_scalar(const DecodeAttnArgs& a, int64_t r0, int64_t r1, float* scores);
void decode_attention_avx512(const DecodeAttnArgs& a, int64_t r0, int64_t r1, float* scores);
void decode_attention_avx2(const DecodeAttnArgs& a, int64_t r0, int64_t r1, float* scores);
}  // namespace detail

}  // namespace attn::kernels::cpu
