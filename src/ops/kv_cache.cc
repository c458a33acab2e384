// KV caches, full and sliding-window (include/attn/ops/kv_cache.h).
#include <attn/core/error.h>
#include <attn/ops/attention.h>
#include <attn/ops/inference.h>
#include <attn/ops/kv_cache.h>

#include <algorithm>
#include <cstring>

namespace attn::ops {

KvCache::KvCache(int64_t kv_heads, int64_t head_dim, int64_t capacity, int64_t window, bool ring)
    : Hkv_(kv_heads), D_(head_dim), capacity_(capacity), window_(window), ring_(ring) {
  ATTN_CHECK(kv_heads > 0 && head_dim > 0 && capacity > 0,
             "KvCache: kv_heads, head_dim and capacity must be > 0; got ", kv_heads, ", ", head_dim, ", ",
             capacity);
  ATTN_CHECK(window >= 0, "KvCache: window must be >= 0 (0 = full), got ", window);
  ATTN_CHECK(window <= capacity, "KvCache: sliding window of ", window,
             " tokens is larger than the context of ", capacity, " tokens");
  slots_ = window && ring ? window : capacity;
  k_.assign(static_cast<std::size_t>(Hkv_ * slots_ * D_), 0.0f);
  v_.assign(k_.size(), 0.0f);
}

void KvCache::visible_rows(int64_t* first, int64_t* count) const {
  if (window_ && !ring_ && length_ > window_) {
    *first = length_ - window_;
    *count = window_;
  } else {
    *first = 0;
    *count = held();
  }
}

int64_t KvCache::bytes() const { return 2 * Hkv_ * slots_ * D_ * static_cast<int64_t>(sizeof(float)); }

void KvCache::append(const float* k, const float* v, int64_t L) {
  ATTN_CHECK(L >= 0 && length_ + L <= capacity_, "KvCache: ", length_, " cached + ", L,
             " new positions exceed the capacity of ", capacity_);
  // Only the last `slots_` of the new positions survive.
  const int64_t first = std::max<int64_t>(0, L - slots_);
  for (int64_t i = first; i < L; ++i) {
    const int64_t slot = (length_ + i) % slots_;
    for (int64_t h = 0; h < Hkv_; ++h) {
      std::memcpy(k_.data() + (h * slots_ + slot) * D_, k + (i * Hkv_ + h) * D_, D_ * sizeof(float));
      std::memcpy(v_.data() + (h * slots_ + slot) * D_, v + (i * Hkv_ + h) * D_, D_ * sizeof(float));
    }
  }
  length_ += L;
}

void KvCache::gather(int64_t p0, int64_t p1, float* k_out, float* v_out) const {
  ATTN_CHECK(first_held() <= p0 && p0 <= p1 && p1 <= length_, "KvCache::gather: positions [", p0, ", ", p1,
             ") are not all held (held: [", first_held(), ", ", length_, "))");
  const int64_t n = p1 - p0;
  for (int64_t h = 0; h < Hkv_; ++h)
    for (int64_t p = p0; p < p1; ++p) {
      const int64_t slot = p % slots_;
      std::memcpy(k_out + (h * n + p - p0) * D_, k_.data() + (h * slots_ + slot) * D_, D_ * sizeof(float));
      std::memcpy(v_out + (h * n + p - p0) * D_, v_.data() + (h * slots_ + slot) * D_, D_ * sizeof(float));
    }
}

int64_t kv_cache_bytes(const std::vector<int64_t>& windows, int64_t kv_heads, int64_t head_dim,
                       int64_t context) {
  int64_t rows = 0;
  for (int64_t w : windows) rows += w > 0 ? std::min(w, context) : context;
  return 2 * rows * kv_heads * head_dim * static_cast<int64_t>(sizeof(float));
}

int64_t cached_prompt_attention(KvCache& cache, const float* q, const float* k, const float* v, int64_t L,
                                int64_t H, double scale, float* out, std::vector<float>* weights) {
  const int64_t Hkv = cache.kv_heads(), D = cache.head_dim(), W = cache.window();
  ATTN_CHECK(L >= 1 && q && k && v && out,
             "cached_prompt_attention: need L >= 1 new positions and buffers; got L ", L);
  ATTN_CHECK(H >= Hkv && H % Hkv == 0, "cached_prompt_attention: ", H, " query heads must be a multiple of ",
             Hkv, " kv heads");
  const int64_t p0 = cache.length();
  ATTN_CHECK(p0 + L <= cache.capacity(), "cached_prompt_attention: ", p0, " cached + ", L,
             " new positions exceed the capacity of ", cache.capacity());
  // The oldest key any new query sees: the window's left end for the first new query.
  const int64_t lo = W ? std::max(cache.first_held(), p0 - (W - 1)) : 0;
  const int64_t old = p0 - lo, Lk = old + L;
  Tensor kt = Tensor::empty({1, Hkv, Lk, D}), vt = Tensor::empty({1, Hkv, Lk, D});
  float* kp = kt.data<float>();
  float* vp = vt.data<float>();
  const int64_t slots = cache.slots();
  for (int64_t h = 0; h < Hkv; ++h) {
    for (int64_t p = lo; p < p0; ++p) {
      std::memcpy(kp + (h * Lk + p - lo) * D, cache.k_rows(h) + (p % slots) * D, D * sizeof(float));
      std::memcpy(vp + (h * Lk + p - lo) * D, cache.v_rows(h) + (p % slots) * D, D * sizeof(float));
    }
    for (int64_t i = 0; i < L; ++i) {
      std::memcpy(kp + (h * Lk + old + i) * D, k + (i * Hkv + h) * D, D * sizeof(float));
      std::memcpy(vp + (h * Lk + old + i) * D, v + (i * Hkv + h) * D, D * sizeof(float));
    }
  }
  Tensor qt = Tensor::empty({1, H, L, D});
  float* qp = qt.data<float>();
  for (int64_t i = 0; i < L; ++i)
    for (int64_t h = 0; h < H; ++h) std::memcpy(qp + (h * L + i) * D, q + (i * H + h) * D, D * sizeof(float));
  AttentionOptions ao;
  ao.scale = scale;
  ao.causal = true;
  ao.align = Align::bottom_right;
  if (W) ao.window_left = W - 1;
  if (weights) ao.capture.enabled = true;
  const AttentionResult r = attention(qt, kt, vt, ao);
  const Tensor o = r.out.contiguous();
  const float* op = o.data<float>();
  for (int64_t i = 0; i < L; ++i)
    for (int64_t h = 0; h < H; ++h)
      std::memcpy(out + (i * H + h) * D, op + (h * L + i) * D, D * sizeof(float));
  if (weights) {
    const Tensor w = r.weights.contiguous();
    weights->assign(w.data<float>(), w.data<float>() + w.numel());
  }
  cache.append(k, v, L);
  return lo;
}

void cached_decode_attention(const KvCache& cache, int64_t h, const float* q, int64_t G, float scale,
                             float* scratch, float* out) {
  ATTN_CHECK(0 <= h && h < cache.kv_heads(), "cached_decode_attention: kv head ", h, " outside [0, ",
             cache.kv_heads(), ")");
  ATTN_CHECK(cache.held() >= 1,
             "cached_decode_attention: the cache is empty (append the new position first)");
  int64_t first = 0, count = 0;
  cache.visible_rows(&first, &count);
  const int64_t D = cache.head_dim();
  group_decode_attention(q, G, cache.k_rows(h) + first * D, cache.v_rows(h) + first * D, D, count, D, scale,
                         scratch, out);
}

}  // namespace attn::ops
