// AVX2 range kernels of the fp32 row and elementwise ops (row_kernels.h, avx2_rows): the path of x86-64
// CPUs without AVX-512, where these ops otherwise ran the scalar templates of nn_kernels.h (statistics in
// double, an exp in double per logit, a scalar hash per element: cross-entropy and dropout alone were 22%
// of the training step there). row_kernels_avx512.cc's kernels with 8 lanes and a masked tail: the same
// operations per element, 8-lane fp32 partial sums reduced once per row, avx2::exp_ps (vec_avx2.h: the
// bits of the AVX-512 kernels' exp); held to the f64 reference like the AVX-512 kernels. Dropout: the
// keep decision and rounding of the scalar kernel, bit for bit (avx2::mix64 builds the hash's 64-bit
// products from 32 x 32 -> 64-bit multiplies), 4 elements per vector and a masked tail.
// Only intrinsics, vec_avx2.h and helpers of this file's anonymous namespace are used here (no weak
// symbols: see scripts/check-isa-objects.sh).
#include <immintrin.h>
#include <math.h>

#include "kernels/cpu/row_kernels.h"
#include "kernels/cpu/vec_avx2.h"

namespace attn::kernels::cpu::avx2_rows {
namespace {

using avx2::erf_ps;
using avx2::exp_ps;
using avx2::hmax;
using avx2::hsum;
using avx2::lanes;
using avx2::load_n;
using avx2::load_or;
using avx2::store_n;

// Lanes [0, n) of v, 0 elsewhere.
inline __m256 keep_n(__m256 v, int64_t n) {
  return n >= 8 ? v : _mm256_and_ps(v, _mm256_castsi256_ps(lanes(n)));
}
inline __m256 ones() { return _mm256_set1_ps(1.f); }
// tanh(u) = sign(u) · (1 - 2 / (exp(2|u|) + 1)); exp overflow gives ±1.
inline __m256 tanh_ps(__m256 u) {
  const __m256 a = _mm256_andnot_ps(_mm256_set1_ps(-0.f), u);
  const __m256 e = exp_ps(_mm256_add_ps(a, a));
  const __m256 r = _mm256_sub_ps(ones(), _mm256_div_ps(_mm256_set1_ps(2.f), _mm256_add_ps(e, ones())));
  return _mm256_or_ps(r, _mm256_and_ps(u, _mm256_set1_ps(-0.f)));
}

// sigmoid(x) = 1 / (1 + exp(-x))
inline __m256 sigmoid_ps(__m256 x) {
  return _mm256_div_ps(ones(), _mm256_add_ps(ones(), exp_ps(_mm256_sub_ps(_mm256_setzero_ps(), x))));
}

constexpr float kSqrt2OverPi = 0.7978845608028654f;  // √(2/π)
constexpr float kInvSqrt2 = 0.7071067811865476f;     // 1/√2
constexpr float kInvSqrt2Pi = 0.3989422804014327f;   // 1/√(2π)
constexpr float kGeluTanhC = 0.044715f;

inline __m256 act_value(Act act, __m256 v) {
  switch (act) {
    case Act::relu:
      return _mm256_max_ps(v, _mm256_setzero_ps());
    case Act::gelu_erf: {
      // y = 0.5 x (1 + erf(x / √2))
      const __m256 e = erf_ps(_mm256_mul_ps(v, _mm256_set1_ps(kInvSqrt2)));
      return _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(0.5f), v), _mm256_add_ps(ones(), e));
    }
    case Act::gelu_tanh: {
      // y = 0.5 x (1 + tanh(√(2/π) (x + 0.044715 x³)))
      const __m256 v3 = _mm256_mul_ps(_mm256_mul_ps(v, v), v);
      const __m256 th = tanh_ps(
          _mm256_mul_ps(_mm256_set1_ps(kSqrt2OverPi), _mm256_fmadd_ps(_mm256_set1_ps(kGeluTanhC), v3, v)));
      return _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(0.5f), v), _mm256_add_ps(ones(), th));
    }
    case Act::silu:
      // y = x σ(x)
      return _mm256_mul_ps(v, sigmoid_ps(v));
  }
  return v;
}

inline __m256 act_grad(Act act, __m256 v, __m256 g) {
  switch (act) {
    case Act::relu:
      // forward: y = max(x, 0)
      return _mm256_and_ps(_mm256_cmp_ps(v, _mm256_setzero_ps(), _CMP_GT_OQ), g);
    case Act::gelu_erf: {
      // forward: y = x Φ(x)   =>   dy/dx = Φ(x) + x φ(x)
      const __m256 cdf = _mm256_mul_ps(
          _mm256_set1_ps(0.5f), _mm256_add_ps(ones(), erf_ps(_mm256_mul_ps(v, _mm256_set1_ps(kInvSqrt2)))));
      const __m256 pdf = _mm256_mul_ps(_mm256_set1_ps(kInvSqrt2Pi),
                                       exp_ps(_mm256_mul_ps(_mm256_set1_ps(-0.5f), _mm256_mul_ps(v, v))));
      return _mm256_mul_ps(g, _mm256_fmadd_ps(v, pdf, cdf));
    }
    case Act::gelu_tanh: {
      // forward: y = 0.5 x (1 + tanh(u)),  u = √(2/π) (x + 0.044715 x³)
      const __m256 v2 = _mm256_mul_ps(v, v);
      const __m256 th =
          tanh_ps(_mm256_mul_ps(_mm256_set1_ps(kSqrt2OverPi),
                                _mm256_fmadd_ps(_mm256_mul_ps(_mm256_set1_ps(kGeluTanhC), v2), v, v)));
      const __m256 du = _mm256_mul_ps(_mm256_set1_ps(kSqrt2OverPi),
                                      _mm256_fmadd_ps(_mm256_set1_ps(3 * kGeluTanhC), v2, ones()));
      const __m256 half = _mm256_set1_ps(0.5f);
      // 0.5 (1 + th) + 0.5 x (1 - th²) du
      const __m256 a = _mm256_mul_ps(half, _mm256_add_ps(ones(), th));
      const __m256 b =
          _mm256_mul_ps(_mm256_mul_ps(half, v), _mm256_mul_ps(_mm256_fnmadd_ps(th, th, ones()), du));
      return _mm256_mul_ps(g, _mm256_add_ps(a, b));
    }
    case Act::silu: {
      // forward: y = x σ(x)   =>   dy/dx = σ(x) (1 + x (1 - σ(x)))
      const __m256 sg = sigmoid_ps(v);
      return _mm256_mul_ps(_mm256_mul_ps(g, sg), _mm256_fmadd_ps(v, _mm256_sub_ps(ones(), sg), ones()));
    }
  }
  return g;
}

// ---- layer norm -----------------------------------------------------------------------------
void layer_norm_fwd(const float* x, const float* w, const float* b, float* y, double* mean, double* rstd,
                    int64_t r0, int64_t r1, int64_t C, double eps) {
  for (int64_t r = r0; r < r1; ++r) {
    const float* xr = x + r * C;
    float* yr = y + r * C;
    __m256 s = _mm256_setzero_ps();
    for (int64_t c = 0; c < C; c += 8) s = _mm256_add_ps(s, load_n(xr + c, C - c));
    const double m = static_cast<double>(hsum(s)) / static_cast<double>(C);
    const __m256 mv = _mm256_set1_ps(static_cast<float>(m));
    __m256 s2 = _mm256_setzero_ps();
    for (int64_t c = 0; c < C; c += 8) {
      const __m256 d = keep_n(_mm256_sub_ps(load_n(xr + c, C - c), mv), C - c);
      s2 = _mm256_fmadd_ps(d, d, s2);
    }
    const double var = static_cast<double>(hsum(s2)) / static_cast<double>(C);
    const double rs = 1.0 / sqrt(var + eps);
    mean[r] = m;
    rstd[r] = rs;
    const __m256 rv = _mm256_set1_ps(static_cast<float>(rs));
    for (int64_t c = 0; c < C; c += 8) {
      // y = (x - mean) · rstd · w + b
      __m256 o = _mm256_mul_ps(_mm256_sub_ps(load_n(xr + c, C - c), mv), rv);
      if (w) o = _mm256_mul_ps(o, load_n(w + c, C - c));
      if (b) o = _mm256_add_ps(o, load_n(b + c, C - c));
      store_n(yr + c, C - c, o);
    }
  }
}

void layer_norm_bwd(const float* g, const float* x, const float* w, const double* mean, const double* rstd,
                    float* dx, float* dw_acc, float* db_acc, int64_t r0, int64_t r1, int64_t C) {
  for (int64_t r = r0; r < r1; ++r) {
    const float* xr = x + r * C;
    const float* gr = g + r * C;
    const __m256 mv = _mm256_set1_ps(static_cast<float>(mean[r]));
    const __m256 rv = _mm256_set1_ps(static_cast<float>(rstd[r]));
    // xhat = (x - mean) · rstd;  dxhat = g · w
    __m256 s1 = _mm256_setzero_ps(), s2 = _mm256_setzero_ps();  // sum(dxhat), sum(dxhat · xhat)
    for (int64_t c = 0; c < C; c += 8) {
      const int64_t n = C - c;
      const __m256 gv = load_n(gr + c, n);
      const __m256 xh = keep_n(_mm256_mul_ps(_mm256_sub_ps(load_n(xr + c, n), mv), rv), n);
      const __m256 dxh = w ? _mm256_mul_ps(gv, load_n(w + c, n)) : gv;
      s1 = _mm256_add_ps(s1, dxh);
      s2 = _mm256_fmadd_ps(dxh, xh, s2);
      if (dw_acc) store_n(dw_acc + c, n, _mm256_fmadd_ps(gv, xh, load_n(dw_acc + c, n)));
      if (db_acc) store_n(db_acc + c, n, _mm256_add_ps(gv, load_n(db_acc + c, n)));
    }
    if (!dx) continue;
    const float invC = 1.f / static_cast<float>(C);
    const __m256 m1 = _mm256_set1_ps(hsum(s1) * invC);
    const __m256 m2 = _mm256_set1_ps(hsum(s2) * invC);
    for (int64_t c = 0; c < C; c += 8) {
      const int64_t n = C - c;
      const __m256 gv = load_n(gr + c, n);
      const __m256 xh = _mm256_mul_ps(_mm256_sub_ps(load_n(xr + c, n), mv), rv);
      const __m256 dxh = w ? _mm256_mul_ps(gv, load_n(w + c, n)) : gv;
      // dx = rstd · (dxhat - mean(dxhat) - xhat · mean(dxhat · xhat))
      store_n(dx + r * C + c, n, _mm256_mul_ps(rv, _mm256_fnmadd_ps(xh, m2, _mm256_sub_ps(dxh, m1))));
    }
  }
}

// ---- RMS norm -------------------------------------------------------------------------------
void rms_norm_fwd(const float* x, const float* w, float* y, double* rstd, int64_t r0, int64_t r1, int64_t C,
                  double eps) {
  for (int64_t r = r0; r < r1; ++r) {
    const float* xr = x + r * C;
    __m256 s = _mm256_setzero_ps();
    for (int64_t c = 0; c < C; c += 8) {
      const __m256 v = load_n(xr + c, C - c);
      s = _mm256_fmadd_ps(v, v, s);
    }
    const double rs = 1.0 / sqrt(static_cast<double>(hsum(s)) / static_cast<double>(C) + eps);
    rstd[r] = rs;
    const __m256 rv = _mm256_set1_ps(static_cast<float>(rs));
    for (int64_t c = 0; c < C; c += 8) {
      // y = x · rstd · w
      __m256 o = _mm256_mul_ps(load_n(xr + c, C - c), rv);
      if (w) o = _mm256_mul_ps(o, load_n(w + c, C - c));
      store_n(y + r * C + c, C - c, o);
    }
  }
}

void rms_norm_bwd(const float* g, const float* x, const float* w, const double* rstd, float* dx,
                  float* dw_acc, int64_t r0, int64_t r1, int64_t C) {
  for (int64_t r = r0; r < r1; ++r) {
    const float* xr = x + r * C;
    const float* gr = g + r * C;
    const __m256 rv = _mm256_set1_ps(static_cast<float>(rstd[r]));
    __m256 s = _mm256_setzero_ps();  // sum(dxhat · xhat), xhat = x · rstd, dxhat = g · w
    for (int64_t c = 0; c < C; c += 8) {
      const int64_t n = C - c;
      const __m256 gv = load_n(gr + c, n);
      const __m256 xh = _mm256_mul_ps(load_n(xr + c, n), rv);
      const __m256 dxh = w ? _mm256_mul_ps(gv, load_n(w + c, n)) : gv;
      s = _mm256_fmadd_ps(dxh, xh, s);
      if (dw_acc) store_n(dw_acc + c, n, _mm256_fmadd_ps(gv, xh, load_n(dw_acc + c, n)));
    }
    if (!dx) continue;
    const __m256 ms = _mm256_set1_ps(hsum(s) / static_cast<float>(C));
    for (int64_t c = 0; c < C; c += 8) {
      const int64_t n = C - c;
      const __m256 gv = load_n(gr + c, n);
      const __m256 xh = _mm256_mul_ps(load_n(xr + c, n), rv);
      const __m256 dxh = w ? _mm256_mul_ps(gv, load_n(w + c, n)) : gv;
      // dx = rstd · (dxhat - xhat · mean(dxhat · xhat))
      store_n(dx + r * C + c, n, _mm256_mul_ps(rv, _mm256_fnmadd_ps(xh, ms, dxh)));
    }
  }
}

// ---- softmax ----------------------------------------------------------------------------------
void softmax_fwd(const float* x, float* y, int64_t r0, int64_t r1, int64_t C, bool log) {
  const float ninf = -__builtin_inff();
  for (int64_t r = r0; r < r1; ++r) {
    const float* xr = x + r * C;
    float* yr = y + r * C;
    __m256 mx = _mm256_set1_ps(ninf);
    for (int64_t c = 0; c < C; c += 8) mx = _mm256_max_ps(mx, load_or(xr + c, C - c, ninf));
    const float m = hmax(mx);
    if (m == ninf) {  // a fully masked row: softmax 0, log_softmax -inf (= x)
      for (int64_t c = 0; c < C; c += 8)
        store_n(yr + c, C - c, log ? load_n(xr + c, C - c) : _mm256_setzero_ps());
      continue;
    }
    const __m256 mv = _mm256_set1_ps(m);
    __m256 s = _mm256_setzero_ps();
    for (int64_t c = 0; c < C; c += 8) {  // lanes past C read -inf: exp gives 0
      const __m256 e = exp_ps(_mm256_sub_ps(load_or(xr + c, C - c, ninf), mv));
      s = _mm256_add_ps(s, e);
      if (!log) store_n(yr + c, C - c, e);
    }
    const double sum = static_cast<double>(hsum(s));
    if (log) {
      // log_softmax: y = x - lse,  lse = max + log(sum exp(x - max))
      const __m256 lse = _mm256_set1_ps(static_cast<float>(static_cast<double>(m) + ::log(sum)));
      for (int64_t c = 0; c < C; c += 8) store_n(yr + c, C - c, _mm256_sub_ps(load_n(xr + c, C - c), lse));
    } else {
      // softmax: y = exp(x - max) / sum exp(x - max)
      const __m256 inv = _mm256_set1_ps(static_cast<float>(1.0 / sum));
      for (int64_t c = 0; c < C; c += 8) store_n(yr + c, C - c, _mm256_mul_ps(load_n(yr + c, C - c), inv));
    }
  }
}

void softmax_bwd(const float* g, const float* y, float* dx, int64_t r0, int64_t r1, int64_t C, bool log) {
  for (int64_t r = r0; r < r1; ++r) {
    const float* gr = g + r * C;
    const float* yr = y + r * C;
    float* dr = dx + r * C;
    __m256 s = _mm256_setzero_ps();
    if (log) {
      for (int64_t c = 0; c < C; c += 8) s = _mm256_add_ps(s, load_n(gr + c, C - c));
      const __m256 sv = _mm256_set1_ps(hsum(s));
      // y = x - lse  =>  dx = g - softmax · sum(g);  softmax = exp(y) (exp(-inf) = 0)
      for (int64_t c = 0; c < C; c += 8) {
        const __m256 p = exp_ps(load_or(yr + c, C - c, -__builtin_inff()));
        store_n(dr + c, C - c, _mm256_fnmadd_ps(p, sv, load_n(gr + c, C - c)));
      }
    } else {
      for (int64_t c = 0; c < C; c += 8) s = _mm256_fmadd_ps(load_n(gr + c, C - c), load_n(yr + c, C - c), s);
      const __m256 sv = _mm256_set1_ps(hsum(s));
      // y = exp(x - lse)  =>  dx = y · (g - sum(g · y))
      for (int64_t c = 0; c < C; c += 8)
        store_n(dr + c, C - c,
                _mm256_mul_ps(load_n(yr + c, C - c), _mm256_sub_ps(load_n(gr + c, C - c), sv)));
    }
  }
}

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

// ---- elementwise --------------------------------------------------------------------------------
void act_fwd(Act act, const float* x, float* y, int64_t i0, int64_t i1) {
  for (int64_t i = i0; i < i1; i += 8) store_n(y + i, i1 - i, act_value(act, load_n(x + i, i1 - i)));
}

void act_bwd(Act act, const float* x, const float* g, float* dx, int64_t i0, int64_t i1) {
  for (int64_t i = i0; i < i1; i += 8)
    store_n(dx + i, i1 - i, act_grad(act, load_n(x + i, i1 - i), load_n(g + i, i1 - i)));
}

void swiglu_fwd(const float* a, const float* b, float* y, int64_t i0, int64_t i1) {
  for (int64_t i = i0; i < i1; i += 8)  // y = silu(a) · b
    store_n(y + i, i1 - i, _mm256_mul_ps(act_value(Act::silu, load_n(a + i, i1 - i)), load_n(b + i, i1 - i)));
}

void swiglu_bwd(const float* a, const float* b, const float* g, float* da, float* db, int64_t i0,
                int64_t i1) {
  for (int64_t i = i0; i < i1; i += 8) {
    const int64_t n = i1 - i;
    const __m256 av = load_n(a + i, n), gv = load_n(g + i, n);
    const __m256 sg = sigmoid_ps(av);
    // forward: y = silu(a) · b   =>   da = dy · b · σ(a) (1 + a (1 - σ(a))),  db = dy · a σ(a)
    if (da) {
      const __m256 d = _mm256_mul_ps(_mm256_mul_ps(_mm256_mul_ps(gv, load_n(b + i, n)), sg),
                                     _mm256_fmadd_ps(av, _mm256_sub_ps(ones(), sg), ones()));
      store_n(da + i, n, d);
    }
    if (db) store_n(db + i, n, _mm256_mul_ps(gv, _mm256_mul_ps(av, sg)));
  }
}

// ---- dropout ----------------------------------------------------------------------------------
// The AVX-512 kernel's operations, 4 elements at a time with a masked tail: keep when (z >> 11) >=
// ceil(p · 2^53) (both below 2^53, so a signed compare serves), y = x · s in double rounded once to
// float, then the neighbour's operation.
void dropout_fused(DropMode mode, const float* x, const float* other, float* y, int64_t i0, int64_t i1,
                   double p, uint64_t seed) {
  const __m256d sv = _mm256_set1_pd(1.0 / (1.0 - p));
  const uint64_t thr = static_cast<uint64_t>(ceil(p * 0x1.0p53));
  const uint64_t golden = 0x9e3779b97f4a7c15ull;
  // z0 = seed + golden · (i + 1) for the lanes i, i + 1, i + 2, i + 3; the next group adds 4 · golden
  // (all modulo 2^64, as the scalar code computes it)
  __m256i z0 = _mm256_setr_epi64x(static_cast<long long>(seed + golden * (static_cast<uint64_t>(i0) + 1)),
                                  static_cast<long long>(seed + golden * (static_cast<uint64_t>(i0) + 2)),
                                  static_cast<long long>(seed + golden * (static_cast<uint64_t>(i0) + 3)),
                                  static_cast<long long>(seed + golden * (static_cast<uint64_t>(i0) + 4)));
  const __m256i step = _mm256_set1_epi64x(static_cast<long long>(golden * 4));
  const __m256i thr_minus_1 = _mm256_set1_epi64x(static_cast<long long>(thr) - 1);
  for (int64_t i = i0; i < i1; i += 4) {
    const bool full = i1 - i >= 4;
    const __m128i k = _mm256_castsi256_si128(lanes(i1 - i));  // lanes [0, i1 - i) of 4
    auto load4 = [&](const float* q) { return full ? _mm_loadu_ps(q) : _mm_maskload_ps(q, k); };
    __m128 out;
    if (mode == DropMode::relu_grad_out) {  // the keep decisions are where the forward's output is nonzero
      const __m128 keep = _mm_cmp_ps(load4(x + i), _mm_setzero_ps(), _CMP_NEQ_OQ);
      out = _mm_and_ps(keep, _mm256_cvtpd_ps(_mm256_mul_pd(_mm256_cvtps_pd(load4(other + i)), sv)));
    } else {
      const __m256i z = avx2::mix64(z0);
      z0 = _mm256_add_epi64(z0, step);
      const __m256i keep64 = _mm256_cmpgt_epi64(_mm256_srli_epi64(z, 11), thr_minus_1);
      __m128 xv = load4(x + i);
      if (mode == DropMode::relu)
        xv = _mm_max_ps(xv, _mm_setzero_ps());  // relu: max(NaN, 0), max(-0, +0): +0
      out =
          _mm256_cvtpd_ps(_mm256_and_pd(_mm256_mul_pd(_mm256_cvtps_pd(xv), sv), _mm256_castsi256_pd(keep64)));
      if (mode == DropMode::add) out = _mm_add_ps(load4(other + i), out);
    }
    if (full)
      _mm_storeu_ps(y + i, out);
    else
      _mm_maskstore_ps(y + i, k, out);
  }
}

}  // namespace

}  // namespace attn::kernels::cpu::avx2_rows

namespace attn::kernels::cpu {

const RowRangeKernels& row_kernels_avx2() {
  namespace k = avx2_rows;
  static const RowRangeKernels table{k::layer_norm_fwd, k::layer_norm_bwd, k::rms_norm_fwd,
                                     k::rms_norm_bwd,   k::softmax_fwd,    k::softmax_bwd,
                                     k::cross_entropy,  k::act_fwd,        k::act_bwd,
                                     k::swiglu_fwd,     k::swiglu_bwd,     k::dropout_fused};
  return table;
}

}  // namespace attn::kernels::cpu
