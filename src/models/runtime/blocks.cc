// The runtime's shared inference blocks (include/attn/models/runtime/blocks.h).
#include <attn/core/error.h>
#include <attn/models/runtime/blocks.h>
#include <attn/ops/geglu.h>
#include <attn/ops/inference.h>

#include <cmath>

namespace attn::models::runtime {

void rms_norm_rows(const float* x, const float* w, int64_t rows, int64_t n, double eps, float* out) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * n;
    double ss = 0;
    for (int64_t i = 0; i < n; ++i) ss += static_cast<double>(xr[i]) * xr[i];
    const float s = static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(n) + eps));
    float* o = out + r * n;
    for (int64_t i = 0; i < n; ++i) o[i] = xr[i] * s * w[i];
  }
}

void layer_norm_rows(float* h, const float* y, const float* bias, const float* w, const float* b,
                     int64_t rows, int64_t n, double eps) {
  ops::residual_layer_norm(h, y, bias, w, b, rows, n, static_cast<float>(eps));
}

void sum_rows(std::span<const float* const> parts, int64_t n, float* out) {
  ATTN_CHECK(!parts.empty(), "sum_rows: expected at least one row to sum");
  if (parts.size() == 3) {  // the encoders' word + position + type, in one pass
    const float *a = parts[0], *p = parts[1], *t = parts[2];
    for (int64_t i = 0; i < n; ++i) out[i] = a[i] + p[i] + t[i];
    return;
  }
  if (parts[0] != out)
    for (int64_t i = 0; i < n; ++i) out[i] = parts[0][i];
  for (std::size_t j = 1; j < parts.size(); ++j)
    for (int64_t i = 0; i < n; ++i) out[i] += parts[j][i];
}

Rope Rope::make(RopeStyle style, int64_t dims, double base, std::span<const float> freq_factors,
                double linear_factor) {
  ATTN_CHECK(dims > 0 && dims % 2 == 0, "rope: rotated dimensions must be even and > 0, got ", dims);
  ATTN_CHECK(std::isfinite(base) && base > 0, "rope: base must be > 0, got ", base);
  ATTN_CHECK(std::isfinite(linear_factor) && linear_factor > 0, "rope: scaling factor must be > 0, got ",
             linear_factor);
  ATTN_CHECK(freq_factors.empty() || static_cast<int64_t>(freq_factors.size()) == dims / 2,
             "rope: ", freq_factors.size(), " frequency factors; expected ", dims / 2);
  Rope r;
  r.style = style;
  r.dims = dims;
  r.position_scale = 1.0 / linear_factor;
  r.inv_freq.resize(static_cast<std::size_t>(dims / 2));
  for (int64_t i = 0; i < dims / 2; ++i) {
    double f = std::pow(base, -2.0 * static_cast<double>(i) / static_cast<double>(dims));
    if (!freq_factors.empty()) {
      const double fac = freq_factors[static_cast<std::size_t>(i)];
      ATTN_CHECK(std::isfinite(fac) && fac > 0, "rope: frequency factor ", i, " is ", fac, "; expected > 0");
      f /= fac;
    }
    r.inv_freq[static_cast<std::size_t>(i)] = f;
  }
  return r;
}

void Rope::tables(const int64_t* positions, int64_t rows, std::vector<float>& cs,
                  std::vector<float>& sn) const {
  const int64_t half = dims / 2;
  cs.resize(static_cast<std::size_t>(rows * half));
  sn.resize(static_cast<std::size_t>(rows * half));
  for (int64_t r = 0; r < rows; ++r) {
    const double p = static_cast<double>(positions[r]) * position_scale;
    for (int64_t i = 0; i < half; ++i) {
      const double theta = p * inv_freq[static_cast<std::size_t>(i)];
      cs[r * half + i] = static_cast<float>(std::cos(theta));
      sn[r * half + i] = static_cast<float>(std::sin(theta));
    }
  }
}

void Rope::apply(float* x, int64_t r0, int64_t r1, int64_t heads, int64_t D, const float* cs,
                 const float* sn) const {
  const int64_t half = dims / 2;
  for (int64_t r = r0; r < r1; ++r) {
    const float* c = cs + r * half;
    const float* s = sn + r * half;
    for (int64_t h = 0; h < heads; ++h) {
      float* v = x + (r * heads + h) * D;
      if (style == RopeStyle::pairs) {
        for (int64_t i = 0; i < half; ++i) {
          const float a = v[2 * i], b = v[2 * i + 1];
          v[2 * i] = a * c[i] - b * s[i];
          v[2 * i + 1] = a * s[i] + b * c[i];
        }
      } else {
        for (int64_t i = 0; i < half; ++i) {
          const float a = v[i], b = v[i + half];
          v[i] = a * c[i] - b * s[i];
          v[i + half] = a * s[i] + b * c[i];
        }
      }
    }
  }
}

void gated_activation(Activation act, float* g, const float* u, int64_t n) {
  if (act == Activation::gelu_tanh) {
    ops::geglu_tanh(g, u, n);
    return;
  }
  ops::swiglu(g, u, n);
}

void soft_cap(float* x, int64_t n, float c) {
  for (int64_t i = 0; i < n; ++i) x[i] = c * std::tanh(x[i] / c);
}

}  // namespace attn::models::runtime
