// GCC 12 reports a false "(may be) used uninitialized" inside the AVX-512 intrinsic headers (the
// _mm512_undefined_ps() pass-through operand of unmasked max/min/roundscale/scalef), as in
// kernels/cpu/attention_fwd_avx512.cc; the operand is never read.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <cmath>
#include <limits>

#include "kernels/cpu/logits.h"
#include "kernels/cpu/vec_avx512.h"

namespace attn::kernels::cpu {

namespace {

// Σ_j exp(x[j] - mx) over a row of V values (tail: the lanes past V masked by `tail`), summed per lane in
// fp32 (each lane sums at most ceil(V / 16) terms <= 1: relative error ~V/16 · 2^-24) and across lanes
// in double.
double sum_exp_shifted(const float* x, int64_t V, float mx, __mmask16 tail) {
  namespace v = kernels::cpu::avx512;
  const __m512 vmx = _mm512_set1_ps(mx);
  __m512 s = _mm512_setzero_ps();
  int64_t t = 0;
  for (; t + 16 <= V; t += 16) s = _mm512_add_ps(s, v::exp_ps(_mm512_sub_ps(_mm512_loadu_ps(x + t), vmx)));
  const __m512 last = _mm512_mask_loadu_ps(vmx, tail, x + t);  // masked lanes: exp(0) = 1, removed below
  s = _mm512_add_ps(s, _mm512_maskz_mov_ps(tail, v::exp_ps(_mm512_sub_ps(last, vmx))));
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, s);
  double total = 0;
  for (float l : lanes) total += l;
  return total;
}

}  // namespace

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
  return mx + std::log(sum_exp_shifted(x, V, mx, tail));
}

ArgmaxLse row_argmax_logsumexp_avx512(const float* x, int64_t V) {
  namespace v = kernels::cpu::avx512;
  // Pass 1: per lane the largest value and the first index holding it.
  const __m512 neg_inf = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  __m512 m = neg_inf;
  __m512i idx = _mm512_set1_epi32(0),
          pos = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  const __m512i step = _mm512_set1_epi32(16);
  int64_t t = 0;
  for (; t + 16 <= V; t += 16, pos = _mm512_add_epi32(pos, step)) {
    const __m512 xv = _mm512_loadu_ps(x + t);
    const __mmask16 gt = _mm512_cmp_ps_mask(xv, m, _CMP_GT_OQ);
    m = _mm512_mask_mov_ps(m, gt, xv);
    idx = _mm512_mask_mov_epi32(idx, gt, pos);
  }
  const __mmask16 tail = static_cast<__mmask16>((1u << (V - t)) - 1u);
  {
    const __m512 xv = _mm512_mask_loadu_ps(neg_inf, tail, x + t);
    const __mmask16 gt = _mm512_mask_cmp_ps_mask(tail, xv, m, _CMP_GT_OQ);
    m = _mm512_mask_mov_ps(m, gt, xv);
    idx = _mm512_mask_mov_epi32(idx, gt, pos);
  }
  alignas(64) float lanes[16];
  alignas(64) int32_t ids[16];
  _mm512_store_ps(lanes, m);
  _mm512_store_si512(ids, idx);
  float mx = lanes[0];
  for (float l : lanes) mx = l > mx ? l : mx;
  int64_t token = V;  // the lowest index among the lanes holding the maximum
  for (int i = 0; i < 16; ++i)
    if (lanes[i] == mx && ids[i] < token) token = ids[i];
  if (mx == -std::numeric_limits<float>::infinity())
    return {0, mx};  // every logit -inf: id 0, as max_element
  // Pass 2: Σ exp(x - max), as row_logsumexp_avx512.
  return {token, mx + std::log(sum_exp_shifted(x, V, mx, tail))};
}

}  // namespace attn::kernels::cpu

#pragma GCC diagnostic pop
