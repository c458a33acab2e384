// Int8-activation dot products: repacking, the double reference, the portable path and the dispatch.
#include "kernels/cpu/qdot.h"

#include <attn/core/error.h>
#include <attn/core/f16.h>
#include <attn/core/parallel.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/cpu/isa.h"

namespace attn::kernels {
namespace {

uint16_t load_u16(const std::byte* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return h;
}

// The 4-bit quant of element j (0..31) of a Q4_1 block.
uint8_t q4_of(const std::byte* blk, int j) {
  const auto b = static_cast<uint8_t>(blk[4 + (j & 15)]);
  return j < 16 ? (b & 0xf) : (b >> 4);
}

void check_dot_args(int64_t K, int64_t M, int64_t N, int64_t ldy, const Q8RowsConst& x) {
  ATTN_CHECK(K > 0 && K % kQBlock == 0, "qdot: K must be a positive multiple of 32, got ", K);
  ATTN_CHECK(M >= 0 && N >= 0, "qdot: M and N must be >= 0, got M=", M, " N=", N);
  ATTN_CHECK(ldy >= N, "qdot: ldy must be >= N=", N, ", got ", ldy);
  const int64_t nbp = q8_padded_blocks(K);
  ATTN_CHECK(M <= 1 || (x.ldq >= nbp * kQBlock && x.ldb >= nbp), "qdot: activation strides ldq=", x.ldq,
             ", ldb=", x.ldb, " must be >= ", nbp * kQBlock, " and ", nbp);
}

}  // namespace

void qdot_pack(QFormat f, const std::byte* w, int64_t N, int64_t K, std::byte* out) {
  ATTN_CHECK(K > 0 && K % kQBlock == 0, "qdot_pack: K must be a positive multiple of 32, got ", K);
  const int64_t nb = K / kQBlock, nbp = q8_padded_blocks(K), bb = qformat_block_bytes(f);
  const int64_t rb = qdot_row_bytes(f, K);
  for (int64_t n = 0; n < N; ++n) {
    const std::byte* src = w + n * nb * bb;
    std::byte* dst = out + n * rb;
    std::memset(dst, 0, rb);
    for (int64_t b = 0; b < nb; ++b) std::memcpy(dst + 2 * b, src + b * bb, 2);  // d
    if (f == QFormat::q4_1) {
      for (int64_t b = 0; b < nb; ++b) std::memcpy(dst + 2 * nbp + 2 * b, src + b * bb + 2, 2);  // m
      auto* qs = reinterpret_cast<uint8_t*>(dst + 4 * nbp);
      for (int64_t b = 0; b < nb; ++b) {
        const std::byte* blk = src + b * bb;
        uint8_t* pair = qs + (b / 2) * 32;
        const int shift = (b % 2) * 4;
        for (int j = 0; j < 32; ++j) pair[j] |= static_cast<uint8_t>(q4_of(blk, j) << shift);
      }
    } else {
      auto* qs = reinterpret_cast<uint8_t*>(dst + 2 * nbp);
      for (int64_t b = 0; b < nbp; ++b)
        for (int j = 0; j < 32; ++j)
          qs[b * 32 + j] =
              b < nb ? static_cast<uint8_t>(static_cast<int8_t>(src[b * bb + 2 + j]) + 128) : 128;
    }
  }
}

void qdot_unpack(QFormat f, const std::byte* packed, int64_t N, int64_t K, float* out) {
  const int64_t nb = K / kQBlock, nbp = q8_padded_blocks(K), rb = qdot_row_bytes(f, K);
  for (int64_t n = 0; n < N; ++n) {
    const std::byte* row = packed + n * rb;
    for (int64_t b = 0; b < nb; ++b) {
      const float d = f16_to_f32(load_u16(row + 2 * b));
      float* o = out + n * K + b * kQBlock;
      if (f == QFormat::q4_1) {
        const float m = f16_to_f32(load_u16(row + 2 * nbp + 2 * b));
        const auto* pair = reinterpret_cast<const uint8_t*>(row + 4 * nbp) + (b / 2) * 32;
        for (int j = 0; j < 32; ++j) o[j] = static_cast<float>((pair[j] >> ((b % 2) * 4)) & 0xf) * d + m;
      } else {
        const auto* q = reinterpret_cast<const uint8_t*>(row + 2 * nbp) + b * 32;
        for (int j = 0; j < 32; ++j) o[j] = static_cast<float>(static_cast<int>(q[j]) - 128) * d;
      }
    }
  }
}

namespace {
// Σ over the blocks of one packed weight row and one quantized row, terms in double or float.
template <typename T>
T row_dot(QFormat f, const std::byte* row, int64_t K, const int8_t* q, const float* d, const float* s) {
  const int64_t nb = K / kQBlock, nbp = q8_padded_blocks(K);
  T acc = 0;
  for (int64_t b = 0; b < nb; ++b) {
    const T dw = f16_to_f32(load_u16(row + 2 * b));
    int32_t isum = 0;
    if (f == QFormat::q4_1) {
      const auto* pair = reinterpret_cast<const uint8_t*>(row + 4 * nbp) + (b / 2) * 32;
      const int shift = (b % 2) * 4;
      for (int j = 0; j < 32; ++j) isum += ((pair[j] >> shift) & 0xf) * q[b * 32 + j];
      const T mw = f16_to_f32(load_u16(row + 2 * nbp + 2 * b));
      acc += dw * static_cast<T>(d[b]) * static_cast<T>(isum) + mw * static_cast<T>(s[b]);
    } else {
      const auto* qw = reinterpret_cast<const uint8_t*>(row + 2 * nbp) + b * 32;
      for (int j = 0; j < 32; ++j) isum += (static_cast<int>(qw[j]) - 128) * q[b * 32 + j];
      acc += dw * static_cast<T>(d[b]) * static_cast<T>(isum);
    }
  }
  return acc;
}
}  // namespace

namespace ref {
void qdot_matmul(QFormat f, const std::byte* packed, int64_t N, int64_t K, Q8RowsConst x, int64_t M, float* y,
                 int64_t ldy) {
  check_dot_args(K, M, N, ldy, x);
  const int64_t rb = qdot_row_bytes(f, K);
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n)
      y[m * ldy + n] = static_cast<float>(
          row_dot<double>(f, packed + n * rb, K, x.q + m * x.ldq, x.d + m * x.ldb, x.s + m * x.ldb));
}
}  // namespace ref

namespace cpu {
namespace detail {
void quantize_q8_scalar(const float* x, int64_t K, int8_t* q, float* d, float* s, float* sum) {
  const int64_t nb = K / kQBlock, nbp = q8_padded_blocks(K);
  for (int64_t b = 0; b < nb; ++b) {
    const float* xb = x + b * kQBlock;
    float amax = 0;
    for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(xb[i]));
    const float db = amax / 127.0f, id = amax != 0.0f ? 127.0f / amax : 0.0f;
    int32_t isum = 0;
    for (int i = 0; i < 32; ++i) {
      const auto v = static_cast<int8_t>(std::nearbyint(xb[i] * id));
      q[b * kQBlock + i] = v;
      isum += v;
    }
    d[b] = round_to_f16(db);
    s[b] = round_to_f16(db * static_cast<float>(isum));
    sum[b] = static_cast<float>(isum);
  }
  for (int64_t b = nb; b < nbp; ++b) {
    std::memset(q + b * kQBlock, 0, kQBlock);
    d[b] = s[b] = sum[b] = 0.0f;
  }
}

void qdot_rows_scalar(QFormat f, const std::byte* packed, int64_t n0, int64_t n1, int64_t K, Q8RowsConst x,
                      int64_t M, float* y, int64_t ldy, bool accumulate) {
  const int64_t rb = qdot_row_bytes(f, K);
  for (int64_t n = n0; n < n1; ++n)
    for (int64_t m = 0; m < M; ++m) {
      const float v =
          row_dot<float>(f, packed + n * rb, K, x.q + m * x.ldq, x.d + m * x.ldb, x.s + m * x.ldb);
      y[m * ldy + n] = accumulate ? y[m * ldy + n] + v : v;
    }
}
}  // namespace detail

bool qdot_vnni_active() { return active_isa() == Isa::avx512 && cpu_has_avx512_vnni(); }

QdotKernel qdot_kernel() {
  if (qdot_vnni_active()) return QdotKernel::vnni;
  if (active_isa() != Isa::scalar) return QdotKernel::avx2;  // AVX2, or AVX-512 without VNNI
  return QdotKernel::scalar;
}

namespace detail {
namespace {
void rows_with(QdotKernel k, QFormat f, const std::byte* packed, int64_t n0, int64_t n1, int64_t K,
               Q8RowsConst x, int64_t M, float* y, int64_t ldy, bool accumulate) {
  if (k == QdotKernel::vnni)
    qdot_rows_vnni(f, packed, n0, n1, K, x, M, y, ldy, accumulate);
  else if (k == QdotKernel::avx2)
    qdot_rows_avx2(f, packed, n0, n1, K, x, M, y, ldy, accumulate);
  else
    qdot_rows_scalar(f, packed, n0, n1, K, x, M, y, ldy, accumulate);
}
}  // namespace

// The kernels walk weight rows outside and activation rows inside. With many activation rows (a
// prompt pass) all of them no longer fit in the core's L2 and would stream from L3 once per weight
// row, so the product is cut into tiles of about kXBytes of activation rows by kWBytes of weight rows,
// each done by the kernel as a whole. Every y[m, n] is still one call's sum over all of K, formed the
// same way: the tiles change where the operands come from, never a result's bits.
void qdot_rows_with(QdotKernel k, QFormat f, const std::byte* packed, int64_t n0, int64_t n1, int64_t K,
                    Q8RowsConst x, int64_t M, float* y, int64_t ldy, bool accumulate) {
  constexpr int64_t kXBytes = 96 * 1024, kWBytes = 64 * 1024;
  const int64_t xrow = x.ldq + 3 * x.ldb * static_cast<int64_t>(sizeof(float));
  const int64_t mt = std::max<int64_t>(4, kXBytes / xrow / 4 * 4);
  if (M <= mt) return rows_with(k, f, packed, n0, n1, K, x, M, y, ldy, accumulate);
  const int64_t nt = std::max<int64_t>(1, kWBytes / qdot_row_bytes(f, K));
  for (int64_t nb = n0; nb < n1; nb += nt) {
    const int64_t ne = std::min(n1, nb + nt);
    for (int64_t mb = 0; mb < M; mb += mt) {
      const Q8RowsConst xs(x.q + mb * x.ldq, x.d + mb * x.ldb, x.s + mb * x.ldb, x.sum + mb * x.ldb, x.ldq,
                           x.ldb);
      rows_with(k, f, packed, nb, ne, K, xs, std::min(mt, M - mb), y + mb * ldy, ldy, accumulate);
    }
  }
}
}  // namespace detail

void quantize_q8(const float* x, int64_t M, int64_t K, int64_t ldx, Q8Rows out) {
  ATTN_CHECK(K > 0 && K % kQBlock == 0, "quantize_q8: K must be a positive multiple of 32, got ", K);
  ATTN_CHECK(ldx >= K, "quantize_q8: ldx must be >= K=", K, ", got ", ldx);
  const Isa isa = active_isa();
  for (int64_t m = 0; m < M; ++m) {
    int8_t* q = out.q + m * out.ldq;
    float *d = out.d + m * out.ldb, *s = out.s + m * out.ldb, *sum = out.sum + m * out.ldb;
    if (isa == Isa::avx512)
      detail::quantize_q8_avx512(x + m * ldx, K, q, d, s, sum);
    else if (isa == Isa::avx2)
      detail::quantize_q8_avx2(x + m * ldx, K, q, d, s, sum);
    else
      detail::quantize_q8_scalar(x + m * ldx, K, q, d, s, sum);
  }
}

void qdot_rows(QFormat f, const std::byte* packed, int64_t n0, int64_t n1, int64_t K, Q8RowsConst x,
               int64_t M, float* y, int64_t ldy, bool accumulate) {
  check_dot_args(K, M, n1, ldy, x);
  ATTN_CHECK(0 <= n0 && n0 <= n1, "qdot_rows: need 0 <= n0 <= n1, got ", n0, ", ", n1);
  detail::qdot_rows_with(qdot_kernel(), f, packed, n0, n1, K, x, M, y, ldy, accumulate);
}

void qdot_matmul(QFormat f, const std::byte* packed, int64_t N, int64_t K, Q8RowsConst x, int64_t M, float* y,
                 int64_t ldy, bool accumulate) {
  check_dot_args(K, M, N, ldy, x);
  const QdotKernel k = qdot_kernel();
  const int64_t grain = std::max<int64_t>(16, 32768 / std::max<int64_t>(1, K * std::max<int64_t>(M, 1)));
  parallel_for(N, grain, [&](int64_t b, int64_t e, int) {
    detail::qdot_rows_with(k, f, packed, b, e, K, x, M, y, ldy, accumulate);
  });
}
}  // namespace cpu
}  // namespace attn::kernels
