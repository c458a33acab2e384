// Paged attention on the CPU (include/attn/ops/paged_attention.h): each work item is one sequence,
// one kv head and up to kPagedRows query rows, i.e. the G query heads of the group for each row
// (decode: one row). The item walks its keys in tiles of at most kPagedTile (each key's K and V rows
// read in place at the address its block table entry gives, so a tile may span blocks) with an
// online softmax: scores of the tile (dot products with a transpose-and-add reduction, or with many
// query vectors the tile's keys transposed once and each key vector shared by several of them), the
// running maximum and sum, the accumulators rescaled only when the maximum grows, P·V into them
// (two query vectors per load of V). Few items (one long decode): each decode row's keys are split
// into shares merged by their maxima. One body (paged_attention_body.h) is compiled for 1 lane (the
// portable body), 8 (AVX2 + FMA + F16C) and 16 (AVX-512) lanes; the items are split over the pool.
#pragma once

#include <cstdint>

#include "kernels/paged_attention_args.h"

namespace attn::kernels::cpu {

inline constexpr int64_t kPagedRows = 16;  // query rows per item in a prefill chunk
inline constexpr int64_t kPagedTile = 32;  // keys per tile (at most)

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
// Floats of scratch one item needs.
int64_t paged_scratch_floats(const PagedAttnArgs& a);
// One item, no threads.
using PagedItemFn = void (*)(const PagedAttnArgs& a, const PagedItem& it, float* scratch);
void paged_item_scalar(const PagedAttnArgs& a, const PagedItem& it, float* scratch);
void paged_item_avx2(const PagedAttnArgs& a, const PagedItem& it, float* scratch);
void paged_item_avx512(const PagedAttnArgs& a, const PagedItem& it, float* scratch);
}  // namespace detail

}  // namespace attn::kernels::cpu
