// GCC 12 reports a false "(may be) used uninitialized" inside the AVX-512 intrinsic headers (the
// _mm512_undefined_ps() pass-through operand of unmasked max/min/roundscale/scalef), as in
// kernels/cpu/attention_fwd_avx512.cc; the operand is never read.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <cmath>
#include <limits>

#include "kernels/cpu/vec_avx512.h"
#include "models/logits.h"

namespace attn::models::detail {

double row_logsumexp_avx512(const float* x, int64_t V) {
  namespace v = kernels::cpu::avx512;
  __m512 m = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  int64_t t = 0;
  for (; t + 16 <= V; t += 16) m = _mm512_max_ps(m, _mm512_loadu_ps(x + t));
  const __mmask16 tail = static_cast<__mmask16>((1u << (V - t)) - 1u);
  m = _mm512_max_ps(m, _mm512_mask_loadu_ps(m, tail, x + t));
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, m);
  float mx = lanes[0];
  for (float l : lanes) mx = l > mx ? l : mx;
  if (mx == -std::numeric_limits<float>::infinity()) return mx;
  const __m512 vmx = _mm512_set1_ps(mx);
  // Each lane sums at most ceil(V / 16) terms <= 1 in fp32 (relative error ~V/16 · 2^-24).
  __m512 s = _mm512_setzero_ps();
  for (t = 0; t + 16 <= V; t += 16)
    s = _mm512_add_ps(s, v::exp_ps(_mm512_sub_ps(_mm512_loadu_ps(x + t), vmx)));
  const __m512 last = _mm512_mask_loadu_ps(vmx, tail, x + t);  // masked lanes: exp(0) = 1, removed below
  s = _mm512_add_ps(s, _mm512_maskz_mov_ps(tail, v::exp_ps(_mm512_sub_ps(last, vmx))));
  _mm512_store_ps(lanes, s);
  double total = 0;
  for (float l : lanes) total += l;
  return mx + std::log(total);
}

}  // namespace attn::models::detail

#pragma GCC diagnostic pop
