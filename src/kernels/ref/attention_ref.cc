#include "kernels/ref/attention_ref.h"

#include <cmath>
#include <limits>
#include <vector>

namespace attn::kernels::ref {
namespace {

template <typename T>
const T* at4(const T* p, const Strides4& s, int64_t b, int64_t h, int64_t r, int64_t c) {
  return p + b * s.b + h * s.h + r * s.r + c * s.c;
}

// Logits of query row (b, h, i) against every key, −inf where masked.
// If `pre_cap` is given it receives the scaled logit before soft-capping
// (needed by the backward pass for the tanh derivative).
template <typename T>
void row_logits(const AttnArgs<T>& a, int64_t b, int64_t h, int64_t i, std::vector<T>& s,
                std::vector<T>* pre_cap = nullptr) {
  const T neg_inf = -std::numeric_limits<T>::infinity();
  const int64_t hk = h / a.group();
  const KeyRange kr = a.mask.range(b, i);
  s.assign(a.Lk, neg_inf);
  if (pre_cap) pre_cap->assign(a.Lk, T(0));
  for (int64_t j = kr.lo; j < kr.hi; ++j) {
    if (a.allow && !*at4(a.allow, a.sallow, b, h, i, j)) continue;
    T dot = 0;
    for (int64_t d = 0; d < a.D; ++d) dot += *at4(a.q, a.sq, b, h, i, d) * *at4(a.k, a.sk, b, hk, j, d);
    T x = dot * static_cast<T>(a.scale);
    if (pre_cap) (*pre_cap)[j] = x;
    if (a.softcap > 0) x = static_cast<T>(a.softcap) * std::tanh(x / static_cast<T>(a.softcap));
    if (a.bias) x += *at4(a.bias, a.sbias, b, h, i, j);
    s[j] = x;
  }
}

template <typename T>
T keep_scale(const AttnArgs<T>& a, int64_t b, int64_t h, int64_t i, int64_t j) {
  if (a.dropout_p <= 0) return T(1);
  const bool keep = dropout_hash(a.dropout_seed, b, h, i, j) >= dropout_threshold(a.dropout_p);
  return keep ? static_cast<T>(1.0 / (1.0 - a.dropout_p)) : T(0);
}

}  // namespace

template <typename T>
void attention_forward(const AttnArgs<T>& a, AttnOut<T>& o) {
  const T neg_inf = -std::numeric_limits<T>::infinity();
  std::vector<T> s;
  for (int64_t b = 0; b < a.B; ++b)
    for (int64_t h = 0; h < a.H; ++h) {
      const int64_t hk = h / a.group();
      for (int64_t i = 0; i < a.Lq; ++i) {
        row_logits(a, b, h, i, s);
        T m = neg_inf;
        bool nan = false;
        for (T x : s) nan |= std::isnan(x), m = std::max(m, x);
        T* out = o.out_row(b, h, i, a.H, a.Lq, a.D);
        T* lse = o.lse + (b * a.H + h) * a.Lq + i;
        if (nan) {  // a NaN logit makes the whole row NaN (out and lse), even when every logit is NaN
          for (int64_t d = 0; d < a.D; ++d) out[d] = std::numeric_limits<T>::quiet_NaN();
          *lse = std::numeric_limits<T>::quiet_NaN();
          continue;
        }
        for (int64_t d = 0; d < a.D; ++d) out[d] = 0;
        if (m == neg_inf) {  // fully masked row
          *lse = neg_inf;
          continue;
        }
        T sum = 0;
        for (T& x : s) {
          x = std::exp(x - m);  // exp(−inf) = 0 for masked keys
          sum += x;
        }
        *lse = m + std::log(sum);
        for (int64_t j = 0; j < a.Lk; ++j) {
          const T p = s[j] / sum * keep_scale(a, b, h, i, j);
          if (p == 0) continue;
          for (int64_t d = 0; d < a.D; ++d) out[d] += p * *at4(a.v, a.sv, b, hk, j, d);
        }
      }
    }

  // Weight capture: exp(s − lse) for the requested rows.
  if (o.weights) {
    T* w = o.weights;
    for (int64_t b : o.cap_b)
      for (int64_t h : o.cap_h)
        for (int64_t i : o.cap_i) {
          row_logits(a, b, h, i, s);
          const T l = o.lse[(b * a.H + h) * a.Lq + i];
          for (int64_t j = 0; j < a.Lk; ++j) w[j] = (l == neg_inf) ? T(0) : std::exp(s[j] - l);
          w += a.Lk;
        }
  }
}

template <typename T>
void attention_backward(const AttnArgs<T>& a, const AttnGradArgs<T>& g) {
  const T neg_inf = -std::numeric_limits<T>::infinity();
  const int64_t D = a.D;
  for (int64_t x = 0; x < a.B * a.H * a.Lq * D; ++x) g.dq[x] = 0;
  for (int64_t x = 0; x < a.B * a.Hkv * a.Lk * D; ++x) g.dk[x] = g.dv[x] = 0;

  std::vector<T> s, pre, p, dp;
  for (int64_t b = 0; b < a.B; ++b)
    for (int64_t h = 0; h < a.H; ++h) {
      const int64_t hk = h / a.group();
      for (int64_t i = 0; i < a.Lq; ++i) {
        const T lse = g.lse[(b * a.H + h) * a.Lq + i];
        if (lse == neg_inf) continue;  // fully masked row: zero gradients
        row_logits(a, b, h, i, s, &pre);
        p.assign(a.Lk, 0);
        dp.assign(a.Lk, 0);
        T dsum = 0;  // D_i = sum_j p_j dP_j
        for (int64_t j = 0; j < a.Lk; ++j) {
          if (s[j] == neg_inf) continue;
          p[j] = std::exp(s[j] - lse);
          const T ks = keep_scale(a, b, h, i, j);
          T dot = 0;  // dout_i · v_j
          for (int64_t d = 0; d < D; ++d)
            dot += *at4(g.dout, g.sdout, b, h, i, d) * *at4(a.v, a.sv, b, hk, j, d);
          dp[j] = dot * ks;
          dsum += p[j] * dp[j];
          // dV_j += p'_j dout_i
          T* dv = g.dv + ((b * a.Hkv + hk) * a.Lk + j) * D;
          for (int64_t d = 0; d < D; ++d) dv[d] += p[j] * ks * *at4(g.dout, g.sdout, b, h, i, d);
        }
        T* dq = g.dq + ((b * a.H + h) * a.Lq + i) * D;
        for (int64_t j = 0; j < a.Lk; ++j) {
          if (p[j] == 0) continue;
          T ds = p[j] * (dp[j] - dsum);  // dL/d(logit)
          if (a.softcap > 0) {
            const T t = std::tanh(pre[j] / static_cast<T>(a.softcap));
            ds *= (1 - t * t);
          }
          ds *= static_cast<T>(a.scale);
          T* dk = g.dk + ((b * a.Hkv + hk) * a.Lk + j) * D;
          for (int64_t d = 0; d < D; ++d) {
            dq[d] += ds * *at4(a.k, a.sk, b, hk, j, d);
            dk[d] += ds * *at4(a.q, a.sq, b, h, i, d);
          }
        }
      }
    }
}

template void attention_forward<float>(const AttnArgs<float>&, AttnOut<float>&);
template void attention_forward<double>(const AttnArgs<double>&, AttnOut<double>&);
template void attention_backward<float>(const AttnArgs<float>&, const AttnGradArgs<float>&);
template void attention_backward<double>(const AttnArgs<double>&, const AttnGradArgs<double>&);

}  // namespace attn::kernels::ref
