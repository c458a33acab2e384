// Scalar encoder kernels and the dispatch (src/kernels/cpu/encoder_kernels.h).
#include "kernels/cpu/encoder_kernels.h"

#include <attn/core/parallel.h>

#include <algorithm>
#include <cmath>

#include "kernels/cpu/isa.h"

namespace attn::kernels::cpu {
namespace detail {

void add_bias_scalar(float* x, const float* bias, int64_t rows, int64_t C) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < C; ++c) x[r * C + c] += bias[c];
}

void bias_gelu_scalar(float* x, const float* bias, int64_t rows, int64_t C) {
  constexpr float kInvSqrt2 = 0.70710678118654752f;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < C; ++c) {
      const float u = x[r * C + c] + (bias ? bias[c] : 0.0f);
      x[r * C + c] = 0.5f * u * (1.0f + std::erf(u * kInvSqrt2));
    }
}

void residual_layer_norm_scalar(float* h, const float* y, const float* bias, const float* w, const float* b,
                                int64_t rows, int64_t C, float eps) {
  for (int64_t r = 0; r < rows; ++r) {
    float* hr = h + r * C;
    const float* yr = y ? y + r * C : nullptr;
    float sum = 0;
    for (int64_t c = 0; c < C; ++c) {
      hr[c] += (yr ? yr[c] : 0.0f) + (bias ? bias[c] : 0.0f);
      sum += hr[c];
    }
    const float mean = sum / static_cast<float>(C);
    float var = 0;
    for (int64_t c = 0; c < C; ++c) var += (hr[c] - mean) * (hr[c] - mean);
    const float rstd = 1.0f / std::sqrt(var / static_cast<float>(C) + eps);
    for (int64_t c = 0; c < C; ++c) hr[c] = (hr[c] - mean) * rstd * w[c] + b[c];
  }
}

void linear_small_m_scalar(const float* x, int64_t ldx, const float* wt, const float* bias, float* y,
                           int64_t ldy, int64_t M, int64_t N, int64_t K, int64_t n0, int64_t n1) {
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = n0; n < n1; ++n) {
      float s = bias ? bias[n] : 0.0f;
      for (int64_t k = 0; k < K; ++k) s += x[m * ldx + k] * wt[k * N + n];
      y[m * ldy + n] = s;
    }
}

void linear_small_m_nt_scalar(const float* x, int64_t ldx, const float* w, const float* bias, float* y,
                              int64_t ldy, int64_t M, int64_t K, int64_t n0, int64_t n1) {
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = n0; n < n1; ++n) {
      float s = 0.0f;
      for (int64_t k = 0; k < K; ++k) s += x[m * ldx + k] * w[n * K + k];
      y[m * ldy + n] = s + (bias ? bias[n] : 0.0f);
    }
}

}  // namespace detail

namespace {
bool use_avx512() { return active_isa() == Isa::avx512; }
int64_t grain(int64_t C) { return std::max<int64_t>(1, 8192 / std::max<int64_t>(1, C)); }
}  // namespace

void add_bias(float* x, const float* bias, int64_t rows, int64_t C) {
  const bool v = use_avx512();
  parallel_for(rows, grain(C), [&](int64_t r0, int64_t r1, int) {
    (v ? detail::add_bias_avx512 : detail::add_bias_scalar)(x + r0 * C, bias, r1 - r0, C);
  });
}

void bias_gelu(float* x, const float* bias, int64_t rows, int64_t C) {
  const bool v = use_avx512();
  parallel_for(rows, grain(C), [&](int64_t r0, int64_t r1, int) {
    (v ? detail::bias_gelu_avx512 : detail::bias_gelu_scalar)(x + r0 * C, bias, r1 - r0, C);
  });
}

void residual_layer_norm(float* h, const float* y, const float* bias, const float* w, const float* b,
                         int64_t rows, int64_t C, float eps) {
  const bool v = use_avx512();
  parallel_for(rows, grain(C), [&](int64_t r0, int64_t r1, int) {
    (v ? detail::residual_layer_norm_avx512 : detail::residual_layer_norm_scalar)(
        h + r0 * C, y ? y + r0 * C : nullptr, bias, w, b, r1 - r0, C, eps);
  });
}

bool linear_small_m_fast() { return use_avx512(); }

void linear_small_m(const float* x, int64_t ldx, const float* wt, const float* bias, float* y, int64_t ldy,
                    int64_t M, int64_t N, int64_t K) {
  const bool v = use_avx512();
  constexpr int64_t kPanel = 32;
  parallel_for((N + kPanel - 1) / kPanel, 1, [&](int64_t p0, int64_t p1, int) {
    (v ? detail::linear_small_m_avx512 : detail::linear_small_m_scalar)(
        x, ldx, wt, bias, y, ldy, M, N, K, p0 * kPanel, std::min(N, p1 * kPanel));
  });
}

void linear_small_m_nt(const float* x, int64_t ldx, const float* w, const float* bias, float* y, int64_t ldy,
                       int64_t M, int64_t N, int64_t K) {
  const bool v = use_avx512();
  constexpr int64_t kPanel = 32;
  parallel_for((N + kPanel - 1) / kPanel, 1, [&](int64_t p0, int64_t p1, int) {
    (v ? detail::linear_small_m_nt_avx512 : detail::linear_small_m_nt_scalar)(
        x, ldx, w, bias, y, ldy, M, K, p0 * kPanel, std::min(N, p1 * kPanel));
  });
}

}  // namespace attn::kernels::cpu
