// Raw-pointer arguments shared by every attention kernel (reference and fused).
//
// Kernels never see attn::Tensor: src/ops/attention.cc validates the tensors,
// allocates outputs, fills one of these structs and dispatches. All strides are
// in elements; a broadcast dimension has stride 0.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

namespace attn::kernels {

// Strides of a 4-D operand: [b, h, row, col]. For q/k/v/out "col" is D; for
// the allow/bias masks it is the key index j.
struct Strides4 {
  int64_t b = 0, h = 0, r = 0, c = 0;
};

// The structural masks (causal, window, key length) intersect into one
// contiguous interval of allowed keys per query row: [lo, hi). An empty
// interval (lo >= hi) is a fully masked row.
struct KeyRange {
  int64_t lo, hi;
};

struct MaskArgs {
  int64_t Lq = 0, Lk = 0;
  bool causal = false;
  int64_t diag_offset = 0;                      // p(i) = i + diag_offset: 0 top-left, Lk - Lq bottom-right
  int64_t window_left = -1, window_right = -1;  // -1 unbounded
  const int64_t* key_lengths = nullptr;         // [B] or null

  KeyRange range(int64_t b, int64_t i) const {
    int64_t lo = 0, hi = Lk;
    const int64_t p = i + diag_offset;
    if (causal) hi = std::min(hi, p + 1);
    if (window_right >= 0) hi = std::min(hi, p + window_right + 1);
    if (window_left >= 0) lo = std::max(lo, p - window_left);
    if (key_lengths) hi = std::min(hi, key_lengths[b]);
    lo = std::max<int64_t>(lo, 0);
    hi = std::max(hi, lo);
    return {lo, hi};
  }
};

// Dropout keep rule: a counter-based hash of (seed, b, h, i, j), so any
// backend, thread split or pass (forward, backward, capture) sees the same
// decision without storing a mask.
inline uint64_t mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return x;
}
inline uint32_t dropout_hash(uint64_t seed, int64_t b, int64_t h, int64_t i, int64_t j) {
  uint64_t x = mix64(seed ^ 0x9e3779b97f4a7c15ull);
  x = mix64(x ^ static_cast<uint64_t>(b));
  x = mix64(x ^ static_cast<uint64_t>(h));
  x = mix64(x ^ static_cast<uint64_t>(i));
  x = mix64(x ^ static_cast<uint64_t>(j));
  return static_cast<uint32_t>(x >> 32);
}
// Elements whose hash is below this threshold are dropped.
inline uint32_t dropout_threshold(double p) {
  const double t = p * 4294967296.0;
  return t >= 4294967295.0 ? 0xffffffffu : static_cast<uint32_t>(t);
}

template <typename T>
struct AttnArgs {
  int64_t B = 0, H = 0, Hkv = 0, Lq = 0, Lk = 0, D = 0;
  const T* q = nullptr;  // [B, H, Lq, D]
  const T* k = nullptr;  // [B, Hkv, Lk, D]
  const T* v = nullptr;  // [B, Hkv, Lk, D]
  Strides4 sq, sk, sv;

  double scale = 1.0;
  double softcap = 0.0;  // > 0: s = softcap * tanh(s / softcap)
  MaskArgs mask;
  const uint8_t* allow = nullptr;  // broadcast view over [B, H, Lq, Lk]
  Strides4 sallow;
  const T* bias = nullptr;  // broadcast view over [B, H, Lq, Lk]
  Strides4 sbias;

  double dropout_p = 0.0;
  uint64_t dropout_seed = 0;

  // bf16 inputs, for the fused CPU forward only (kernels::cpu::fused_bf16_available()): when `bf16`
  // is set, q, k and v above are null and these hold the raw bf16 bits (attn::bf16::bits) of the
  // same operands, with the same strides sq, sk, sv (unit stride in D).
  bool bf16 = false;
  const uint16_t* q16 = nullptr;  // [B, H, Lq, D]
  const uint16_t* k16 = nullptr;  // [B, Hkv, Lk, D]
  const uint16_t* v16 = nullptr;  // [B, Hkv, Lk, D]

  int64_t group() const { return H / Hkv; }  // query heads per kv head
};

// Forward outputs.
template <typename T>
struct AttnOut {
  T* out = nullptr;  // [B, H, Lq, D]: contiguous, or with the strides sout (unit stride in D)
  Strides4 sout;     // all zero: contiguous
  T* lse = nullptr;  // [B, H, Lq] contiguous
  // Weight capture (optional): probabilities for the listed (b, h, i),
  // written contiguous as [nb, nh, nr, Lk].
  T* weights = nullptr;
  std::vector<int64_t> cap_b, cap_h, cap_i;

  // Row (b, h, i) of out; H, Lq, D are the call's.
  T* out_row(int64_t b, int64_t h, int64_t i, int64_t H, int64_t Lq, int64_t D) const {
    if (sout.r == 0) return out + ((b * H + h) * Lq + i) * D;
    return out + b * sout.b + h * sout.h + i * sout.r;
  }
};

// Backward inputs and outputs.
template <typename T>
struct AttnGradArgs {
  const T* out = nullptr;  // [B, H, Lq, D]
  Strides4 sout;
  const T* dout = nullptr;  // [B, H, Lq, D]
  Strides4 sdout;
  const T* lse = nullptr;  // [B, H, Lq] contiguous
  T* dq = nullptr;         // [B, H, Lq, D] contiguous, written (not accumulated)
  T* dk = nullptr;         // [B, Hkv, Lk, D] contiguous, written
  T* dv = nullptr;         // [B, Hkv, Lk, D] contiguous, written
};

}  // namespace attn::kernels
