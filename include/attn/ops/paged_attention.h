// THE inference attention entry of the runtime (issue 37): a ragged batch of sequences, each with
// Lq query rows (Lq = 1: a decode step; Lq > 1: a prefill chunk) over its keys in a paged KV cache,
// read through the sequence's block table with no gather copy. The model says what it needs
// (window, softcap, scale, the cache's precision, GQA through the head counts); this entry checks
// the arguments and chooses the kernel (AVX-512, AVX2 or the portable body: kernels/cpu/isa.h).
// INFERENCE ONLY: NO AUTOGRAD.
//
// Layout of the pool (models/runtime/kv_cache.h builds it): block b starts at element
// b · block_stride of `data`; it holds K [Hkv, block_tokens, D] and then V [Hkv, block_tokens, D]
// (f32, IEEE half bits for KvDtype::f16, int8 for KvDtype::q8). For q8 an element is a byte and each
// row (one position of one kv head, D values x) is stored as q = round(x / d) in [−127, 127] with
// d = max|x| / 127 (store_q8_row); the block's f32 scales follow its values at byte
// q8_scales_offset(): d of K [Hkv, block_tokens], then d of V [Hkv, block_tokens]. The value read is
// q · d. Block i of a sequence's table holds its positions [i · block_tokens, (i + 1) · block_tokens).
//
// Semantics (as attn::attention with Align::bottom_right): sequence s has Lk = keys positions
// 0 .. Lk − 1 cached, of which the last Lq are this call's queries: query row r (0 <= r < Lq) is at
// position p = Lk − Lq + r and sees the keys j with max(0, p − W + 1) <= j <= p (W = window; 0 = no
// window: every j <= p). Query head h reads kv head h / (H / Hkv). Per (row, head):
//   s_j = scale · q·k_j, then softcap c · tanh(s_j / c) when softcap > 0,
//   out = Σ_j softmax_j(s) v_j,  lse = log Σ_j exp(s_j).
// A row that sees no key (it cannot happen with Lq <= Lk, every row sees itself) gets out 0 and
// lse −inf. The table entries of the blocks a row sees must be valid block ids; entries of blocks no
// row sees (a window's released blocks) may be −1.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

namespace attn::ops {

enum class KvDtype { f32, f16, q8 };

// "f32", "f16" or "q8".
const char* kv_dtype_name(KvDtype dtype);
// The dtype of a name kv_dtype_name gives; anything else throws attn::Error naming the three.
KvDtype parse_kv_dtype(std::string_view name);
// Bytes of one position of one layer, K and V of every kv head (q8: the values and their scales).
int64_t kv_position_bytes(KvDtype dtype, int64_t kv_heads, int64_t head_dim);
// q8: the byte of a block where its scales start (after 2 · Hkv · block_tokens · D values, rounded up
// to 64), and the smallest block_stride (the scales' end, rounded up to 64).
int64_t q8_scales_offset(int64_t kv_heads, int64_t block_tokens, int64_t head_dim);
int64_t q8_block_bytes(int64_t kv_heads, int64_t block_tokens, int64_t head_dim);
// q8: one row x [n] -> q [n] and its scale *d (d = max|x| / 127, q = x · (127 / max|x|) rounded to
// nearest even; an all-zero row gets d = 0 and q = 0; a row with a non-finite value gets d = NaN, so
// what reads it is NaN as it would be in f32).
void store_q8_row(const float* x, int64_t n, int8_t* q, float* d);

// The pool of a paged KV cache (shared by every layer; each layer's tables name its blocks).
struct PagedKv {
  const void* data = nullptr;  // const float*, const uint16_t* (f16 bits) or const int8_t* (q8)
  KvDtype dtype = KvDtype::f32;
  int64_t num_blocks = 0;
  int64_t block_tokens = 0;  // positions per block
  int64_t kv_heads = 0;      // Hkv
  int64_t head_dim = 0;      // D
  // Elements from one block to the next: >= 2 · Hkv · block_tokens · D (f32, f16), >= q8_block_bytes
  // and a multiple of 4 (q8, in bytes).
  int64_t block_stride = 0;
};

// One sequence of the batch.
struct PagedSequence {
  const int32_t* blocks = nullptr;  // its block table on this layer
  int64_t table_size = 0;           // entries of `blocks`, >= ceil(keys / block_tokens)
  int64_t keys = 0;                 // Lk >= 1: positions cached, this call's included
  int64_t queries = 0;              // Lq in [0, Lk]: the last Lq positions are query rows
  // Optional exact weight capture: [Lq, H, Lk] receives each row's probabilities over all Lk keys
  // (0 for the keys a row does not see), re-derived from the row's log-sum-exp; null = none.
  float* weights = nullptr;
};

struct PagedAttentionOptions {
  float scale = 0.0f;    // 0: 1/sqrt(D)
  int64_t window = 0;    // 0: none; W >= 1: a query at p sees p − W < j <= p
  float softcap = 0.0f;  // 0: none; c > 0: scores c · tanh(s / c)
  // Only the query heads of kv heads [kv_head_begin, kv_head_end) (end 0 = Hkv): for a caller that
  // splits the heads over its own threads (the others' rows of out, lse and weights are not written).
  int64_t kv_head_begin = 0;
  int64_t kv_head_end = 0;
};

// q   [rows, H, D] f32 contiguous, rows = Σ_s queries_s, the sequences' rows in order
// out [rows, H, D] f32 contiguous (written)
// lse [rows, H] f32 or null
// Rows and heads are split over the thread pool (serially when called inside a parallel_for).
void paged_attention(const float* q, int64_t H, const PagedKv& kv, std::span<const PagedSequence> seqs,
                     const PagedAttentionOptions& options, float* out, float* lse = nullptr);

}  // namespace attn::ops
