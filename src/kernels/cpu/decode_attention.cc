// Decode-step attention: the double reference, the portable path and the dispatch.
#include "kernels/cpu/decode_attention.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/isa.h"

namespace attn::kernels {

namespace ref {
void decode_attention(const float* q, int64_t G, const float* k, const float* v, int64_t ldk, int64_t Lk,
                      int64_t D, float scale, float* out) {
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
void decode_attention_scalar(const float* q, int64_t G, const float* k, const float* v, int64_t ldk,
                             int64_t Lk, int64_t D, float scale, float* scratch, float* out) {
  for (int64_t g = 0; g < G; ++g) {
    float* s = scratch + g * Lk;
    const float* qg = q + g * D;
    float mx = -INFINITY;
    for (int64_t j = 0; j < Lk; ++j) {
      float acc = 0;
      for (int64_t d = 0; d < D; ++d) acc += qg[d] * k[j * ldk + d];
      s[j] = acc * scale;
      mx = std::max(mx, s[j]);
    }
    float sum = 0;
    for (int64_t j = 0; j < Lk; ++j) sum += (s[j] = std::exp(s[j] - mx));
    float* o = out + g * D;
    std::fill_n(o, D, 0.0f);
    for (int64_t j = 0; j < Lk; ++j)
      for (int64_t d = 0; d < D; ++d) o[d] += s[j] * v[j * ldk + d];
    const float inv = 1.0f / sum;
    for (int64_t d = 0; d < D; ++d) o[d] *= inv;
  }
}
}  // namespace detail

void decode_attention(const float* q, int64_t G, const float* k, const float* v, int64_t ldk, int64_t Lk,
                      int64_t D, float scale, float* scratch, float* out) {
  if (active_isa() == Isa::avx512 && D % 16 == 0 && D <= 256)
    detail::decode_attention_avx512(q, G, k, v, ldk, Lk, D, scale, scratch, out);
  else
    detail::decode_attention_scalar(q, G, k, v, ldk, Lk, D, scale, scratch, out);
}
}  // namespace cpu
}  // namespace attn::kernels
