// kernels/cpu/q8k.h: activation quantization, the oracle and the ISA dispatch.
#include "kernels/cpu/q8k.h"

#include <attn/core/error.h>
#include <attn/core/f16.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/cpu/isa.h"

namespace attn::kernels {

Q8Kind q8k_kind_for(KFormat f) {
  return (f == KFormat::q4_k || f == KFormat::q5_k || f == KFormat::q6_k) ? Q8Kind::q8_k : Q8Kind::q8_0;
}
int64_t q8k_block(Q8Kind k) { return k == Q8Kind::q8_k ? 256 : 32; }
bool q8k_supported(KFormat f) {
  return f == KFormat::q4_0 || f == KFormat::q4_1 || f == KFormat::q5_0 || f == KFormat::q8_0 ||
         f == KFormat::q4_k || f == KFormat::q5_k || f == KFormat::q6_k;
}

namespace {
float half(const std::byte* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return f16_to_f32(h);
}

void check(KFormat f, int64_t n0, int64_t n1, int64_t K, const Q8KRows& x, int64_t ldy) {
  ATTN_CHECK(q8k_supported(f), "q8k_dot_rows: weight format ", kformat_name(f),
             " has no 8-bit activation product (Q4_0 Q4_1 Q5_0 Q8_0 Q4_K Q5_K Q6_K)");
  ATTN_CHECK(K > 0 && K % kformat_block_elems(f) == 0, "q8k_dot_rows: K must be a positive multiple of ",
             kformat_block_elems(f), " for ", kformat_name(f), ", got ", K);
  ATTN_CHECK(x.K == K && x.kind == q8k_kind_for(f), "q8k_dot_rows: activations of K = ", x.K, " kind ",
             x.kind == Q8Kind::q8_k ? "Q8_K" : "Q8_0", " against ", kformat_name(f), " weights of K = ", K,
             " (need kind ", q8k_kind_for(f) == Q8Kind::q8_k ? "Q8_K" : "Q8_0", ")");
  ATTN_CHECK(0 <= n0 && n0 <= n1 && ldy >= n1, "q8k_dot_rows: need 0 <= n0 <= n1 <= ldy, got ", n0, ", ", n1,
             ", ", ldy);
}

void store(float* y, float v, bool accumulate) { *y = accumulate ? *y + v : v; }
}  // namespace

namespace detail {
void q8k_unpack_int(KFormat f, const std::byte* row, int64_t K, int32_t* q, double* sw, double* tw) {
  const int64_t be = kformat_block_elems(f), bb = kformat_block_bytes(f);
  for (int64_t b = 0; b < K / be; ++b) {
    const std::byte* blk = row + b * bb;
    int32_t* o = q + b * be;
    double* s = sw + b * be / 16;
    double* t = tw + b * be / 16;
    const auto* u = reinterpret_cast<const uint8_t*>(blk);
    switch (f) {
      case KFormat::q8_0: {
        const double d = half(blk);
        for (int i = 0; i < 32; ++i) o[i] = static_cast<int8_t>(u[2 + i]);
        s[0] = s[1] = d;
        t[0] = t[1] = 0;
        break;
      }
      case KFormat::q4_0: {
        const double d = half(blk);
        for (int i = 0; i < 32; ++i) o[i] = i < 16 ? (u[2 + i] & 0xf) : (u[2 + i - 16] >> 4);
        s[0] = s[1] = d;
        t[0] = t[1] = 8 * d;
        break;
      }
      case KFormat::q4_1: {  // value d·q + m: the min enters as -m
        const double d = half(blk), mn = half(blk + 2);
        for (int i = 0; i < 32; ++i) o[i] = i < 16 ? (u[4 + i] & 0xf) : (u[4 + i - 16] >> 4);
        s[0] = s[1] = d;
        t[0] = t[1] = -mn;
        break;
      }
      case KFormat::q5_0: {
        const double d = half(blk);
        uint32_t qh;
        std::memcpy(&qh, blk + 2, 4);
        for (int i = 0; i < 32; ++i) {
          const int lo = i < 16 ? (u[6 + i] & 0xf) : (u[6 + i - 16] >> 4);
          o[i] = lo | static_cast<int>(((qh >> i) & 1u) << 4);
        }
        s[0] = s[1] = d;
        t[0] = t[1] = 16 * d;
        break;
      }
      case KFormat::q4_k:
      case KFormat::q5_k: {
        const bool five = f == KFormat::q5_k;
        const double d = half(blk), dmin = half(blk + 2);
        const uint8_t* sc = u + 4;
        const uint8_t* qh = five ? u + 16 : nullptr;
        const uint8_t* qs = u + (five ? 48 : 16);
        for (int j = 0; j < 8; ++j) {
          int scj, mj;
          k_scale_min(sc, j, &scj, &mj);
          for (int i = 0; i < 32; ++i) {
            int v = (qs[32 * (j / 2) + i] >> (4 * (j % 2))) & 0xf;
            if (five) v |= ((qh[i] >> j) & 1) << 4;
            o[32 * j + i] = v;
          }
          s[2 * j] = s[2 * j + 1] = d * scj;
          t[2 * j] = t[2 * j + 1] = dmin * mj;
        }
        break;
      }
      case KFormat::q6_k: {
        const uint8_t* ql = u;
        const uint8_t* qh = u + 128;
        const auto* sc = reinterpret_cast<const int8_t*>(u + 192);
        const double d = half(blk + 208);
        for (int c = 0; c < 8; ++c) {
          const int h = c / 4, tt = c % 4;
          for (int i = 0; i < 32; ++i) {
            const int lo = (ql[64 * h + 32 * (tt % 2) + i] >> (4 * (tt / 2))) & 0xf;
            const int hi = (qh[32 * h + i] >> (2 * tt)) & 3;
            o[32 * c + i] = lo | (hi << 4);
          }
        }
        for (int g = 0; g < 16; ++g) {
          s[g] = d * sc[g];
          t[g] = 32 * d * sc[g];
        }
        break;
      }
      default:
        break;
    }
  }
}
}  // namespace detail

namespace cpu {
void q8k_quantize(Q8Kind kind, const float* x, int64_t M, int64_t K, int64_t ldx, int8_t* q, float* d,
                  int32_t* bsum) {
  const int64_t B = q8k_block(kind);
  ATTN_CHECK(K > 0 && K % B == 0, "q8k_quantize: K must be a positive multiple of ", B, ", got ", K);
  ATTN_CHECK(M >= 0 && ldx >= K, "q8k_quantize: need M >= 0 and ldx >= K = ", K, ", got M ", M, ", ldx ",
             ldx);
  const int64_t nb = K / B;
  if (active_isa() == Isa::avx512) {
    if (detail::q8k_quantize_avx512(kind, x, M, K, ldx, q, d, bsum)) return;
    // a value that is not finite: the portable loop names its row and block
  }
  for (int64_t m = 0; m < M; ++m) {
    const float* xr = x + m * ldx;
    int8_t* qr = q + m * K;
    for (int64_t b = 0; b < nb; ++b) {
      const float* xb = xr + b * B;
      float amax = 0;
      for (int64_t i = 0; i < B; ++i) {
        const float a = std::fabs(xb[i]);
        ATTN_CHECK(std::isfinite(a), "q8k_quantize: activation row ", m, " block ", b, " is not finite");
        amax = std::max(amax, a);
      }
      float db = amax / 127.0f;
      const float id = db > 0 ? 1.0f / db : 0.0f;
      if (kind == Q8Kind::q8_0) db = round_to_f16(db);
      d[m * nb + b] = db;
      for (int64_t i = 0; i < B; ++i) {
        const float v = std::round(xb[i] * id);
        qr[b * B + i] = static_cast<int8_t>(std::clamp(v, -127.0f, 127.0f));
      }
    }
    for (int64_t g = 0; g < K / 16; ++g) {
      int32_t s = 0;
      for (int i = 0; i < 16; ++i) s += qr[16 * g + i];
      bsum[m * (K / 16) + g] = s;
    }
  }
}

bool q8k_fast() { return active_isa() != Isa::scalar; }

void q8k_dot_rows(KFormat f, const std::byte* w, int64_t n0, int64_t n1, int64_t K, const Q8KRows& x,
                  float* y, int64_t ldy, bool accumulate) {
  const Isa isa = active_isa();
  if (isa == Isa::scalar) {
    ref::q8k_dot_rows(f, w, n0, n1, K, x, y, ldy, accumulate);
    return;
  }
  check(f, n0, n1, K, x, ldy);
  const bool vnni = isa == Isa::avx512 && cpu_has_avx512_vnni();
  const int64_t rb = K / kformat_block_elems(f) * kformat_block_bytes(f);
  if (x.M == 1) {  // decode: the row loop inside the ISA kernel
    if (vnni)
      detail::q8k_rows_m1_vnni(f, w, rb, n0, n1, K, x, y, accumulate);
    else
      detail::q8k_rows_m1_avx2(f, w, rb, n0, n1, K, x, y, accumulate);
    return;
  }
  float out[4];
  for (int64_t n = n0; n < n1; ++n) {
    const std::byte* row = w + n * rb;
    for (int64_t m = 0; m < x.M; m += 4) {
      const int R = static_cast<int>(std::min<int64_t>(4, x.M - m));
      if (vnni)
        detail::q8k_row_vnni(f, row, K, x, m, R, out);
      else
        detail::q8k_row_avx2(f, row, K, x, m, R, out);
      for (int r = 0; r < R; ++r) store(y + (m + r) * ldy + n, out[r], accumulate);
    }
  }
}

void q8k_dot_row_list(KFormat f, const std::byte* w, const int64_t* rows, int64_t count, int64_t K,
                      const Q8KRows& x, float* y) {
  ATTN_CHECK(x.M == 1, "q8k_dot_row_list: expected one activation row, got ", x.M);
  const Isa isa = active_isa();
  if (isa == Isa::scalar) {
    for (int64_t i = 0; i < count; ++i)
      ref::q8k_dot_rows(f, w, rows[i], rows[i] + 1, K, x, y, rows[i] + 1, false);
    return;
  }
  check(f, 0, 0, K, x, 0);
  const int64_t rb = K / kformat_block_elems(f) * kformat_block_bytes(f);
  if (isa == Isa::avx512 && cpu_has_avx512_vnni())
    detail::q8k_row_list_vnni(f, w, rb, rows, count, K, x, y);
  else
    detail::q8k_row_list_avx2(f, w, rb, rows, count, K, x, y);
}
}  // namespace cpu

namespace ref {
void q8k_dot_rows(KFormat f, const std::byte* w, int64_t n0, int64_t n1, int64_t K, const Q8KRows& x,
                  float* y, int64_t ldy, bool accumulate) {
  check(f, n0, n1, K, x, ldy);
  const int64_t rb = K / kformat_block_elems(f) * kformat_block_bytes(f), G = K / 16;
  const int64_t per = q8k_block(x.kind) / 16;  // groups of 16 per activation scale
  std::vector<int32_t> q(K);
  std::vector<double> sw(G), tw(G);
  for (int64_t n = n0; n < n1; ++n) {
    detail::q8k_unpack_int(f, w + n * rb, K, q.data(), sw.data(), tw.data());
    for (int64_t m = 0; m < x.M; ++m) {
      const int8_t* xq = x.q + m * x.ldq;
      double acc = 0;
      for (int64_t g = 0; g < G; ++g) {
        int64_t is = 0;
        for (int i = 0; i < 16; ++i) is += static_cast<int64_t>(q[16 * g + i]) * xq[16 * g + i];
        const double dx = x.d[m * x.ldd + g / per];
        acc += dx * (sw[g] * static_cast<double>(is) - tw[g] * x.bsum[m * x.ldb + g]);
      }
      store(y + m * ldy + n, static_cast<float>(acc), accumulate);
    }
  }
}
}  // namespace ref
}  // namespace attn::kernels
