// Paged attention on the CPU (include/attn/ops/paged_attention.h): each work item is one sequence,
// one kv head and up to kPagedRows query rows, i.e. the G query heads of the group for each row
// (decode: one row). The item walks its keys in tiles of at most kPagedTile (each key's K and V rows
// read in place at the address its block table entry gives, so a tile may span blocks) with an
// online softmax: scores of the tile (the tile's keys transposed once and each key vector shared by
// the item's query vectors), the
// running maximum and sum, the accumulators rescaled only when the maximum grows, P·V into them
// (two query vectors per load of V). A row of at least 1,024 keys is split into shares merged by
// their maxima (paged_shares): a decode row's shares are items of their own (one long sequence
// decoding has only Hkv items), a chunk row's are cut by its item. One body (paged_attention_body.h) is
// compiled for 1 lane (the portable body), 8 (AVX2 + FMA + F16C) and 16 (AVX-512) lanes; the items are split
// over the pool.
#pragma once

#include <algorithm>
#include <cstdint>

#include "kernels/paged_attention_args.h"

namespace attn::kernels::cpu {

inline constexpr int64_t kPagedRows = 16;           // query rows per item in a prefill chunk
inline constexpr int64_t kPagedTile = 32;           // keys per tile (at most); tiles start at multiples of it
inline constexpr int64_t kPagedMinShareKeys = 512;  // keys a row's share has at least
inline constexpr int64_t kPagedMaxShares = 4;       // shares of one row at most

// The shares of a row that sees keys [lo, hi]: returns their number P (1: the row is not split; a row
// of at least 2 · kPagedMinShareKeys keys is split into min(kPagedMaxShares, keys / 512)) and writes
// b[0] = lo < b[1] < ... < b[P] = hi + 1, the inner bounds multiples of kPagedTile (tile starts).
// They depend on lo and hi alone: a row is the same bits as a decode row (whose shares are items of
// their own, run in parallel) and as a row of a prompt chunk (whose item splits it as it walks its
// tiles), in any batch. A preempted sequence's recompute then writes the cache its decode wrote.
inline int64_t paged_shares(int64_t lo, int64_t hi, int64_t* b) {
  const int64_t n = hi - lo + 1;
  const int64_t parts = n >= 2 * kPagedMinShareKeys ? std::min(kPagedMaxShares, n / kPagedMinShareKeys) : 1;
  b[0] = lo;
  for (int64_t p = 1; p < parts; ++p) b[p] = (lo + n * p / parts) / kPagedTile * kPagedTile;
  b[parts] = hi + 1;
  return parts;
}

// Writes out and lse (a.lse must be non-null when a sequence asks for weights), then the weights
// [queries, H, keys] of the sequences that ask: exp(s_j − lse) with s_j recomputed in double.
void paged_attention(const PagedAttnArgs& a);

namespace detail {
// One work item: sequence s, kv head g, query rows [r0, r1) of s, keys clamped to [k0, k1). With
// partial null it writes out and lse; else (a decode row's share of its keys, merged by the caller)
// per query head of the group: the unnormalised accumulator [D], then the running maximum and sum.
struct PagedItem {
  int64_t s = 0, g = 0, r0 = 0, r1 = 0;
  int64_t k0 = 0, k1 = INT64_MAX;
  float* partial = nullptr;
};
// Floats of one item's partial: G · (D + 2).
inline int64_t paged_partial_floats(const PagedAttnArgs& a) { return (a.H / a.Hkv) * (a.D + 2); }
// One query vector's shares merged: part p at parts + p · stride holds its unnormalised accumulator
// [D], running maximum and sum. Writes o [D] and returns the log-sum-exp (−inf: no key seen). The
// decode shares (merged after the items) and a chunk row's (merged by its item) take this one
// function, so they are the same bits.
float paged_merge(const float* parts, int64_t n_parts, int64_t stride, int64_t D, float* o);
// Floats of scratch one item needs.
int64_t paged_scratch_floats(const PagedAttnArgs& a);
// One item, no threads.
using PagedItemFn = void (*)(const PagedAttnArgs& a, const PagedItem& it, float* scratch);
void paged_item_scalar(const PagedAttnArgs& a, const PagedItem& it, float* scratch);
void paged_item_avx2(const PagedAttnArgs& a, const PagedItem& it, float* scratch);
void paged_item_avx512(const PagedAttnArgs& a, const PagedItem& it, float* scratch);
}  // namespace detail

}  // namespace attn::kernels::cpu
