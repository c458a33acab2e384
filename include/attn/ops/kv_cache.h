// The KV cache of one decoder attention layer, full or sliding-window (a ring buffer), and the two
// attention passes that read it: a prompt pass (many new positions, the fused kernel with its window
// option) and a decode step (one new position). INFERENCE ONLY: NO AUTOGRAD.
//
// Positions are appended in order from 0. A full cache (window 0) keeps every position up to its
// capacity. A sliding-window cache (window W > 0: a query at position i sees keys j with
// i − W < j ≤ i, llama.cpp's "standard" SWA, Gemma 3's local layers) keeps only the last
// min(W, capacity) positions: position p lives in slot p % slots, so the memory is W rows whatever
// the sequence length. Rows are f32 [Hkv, slots, D].
#pragma once

#include <attn/core/tensor.h>

#include <cstdint>
#include <vector>

namespace attn::ops {

class KvCache {
 public:
  KvCache() = default;
  // kv_heads Hkv, head_dim D, capacity (the longest sequence), window (0: full; else W >= 1).
  // Throws for non-positive sizes or a window larger than the capacity (a window that could never
  // fill: the caller should make the layer global, or the context longer). ring = false keeps every
  // position of a windowed layer (slots = capacity; the attention still sees only the window): the
  // full cache the ring buffer is measured and tested against.
  KvCache(int64_t kv_heads, int64_t head_dim, int64_t capacity, int64_t window, bool ring = true);

  void clear() { length_ = 0; }
  int64_t length() const { return length_; }  // positions appended so far
  int64_t capacity() const { return capacity_; }
  int64_t kv_heads() const { return Hkv_; }
  int64_t head_dim() const { return D_; }
  int64_t window() const { return window_; }
  int64_t slots() const { return slots_; }  // rows held per head: capacity, or min(window, capacity)
  int64_t held() const { return length_ < slots_ ? length_ : slots_; }  // rows in use
  int64_t bytes() const;                                                // of K and V together
  // The oldest position still held.
  int64_t first_held() const { return length_ - held(); }

  // Appends L positions: k, v [L, Hkv, D] contiguous. Throws past the capacity.
  void append(const float* k, const float* v, int64_t L);
  // Positions [p0, p1) (each still held) in order: k_out, v_out [Hkv, p1 − p0, D].
  void gather(int64_t p0, int64_t p1, float* k_out, float* v_out) const;
  // The rows of kv head h, in slot order (a ring's slot order is not position order: the attention
  // of one query over them does not depend on the order): [slots(), D] contiguous.
  const float* k_rows(int64_t h) const { return k_.data() + h * slots_ * D_; }
  const float* v_rows(int64_t h) const { return v_.data() + h * slots_ * D_; }
  // The rows the last appended position attends: [first, first + count) of k_rows / v_rows.
  void visible_rows(int64_t* first, int64_t* count) const;

 private:
  int64_t Hkv_ = 0, D_ = 0, capacity_ = 0, window_ = 0, slots_ = 0, length_ = 0;
  bool ring_ = true;
  std::vector<float> k_, v_;
};

// The KV-cache bytes (K and V, f32, all layers) of a model whose layers have the given windows
// (0 = global) at a context of `context` tokens.
int64_t kv_cache_bytes(const std::vector<int64_t>& layer_windows, int64_t kv_heads, int64_t head_dim,
                       int64_t context);

// A prompt pass through one layer: the L new positions' q [L, H, D], k, v [L, Hkv, D] (contiguous,
// RoPE applied). Appends k, v to the cache, then out [L, H, D] = causal attention (bottom-right
// aligned, the cache's window as the fused kernel's window_left = W − 1) of each new query over the
// held positions and the new ones. weights: when non-null receives the probabilities
// [H, L, Lk] with Lk = the keys seen (first_held() before the append .. the last new position).
// Returns the position of the first key column (for a capture).
int64_t cached_prompt_attention(KvCache& cache, const float* q, const float* k, const float* v, int64_t L,
                                int64_t H, double scale, float* out, std::vector<float>* weights = nullptr);

// A decode step for one new position (already appended with append()): the G query heads q [G, D]
// of kv head h attend every held row. scratch [G, slots()] (the caller's), out [G, D].
void cached_decode_attention(const KvCache& cache, int64_t h, const float* q, int64_t G, float scale,
                             float* scratch, float* out);

}  // namespace attn::ops
