// The raw arguments of the paged attention kernels (ops::paged_attention checks them and fills
// this). Layouts and semantics: include/attn/ops/paged_attention.h.
#pragma once

#include <attn/core/f16.h>

#include <cstdint>

namespace attn::kernels {

struct PagedSeqArgs {
  const int32_t* blocks = nullptr;  // block table
  int64_t keys = 0;                 // Lk
  int64_t queries = 0;              // Lq <= Lk: the last Lq positions are query rows
  int64_t row0 = 0;                 // the sequence's first row in q / out / lse
  float* weights = nullptr;         // [queries, H, keys] probabilities, or null
};

struct PagedAttnArgs {
  const float* q = nullptr;  // [rows, H, D]
  float* out = nullptr;      // [rows, H, D]
  float* lse = nullptr;      // [rows, H] or null
  int64_t H = 0, Hkv = 0, D = 0;
  const void* kv = nullptr;  // the pool: float, uint16_t half bits when f16, int8 when q8
  bool f16 = false;
  bool q8 = false;        // int8 rows with an f32 scale each (include/attn/ops/paged_attention.h)
  int64_t q8_scales = 0;  // q8: byte of a block where the K scales [Hkv, bt] start (then V's)
  int64_t block_tokens = 0;
  int64_t block_stride = 0;  // elements per block (K [Hkv, bt, D] then V [Hkv, bt, D]; q8: bytes)
  const PagedSeqArgs* seqs = nullptr;
  int64_t n_seqs = 0;
  float scale = 1.0f;
  int64_t window = 0;      // 0: none
  float softcap = 0.0f;    // 0: none
  int64_t g0 = 0, g1 = 0;  // kv heads [g0, g1) only (g1 = 0: Hkv)
};

// The key interval [lo, hi] that query row r of sequence s sees (bottom-right causal, window).
// static: each file compiled for an instruction set keeps its own copy (no weak symbol).
static inline void paged_row_range(const PagedAttnArgs& a, const PagedSeqArgs& s, int64_t r, int64_t* lo,
                                   int64_t* hi) {
  const int64_t pos = s.keys - s.queries + r;
  *hi = pos;
  *lo = a.window > 0 && pos - a.window + 1 > 0 ? pos - a.window + 1 : 0;
}

// Element d of the key (v false) or value (v true) row of position j, kv head g, as the kernels read
// it (q8: q · d). For the oracle and the weight capture.
static inline float paged_kv_value(const PagedAttnArgs& a, const PagedSeqArgs& s, bool v, int64_t g,
                                   int64_t j, int64_t d) {
  const int64_t bt = a.block_tokens, blk = s.blocks[j / bt], i = g * bt + j % bt;
  const int64_t off = blk * a.block_stride + (v ? a.Hkv * bt * a.D : 0) + i * a.D + d;
  if (a.q8) {
    const char* base = static_cast<const char*>(a.kv) + blk * a.block_stride + a.q8_scales;
    const float* scales = reinterpret_cast<const float*>(base) + (v ? a.Hkv * bt : 0);
    return static_cast<float>(static_cast<const int8_t*>(a.kv)[off]) * scales[i];
  }
  return a.f16 ? f16_to_f32(static_cast<const uint16_t*>(a.kv)[off]) : static_cast<const float*>(a.kv)[off];
}

}  // namespace attn::kernels
