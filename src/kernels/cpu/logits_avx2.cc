// AVX2 bodies of the decoding row reductions (src/kernels/cpu/logits.h): logits_avx512.cc's two passes
// with 8 lanes, for CPUs without AVX-512, where the scalar body takes an exp in double per logit (4% of a
// batch-32 decoding step there). The same contract: the first maximum (ties to the lower id), and
// Σ exp(x - max) summed per lane in fp32 (each lane at most ceil(V / 8) terms <= 1) and across lanes in
// double. Only intrinsics, vec_avx2.h and this file's anonymous namespace are used here (no weak
// symbols: see scripts/check-isa-objects.sh).
#include <immintrin.h>
#include <math.h>

#include "kernels/cpu/logits.h"
#include "kernels/cpu/vec_avx2.h"

namespace attn::kernels::cpu {
namespace {

double sum_exp_shifted(const float* x, int64_t V, float mx) {
  const __m256 vmx = _mm256_set1_ps(mx);
  __m256 s = _mm256_setzero_ps();
  int64_t t = 0;
  for (; t + 8 <= V; t += 8) s = _mm256_add_ps(s, avx2::exp_ps(_mm256_sub_ps(_mm256_loadu_ps(x + t), vmx)));
  if (t < V) {  // lanes past V read -inf: exp(-inf) = 0
    const __m256 last = avx2::load_or(x + t, V - t, -__builtin_inff());
    s = _mm256_add_ps(s, avx2::exp_ps(_mm256_sub_ps(last, vmx)));
  }
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, s);
  double total = 0;
  for (float l : lanes) total += l;
  return total;
}

}  // namespace

double row_logsumexp_avx2(const float* x, int64_t V) {
  const __m256 neg_inf = _mm256_set1_ps(-__builtin_inff());
  __m256 m = neg_inf;
  int64_t t = 0;
  for (; t + 8 <= V; t += 8) m = _mm256_max_ps(m, _mm256_loadu_ps(x + t));
  if (t < V) m = _mm256_max_ps(m, avx2::load_or(x + t, V - t, -__builtin_inff()));
  const float mx = avx2::hmax(m);
  if (mx == -__builtin_inff()) return mx;
  return mx + log(sum_exp_shifted(x, V, mx));
}

ArgmaxLse row_argmax_logsumexp_avx2(const float* x, int64_t V) {
  // Pass 1: per lane the largest value and the first index holding it.
  const __m256 neg_inf = _mm256_set1_ps(-__builtin_inff());
  __m256 m = neg_inf;
  __m256i idx = _mm256_setzero_si256(), pos = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256i step = _mm256_set1_epi32(8);
  int64_t t = 0;
  for (; t + 8 <= V; t += 8, pos = _mm256_add_epi32(pos, step)) {
    const __m256 xv = _mm256_loadu_ps(x + t);
    const __m256 gt = _mm256_cmp_ps(xv, m, _CMP_GT_OQ);
    m = _mm256_blendv_ps(m, xv, gt);
    idx = _mm256_castps_si256(_mm256_blendv_ps(_mm256_castsi256_ps(idx), _mm256_castsi256_ps(pos), gt));
  }
  if (t < V) {  // lanes past V read -inf and never compare greater
    const __m256 xv = avx2::load_or(x + t, V - t, -__builtin_inff());
    const __m256 gt = _mm256_cmp_ps(xv, m, _CMP_GT_OQ);
    m = _mm256_blendv_ps(m, xv, gt);
    idx = _mm256_castps_si256(_mm256_blendv_ps(_mm256_castsi256_ps(idx), _mm256_castsi256_ps(pos), gt));
  }
  alignas(32) float lanes[8];
  alignas(32) int32_t ids[8];
  _mm256_store_ps(lanes, m);
  _mm256_store_si256(reinterpret_cast<__m256i*>(ids), idx);
  float mx = lanes[0];
  for (float l : lanes) mx = l > mx ? l : mx;
  int64_t token = V;  // the lowest index among the lanes holding the maximum
  for (int i = 0; i < 8; ++i)
    if (lanes[i] == mx && ids[i] < token) token = ids[i];
  if (mx == -__builtin_inff()) return {0, mx};  // every logit -inf: id 0, as max_element
  return {token, mx + log(sum_exp_shifted(x, V, mx))};
}

}  // namespace attn::kernels::cpu
