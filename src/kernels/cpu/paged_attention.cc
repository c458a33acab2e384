// Paged attention: the portable body (1 lane), the work items and the dispatch.
#include "kernels/cpu/paged_attention.h"

#include <attn/core/f16.h>
#include <attn/core/parallel.h>

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
  static void store(float* p, F x) { *p = x; }
  static F mul(F a, F b) { return a * b; }
  static F sub(F a, F b) { return a - b; }
  static F add(F a, F b) { return a + b; }
  static F max(F a, F b) { return a > b ? a : b; }
  static float reduce_sum(F a) { return a; }
  static float reduce_max(F a) { return a; }
  static F fma(F a, F b, F c) { return a * b + c; }
  static F exp(F x) { return std::exp(x); }
  static F tanh(F x) { return std::tanh(x); }
  static F hsum(const F* a) { return a[0]; }
};
}  // namespace

int64_t paged_scratch_floats(const PagedAttnArgs& a) {
  const int64_t nv = kPagedRows * (a.H / a.Hkv);
  return 2 * nv * paged_padded(a.D) + 2 * nv + 2 * (kPagedTile + 16);
}

void paged_item_scalar(const PagedAttnArgs& a, const PagedSeqArgs& s, int64_t g, int64_t r0, int64_t r1,
                       float* scratch) {
  paged_item<V1>(a, s, g, r0, r1, scratch);
}
}  // namespace detail

void paged_attention(const PagedAttnArgs& a) {
  const Isa isa = active_isa();
  const detail::PagedItemFn body = isa == Isa::avx512 ? &detail::paged_item_avx512
                                   : isa == Isa::avx2 ? &detail::paged_item_avx2
                                                      : &detail::paged_item_scalar;
  struct Item {
    int64_t s, g, r0, r1;
  };
  std::vector<Item> items;
  for (int64_t s = 0; s < a.n_seqs; ++s) {
    const int64_t Lq = a.seqs[s].queries;
    const int64_t rows = Lq == 1 ? 1 : kPagedRows;
    for (int64_t r0 = 0; r0 < Lq; r0 += rows)
      for (int64_t g = 0; g < a.Hkv; ++g) items.push_back({s, g, r0, std::min(r0 + rows, Lq)});
  }
  const int64_t need = detail::paged_scratch_floats(a);
  parallel_for(static_cast<int64_t>(items.size()), 1, [&](int64_t i0, int64_t i1, int) {
    thread_local std::vector<float> scratch;
    if (static_cast<int64_t>(scratch.size()) < need) scratch.resize(static_cast<std::size_t>(need));
    for (int64_t i = i0; i < i1; ++i) {
      const Item& it = items[static_cast<std::size_t>(i)];
      body(a, a.seqs[it.s], it.g, it.r0, it.r1, scratch.data());
    }
  });
}

}  // namespace attn::kernels::cpu
