// Row kernels of the neural-network ops (norms, softmax, cross-entropy, RoPE,
// embedding, dropout). Raw contiguous pointers; T is float or double; row
// statistics accumulate in double; threads via attn::parallel_for. Each
// backward sits under its forward and differentiates the quoted line.
#pragma once

#include <attn/core/parallel.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

namespace attn::kernels::cpu {

inline int64_t rows_grain(int64_t row_len) {
  return std::max<int64_t>(1, 16384 / std::max<int64_t>(1, row_len));
}

// Column sums of per-thread partials: parts is [threads][C] in double.
template <typename T>
void reduce_partials(const std::vector<double>& parts, int threads, int64_t C, T* out) {
  for (int64_t c = 0; c < C; ++c) {
    double s = 0;
    for (int t = 0; t < threads; ++t) s += parts[static_cast<std::size_t>(t * C + c)];
    out[c] = static_cast<T>(s);
  }
}

// ---- layer norm ---------------------------------------------------------------------
// x, y: [rows, C]; w, b: [C] or null; mean, rstd: [rows] (saved for backward).
template <typename T>
void layer_norm_forward(const T* x, const T* w, const T* b, T* y, double* mean, double* rstd, int64_t rows,
                        int64_t C, double eps) {
  parallel_for(rows, rows_grain(C), [&](int64_t r0, int64_t r1, int) {
    for (int64_t r = r0; r < r1; ++r) {
      const T* xr = x + r * C;
      double m = 0;
      for (int64_t c = 0; c < C; ++c) m += xr[c];
      m /= static_cast<double>(C);
      double v = 0;
      for (int64_t c = 0; c < C; ++c) v += (xr[c] - m) * (xr[c] - m);
      v /= static_cast<double>(C);
      const double rs = 1.0 / std::sqrt(v + eps);
      mean[r] = m;
      rstd[r] = rs;
      for (int64_t c = 0; c < C; ++c) {
        // y = (x - mean) · rstd · w + b
        double o = (xr[c] - m) * rs;
        if (w) o *= w[c];
        if (b) o += b[c];
        y[r * C + c] = static_cast<T>(o);
      }
    }
  });
}

// g, dx: [rows, C]; dw, db: [C] or null (written, not accumulated).
template <typename T>
void layer_norm_backward(const T* g, const T* x, const T* w, const double* mean, const double* rstd, T* dx,
                         T* dw, T* db, int64_t rows, int64_t C) {
  const int nt = num_threads();
  std::vector<double> pw(dw ? static_cast<std::size_t>(nt * C) : 0, 0.0);
  std::vector<double> pb(db ? static_cast<std::size_t>(nt * C) : 0, 0.0);
  parallel_for(rows, rows_grain(C), [&](int64_t r0, int64_t r1, int tid) {
    for (int64_t r = r0; r < r1; ++r) {
      const T* xr = x + r * C;
      const T* gr = g + r * C;
      const double m = mean[r], rs = rstd[r];
      // xhat = (x - mean) · rstd;  dxhat = g · w
      double s1 = 0, s2 = 0;  // sum(dxhat), sum(dxhat · xhat)
      for (int64_t c = 0; c < C; ++c) {
        const double xh = (xr[c] - m) * rs;
        const double dxh = w ? gr[c] * static_cast<double>(w[c]) : gr[c];
        s1 += dxh;
        s2 += dxh * xh;
        if (dw) pw[static_cast<std::size_t>(tid * C + c)] += gr[c] * xh;
        if (db) pb[static_cast<std::size_t>(tid * C + c)] += gr[c];
      }
      s1 /= static_cast<double>(C);
      s2 /= static_cast<double>(C);
      if (dx) {
        for (int64_t c = 0; c < C; ++c) {
          const double xh = (xr[c] - m) * rs;
          const double dxh = w ? gr[c] * static_cast<double>(w[c]) : gr[c];
          // dx = rstd · (dxhat - mean(dxhat) - xhat · mean(dxhat · xhat))
          dx[r * C + c] = static_cast<T>(rs * (dxh - s1 - xh * s2));
        }
      }
    }
  });
  if (dw) reduce_partials(pw, nt, C, dw);
  if (db) reduce_partials(pb, nt, C, db);
}

// ---- RMS norm -------------------------------------------------------------------------
// x, y: [rows, C]; w: [C] or null; rstd: [rows].
template <typename T>
void rms_norm_forward(const T* x, const T* w, T* y, double* rstd, int64_t rows, int64_t C, double eps) {
  parallel_for(rows, rows_grain(C), [&](int64_t r0, int64_t r1, int) {
    for (int64_t r = r0; r < r1; ++r) {
      const T* xr = x + r * C;
      double ss = 0;
      for (int64_t c = 0; c < C; ++c) ss += static_cast<double>(xr[c]) * xr[c];
      const double rs = 1.0 / std::sqrt(ss / static_cast<double>(C) + eps);
      rstd[r] = rs;
      // y = x · rstd · w
      for (int64_t c = 0; c < C; ++c)
        y[r * C + c] = static_cast<T>(xr[c] * rs * (w ? static_cast<double>(w[c]) : 1.0));
    }
  });
}

template <typename T>
void rms_norm_backward(const T* g, const T* x, const T* w, const double* rstd, T* dx, T* dw, int64_t rows,
                       int64_t C) {
  const int nt = num_threads();
  std::vector<double> pw(dw ? static_cast<std::size_t>(nt * C) : 0, 0.0);
  parallel_for(rows, rows_grain(C), [&](int64_t r0, int64_t r1, int tid) {
    for (int64_t r = r0; r < r1; ++r) {
      const T* xr = x + r * C;
      const T* gr = g + r * C;
      const double rs = rstd[r];
      double s = 0;  // sum(dxhat · xhat), xhat = x · rstd, dxhat = g · w
      for (int64_t c = 0; c < C; ++c) {
        const double xh = xr[c] * rs;
        const double dxh = w ? gr[c] * static_cast<double>(w[c]) : gr[c];
        s += dxh * xh;
        if (dw) pw[static_cast<std::size_t>(tid * C + c)] += gr[c] * xh;
      }
      s /= static_cast<double>(C);
      if (dx) {
        for (int64_t c = 0; c < C; ++c) {
          const double dxh = w ? gr[c] * static_cast<double>(w[c]) : gr[c];
          // dx = rstd · (dxhat - xhat · mean(dxhat · xhat))
          dx[r * C + c] = static_cast<T>(rs * (dxh - xr[c] * rs * s));
        }
      }
    }
  });
  if (dw) reduce_partials(pw, nt, C, dw);
}

// ---- softmax and log-softmax over the last dim ------------------------------------------
// x, y: [rows, C]. A row of all -inf gives y = 0 (softmax) / -inf (log_softmax), never NaN.
template <typename T>
void softmax_forward(const T* x, T* y, int64_t rows, int64_t C, bool log) {
  parallel_for(rows, rows_grain(C), [&](int64_t r0, int64_t r1, int) {
    for (int64_t r = r0; r < r1; ++r) {
      const T* xr = x + r * C;
      T* yr = y + r * C;
      double mx = -std::numeric_limits<double>::infinity();
      for (int64_t c = 0; c < C; ++c) mx = std::max<double>(mx, xr[c]);
      if (mx == -std::numeric_limits<double>::infinity()) {
        for (int64_t c = 0; c < C; ++c) yr[c] = log ? xr[c] : T(0);
        continue;
      }
      double s = 0;
      for (int64_t c = 0; c < C; ++c) s += std::exp(xr[c] - mx);
      const double lse = mx + std::log(s);
      // softmax: y = exp(x - lse);  log_softmax: y = x - lse
      for (int64_t c = 0; c < C; ++c) yr[c] = static_cast<T>(log ? xr[c] - lse : std::exp(xr[c] - lse));
    }
  });
}

// g, y, dx: [rows, C]; y is the forward output.
template <typename T>
void softmax_backward(const T* g, const T* y, T* dx, int64_t rows, int64_t C, bool log) {
  parallel_for(rows, rows_grain(C), [&](int64_t r0, int64_t r1, int) {
    for (int64_t r = r0; r < r1; ++r) {
      const T* gr = g + r * C;
      const T* yr = y + r * C;
      T* dr = dx + r * C;
      double s = 0;
      if (log) {
        for (int64_t c = 0; c < C; ++c) s += gr[c];
        // y = x - lse  =>  dx = g - softmax · sum(g);  softmax = exp(y)
        for (int64_t c = 0; c < C; ++c) {
          const double p = yr[c] == -std::numeric_limits<T>::infinity() ? 0.0 : std::exp(double{yr[c]});
          dr[c] = static_cast<T>(gr[c] - p * s);
        }
      } else {
        for (int64_t c = 0; c < C; ++c) s += static_cast<double>(gr[c]) * yr[c];
        // y = exp(x - lse)  =>  dx = y · (g - sum(g · y))
        for (int64_t c = 0; c < C; ++c) dr[c] = static_cast<T>(yr[c] * (gr[c] - s));
      }
    }
  });
}

// ---- cross-entropy ------------------------------------------------------------------------
// logits: [N, V]; target: [N] (already validated; ignore_index rows skipped);
// lse: [N] out. Returns sum over valid rows of
//   (1 - eps) · (lse - x[t]) + eps · (lse - mean_v x[v]).
template <typename T>
double cross_entropy_forward(const T* x, const int64_t* target, double* lse, int64_t N, int64_t V,
                             int64_t ignore_index, double eps) {
  const int nt = num_threads();
  std::vector<double> part(static_cast<std::size_t>(nt), 0.0);
  parallel_for(N, rows_grain(V), [&](int64_t r0, int64_t r1, int tid) {
    for (int64_t r = r0; r < r1; ++r) {
      const T* xr = x + r * V;
      double mx = -std::numeric_limits<double>::infinity(), sum_x = 0;
      for (int64_t v = 0; v < V; ++v) {
        mx = std::max<double>(mx, xr[v]);
        sum_x += xr[v];
      }
      double s = 0;
      for (int64_t v = 0; v < V; ++v) s += std::exp(xr[v] - mx);
      lse[r] = mx + std::log(s);
      if (target[r] == ignore_index) continue;
      // loss_r = (1 - eps) · (-log p[t]) + eps · mean_v(-log p[v]),  log p[v] = x[v] - lse
      const double nll = lse[r] - xr[target[r]];
      const double smooth = lse[r] - sum_x / static_cast<double>(V);
      part[static_cast<std::size_t>(tid)] += (1.0 - eps) * nll + eps * smooth;
    }
  });
  double total = 0;
  for (double p : part) total += p;
  return total;
}

// dx = (softmax - (1 - eps) · onehot(t) - eps / V) · gscale on valid rows, 0 on ignored ones.
template <typename T>
void cross_entropy_backward(const T* x, const int64_t* target, const double* lse, T* dx, int64_t N, int64_t V,
                            int64_t ignore_index, double eps, double gscale) {
  parallel_for(N, rows_grain(V), [&](int64_t r0, int64_t r1, int) {
    for (int64_t r = r0; r < r1; ++r) {
      T* dr = dx + r * V;
      if (target[r] == ignore_index) {
        std::fill(dr, dr + V, T(0));
        continue;
      }
      const T* xr = x + r * V;
      for (int64_t v = 0; v < V; ++v) {
        const double p = std::exp(xr[v] - lse[r]);
        const double t = (v == target[r] ? 1.0 - eps : 0.0) + eps / static_cast<double>(V);
        dr[v] = static_cast<T>((p - t) * gscale);
      }
    }
  });
}

// ---- rotary position embedding ------------------------------------------------------------
// x, y: [rows, D] where row r sits at sequence position pos[r % L]; cos_t,
// sin_t: [L, D/2]. Pair i is (2i, 2i+1) (interleaved) or (i, i + D/2)
// (half-split). sign = +1 rotates by +theta (forward), -1 by -theta (its
// transpose: the backward).
template <typename T>
void rope_apply(const T* x, T* y, int64_t rows, int64_t L, int64_t D, const double* cos_t,
                const double* sin_t, bool interleaved, double sign) {
  const int64_t half = D / 2;
  parallel_for(rows, rows_grain(D), [&](int64_t r0, int64_t r1, int) {
    for (int64_t r = r0; r < r1; ++r) {
      const T* xr = x + r * D;
      T* yr = y + r * D;
      const double* cr = cos_t + (r % L) * half;
      const double* sr = sin_t + (r % L) * half;
      for (int64_t i = 0; i < half; ++i) {
        const int64_t ia = interleaved ? 2 * i : i, ib = interleaved ? 2 * i + 1 : i + half;
        const double a = xr[ia], b = xr[ib], c = cr[i], s = sign * sr[i];
        // forward: y_a = a·cos - b·sin,  y_b = a·sin + b·cos
        yr[ia] = static_cast<T>(a * c - b * s);
        yr[ib] = static_cast<T>(a * s + b * c);
      }
    }
  });
}

// ---- dropout ----------------------------------------------------------------------------
// Keep decision of element i: a pure function of (seed, i).
inline bool dropout_keep_flat(uint64_t seed, int64_t i, double p) {
  uint64_t z = seed + 0x9e3779b97f4a7c15ull * (static_cast<uint64_t>(i) + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  const double u = static_cast<double>(z >> 11) * 0x1.0p-53;  // uniform in [0, 1)
  return u >= p;
}

// y = x · keep / (1 - p) over n contiguous elements (also its own backward).
template <typename T>
void dropout_apply(const T* x, T* y, int64_t n, double p, uint64_t seed) {
  const double s = 1.0 / (1.0 - p);
  parallel_for(n, 16384, [&](int64_t b, int64_t e, int) {
    for (int64_t i = b; i < e; ++i) y[i] = dropout_keep_flat(seed, i, p) ? static_cast<T>(x[i] * s) : T(0);
  });
}

}  // namespace attn::kernels::cpu
