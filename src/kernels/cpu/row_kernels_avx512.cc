// AVX-512 range kernels of the fp32 row and elementwise ops (row_kernels.h).
// 16 lanes at a time with a masked tail; row statistics are 16-lane fp32
// partial sums reduced once per row. Only intrinsics and helpers of this
// file's anonymous namespace are used here (no weak symbols: see
// scripts/check-isa-objects.sh). Each backward differentiates the forward
// line quoted above it.
// GCC 12 reports -Wmaybe-uninitialized inside its own AVX-512 intrinsics (the
// unmasked forms start from _mm512_undefined_ps); the warning is about the
// header, not this code.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <immintrin.h>
#include <math.h>

#include "kernels/cpu/row_kernels.h"
#include "kernels/cpu/vec_avx512.h"

namespace attn::kernels::cpu::avx512_rows {
namespace {

using avx512::exp_ps;

// Lanes [0, n) of 16 (n >= 16 selects all).
inline __mmask16 tail(int64_t n) {
  return n >= 16 ? static_cast<__mmask16>(0xffff)
                 : static_cast<__mmask16>((1u << static_cast<unsigned>(n)) - 1u);
}
inline __m512 load(const float* p, __mmask16 k) { return _mm512_maskz_loadu_ps(k, p); }
inline __m512 load_or(const float* p, __mmask16 k, float fill) {
  return _mm512_mask_loadu_ps(_mm512_set1_ps(fill), k, p);
}
inline __m512 ones() { return _mm512_set1_ps(1.f); }

// erf(x) by Abramowitz & Stegun 7.1.26 (|error| <= 1.5e-7): for a = |x|,
// t = 1 / (1 + p·a), erf(a) = 1 - t·poly(t)·exp(-a²), sign restored.
inline __m512 erf_ps(__m512 x) {
  const __m512 a = _mm512_abs_ps(x);
  const __m512 t = _mm512_div_ps(ones(), _mm512_fmadd_ps(_mm512_set1_ps(0.3275911f), a, ones()));
  __m512 p = _mm512_set1_ps(1.061405429f);
  p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(-1.453152027f));
  p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(1.421413741f));
  p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(-0.284496736f));
  p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(0.254829592f));
  p = _mm512_mul_ps(p, t);
  const __m512 e = exp_ps(_mm512_mul_ps(_mm512_sub_ps(_mm512_setzero_ps(), a), a));
  const __m512 r = _mm512_fnmadd_ps(p, e, ones());
  // copy x's sign onto r (r >= 0)
  const __m512i sign =
      _mm512_and_si512(_mm512_castps_si512(x), _mm512_set1_epi32(static_cast<int>(0x80000000u)));
  return _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(r), sign));
}

// tanh(u) = sign(u) · (1 - 2 / (exp(2|u|) + 1)); exp overflow gives ±1.
inline __m512 tanh_ps(__m512 u) {
  const __m512 a = _mm512_abs_ps(u);
  const __m512 e = exp_ps(_mm512_add_ps(a, a));
  const __m512 r = _mm512_sub_ps(ones(), _mm512_div_ps(_mm512_set1_ps(2.f), _mm512_add_ps(e, ones())));
  const __m512i sign =
      _mm512_and_si512(_mm512_castps_si512(u), _mm512_set1_epi32(static_cast<int>(0x80000000u)));
  return _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(r), sign));
}

// sigmoid(x) = 1 / (1 + exp(-x))
inline __m512 sigmoid_ps(__m512 x) {
  return _mm512_div_ps(ones(), _mm512_add_ps(ones(), exp_ps(_mm512_sub_ps(_mm512_setzero_ps(), x))));
}

constexpr float kSqrt2OverPi = 0.7978845608028654f;  // √(2/π)
constexpr float kInvSqrt2 = 0.7071067811865476f;     // 1/√2
constexpr float kInvSqrt2Pi = 0.3989422804014327f;   // 1/√(2π)
constexpr float kGeluTanhC = 0.044715f;

inline __m512 act_value(Act act, __m512 v) {
  switch (act) {
    case Act::relu:
      return _mm512_max_ps(v, _mm512_setzero_ps());
    case Act::gelu_erf: {
      // y = 0.5 x (1 + erf(x / √2))
      const __m512 e = erf_ps(_mm512_mul_ps(v, _mm512_set1_ps(kInvSqrt2)));
      return _mm512_mul_ps(_mm512_mul_ps(_mm512_set1_ps(0.5f), v), _mm512_add_ps(ones(), e));
    }
    case Act::gelu_tanh: {
      // y = 0.5 x (1 + tanh(√(2/π) (x + 0.044715 x³)))
      const __m512 v3 = _mm512_mul_ps(_mm512_mul_ps(v, v), v);
      const __m512 th = tanh_ps(
          _mm512_mul_ps(_mm512_set1_ps(kSqrt2OverPi), _mm512_fmadd_ps(_mm512_set1_ps(kGeluTanhC), v3, v)));
      return _mm512_mul_ps(_mm512_mul_ps(_mm512_set1_ps(0.5f), v), _mm512_add_ps(ones(), th));
    }
    case Act::silu:
      // y = x σ(x)
      return _mm512_mul_ps(v, sigmoid_ps(v));
  }
  return v;
}

inline __m512 act_grad(Act act, __m512 v, __m512 g) {
  switch (act) {
    case Act::relu:
      // forward: y = max(x, 0)
      return _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(v, _mm512_setzero_ps(), _CMP_GT_OQ), g);
    case Act::gelu_erf: {
      // forward: y = x Φ(x)   =>   dy/dx = Φ(x) + x φ(x)
      const __m512 cdf = _mm512_mul_ps(
          _mm512_set1_ps(0.5f), _mm512_add_ps(ones(), erf_ps(_mm512_mul_ps(v, _mm512_set1_ps(kInvSqrt2)))));
      const __m512 pdf = _mm512_mul_ps(_mm512_set1_ps(kInvSqrt2Pi),
                                       exp_ps(_mm512_mul_ps(_mm512_set1_ps(-0.5f), _mm512_mul_ps(v, v))));
      return _mm512_mul_ps(g, _mm512_fmadd_ps(v, pdf, cdf));
    }
    case Act::gelu_tanh: {
      // forward: y = 0.5 x (1 + tanh(u)),  u = √(2/π) (x + 0.044715 x³)
      const __m512 v2 = _mm512_mul_ps(v, v);
      const __m512 th =
          tanh_ps(_mm512_mul_ps(_mm512_set1_ps(kSqrt2OverPi),
                                _mm512_fmadd_ps(_mm512_mul_ps(_mm512_set1_ps(kGeluTanhC), v2), v, v)));
      const __m512 du = _mm512_mul_ps(_mm512_set1_ps(kSqrt2OverPi),
                                      _mm512_fmadd_ps(_mm512_set1_ps(3 * kGeluTanhC), v2, ones()));
      const __m512 half = _mm512_set1_ps(0.5f);
      // 0.5 (1 + th) + 0.5 x (1 - th²) du
      const __m512 a = _mm512_mul_ps(half, _mm512_add_ps(ones(), th));
      const __m512 b =
          _mm512_mul_ps(_mm512_mul_ps(half, v), _mm512_mul_ps(_mm512_fnmadd_ps(th, th, ones()), du));
      return _mm512_mul_ps(g, _mm512_add_ps(a, b));
    }
    case Act::silu: {
      // forward: y = x σ(x)   =>   dy/dx = σ(x) (1 + x (1 - σ(x)))
      const __m512 s = sigmoid_ps(v);
      return _mm512_mul_ps(_mm512_mul_ps(g, s), _mm512_fmadd_ps(v, _mm512_sub_ps(ones(), s), ones()));
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
    __m512 s = _mm512_setzero_ps();
    for (int64_t c = 0; c < C; c += 16) s = _mm512_add_ps(s, load(xr + c, tail(C - c)));
    const double m = static_cast<double>(_mm512_reduce_add_ps(s)) / static_cast<double>(C);
    const __m512 mv = _mm512_set1_ps(static_cast<float>(m));
    __m512 s2 = _mm512_setzero_ps();
    for (int64_t c = 0; c < C; c += 16) {
      const __mmask16 k = tail(C - c);
      const __m512 d = _mm512_maskz_sub_ps(k, load(xr + c, k), mv);
      s2 = _mm512_fmadd_ps(d, d, s2);
    }
    const double var = static_cast<double>(_mm512_reduce_add_ps(s2)) / static_cast<double>(C);
    const double rs = 1.0 / sqrt(var + eps);
    mean[r] = m;
    rstd[r] = rs;
    const __m512 rv = _mm512_set1_ps(static_cast<float>(rs));
    for (int64_t c = 0; c < C; c += 16) {
      const __mmask16 k = tail(C - c);
      // y = (x - mean) · rstd · w + b
      __m512 o = _mm512_mul_ps(_mm512_sub_ps(load(xr + c, k), mv), rv);
      if (w) o = _mm512_mul_ps(o, load(w + c, k));
      if (b) o = _mm512_add_ps(o, load(b + c, k));
      _mm512_mask_storeu_ps(yr + c, k, o);
    }
  }
}

void layer_norm_bwd(const float* g, const float* x, const float* w, const double* mean, const double* rstd,
                    float* dx, float* dw_acc, float* db_acc, int64_t r0, int64_t r1, int64_t C) {
  for (int64_t r = r0; r < r1; ++r) {
    const float* xr = x + r * C;
    const float* gr = g + r * C;
    const __m512 mv = _mm512_set1_ps(static_cast<float>(mean[r]));
    const float rsf = static_cast<float>(rstd[r]);
    const __m512 rv = _mm512_set1_ps(rsf);
    // xhat = (x - mean) · rstd;  dxhat = g · w
    __m512 s1 = _mm512_setzero_ps(), s2 = _mm512_setzero_ps();  // sum(dxhat), sum(dxhat · xhat)
    for (int64_t c = 0; c < C; c += 16) {
      const __mmask16 k = tail(C - c);
      const __m512 gv = load(gr + c, k);
      const __m512 xh = _mm512_maskz_mul_ps(k, _mm512_sub_ps(load(xr + c, k), mv), rv);
      const __m512 dxh = w ? _mm512_mul_ps(gv, load(w + c, k)) : gv;
      s1 = _mm512_add_ps(s1, dxh);
      s2 = _mm512_fmadd_ps(dxh, xh, s2);
      if (dw_acc) _mm512_mask_storeu_ps(dw_acc + c, k, _mm512_fmadd_ps(gv, xh, load(dw_acc + c, k)));
      if (db_acc) _mm512_mask_storeu_ps(db_acc + c, k, _mm512_add_ps(gv, load(db_acc + c, k)));
    }
    if (!dx) continue;
    const float invC = 1.f / static_cast<float>(C);
    const __m512 m1 = _mm512_set1_ps(_mm512_reduce_add_ps(s1) * invC);
    const __m512 m2 = _mm512_set1_ps(_mm512_reduce_add_ps(s2) * invC);
    for (int64_t c = 0; c < C; c += 16) {
      const __mmask16 k = tail(C - c);
      const __m512 gv = load(gr + c, k);
      const __m512 xh = _mm512_mul_ps(_mm512_sub_ps(load(xr + c, k), mv), rv);
      const __m512 dxh = w ? _mm512_mul_ps(gv, load(w + c, k)) : gv;
      // dx = rstd · (dxhat - mean(dxhat) - xhat · mean(dxhat · xhat))
      const __m512 o = _mm512_mul_ps(rv, _mm512_fnmadd_ps(xh, m2, _mm512_sub_ps(dxh, m1)));
      _mm512_mask_storeu_ps(dx + r * C + c, k, o);
    }
  }
}

// ---- RMS norm -------------------------------------------------------------------------------
void rms_norm_fwd(const float* x, const float* w, float* y, double* rstd, int64_t r0, int64_t r1, int64_t C,
                  double eps) {
  for (int64_t r = r0; r < r1; ++r) {
    const float* xr = x + r * C;
    __m512 s = _mm512_setzero_ps();
    for (int64_t c = 0; c < C; c += 16) {
      const __m512 v = load(xr + c, tail(C - c));
      s = _mm512_fmadd_ps(v, v, s);
    }
    const double rs = 1.0 / sqrt(static_cast<double>(_mm512_reduce_add_ps(s)) / static_cast<double>(C) + eps);
    rstd[r] = rs;
    const __m512 rv = _mm512_set1_ps(static_cast<float>(rs));
    for (int64_t c = 0; c < C; c += 16) {
      const __mmask16 k = tail(C - c);
      // y = x · rstd · w
      __m512 o = _mm512_mul_ps(load(xr + c, k), rv);
      if (w) o = _mm512_mul_ps(o, load(w + c, k));
      _mm512_mask_storeu_ps(y + r * C + c, k, o);
    }
  }
}

void rms_norm_bwd(const float* g, const float* x, const float* w, const double* rstd, float* dx,
                  float* dw_acc, int64_t r0, int64_t r1, int64_t C) {
  for (int64_t r = r0; r < r1; ++r) {
    const float* xr = x + r * C;
    const float* gr = g + r * C;
    const __m512 rv = _mm512_set1_ps(static_cast<float>(rstd[r]));
    __m512 s = _mm512_setzero_ps();  // sum(dxhat · xhat), xhat = x · rstd, dxhat = g · w
    for (int64_t c = 0; c < C; c += 16) {
      const __mmask16 k = tail(C - c);
      const __m512 gv = load(gr + c, k);
      const __m512 xh = _mm512_mul_ps(load(xr + c, k), rv);
      const __m512 dxh = w ? _mm512_mul_ps(gv, load(w + c, k)) : gv;
      s = _mm512_fmadd_ps(dxh, xh, s);
      if (dw_acc) _mm512_mask_storeu_ps(dw_acc + c, k, _mm512_fmadd_ps(gv, xh, load(dw_acc + c, k)));
    }
    if (!dx) continue;
    const __m512 ms = _mm512_set1_ps(_mm512_reduce_add_ps(s) / static_cast<float>(C));
    for (int64_t c = 0; c < C; c += 16) {
      const __mmask16 k = tail(C - c);
      const __m512 gv = load(gr + c, k);
      const __m512 xh = _mm512_mul_ps(load(xr + c, k), rv);
      const __m512 dxh = w ? _mm512_mul_ps(gv, load(w + c, k)) : gv;
      // dx = rstd · (dxhat - xhat · mean(dxhat · xhat))
      _mm512_mask_storeu_ps(dx + r * C + c, k, _mm512_mul_ps(rv, _mm512_fnmadd_ps(xh, ms, dxh)));
    }
  }
}

// ---- softmax ----------------------------------------------------------------------------------
void softmax_fwd(const float* x, float* y, int64_t r0, int64_t r1, int64_t C, bool log) {
  const float ninf = -__builtin_inff();
  for (int64_t r = r0; r < r1; ++r) {
    const float* xr = x + r * C;
    float* yr = y + r * C;
    __m512 mx = _mm512_set1_ps(ninf);
    for (int64_t c = 0; c < C; c += 16) mx = _mm512_max_ps(mx, load_or(xr + c, tail(C - c), ninf));
    const float m = _mm512_reduce_max_ps(mx);
    if (m == ninf) {  // a fully masked row: softmax 0, log_softmax -inf (= x)
      for (int64_t c = 0; c < C; c += 16) {
        const __mmask16 k = tail(C - c);
        _mm512_mask_storeu_ps(yr + c, k, log ? load(xr + c, k) : _mm512_setzero_ps());
      }
      continue;
    }
    const __m512 mv = _mm512_set1_ps(m);
    __m512 s = _mm512_setzero_ps();
    for (int64_t c = 0; c < C; c += 16) {
      const __mmask16 k = tail(C - c);
      const __m512 e = _mm512_maskz_mov_ps(k, exp_ps(_mm512_sub_ps(load_or(xr + c, k, ninf), mv)));
      s = _mm512_add_ps(s, e);
      if (!log) _mm512_mask_storeu_ps(yr + c, k, e);
    }
    const double sum = static_cast<double>(_mm512_reduce_add_ps(s));
    if (log) {
      // log_softmax: y = x - lse,  lse = max + log(sum exp(x - max))
      const __m512 lse = _mm512_set1_ps(static_cast<float>(static_cast<double>(m) + ::log(sum)));
      for (int64_t c = 0; c < C; c += 16) {
        const __mmask16 k = tail(C - c);
        _mm512_mask_storeu_ps(yr + c, k, _mm512_sub_ps(load(xr + c, k), lse));
      }
    } else {
      // softmax: y = exp(x - max) / sum exp(x - max)
      const __m512 inv = _mm512_set1_ps(static_cast<float>(1.0 / sum));
      for (int64_t c = 0; c < C; c += 16) {
        const __mmask16 k = tail(C - c);
        _mm512_mask_storeu_ps(yr + c, k, _mm512_mul_ps(load(yr + c, k), inv));
      }
    }
  }
}

void softmax_bwd(const float* g, const float* y, float* dx, int64_t r0, int64_t r1, int64_t C, bool log) {
  for (int64_t r = r0; r < r1; ++r) {
    const float* gr = g + r * C;
    const float* yr = y + r * C;
    float* dr = dx + r * C;
    __m512 s = _mm512_setzero_ps();
    if (log) {
      for (int64_t c = 0; c < C; c += 16) s = _mm512_add_ps(s, load(gr + c, tail(C - c)));
      const __m512 sv = _mm512_set1_ps(_mm512_reduce_add_ps(s));
      // y = x - lse  =>  dx = g - softmax · sum(g);  softmax = exp(y) (exp(-inf) = 0)
      for (int64_t c = 0; c < C; c += 16) {
        const __mmask16 k = tail(C - c);
        const __m512 p = exp_ps(load_or(yr + c, k, -__builtin_inff()));
        _mm512_mask_storeu_ps(dr + c, k, _mm512_fnmadd_ps(p, sv, load(gr + c, k)));
      }
    } else {
      for (int64_t c = 0; c < C; c += 16) {
        const __mmask16 k = tail(C - c);
        s = _mm512_fmadd_ps(load(gr + c, k), load(yr + c, k), s);
      }
      const __m512 sv = _mm512_set1_ps(_mm512_reduce_add_ps(s));
      // y = exp(x - lse)  =>  dx = y · (g - sum(g · y))
      for (int64_t c = 0; c < C; c += 16) {
        const __mmask16 k = tail(C - c);
        _mm512_mask_storeu_ps(dr + c, k, _mm512_mul_ps(load(yr + c, k), _mm512_sub_ps(load(gr + c, k), sv)));
      }
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
    __m512 mx = _mm512_set1_ps(ninf), sx = _mm512_setzero_ps();
    for (int64_t v = 0; v < V; v += 16) {
      const __mmask16 k = tail(V - v);
      const __m512 xv = load_or(xr + v, k, ninf);
      mx = _mm512_max_ps(mx, xv);
      sx = _mm512_add_ps(sx, _mm512_maskz_mov_ps(k, xv));
    }
    const float m = _mm512_reduce_max_ps(mx);
    const __m512 mv = _mm512_set1_ps(m);
    // e = exp(x - max), kept in dx (when wanted) so that the gradient needs no second exp
    const bool keep_e = dr != nullptr && !ignored;
    __m512 s = _mm512_setzero_ps();
    for (int64_t v = 0; v < V; v += 16) {
      const __mmask16 k = tail(V - v);
      const __m512 e = _mm512_maskz_mov_ps(k, exp_ps(_mm512_sub_ps(load_or(xr + v, k, ninf), mv)));
      s = _mm512_add_ps(s, e);
      if (keep_e) _mm512_mask_storeu_ps(dr + v, k, e);
    }
    const double sum = static_cast<double>(_mm512_reduce_add_ps(s));
    lse[r] = static_cast<double>(m) + ::log(sum);
    if (ignored) {
      if (dr)
        for (int64_t v = 0; v < V; v += 16) _mm512_mask_storeu_ps(dr + v, tail(V - v), _mm512_setzero_ps());
      continue;
    }
    // loss_r = (1 - eps) · (lse - x[t]) + eps · (lse - mean_v x[v])
    const double sum_x = static_cast<double>(_mm512_reduce_add_ps(sx));
    total += (1.0 - eps) * (lse[r] - static_cast<double>(xr[target[r]])) +
             eps * (lse[r] - sum_x / static_cast<double>(V));
    if (!dr) continue;
    // dx = (softmax - (1 - eps) · onehot(t) - eps / V) · gscale,  softmax = e / sum
    const __m512 scale = _mm512_set1_ps(static_cast<float>(gscale / sum));
    const __m512 shift = _mm512_set1_ps(static_cast<float>(eps / static_cast<double>(V) * gscale));
    for (int64_t v = 0; v < V; v += 16) {
      const __mmask16 k = tail(V - v);
      _mm512_mask_storeu_ps(dr + v, k, _mm512_fmsub_ps(load(dr + v, k), scale, shift));
    }
    dr[target[r]] -= static_cast<float>((1.0 - eps) * gscale);
  }
  return total;
}

// ---- elementwise --------------------------------------------------------------------------------
void act_fwd(Act act, const float* x, float* y, int64_t i0, int64_t i1) {
  for (int64_t i = i0; i < i1; i += 16) {
    const __mmask16 k = tail(i1 - i);
    _mm512_mask_storeu_ps(y + i, k, act_value(act, load(x + i, k)));
  }
}

void act_bwd(Act act, const float* x, const float* g, float* dx, int64_t i0, int64_t i1) {
  for (int64_t i = i0; i < i1; i += 16) {
    const __mmask16 k = tail(i1 - i);
    _mm512_mask_storeu_ps(dx + i, k, act_grad(act, load(x + i, k), load(g + i, k)));
  }
}

void swiglu_fwd(const float* a, const float* b, float* y, int64_t i0, int64_t i1) {
  for (int64_t i = i0; i < i1; i += 16) {
    const __mmask16 k = tail(i1 - i);
    // y = silu(a) · b
    _mm512_mask_storeu_ps(y + i, k, _mm512_mul_ps(act_value(Act::silu, load(a + i, k)), load(b + i, k)));
  }
}

void swiglu_bwd(const float* a, const float* b, const float* g, float* da, float* db, int64_t i0,
                int64_t i1) {
  for (int64_t i = i0; i < i1; i += 16) {
    const __mmask16 k = tail(i1 - i);
    const __m512 av = load(a + i, k), gv = load(g + i, k);
    const __m512 s = sigmoid_ps(av);
    // forward: y = silu(a) · b   =>   da = dy · b · σ(a) (1 + a (1 - σ(a))),  db = dy · a σ(a)
    if (da) {
      const __m512 d = _mm512_mul_ps(_mm512_mul_ps(_mm512_mul_ps(gv, load(b + i, k)), s),
                                     _mm512_fmadd_ps(av, _mm512_sub_ps(ones(), s), ones()));
      _mm512_mask_storeu_ps(da + i, k, d);
    }
    if (db) _mm512_mask_storeu_ps(db + i, k, _mm512_mul_ps(gv, _mm512_mul_ps(av, s)));
  }
}

// Dropout alone (DropMode::plain) or with its neighbour in the same pass (row_kernels.h, DropMode).
// The keep decision of nn_kernels.h (dropout_keep_flat), 8 elements per vector: z = splitmix64
// finaliser of seed + φ·(i + 1); keep when (z >> 11) · 2^-53 >= p, i.e. (z >> 11) >= ceil(p · 2^53)
// (exact: both sides are integers below 2^53 scaled by a power of two). The one rounding of x · s is
// the scalar kernel's, the neighbour's operation is the one its own kernel does, so each mode gives the
// bits of the two operations run one after the other.
void dropout_fused(DropMode mode, const float* x, const float* other, float* y, int64_t i0, int64_t i1,
                   double p, uint64_t seed) {
  const double s = 1.0 / (1.0 - p);
  const __m512d sv = _mm512_set1_pd(s);
  const uint64_t thr = static_cast<uint64_t>(ceil(p * 0x1.0p53));
  const __m512i thrv = _mm512_set1_epi64(static_cast<long long>(thr));
  const __m512i golden = _mm512_set1_epi64(static_cast<long long>(0x9e3779b97f4a7c15ull));
  const __m512i c1 = _mm512_set1_epi64(static_cast<long long>(0xbf58476d1ce4e5b9ull));
  const __m512i c2 = _mm512_set1_epi64(static_cast<long long>(0x94d049bb133111ebull));
  const __m512i seedv = _mm512_set1_epi64(static_cast<long long>(seed));
  const __m512i lane = _mm512_set_epi64(8, 7, 6, 5, 4, 3, 2, 1);  // i + 1 for lanes 0..7
  if (mode == DropMode::relu_grad_out) {  // the keep decisions are where the forward's output is nonzero
    for (int64_t i = i0; i < i1; i += 8) {
      const int64_t n = i1 - i;
      const __mmask8 k = n >= 8 ? static_cast<__mmask8>(0xff) : static_cast<__mmask8>((1u << n) - 1u);
      const __mmask8 keep =
          _mm256_cmp_ps_mask(_mm256_maskz_loadu_ps(k, x + i), _mm256_setzero_ps(), _CMP_NEQ_OQ);
      const __m512d prod = _mm512_mul_pd(_mm512_cvtps_pd(_mm256_maskz_loadu_ps(k, other + i)), sv);
      _mm256_mask_storeu_ps(y + i, k, _mm256_maskz_mov_ps(keep, _mm512_cvtpd_ps(prod)));
    }
    return;
  }
  for (int64_t i = i0; i < i1; i += 8) {
    const int64_t n = i1 - i;
    const __mmask8 k = n >= 8 ? static_cast<__mmask8>(0xff) : static_cast<__mmask8>((1u << n) - 1u);
    const __m512i idx = _mm512_add_epi64(_mm512_set1_epi64(i), lane);
    __m512i z = _mm512_add_epi64(seedv, _mm512_mullo_epi64(golden, idx));
    z = _mm512_mullo_epi64(_mm512_xor_si512(z, _mm512_srli_epi64(z, 30)), c1);
    z = _mm512_mullo_epi64(_mm512_xor_si512(z, _mm512_srli_epi64(z, 27)), c2);
    z = _mm512_xor_si512(z, _mm512_srli_epi64(z, 31));
    const __mmask8 keep = _mm512_cmpge_epu64_mask(_mm512_srli_epi64(z, 11), thrv);
    __m256 xv = _mm256_maskz_loadu_ps(k, x + i);
    if (mode == DropMode::relu)
      xv = _mm256_max_ps(xv, _mm256_setzero_ps());  // relu: max(NaN, 0) and max(-0, +0) give +0
    // y = x · s in double, rounded once to float (as the scalar static_cast<float>(x * s))
    const __m512d prod = _mm512_mul_pd(_mm512_cvtps_pd(xv), sv);
    __m256 out = _mm256_maskz_mov_ps(keep, _mm512_cvtpd_ps(prod));
    if (mode == DropMode::add) out = _mm256_add_ps(_mm256_maskz_loadu_ps(k, other + i), out);
    _mm256_mask_storeu_ps(y + i, k, out);
  }
}

}  // namespace

}  // namespace attn::kernels::cpu::avx512_rows

namespace attn::kernels::cpu {

const RowRangeKernels& row_kernels_avx512() {
  namespace k = avx512_rows;
  static const RowRangeKernels table{k::layer_norm_fwd, k::layer_norm_bwd, k::rms_norm_fwd,
                                     k::rms_norm_bwd,   k::softmax_fwd,    k::softmax_bwd,
                                     k::cross_entropy,  k::act_fwd,        k::act_bwd,
                                     k::swiglu_fwd,     k::swiglu_bwd,     k::dropout_fused};
  return table;
}

}  // namespace attn::kernels::cpu
