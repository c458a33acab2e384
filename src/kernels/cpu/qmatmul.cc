// Quantized-weight matrix product: the reference, the portable path and the dispatch.
#include "kernels/cpu/qmatmul.h"

#include <attn/core/error.h>
#include <attn/core/f16.h>
#include <attn/core/parallel.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/cpu/isa.h"

namespace attn::kernels {
namespace {

// The binary16 at p (unaligned) as a float.
float half_to_float(const std::byte* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return f16_to_f32(h);
}

// One block's 32 weights, w[i] = d·q + m (Q4_1) or d·q (Q8_0), in float (the value ggml's dequantize gives).
void unpack_block(QFormat f, const std::byte* b, float* w) {
  const float d = half_to_float(b);
  if (f == QFormat::q4_1) {
    const float m = half_to_float(b + 2);
    const auto* qs = reinterpret_cast<const uint8_t*>(b + 4);
    for (int i = 0; i < 16; ++i) {
      w[i] = static_cast<float>(qs[i] & 0xf) * d + m;
      w[i + 16] = static_cast<float>(qs[i] >> 4) * d + m;
    }
  } else {
    const auto* q = reinterpret_cast<const int8_t*>(b + 2);
    for (int i = 0; i < 32; ++i) w[i] = static_cast<float>(q[i]) * d;
  }
}

void check_args(int64_t K, int64_t M, int64_t ldx, int64_t ldy, int64_t N) {
  ATTN_CHECK(K > 0 && K % kQBlock == 0, "qmatmul: K must be a positive multiple of 32, got ", K);
  ATTN_CHECK(M >= 0 && N >= 0, "qmatmul: M and N must be >= 0, got M=", M, " N=", N);
  ATTN_CHECK(ldx >= K, "qmatmul: ldx must be >= K=", K, ", got ", ldx);
  ATTN_CHECK(ldy >= N, "qmatmul: ldy must be >= N=", N, ", got ", ldy);
}

}  // namespace

namespace ref {
void qmatmul(QFormat f, const std::byte* w, int64_t N, int64_t K, const float* x, int64_t M, int64_t ldx,
             float* y, int64_t ldy) {
  check_args(K, M, ldx, ldy, N);
  const int64_t nb = K / kQBlock, bb = qformat_block_bytes(f);
  for (int64_t m = 0; m < M; ++m) {
    for (int64_t n = 0; n < N; ++n) {
      double acc = 0;
      for (int64_t b = 0; b < nb; ++b) {
        const std::byte* blk = w + (n * nb + b) * bb;
        const double d = half_to_float(blk);
        for (int i = 0; i < 32; ++i) {
          double wv;
          if (f == QFormat::q4_1) {
            const auto q = static_cast<uint8_t>(blk[4 + (i & 15)]);
            wv = d * ((i < 16) ? (q & 0xf) : (q >> 4)) + static_cast<double>(half_to_float(blk + 2));
          } else {
            wv = d * static_cast<int8_t>(blk[2 + i]);
          }
          acc += wv * static_cast<double>(x[m * ldx + b * kQBlock + i]);
        }
      }
      y[m * ldy + n] = static_cast<float>(acc);
    }
  }
}
}  // namespace ref

namespace cpu {
namespace detail {
void qmatmul_rows_scalar(QFormat f, const std::byte* w, int64_t n0, int64_t n1, int64_t K, const float* x,
                         int64_t M, int64_t ldx, float* y, int64_t ldy) {
  const int64_t nb = K / kQBlock, bb = qformat_block_bytes(f);
  float wb[32];
  for (int64_t n = n0; n < n1; ++n) {
    for (int64_t m = 0; m < M; ++m) y[m * ldy + n] = 0.0f;
    for (int64_t b = 0; b < nb; ++b) {
      unpack_block(f, w + (n * nb + b) * bb, wb);
      for (int64_t m = 0; m < M; ++m) {
        const float* xr = x + m * ldx + b * kQBlock;
        float s = 0.0f;
        for (int i = 0; i < 32; ++i) s += wb[i] * xr[i];
        y[m * ldy + n] += s;
      }
    }
  }
}
}  // namespace detail

void qmatmul_rows(QFormat f, const std::byte* w, int64_t n0, int64_t n1, int64_t K, const float* x, int64_t M,
                  int64_t ldx, float* y, int64_t ldy) {
  check_args(K, M, ldx, ldy, n1);
  ATTN_CHECK(0 <= n0 && n0 <= n1, "qmatmul_rows: need 0 <= n0 <= n1, got ", n0, ", ", n1);
  if (active_isa() == Isa::avx512)
    detail::qmatmul_rows_avx512(f, w, n0, n1, K, x, M, ldx, y, ldy);
  else
    detail::qmatmul_rows_scalar(f, w, n0, n1, K, x, M, ldx, y, ldy);
}

void qmatmul(QFormat f, const std::byte* w, int64_t N, int64_t K, const float* x, int64_t M, int64_t ldx,
             float* y, int64_t ldy) {
  check_args(K, M, ldx, ldy, N);
  const bool avx = active_isa() == Isa::avx512;
  // ~16K multiply-adds per chunk at least, so small products do not pay for the pool.
  const int64_t grain = std::max<int64_t>(8, 16384 / std::max<int64_t>(1, K * std::max<int64_t>(M, 1)));
  parallel_for(N, grain, [&](int64_t b, int64_t e, int) {
    if (avx)
      detail::qmatmul_rows_avx512(f, w, b, e, K, x, M, ldx, y, ldy);
    else
      detail::qmatmul_rows_scalar(f, w, b, e, K, x, M, ldx, y, ldy);
  });
}
}  // namespace cpu
}  // namespace attn::kernels
