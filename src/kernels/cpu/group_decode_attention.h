// Attention of one new token over a KV cache (a decode step), for the G query heads that share one
// key/value head (grouped-query attention):
//
//   out[g, :] = Σ_j p[g, j] · v[j, :],   p[g, :] = softmax_j(scale · q[g, :] · k[j, :]),  j < Lk
//
// Two passes over the keys (scores and their maximum, then exp and P·V), the scores kept in a caller's
// scratch, so a step allocates nothing. Every query head of the group reads the same cached rows while
// they are in L1/L2. Behind ops::group_decode_attention (the former Llama engine's decode step, now
// bench/paged_attention_bench's contiguous baseline), called from inside the caller's parallel region
// (single-threaded here), reading an f32 or f16 cache. The batched,
// threaded one-query kernel for nn::MultiHeadAttention is kernels/cpu/decode_attention.h.
#pragma once

#include <cstdint>

namespace attn::kernels {

namespace ref {
// The oracle, in double. Same arguments as cpu::group_decode_attention (scratch unused).
void group_decode_attention(const float* q, int64_t G, const float* k, const float* v, int64_t ldk,
                            int64_t Lk, int64_t D, float scale, float* out);
}  // namespace ref

namespace cpu {
// q: [G, D] contiguous; k, v: [Lk, D] with row stride ldk (>= D); scratch: [G, Lk]; out: [G, D]
// contiguous. Lk >= 1. AVX-512 when active and D % 16 == 0, else a portable loop.
void group_decode_attention(const float* q, int64_t G, const float* k, const float* v, int64_t ldk,
                            int64_t Lk, int64_t D, float scale, float* scratch, float* out);
// The same over an f16 cache (k, v: IEEE half bits, llama.cpp's KV cache type): half the bytes per step.
void group_decode_attention_f16(const float* q, int64_t G, const uint16_t* k, const uint16_t* v, int64_t ldk,
                                int64_t Lk, int64_t D, float scale, float* scratch, float* out);
// x rounded to IEEE half (to nearest even) → out: n bits.
void f32_to_f16(const float* x, int64_t n, uint16_t* out);

namespace detail {
void group_decode_attention_scalar(const float* q, int64_t G, const float* k, const float* v, int64_t ldk,
                                   int64_t Lk, int64_t D, float scale, float* scratch, float* out);
void group_decode_attention_avx512(const float* q, int64_t G, const float* k, const float* v, int64_t ldk,
                                   int64_t Lk, int64_t D, float scale, float* scratch, float* out);
void group_decode_attention_f16_scalar(const float* q, int64_t G, const uint16_t* k, const uint16_t* v,
                                       int64_t ldk, int64_t Lk, int64_t D, float scale, float* scratch,
                                       float* out);
void group_decode_attention_f16_avx512(const float* q, int64_t G, const uint16_t* k, const uint16_t* v,
                                       int64_t ldk, int64_t Lk, int64_t D, float scale, float* scratch,
                                       float* out);
void f32_to_f16_avx512(const float* x, int64_t n, uint16_t* out);
}  // namespace detail
}  // namespace cpu
}  // namespace attn::kernels
