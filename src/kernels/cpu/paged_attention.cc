// Paged attention: the portable body (1 lane), the work items and the dispatch.
#include "kernels/cpu/paged_attention.h"

#include <attn/core/f16.h>
#include <attn/core/parallel.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/isa.h"
#include "kernels/cpu/paged_attention_body.h"

namespace attn::kernels::cpu {

namespace detail {
namespace {
struct V1 {
  using F = float;
  static constexpr int N = 1;
  static F zero() { return 0.0f; }
  static F set1(float x) { return x; }
  static F load(const float* p) { return *p; }
  static F load_n(const float* p, int64_t n) { return n > 0 ? *p : 0.0f; }
  static F load(const uint16_t* p) { return f16_to_f32(*p); }
  static F load_n(const uint16_t* p, int64_t n) { return n > 0 ? f16_to_f32(*p) : 0.0f; }
  static F load(const int8_t* p) { return static_cast<float>(*p); }
  static F load_n(const int8_t* p, int64_t n) { return n > 0 ? static_cast<float>(*p) : 0.0f; }
  static void store(float* p, F x) { *p = x; }
  static F mul(F a, F b) { return a * b; }
  static F sub(F a, F b) { return a - b; }
  static F add(F a, F b) { return a + b; }
  static F max(F a, F b) { return a > b ? a : b; }
  static float reduce_sum(F a) { return a; }
  static float reduce_max(F a) { return a; }
  static void transpose(F*) {}
  static F fma(F a, F b, F c) { return a * b + c; }
  static F exp(F x) { return std::exp(x); }
  static F tanh(F x) { return std::tanh(x); }
};
}  // namespace

int64_t paged_scratch_floats(const PagedAttnArgs& a) {
  const int64_t nv = kPagedRows * (a.H / a.Hkv), Dp = paged_padded(a.D);
  return 2 * nv * Dp + 3 * nv + 2 * nv * (kPagedTile + 16) + 2 * Dp * kPagedTile +
         nv * kPagedMaxShares * (a.D + 2);
}

float paged_merge(const float* parts, int64_t n_parts, int64_t stride, int64_t D, float* o) {
  float m = -INFINITY;
  for (int64_t p = 0; p < n_parts; ++p) m = std::max(m, parts[p * stride + D]);
  std::fill_n(o, D, 0.0f);
  float l = 0.0f;
  if (m != -INFINITY)
    for (int64_t p = 0; p < n_parts; ++p) {
      const float* part = parts + p * stride;
      if (part[D + 1] == 0.0f) continue;  // a share with no visible key
      const float w = std::exp(part[D] - m);
      l += part[D + 1] * w;
      for (int64_t d = 0; d < D; ++d) o[d] += part[d] * w;
    }
  const float inv = l > 0 ? 1.0f / l : 0.0f;
  for (int64_t d = 0; d < D; ++d) o[d] *= inv;
  return l > 0 ? m + std::log(l) : -INFINITY;
}

void paged_item_scalar(const PagedAttnArgs& a, const PagedItem& it, float* scratch) {
  paged_item<V1>(a, it, scratch);
}
}  // namespace detail

namespace {
// Merges the shares of one decode item (partials of `parts` shares, G query heads each) into out/lse.
void merge_parts(const PagedAttnArgs& a, const detail::PagedItem& it, int64_t parts, int64_t stride) {
  const int64_t G = a.H / a.Hkv, D = a.D;
  const PagedSeqArgs& s = a.seqs[it.s];
  for (int64_t gi = 0; gi < G; ++gi) {
    const int64_t row = (s.row0 + it.r0) * a.H + it.g * G + gi;
    const float l = detail::paged_merge(it.partial + gi * (D + 2), parts, stride, D, a.out + row * D);
    if (a.lse) a.lse[row] = l;
  }
}
// The probabilities of every query row of the sequences that ask for them, from lse.
void capture_weights(const PagedAttnArgs& a) {
  std::vector<std::pair<int64_t, int64_t>> rows;  // (sequence, row)
  for (int64_t s = 0; s < a.n_seqs; ++s)
    if (a.seqs[s].weights)
      for (int64_t r = 0; r < a.seqs[s].queries; ++r) rows.emplace_back(s, r);
  const int64_t D = a.D, G = a.H / a.Hkv;
  parallel_for(static_cast<int64_t>(rows.size()), 1, [&](int64_t i0, int64_t i1, int) {
    for (int64_t i = i0; i < i1; ++i) {
      const PagedSeqArgs& s = a.seqs[rows[static_cast<std::size_t>(i)].first];
      const int64_t r = rows[static_cast<std::size_t>(i)].second;
      int64_t lo, hi;
      paged_row_range(a, s, r, &lo, &hi);
      for (int64_t h = a.g0 * G; h < a.g1 * G; ++h) {
        const int64_t row = (s.row0 + r) * a.H + h, g = h / G;
        const float* q = a.q + row * D;
        float* w = s.weights + (r * a.H + h) * s.keys;
        std::fill_n(w, s.keys, 0.0f);
        const double lse = a.lse[row];
        if (!std::isfinite(lse)) continue;
        for (int64_t j = lo; j <= hi; ++j) {
          double dot = 0;
          for (int64_t d = 0; d < D; ++d)
            dot += static_cast<double>(q[d]) * paged_kv_value(a, s, false, g, j, d);
          double x = dot * a.scale;
          if (a.softcap > 0) x = a.softcap * std::tanh(x / a.softcap);
          w[j] = static_cast<float>(std::exp(x - lse));
        }
      }
    }
  });
}
}  // namespace

void paged_attention(const PagedAttnArgs& args) {
  PagedAttnArgs a = args;
  if (a.g1 == 0) a.g1 = a.Hkv;
  const Isa isa = active_isa();
  const detail::PagedItemFn body = isa == Isa::avx512 ? &detail::paged_item_avx512
                                   : isa == Isa::avx2 ? &detail::paged_item_avx2
                                                      : &detail::paged_item_scalar;
  std::vector<detail::PagedItem> items;
  for (int64_t s = 0; s < a.n_seqs; ++s) {
    const int64_t Lq = a.seqs[s].queries;
    const int64_t rows = Lq == 1 ? 1 : kPagedRows;
    for (int64_t r0 = 0; r0 < Lq; r0 += rows)
      for (int64_t g = a.g0; g < a.g1; ++g) items.push_back({s, g, r0, std::min(r0 + rows, Lq)});
  }
  // Each decode row of at least 2 · kPagedMinShareKeys keys is split into its shares (paged_shares),
  // computed as items of their own (one long sequence decoding has only Hkv items) and merged by their
  // maxima. The shares depend on the row's keys alone, never on the batch or the threads, and a chunk's
  // item cuts its long rows at the same bounds: a row is the same bits as a decode row or in a chunk,
  // in any batch (the runtime's batch invariance; a recompute after preemption). Before 2026-12-07
  // rows were split only when the call had fewer items than twice the threads, and chunk rows never.
  std::vector<detail::PagedItem> shares;
  std::vector<int64_t> share_parts;  // per split item: shares
  std::vector<float> partials;
  const int64_t stride = detail::paged_partial_floats(a);
  struct Split {
    std::size_t item;
    int64_t parts, bounds[kPagedMaxShares + 1];
  };
  std::vector<Split> split;
  int64_t total = 0;
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (items[i].r1 - items[i].r0 != 1) continue;
    Split sp{i, 0, {}};
    int64_t lo, hi;
    paged_row_range(a, a.seqs[items[i].s], items[i].r0, &lo, &hi);
    sp.parts = paged_shares(lo, hi, sp.bounds);
    if (sp.parts < 2) continue;
    split.push_back(sp);
    total += sp.parts;
  }
  if (!split.empty()) {  // the items rebuilt with the shares in place of the split ones
    partials.resize(static_cast<std::size_t>(total * stride));
    int64_t next = 0;
    std::vector<detail::PagedItem> kept;
    std::vector<bool> is_split(items.size(), false);
    for (const Split& sp : split) {
      is_split[sp.item] = true;
      detail::PagedItem base = items[sp.item];
      base.partial = partials.data() + next * stride;
      shares.push_back(base);  // the merge's view: the first share's partial, `parts` in a row
      share_parts.push_back(sp.parts);
      for (int64_t p = 0; p < sp.parts; ++p) {
        detail::PagedItem sh = base;
        sh.k0 = sp.bounds[p];
        sh.k1 = sp.bounds[p + 1];
        sh.partial = partials.data() + (next + p) * stride;
        kept.push_back(sh);
      }
      next += sp.parts;
    }
    for (std::size_t i = 0; i < items.size(); ++i)
      if (!is_split[i]) kept.push_back(items[i]);
    items.swap(kept);
  }
  const int64_t need = detail::paged_scratch_floats(a);
  parallel_for(static_cast<int64_t>(items.size()), 1, [&](int64_t i0, int64_t i1, int) {
    thread_local std::vector<float> scratch;
    if (static_cast<int64_t>(scratch.size()) < need) scratch.resize(static_cast<std::size_t>(need));
    for (int64_t i = i0; i < i1; ++i) body(a, items[static_cast<std::size_t>(i)], scratch.data());
  });
  for (std::size_t i = 0; i < shares.size(); ++i) merge_parts(a, shares[i], share_parts[i], stride);
  capture_weights(a);
}

}  // namespace attn::kernels::cpu
