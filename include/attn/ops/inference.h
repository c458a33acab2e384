// Inference-only ops: the attention layouts of decoding and of the BERT encoder, the fused row
// ops of the encoder, and the fused reductions of decoding over a row of logits.
//
// INFERENCE ONLY: NO AUTOGRAD. None of these records a backward; they read and write buffers the
// caller owns (tensors given as outputs, or raw pointers), so a decoding step or an encoder layer
// allocates nothing here. They choose the kernel (AVX-512 where the CPU has it, else the portable
// loop) and validate their arguments (attn::Error with the expected and the actual values).
// The differentiable attention is attn::attention (include/attn/ops/attention.h); these compute
// the same function for the layouts named below (tests/ops compare them with it).
//
// Dimension names as in attention.h: B batch, H query heads, Hkv key/value heads (Hkv divides H;
// query head h reads kv head h / (H / Hkv)), L or Lk keys, D head size, G = H / Hkv, V vocabulary.
#pragma once

#include <attn/core/tensor.h>

#include <cstdint>
#include <vector>

namespace attn::ops {

// ---- attention ------------------------------------------------------------------------------

// A decoding step of nn::MultiHeadAttention: ONE query row per (batch, head) over a KV cache.
// Inference only: no autograd.
//   q    [B, H,   1, D]   f32, unit stride along D (any other strides)
//   k, v [B, Hkv, L, D]   f32, unit stride along D, L >= 1
//   key_lengths           empty (every row sees all L keys) or B values, each in [1, L]
//   returns o [B, 1, H·D] (heads merged: what the output projection reads)
// o[b, 0, h·D : (h+1)·D] = attention(q, k, v) with scale 1/sqrt(D) and key_lengths; no causal mask
// is needed, the query being the last position.
Tensor decode_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                        const std::vector<int64_t>& key_lengths = {});
// True when decode_attention accepts these arguments (callers take attn::attention otherwise).
bool decode_attention_applies(const Tensor& q, const Tensor& k, const Tensor& v,
                              const std::vector<int64_t>& key_lengths = {});

// A decoding step for the G query heads that share one key/value head, on raw buffers,
// single-threaded (the caller runs it from inside its own parallel region, once per kv head and layer;
// the former Llama engine's step, now bench/paged_attention_bench's contiguous baseline). Inference
// only: no autograd.
//   q       [G, D]   contiguous
//   k, v    [Lk, D]  rows ldk >= D floats apart, Lk >= 1
//   scratch [G, Lk]  the caller's (so a step allocates nothing)
//   out     [G, D]   contiguous
// out[g] = Σ_j softmax_j(scale · q[g]·k[j]) v[j]  (every key visible: the query is the last position).
void group_decode_attention(const float* q, int64_t G, const float* k, const float* v, int64_t ldk,
                            int64_t Lk, int64_t D, float scale, float* scratch, float* out);
// The same over an f16 KV cache (k, v: IEEE half bits, llama.cpp's cache type).
void group_decode_attention_f16(const float* q, int64_t G, const uint16_t* k, const uint16_t* v, int64_t ldk,
                                int64_t Lk, int64_t D, float scale, float* scratch, float* out);
// Appends to an f16 KV cache: x [n] rounded to IEEE half (to nearest even) -> out [n] bits.
void store_f16(const float* x, int64_t n, uint16_t* out);

// Self-attention of a BERT layer read straight from the fused QKV projection, written with the heads
// merged (no head split or merge copies). Inference only: no autograd.
//   qkv     [B, L, 3, H, D]  f32 contiguous: q = qkv[:, :, 0], k = qkv[:, :, 1], v = qkv[:, :, 2]
//   lengths [B]              real tokens per sequence, each in [1, L]; keys past it (padding) are
//                            masked, padding query rows are computed like real ones
//   ctx     [B, L, H, D]     f32 contiguous, written (the caller's buffer)
// ctx[b, i, h] = Σ_{j < lengths[b]} softmax_j(scale · q[b, i, h]·k[b, j, h]) v[b, j, h].
// Needs encoder_attention_fast(D) (throws otherwise): without a vectorised body the caller runs
// attn::attention on strided views of qkv instead.
// queries in [1, L] (-1: all L): only query rows i < queries of each sequence are computed and written;
// they carry the same bits as a full call's rows (each row's arithmetic does not depend on the count).
void encoder_attention(const Tensor& qkv, const std::vector<int64_t>& lengths, const Tensor& ctx, float scale,
                       int64_t queries = -1);
// True when encoder_attention has a vectorised body for head size D on this CPU.
bool encoder_attention_fast(int64_t D);

// THE encoder's self-attention entry (issue 37): every key of a sequence visible, padding keys masked,
// read from the fused QKV projection and written with the heads merged; the kernel chosen here:
// encoder_attention where it has a vectorised body for D and no probabilities are asked for, else
// attn::attention over strided views of qkv (exact probabilities; its output then copied into ctx).
//   qkv, lengths, ctx as encoder_attention's; scale: the logits' (1/sqrt(D) for BERT)
//   queries: as encoder_attention's (rows i < queries written; -1: all); without capture on the fused
//   kernel the same bits as a full call's rows, on attn::attention within f32 rounding of them.
// Returns the probabilities [B, H, queries, L] (padded keys 0) with capture, else an undefined tensor.
Tensor encoder_self_attention(const Tensor& qkv, const std::vector<int64_t>& lengths, const Tensor& ctx,
                              double scale, bool capture, int64_t queries = -1);

// ---- fused row ops of the encoder (raw contiguous f32, rows split over the thread pool) ----------
// Inference only: no autograd.
// x [rows, C] in place, bias [C] or null:  x = gelu(x + bias), the exact (erf) form.
void bias_gelu(float* x, const float* bias, int64_t rows, int64_t C);
// h [rows, C] in place (the residual stream), y [rows, C] or null, bias [C] or null, w, b [C]:
//   h = LayerNorm(h + y + bias) · w + b   (biased variance, eps inside the square root)
void residual_layer_norm(float* h, const float* y, const float* bias, const float* w, const float* b,
                         int64_t rows, int64_t C, float eps);

// ---- decoding's reductions over one row of logits x [V] (no NaN) ------------------------------
// Inference only: no autograd.
// log Σ_t exp(x[t]), max-shifted (−inf for a row of −inf).
double row_logsumexp(const float* x, int64_t V);
// Greedy's two reductions in one pass: the first maximum (ties go to the lower id, as
// std::max_element) and row_logsumexp(x, V).
struct ArgmaxLse {
  int64_t token;
  double lse;
};
ArgmaxLse row_argmax_logsumexp(const float* x, int64_t V);

}  // namespace attn::ops
