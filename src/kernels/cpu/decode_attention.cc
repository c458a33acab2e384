#include "kernels/cpu/decode_attention.h"

#include <attn/core/parallel.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/cpu/isa.h"

namespace attn::kernels::cpu {

namespace detail {

void decode_attention_scalar(const DecodeAttnArgs& a, int64_t r0, int64_t r1, float* scores) {
  const int64_t group = a.H / a.Hkv;
  for (int64_t r = r0; r < r1; ++r) {
    const int64_t b = r / a.H, h = r % a.H, g = h / group;
    const int64_t len = a.lengths ? a.lengths[b] : a.L;
    const float* q = a.q + b * a.sqb + h * a.sqh;
    const float* k = a.k + b * a.skb + g * a.skh;
    const float* v = a.v + b * a.svb + g * a.svh;
    float* o = a.o + b * a.sob + h * a.soh;
    float mx = -std::numeric_limits<float>::infinity();
    for (int64_t j = 0; j < len; ++j) {
      float s = 0.0f;
      for (int64_t d = 0; d < a.D; ++d) s += q[d] * k[j * a.skl + d];
      scores[j] = s * a.scale;
      mx = std::max(mx, scores[j]);
    }
    float sum = 0.0f;
    for (int64_t j = 0; j < len; ++j) sum += scores[j] = std::exp(scores[j] - mx);
    for (int64_t d = 0; d < a.D; ++d) o[d] = 0.0f;
    for (int64_t j = 0; j < len; ++j)
      for (int64_t d = 0; d < a.D; ++d) o[d] += scores[j] * v[j * a.svl + d];
    const float inv = len > 0 ? 1.0f / sum : 0.0f;
    for (int64_t d = 0; d < a.D; ++d) o[d] *= inv;
  }
}

}  // namespace detail

void decode_attention(const DecodeAttnArgs& a) {
  const Isa isa = active_isa();
  const auto body = isa == Isa::avx512 ? &detail::decode_attention_avx512
                    : isa == Isa::avx2 ? &detail::decode_attention_avx2
                                       : &detail::decode_attention_scalar;
  parallel_for(a.B * a.H, 4, [&](int64_t r0, int64_t r1, int) {
    thread_local std::vector<float> scratch;
    if (static_cast<int64_t>(scratch.size()) < a.L + 16) scratch.resize(static_cast<std::size_t>(a.L + 16));
    body(a, r0, r1, scratch.data());
  });
}

}  // namespace attn::kernels::cpu
