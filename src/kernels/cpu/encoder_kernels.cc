// Scalar encoder kernels and the dispatch (src/kernels/cpu/encoder_kernels.h).
#include "kernels/cpu/encoder_kernels.h"

#include <attn/core/error.h>
#include <attn/core/parallel.h>

#include <algorithm>
#include <cmath>
#include <vector>

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

int64_t encoder_attention_scratch(int64_t L, int64_t D) {
  const int64_t Lp = (L + 15) / 16 * 16;
  return D * Lp + 8 * Lp + 16;
}

void encoder_attention_scalar(const float* qkv, const int64_t* lengths, float* ctx, int64_t L, int64_t Lq,
                              int64_t H, int64_t D, float scale, int64_t b, int64_t h, float* scratch) {
  const int64_t C = H * D, ld = 3 * C, n = lengths[b];
  const float* q = qkv + b * L * ld + h * D;  // q: row i at q + i · ld
  const float* k = q + C;
  const float* v = q + 2 * C;
  float* p = scratch;  // p: [n]
  for (int64_t i = 0; i < Lq; ++i) {
    float mx = -INFINITY;
    for (int64_t j = 0; j < n; ++j) {
      float s = 0;
      for (int64_t d = 0; d < D; ++d) s += q[i * ld + d] * k[j * ld + d];
      p[j] = s * scale;
      mx = std::max(mx, p[j]);
    }
    float z = 0;
    for (int64_t j = 0; j < n; ++j) z += (p[j] = std::exp(p[j] - mx));
    float* o = ctx + (b * L + i) * C + h * D;
    for (int64_t d = 0; d < D; ++d) {
      float acc = 0;
      for (int64_t j = 0; j < n; ++j) acc += p[j] * v[j * ld + d];
      o[d] = acc / z;
    }
  }
}

}  // namespace detail

namespace {
bool use_avx512() { return active_isa() == Isa::avx512; }
int64_t grain(int64_t C) { return std::max<int64_t>(1, 8192 / std::max<int64_t>(1, C)); }

// The kernels' version for this CPU: AVX-512, AVX2 or the scalar oracle.
template <class Fn>
Fn pick_rows(Fn avx512, Fn avx2, Fn scalar) {
  const Isa isa = active_isa();
  return isa == Isa::avx512 ? avx512 : isa == Isa::avx2 ? avx2 : scalar;
}
}  // namespace

void add_bias(float* x, const float* bias, int64_t rows, int64_t C) {
  const auto fn = pick_rows(&detail::add_bias_avx512, &detail::add_bias_avx2, &detail::add_bias_scalar);
  parallel_for(rows, grain(C), [&](int64_t r0, int64_t r1, int) { fn(x + r0 * C, bias, r1 - r0, C); });
}

void bias_gelu(float* x, const float* bias, int64_t rows, int64_t C) {
  const auto fn = pick_rows(&detail::bias_gelu_avx512, &detail::bias_gelu_avx2, &detail::bias_gelu_scalar);
  parallel_for(rows, grain(C), [&](int64_t r0, int64_t r1, int) { fn(x + r0 * C, bias, r1 - r0, C); });
}

void residual_layer_norm(float* h, const float* y, const float* bias, const float* w, const float* b,
                         int64_t rows, int64_t C, float eps) {
  const auto fn = pick_rows(&detail::residual_layer_norm_avx512, &detail::residual_layer_norm_avx2,
                            &detail::residual_layer_norm_scalar);
  parallel_for(rows, grain(C), [&](int64_t r0, int64_t r1, int) {
    fn(h + r0 * C, y ? y + r0 * C : nullptr, bias, w, b, r1 - r0, C, eps);
  });
}

bool linear_small_m_fast() { return use_avx512(); }

bool encoder_attention_fast(int64_t D) {
  const Isa isa = active_isa();
  return D > 0 && ((isa == Isa::avx512 && D % 16 == 0) || (isa == Isa::avx2 && D % 8 == 0));
}

void encoder_attention(const float* qkv, const int64_t* lengths, float* ctx, int64_t B, int64_t L, int64_t H,
                       int64_t D, float scale, int64_t queries) {
  ATTN_CHECK(B >= 0 && L >= 1 && H >= 1 && D >= 1,
             "encoder_attention: expected B >= 0 and positive L, H, D; got B ", B, ", L ", L, ", H ", H,
             ", D ", D);
  const int64_t Lq = queries < 0 ? L : queries;
  ATTN_CHECK(Lq >= 1 && Lq <= L, "encoder_attention: queries must be in [1, ", L, "] (or -1 for all); got ",
             queries);
  ATTN_CHECK(48 * H * D < (int64_t{1} << 31), "encoder_attention: 3 H D = ", 3 * H * D,
             " floats per token is too wide (16 rows of it must fit a 32-bit offset)");
  for (int64_t b = 0; b < B; ++b)
    ATTN_CHECK(lengths[b] >= 1 && lengths[b] <= L, "encoder_attention: lengths[", b, "] = ", lengths[b],
               "; expected a value in [1, ", L, "]");
  const auto body = encoder_attention_fast(D)
                        ? pick_rows(&detail::encoder_attention_avx512, &detail::encoder_attention_avx2,
                                    &detail::encoder_attention_scalar)
                        : &detail::encoder_attention_scalar;
  const int64_t per = detail::encoder_attention_scratch(L, D);
  // At least ~1 MFLOP per chunk: short sequences (one sentence of 16 tokens: 12 heads x 64 kFLOP) run
  // on the caller instead of waking the pool for microseconds of work.
  const int64_t flops = std::max<int64_t>(1, 4 * Lq * L * D);
  parallel_for(B * H, std::max<int64_t>(1, (int64_t{1} << 20) / flops), [&](int64_t i0, int64_t i1, int) {
    // Every scratch entry is written before it is read: a grow-only per-thread buffer, not zeroed.
    thread_local std::vector<float> scratch;
    if (static_cast<int64_t>(scratch.size()) < per) scratch.resize(static_cast<std::size_t>(per));
    float* s = scratch.data();
    for (int64_t i = i0; i < i1; ++i) body(qkv, lengths, ctx, L, Lq, H, D, scale, i / H, i % H, s);
  });
}

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
