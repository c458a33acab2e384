// kernels/cpu/qscreen.h: building the screen, the activation side, the dispatch and the oracle.
#include "kernels/cpu/qscreen.h"

#include <attn/core/f16.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/cpu/isa.h"

namespace attn::kernels {
namespace {
uint16_t half_bits(const std::byte* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return h;
}

uint16_t f16_at_least(double v) { return qscreen_f16_at_least(v); }

// Where u(row r of a panel, k) lives (qscreen.h): its nibble byte, which nibble, its fifth-bit byte and bit.
struct USlot {
  int64_t nib, bits;
  int shift, bit;
};
USlot u_slot(int64_t r, int64_t k) {
  const int64_t b = k / 32, s = (k % 32) / 8, hi = (k % 8) / 4, i = k % 4, lane = 4 * r + i;
  return {qscreen_nib(b, s) + lane, qscreen_bits(b, s) + 8 * hi + lane / 8, static_cast<int>(4 * hi),
          static_cast<int>(lane % 8)};
}
}  // namespace

uint16_t qscreen_f16_at_least(double v) {
  uint16_t h = f32_to_f16(static_cast<float>(v));
  while (static_cast<double>(f16_to_f32(h)) < v && (h & 0x7c00) != 0x7c00) ++h;  // next half up
  return h;
}

bool qscreen_prepare(const int8_t* q, const float* d, int64_t K, const int32_t* cols, int8_t* xq, float* g,
                     float* hb, float* xo, float* ho) {
  bool outlier[4096] = {};
  if (K > 4096) return false;
  double hsum = 0;
  for (int64_t j = 0; j < kScreenOutliers; ++j) {
    const int32_t c = cols[j];
    outlier[c] = true;
    xo[j] = d[c / 32] * static_cast<float>(q[c]);  // exact: 11 x 8 bits
    hsum += 0.5 * std::fabs(static_cast<double>(xo[j]));
  }
  *ho = static_cast<float>(hsum);
  if (static_cast<double>(*ho) < hsum) *ho = std::nextafter(*ho, INFINITY);
  if (!std::isfinite(*ho)) return false;
  std::memcpy(xq, q, static_cast<std::size_t>(K));
  for (int64_t b = 0; b < K / 32; ++b) {
    if (!std::isfinite(d[b])) return false;
    int64_t l1 = 0, l1_plain = 0, sum = 0;
    for (int i = 0; i < 32; ++i) {
      const int32_t a = std::abs(int32_t{q[32 * b + i]});
      l1 += a, sum += q[32 * b + i];
      if (!outlier[32 * b + i]) l1_plain += a;
    }
    g[b] = static_cast<float>(-16.0 * static_cast<double>(d[b]) * static_cast<double>(sum));
    const double h = std::fabs(static_cast<double>(d[b])) *
                     (0.5 * static_cast<double>(l1_plain) + kScreenMargin * static_cast<double>(l1));
    float f = static_cast<float>(h);
    if (static_cast<double>(f) < h) f = std::nextafter(f, INFINITY);  // rounded up
    if (!std::isfinite(f) || !std::isfinite(g[b])) return false;
    hb[b] = f;
  }
  return true;
}

namespace cpu {
namespace detail {
bool qscreen_outliers(const std::byte* w, int64_t n, int64_t K, const int32_t* cols, const uint8_t* u,
                      const uint16_t* sh, int8_t* c, uint16_t* th_out) {
  const int64_t nb = K / 32;
  double delta[kScreenOutliers], dmax = 0;
  for (int64_t j = 0; j < kScreenOutliers; ++j) {  // the 5-bit error at the outlier columns (exact)
    const int64_t b = cols[j] / 32, i = cols[j] % 32;
    const std::byte* src = w + (n * nb + b) * 34;
    const float v = f16_to_f32(half_bits(src)) * static_cast<float>(static_cast<int8_t>(src[2 + i]));
    const double s = f16_to_f32(sh[b]);
    delta[j] = static_cast<double>(v) - s * static_cast<double>(static_cast<int>(u[cols[j]]) - 16);
    dmax = std::max(dmax, std::fabs(delta[j]));
  }
  uint16_t th = 0;
  double t = 0;
  if (dmax > 0) {
    th = f16_at_least(dmax / 127.5);
    t = f16_to_f32(th);
    if (!std::isfinite(t)) return false;
  }
  for (int64_t j = 0; j < kScreenOutliers; ++j)
    c[j] =
        static_cast<int8_t>(t > 0 ? std::clamp(static_cast<int>(std::lround(delta[j] / t)), -128, 127) : 0);
  *th_out = th;
  return true;
}

void qscreen_store_row(std::byte* screen, int64_t n, int64_t K, const uint8_t* u, const uint16_t* sh,
                       const int8_t* c, uint16_t th) {
  const int64_t nb = K / 32, r = n % kScreenPanel;
  std::byte* panel = screen + n / kScreenPanel * qscreen_panel_bytes(K);
  auto* nib = reinterpret_cast<uint8_t*>(panel);
  for (int64_t b = 0; b < nb; ++b)
    for (int64_t s = 0; s < 4; ++s) {
      // the 8 quants of this step: 4 for the low nibbles, 4 for the high ones
      uint32_t lo, hi;
      std::memcpy(&lo, u + 32 * b + 8 * s, 4);
      std::memcpy(&hi, u + 32 * b + 8 * s + 4, 4);
      const uint32_t v = (lo & 0x0f0f0f0fu) | ((hi & 0x0f0f0f0fu) << 4);
      std::memcpy(nib + qscreen_nib(b, s) + 4 * r, &v, 4);
      // bit 4 of each byte gathered into 4 bits (no carries: the products land on distinct bits)
      const uint32_t blo = ((((lo >> 4) & 0x01010101u) * 0x01020408u) >> 24) & 0xfu;
      const uint32_t bhi = ((((hi >> 4) & 0x01010101u) * 0x01020408u) >> 24) & 0xfu;
      const int sh4 = static_cast<int>(4 * (r % 2));
      uint8_t* m = nib + qscreen_bits(b, s) + r / 2;
      m[0] = static_cast<uint8_t>((m[0] & ~(0xfu << sh4)) | (blo << sh4));
      m[8] = static_cast<uint8_t>((m[8] & ~(0xfu << sh4)) | (bhi << sh4));
    }
  for (int64_t b = 0; b < nb; ++b) std::memcpy(panel + qscreen_scales(b) + 2 * r, sh + b, 2);
  std::byte* corr = panel + 352 * nb;
  for (int64_t j = 0; j < kScreenOutliers; ++j) corr[16 * j + r] = static_cast<std::byte>(c[j]);
  std::memcpy(corr + 256 + 2 * r, &th, 2);
}

bool qscreen_build_scalar(const std::byte* w, int64_t n0, int64_t n1, int64_t K, const int32_t* cols,
                          std::byte* screen) {
  const int64_t nb = K / 32;
  std::vector<uint8_t> u(static_cast<std::size_t>(K));
  std::vector<uint16_t> shs(static_cast<std::size_t>(nb));
  int8_t c[kScreenOutliers];
  for (int64_t n = n0; n < n1; ++n) {
    for (int64_t b = 0; b < nb; ++b) {
      const std::byte* src = w + (n * nb + b) * 34;
      const float dw = f16_to_f32(half_bits(src));
      if (!std::isfinite(dw)) return false;
      float v[32], amax = 0;
      for (int i = 0; i < 32; ++i) {
        v[i] = dw * static_cast<float>(static_cast<int8_t>(src[2 + i]));  // exact: 11 x 8 bits
        amax = std::max(amax, std::fabs(v[i]));
      }
      uint16_t sh = 0;  // +0: every weight of the block is 0, u = 16 is exact
      float s = 0;
      if (amax > 0) {
        sh = f16_at_least(static_cast<double>(amax) / 15.5);
        s = f16_to_f32(sh);
        if (!std::isfinite(s)) return false;
      }
      // |v / s| <= 15.5 (to f32 rounding): round to nearest, then only +16 is clipped (to 15, half a
      // step); half away from zero by truncation (no libm call on the baseline ISA)
      const float inv = s > 0 ? 1.0f / s : 0.0f;
      for (int i = 0; i < 32; ++i) {
        const float r = v[i] * inv;
        u[32 * b + i] =
            static_cast<uint8_t>(std::clamp(static_cast<int>(r + (r >= 0 ? 0.5f : -0.5f)) + 16, 0, 31));
      }
      shs[b] = sh;
    }
    uint16_t th;
    if (!qscreen_outliers(w, n, K, cols, u.data(), shs.data(), c, &th)) return false;
    qscreen_store_row(screen, n, K, u.data(), shs.data(), c, th);
  }
  return true;
}
}  // namespace detail

bool qscreen_build(const std::byte* w, int64_t n0, int64_t n1, int64_t K, const int32_t* cols,
                   std::byte* screen) {
  if (active_isa() == Isa::avx512) return detail::qscreen_build_avx512(w, n0, n1, K, cols, screen);
  return detail::qscreen_build_scalar(w, n0, n1, K, cols, screen);
}

void qscreen_rows(const std::byte* screen, int64_t n0, int64_t n1, const ScreenX& x, float* value,
                  float* bound) {
  const Isa isa = active_isa();
  if (isa == Isa::avx512 && cpu_has_avx512_vnni())
    detail::qscreen_rows_vnni(screen, n0, n1, x, value, bound);
  else if (isa != Isa::scalar)
    detail::qscreen_rows_avx2(screen, n0, n1, x, value, bound);
  else
    ref::qscreen_rows(screen, n0, n1, x, value, bound);
}

void qscreen_rows_multi(const std::byte* screen, int64_t n0, int64_t n1, const ScreenX* xs, int64_t R,
                        float* value, float* bound, int64_t ld) {
  if (active_isa() == Isa::avx512 && cpu_has_avx512_vnni())
    return detail::qscreen_rows_multi_vnni(screen, n0, n1, xs, R, value, bound, ld);
  for (int64_t r = 0; r < R; ++r) qscreen_rows(screen, n0, n1, xs[r], value + r * ld, bound + r * ld);
}

int64_t detail::qscreen_select_scalar(const float* value, const float* bound, int64_t N, float lower,
                                      int64_t* rows) {
  int64_t c = 0;
  for (int64_t n = 0; n < N; ++n) {  // branch-free: write every index, advance past the kept ones
    rows[c] = n;
    c += !(value[n] + bound[n] < lower);
  }
  return c;
}

float detail::qscreen_lower_scalar(const float* value, const float* bound, int64_t N, float lower) {
  float l = lower;
  for (int64_t n = 0; n < N; ++n) l = std::max(l, value[n] - bound[n]);
  return l;
}

int64_t qscreen_select(const float* value, const float* bound, int64_t N, float lower, int64_t* rows) {
  if (active_isa() == Isa::avx512) return detail::qscreen_select_avx512(value, bound, N, lower, rows);
  return detail::qscreen_select_scalar(value, bound, N, lower, rows);
}

float qscreen_lower(const float* value, const float* bound, int64_t N, float lower) {
  if (active_isa() == Isa::avx512) return detail::qscreen_lower_avx512(value, bound, N, lower);
  return detail::qscreen_lower_scalar(value, bound, N, lower);
}
}  // namespace cpu

namespace ref {
void qscreen_rows(const std::byte* screen, int64_t n0, int64_t n1, const ScreenX& x, float* value,
                  float* bound) {
  const int64_t nb = x.K / 32;
  for (int64_t n = n0; n < n1; ++n) {
    const std::byte* panel = screen + n / kScreenPanel * qscreen_panel_bytes(x.K);
    const auto* pb = reinterpret_cast<const uint8_t*>(panel);
    const int64_t r = n % kScreenPanel;
    double val = 0, bnd = 0;
    for (int64_t b = 0; b < nb; ++b) {
      int64_t isum = 0;
      for (int64_t k = 32 * b; k < 32 * b + 32; ++k) {
        const USlot at = u_slot(r, k);
        const int u = ((pb[at.nib] >> at.shift) & 0xf) | (((pb[at.bits] >> at.bit) & 1) << 4);
        isum += static_cast<int64_t>(u - 16) * x.xq[k];
      }
      const double s = f16_to_f32(half_bits(panel + qscreen_scales(b) + 2 * r));
      val += s * static_cast<double>(x.d[b]) * static_cast<double>(isum);
      bnd += s * static_cast<double>(x.hb[b]);
    }
    const std::byte* corr = panel + 352 * nb;
    const double t = f16_to_f32(half_bits(corr + 256 + 2 * r));
    for (int64_t j = 0; j < kScreenOutliers; ++j)
      val += t * static_cast<double>(static_cast<int8_t>(corr[16 * j + r])) * static_cast<double>(x.xo[j]);
    bnd += t * static_cast<double>(x.ho);
    value[n] = static_cast<float>(val);
    bound[n] = static_cast<float>(bnd);
  }
}
}  // namespace ref
}  // namespace attn::kernels
