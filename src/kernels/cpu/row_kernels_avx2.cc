// AVX2 range kernels of the fp32 cross-entropy and dropout (row_kernels.h, avx2_rows): the path of x86-64
// CPUs without AVX-512, where these two ops otherwise ran the scalar templates of nn_kernels.h (an exp in
// double per logit, a scalar hash per element: on the training step, 22% of its time on AVX2).
// Cross-entropy: 8 lanes, avx2::exp_ps (vec_avx2.h: the bits of the AVX-512 kernels' exp), 8-lane partial
// sums reduced once per row; held to the f64 reference like the AVX-512 kernel. Dropout: the keep
// decision and rounding of the scalar kernel, bit for bit (avx2::mix64 builds the hash's 64-bit products
// from 32 x 32 -> 64-bit multiplies), 4 elements per vector, the last few element by element. Only
// intrinsics, vec_avx2.h and helpers of this file's anonymous namespace are used here (no weak symbols:
// see scripts/check-isa-objects.sh).
#include <immintrin.h>
#include <math.h>

#include "kernels/cpu/row_kernels.h"
#include "kernels/cpu/vec_avx2.h"

namespace attn::kernels::cpu::avx2_rows {
namespace {

using avx2::exp_ps;
using avx2::lanes;

// Lanes past n read `fill`.
inline __m256 load_or(const float* p, int64_t n, float fill) {
  if (n >= 8) return _mm256_loadu_ps(p);
  const __m256i k = lanes(n);
  return _mm256_blendv_ps(_mm256_set1_ps(fill), _mm256_maskload_ps(p, k), _mm256_castsi256_ps(k));
}
inline void store_n(float* p, int64_t n, __m256 v) {
  if (n >= 8)
    _mm256_storeu_ps(p, v);
  else
    _mm256_maskstore_ps(p, lanes(n), v);
}

inline float hmax(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_shuffle_ps(m, m, 1));
  return _mm_cvtss_f32(m);
}
inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
  return _mm_cvtss_f32(s);
}

// The scalar keep decision (nn_kernels.h, dropout_keep_flat), for one element.
inline bool keep_one(uint64_t seed, int64_t i, uint64_t thr) {
  uint64_t z = seed + 0x9e3779b97f4a7c15ull * (static_cast<uint64_t>(i) + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return (z >> 11) >= thr;
}

}  // namespace

// ---- cross-entropy ----------------------------------------------------------------------------
double cross_entropy(const float* x, const int64_t* target, double* lse, float* dx, int64_t r0, int64_t r1,
                     int64_t V, int64_t ignore_index, double eps, double gscale) {
  const float ninf = -__builtin_inff();
  double total = 0;
  for (int64_t r = r0; r < r1; ++r) {
    const float* xr = x + r * V;
    float* dr = dx ? dx + r * V : nullptr;
    const bool ignored = target[r] == ignore_index;
    __m256 mx = _mm256_set1_ps(ninf), sx = _mm256_setzero_ps();
    for (int64_t v = 0; v < V; v += 8) {
      const __m256 xv = load_or(xr + v, V - v, ninf);
      mx = _mm256_max_ps(mx, xv);
      sx = _mm256_add_ps(sx, load_or(xr + v, V - v, 0.f));
    }
    const float m = hmax(mx);
    const __m256 mv = _mm256_set1_ps(m);
    // e = exp(x - max), kept in dx (when wanted) so that the gradient needs no second exp; lanes past V
    // read -inf and give 0
    const bool keep_e = dr != nullptr && !ignored;
    __m256 s = _mm256_setzero_ps();
    for (int64_t v = 0; v < V; v += 8) {
      const __m256 e = exp_ps(_mm256_sub_ps(load_or(xr + v, V - v, ninf), mv));
      s = _mm256_add_ps(s, e);
      if (keep_e) store_n(dr + v, V - v, e);
    }
    const double sum = static_cast<double>(hsum(s));
    lse[r] = static_cast<double>(m) + ::log(sum);
    if (ignored) {
      if (dr)
        for (int64_t v = 0; v < V; v += 8) store_n(dr + v, V - v, _mm256_setzero_ps());
      continue;
    }
    // loss_r = (1 - eps) · (lse - x[t]) + eps · (lse - mean_v x[v])
    const double sum_x = static_cast<double>(hsum(sx));
    total += (1.0 - eps) * (lse[r] - static_cast<double>(xr[target[r]])) +
             eps * (lse[r] - sum_x / static_cast<double>(V));
    if (!dr) continue;
    // dx = (softmax - (1 - eps) · onehot(t) - eps / V) · gscale,  softmax = e / sum
    const __m256 scale = _mm256_set1_ps(static_cast<float>(gscale / sum));
    const __m256 shift = _mm256_set1_ps(static_cast<float>(eps / static_cast<double>(V) * gscale));
    for (int64_t v = 0; v < V; v += 8)
      store_n(dr + v, V - v, _mm256_fmsub_ps(load_or(dr + v, V - v, 0.f), scale, shift));
    dr[target[r]] -= static_cast<float>((1.0 - eps) * gscale);
  }
  return total;
}

// ---- dropout ----------------------------------------------------------------------------------
// The AVX-512 kernel's operations, 4 elements at a time: keep when (z >> 11) >= ceil(p · 2^53) (both
// below 2^53, so a signed compare serves), y = x · s in double rounded once to float, then the
// neighbour's operation; the last i1 - i0 mod 4 elements take the same steps one by one.
void dropout_fused(DropMode mode, const float* x, const float* other, float* y, int64_t i0, int64_t i1,
                   double p, uint64_t seed) {
  const double s = 1.0 / (1.0 - p);
  const __m256d sv = _mm256_set1_pd(s);
  const uint64_t thr = static_cast<uint64_t>(ceil(p * 0x1.0p53));
  const int64_t n4 = i0 + (i1 - i0) / 4 * 4;
  auto one = [&](int64_t i, bool keep) {
    float xv = x[i];
    if (mode == DropMode::relu) xv = xv > 0.f ? xv : 0.f;  // _mm_max_ps(x, 0): NaN and -0 give +0
    const float d =
        keep ? static_cast<float>(static_cast<double>(mode == DropMode::relu_grad_out ? other[i] : xv) * s)
             : 0.f;
    y[i] = mode == DropMode::add ? other[i] + d : d;
  };
  if (mode == DropMode::relu_grad_out) {  // the keep decisions are where the forward's output is nonzero
    for (int64_t i = i0; i < n4; i += 4) {
      const __m128 keep = _mm_cmp_ps(_mm_loadu_ps(x + i), _mm_setzero_ps(), _CMP_NEQ_OQ);
      const __m128 v = _mm256_cvtpd_ps(_mm256_mul_pd(_mm256_cvtps_pd(_mm_loadu_ps(other + i)), sv));
      _mm_storeu_ps(y + i, _mm_and_ps(keep, v));
    }
    for (int64_t i = n4; i < i1; ++i) one(i, x[i] < 0.f || x[i] > 0.f);  // x != 0, false for NaN (NEQ_OQ)
    return;
  }
  const uint64_t golden = 0x9e3779b97f4a7c15ull;
  // z0 = seed + golden · (i + 1) for the lanes i, i + 1, i + 2, i + 3; the next group adds 4 · golden
  // (all modulo 2^64, as the scalar code computes it)
  __m256i z0 = _mm256_setr_epi64x(static_cast<long long>(seed + golden * (static_cast<uint64_t>(i0) + 1)),
                                  static_cast<long long>(seed + golden * (static_cast<uint64_t>(i0) + 2)),
                                  static_cast<long long>(seed + golden * (static_cast<uint64_t>(i0) + 3)),
                                  static_cast<long long>(seed + golden * (static_cast<uint64_t>(i0) + 4)));
  const __m256i step = _mm256_set1_epi64x(static_cast<long long>(golden * 4));
  const __m256i thr_minus_1 = _mm256_set1_epi64x(static_cast<long long>(thr) - 1);
  for (int64_t i = i0; i < n4; i += 4) {
    const __m256i z = avx2::mix64(z0);
    z0 = _mm256_add_epi64(z0, step);
    const __m256i keep64 = _mm256_cmpgt_epi64(_mm256_srli_epi64(z, 11), thr_minus_1);
    __m128 xv = _mm_loadu_ps(x + i);
    if (mode == DropMode::relu) xv = _mm_max_ps(xv, _mm_setzero_ps());  // relu: max(NaN, 0), max(-0, +0): +0
    const __m256d prod = _mm256_and_pd(_mm256_mul_pd(_mm256_cvtps_pd(xv), sv), _mm256_castsi256_pd(keep64));
    __m128 out = _mm256_cvtpd_ps(prod);
    if (mode == DropMode::add) out = _mm_add_ps(_mm_loadu_ps(other + i), out);
    _mm_storeu_ps(y + i, out);
  }
  for (int64_t i = n4; i < i1; ++i) one(i, keep_one(seed, i, thr));
}

}  // namespace attn::kernels::cpu::avx2_rows
