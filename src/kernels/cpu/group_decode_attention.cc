// Decode-step attention: the double reference, the portable path and the dispatch.
#include "kernels/cpu/group_decode_attention.h"

#include <attn/core/f16.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/cpu/isa.h"

namespace attn::kernels {

namespace {
inline float to_float(float x) { return x; }
inline float to_float(uint16_t h) { return f16_to_f32(h); }

template <typename T>
void decode_scalar(const float* q, int64_t G, const T* k, const T* v, int64_t ldk, int64_t Lk, int64_t D,
                   float scale, float* scratch, float* out) {
  for (int64_t g = 0; g < G; ++g) {
    float* s = scratch + g * Lk;
    const float* qg = q + g * D;
    float mx = -INFINITY;
    for (int64_t j = 0; j < Lk; ++j) {
      float acc = 0;
      for (int64_t d = 0; d < D; ++d) acc += qg[d] * to_float(k[j * ldk + d]);
      s[j] = acc * scale;
      mx = std::max(mx, s[j]);
    }
    float sum = 0;
    for (int64_t j = 0; j < Lk; ++j) sum += (s[j] = std::exp(s[j] - mx));
    float* o = out + g * D;
    std::fill_n(o, D, 0.0f);
    for (int64_t j = 0; j < Lk; ++j)
      for (int64_t d = 0; d < D; ++d) o[d] += s[j] * to_float(v[j * ldk + d]);
    const float inv = 1.0f / sum;
    for (int64_t d = 0; d < D; ++d) o[d] *= inv;
  }
}
}  // namespace

namespace ref {
void group_decode_attention(const float* q, int64_t G, const float* k, const float* v, int64_t ldk,
                            int64_t Lk, int64_t D, float scale, float* out) {
  std::vector<double> s(Lk);
  for (int64_t g = 0; g < G; ++g) {
    double mx = -INFINITY;
    for (int64_t j = 0; j < Lk; ++j) {
      double acc = 0;
      for (int64_t d = 0; d < D; ++d) acc += static_cast<double>(q[g * D + d]) * k[j * ldk + d];
      s[j] = acc * scale;
      mx = std::max(mx, s[j]);
    }
    double sum = 0;
    for (int64_t j = 0; j < Lk; ++j) sum += (s[j] = std::exp(s[j] - mx));
    for (int64_t d = 0; d < D; ++d) {
      double acc = 0;
      for (int64_t j = 0; j < Lk; ++j) acc += s[j] * v[j * ldk + d];
      out[g * D + d] = static_cast<float>(acc / sum);
    }
  }
}
}  // namespace ref

namespace cpu {
namespace detail {
void group_decode_attention_scalar(const float* q, int64_t G, const float* k, const float* v, int64_t ldk,
                                   int64_t Lk, int64_t D, float scale, float* scratch, float* out) {
  decode_scalar(q, G, k, v, ldk, Lk, D, scale, scratch, out);
}
void group_decode_attention_f16_scalar(const float* q, int64_t G, const uint16_t* k, const uint16_t* v,
                                       int64_t ldk, int64_t Lk, int64_t D, float scale, float* scratch,
                                       float* out) {
  decode_scalar(q, G, k, v, ldk, Lk, D, scale, scratch, out);
}
}  // namespace detail

void group_decode_attention(const float* q, int64_t G, const float* k, const float* v, int64_t ldk,
                            int64_t Lk, int64_t D, float scale, float* scratch, float* out) {
  if (active_isa() == Isa::avx512 && D % 16 == 0 && D <= 256)
    detail::group_decode_attention_avx512(q, G, k, v, ldk, Lk, D, scale, scratch, out);
  else
    detail::group_decode_attention_scalar(q, G, k, v, ldk, Lk, D, scale, scratch, out);
}

void group_decode_attention_f16(const float* q, int64_t G, const uint16_t* k, const uint16_t* v, int64_t ldk,
                                int64_t Lk, int64_t D, float scale, float* scratch, float* out) {
  if (active_isa() == Isa::avx512 && D % 16 == 0 && D <= 256)
    detail::group_decode_attention_f16_avx512(q, G, k, v, ldk, Lk, D, scale, scratch, out);
  else
    detail::group_decode_attention_f16_scalar(q, G, k, v, ldk, Lk, D, scale, scratch, out);
}

void f32_to_f16(const float* x, int64_t n, uint16_t* out) {
  if (active_isa() == Isa::avx512) {
    detail::f32_to_f16_avx512(x, n, out);
    return;
  }
  for (int64_t i = 0; i < n; ++i) out[i] = attn::f32_to_f16(x[i]);
}
}  // namespace cpu
}  // namespace attn::kernels
