// The vector body of kernels/cpu/kquant.h, written once over a lane type V (included by
// kquant_avx2.cc with 8 lanes and kquant_avx512.cc with 16). V provides, on int32 lanes I and
// float lanes F of V::N elements:
//   I u8(const uint8_t*), i8(const int8_t*)  (N bytes widened), I iota(int start) (start, start+1, ..)
//   I srl(I, int), srlv(I, I), and_(I, int), or_(I, I), sll(I, int), sub(I, int)
//   F cvt(I), set1(float), mul(F, F), add(F, F), sub(F, F), fma(F, F, F), load(const float*), zero()
//   void store(float*, F), float sum(F)
// Products and sums of the unpack are separate roundings (no FMA): the values equal io::dequantize's.
#pragma once

#include <attn/core/f16.h>

#include <cstring>

#include "kernels/cpu/kquant.h"

namespace attn::kernels::cpu::detail {
namespace {

inline float half_at(const std::byte* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return f16_to_f32(h);
}

template <typename V>
struct KBody {
  using I = typename V::I;
  using F = typename V::F;
  static constexpr int N = V::N;

  // 32 elements from 5-bit (or 4-bit when qh_bits is false) quants of a Q4_0/Q4_1/Q5_0/Q5_1 block.
  static void small_block(const std::byte* blk, bool has_m, bool five, int offset, float* out) {
    const F d = V::set1(half_at(blk));
    const F m = V::set1(has_m ? half_at(blk + 2) : 0.0f);
    const std::byte* p = blk + (has_m ? 4 : 2);
    uint32_t qh = 0;
    if (five) {
      std::memcpy(&qh, p, 4);
      p += 4;
    }
    const auto* qs = reinterpret_cast<const uint8_t*>(p);
    const I qhv = V::set1i(static_cast<int32_t>(qh));
    for (int o = 0; o < 32; o += N) {
      I q = o < 16 ? V::and_(V::u8(qs + o), 0xf) : V::srl(V::u8(qs + o - 16), 4);
      if (five) q = V::or_(q, V::sll(V::and_(V::srlv(qhv, V::iota(o)), 1), 4));
      if (offset) q = V::sub(q, offset);
      const F pq = V::mul(d, V::cvt(q));
      V::store(out + o, has_m ? V::add(pq, m) : pq);
    }
  }

  static void q8_block(const std::byte* blk, float* out) {
    const F d = V::set1(half_at(blk));
    const auto* q = reinterpret_cast<const int8_t*>(blk + 2);
    for (int o = 0; o < 32; o += N) V::store(out + o, V::mul(d, V::cvt(V::i8(q + o))));
  }

  static void k45_block(const std::byte* blk, bool five, float* out) {
    const float d = half_at(blk), dmin = half_at(blk + 2);
    const auto* sc = reinterpret_cast<const uint8_t*>(blk + 4);
    const auto* qh = five ? reinterpret_cast<const uint8_t*>(blk + 16) : nullptr;
    const auto* qs = reinterpret_cast<const uint8_t*>(blk + (five ? 48 : 16));
    for (int j = 0; j < 8; ++j) {
      int s, mn;
      k_scale_min(sc, j, &s, &mn);
      const F dl = V::set1(d * static_cast<float>(s)), ml = V::set1(dmin * static_cast<float>(mn));
      const uint8_t* q = qs + 32 * (j / 2);
      const int shift = 4 * (j % 2);
      for (int o = 0; o < 32; o += N) {
        I v = V::and_(V::srl(V::u8(q + o), shift), 0xf);
        if (five) v = V::or_(v, V::sll(V::and_(V::srl(V::u8(qh + o), j), 1), 4));
        V::store(out + 32 * j + o, V::sub(V::mul(dl, V::cvt(v)), ml));
      }
    }
  }

  static void q6k_block(const std::byte* blk, float* out) {
    const auto* ql = reinterpret_cast<const uint8_t*>(blk);
    const auto* qh = reinterpret_cast<const uint8_t*>(blk + 128);
    const auto* sc = reinterpret_cast<const int8_t*>(blk + 192);
    const float d = half_at(blk + 208);
    for (int g = 0; g < 8; ++g) {
      const int h = g / 4, t = g % 4;
      for (int o = 0; o < 32; o += N) {
        const F dl = V::set1(d * static_cast<float>(sc[8 * h + 2 * t + o / 16]));
        I lo = V::and_(V::srl(V::u8(ql + 64 * h + 32 * (t % 2) + o), 4 * (t / 2)), 0xf);
        I hi = V::sll(V::and_(V::srl(V::u8(qh + 32 * h + o), 2 * t), 3), 4);
        V::store(out + 32 * g + o, V::mul(dl, V::cvt(V::sub(V::or_(lo, hi), 32))));
      }
    }
  }

  static bool unpack_row(KFormat f, const std::byte* row, int64_t K, float* out) {
    const int64_t be = kformat_block_elems(f), bb = kformat_block_bytes(f), nb = K / be;
    for (int64_t b = 0; b < nb; ++b) {
      const std::byte* blk = row + b * bb;
      float* o = out + b * be;
      switch (f) {
        case KFormat::q4_0:
          small_block(blk, false, false, 8, o);
          break;
        case KFormat::q4_1:
          small_block(blk, true, false, 0, o);
          break;
        case KFormat::q5_0:
          small_block(blk, false, true, 16, o);
          break;
        case KFormat::q5_1:
          small_block(blk, true, true, 0, o);
          break;
        case KFormat::q8_0:
          q8_block(blk, o);
          break;
        case KFormat::q4_k:
          k45_block(blk, false, o);
          break;
        case KFormat::q5_k:
          k45_block(blk, true, o);
          break;
        case KFormat::q6_k:
          q6k_block(blk, o);
          break;
      }
    }
    return true;
  }

  // Up to 4 rows of X at a time, 2 accumulators per row.
  static void dots(const float* w, int64_t K, const float* x, int64_t M, int64_t ldx, float* y, int64_t ldy,
                   bool accumulate) {
    int64_t m = 0;
    for (; m + 4 <= M; m += 4) {
      F a0 = V::zero(), a1 = V::zero(), a2 = V::zero(), a3 = V::zero();
      const float* x0 = x + m * ldx;
      for (int64_t k = 0; k < K; k += N) {
        const F wv = V::load(w + k);
        a0 = V::fma(wv, V::load(x0 + k), a0);
        a1 = V::fma(wv, V::load(x0 + ldx + k), a1);
        a2 = V::fma(wv, V::load(x0 + 2 * ldx + k), a2);
        a3 = V::fma(wv, V::load(x0 + 3 * ldx + k), a3);
      }
      const float s[4] = {V::sum(a0), V::sum(a1), V::sum(a2), V::sum(a3)};
      for (int r = 0; r < 4; ++r) y[(m + r) * ldy] = accumulate ? y[(m + r) * ldy] + s[r] : s[r];
    }
    for (; m < M; ++m) {
      F a0 = V::zero(), a1 = V::zero();
      const float* xr = x + m * ldx;
      int64_t k = 0;
      for (; k + 2 * N <= K; k += 2 * N) {
        a0 = V::fma(V::load(w + k), V::load(xr + k), a0);
        a1 = V::fma(V::load(w + k + N), V::load(xr + k + N), a1);
      }
      for (; k < K; k += N) a0 = V::fma(V::load(w + k), V::load(xr + k), a0);
      const float s = V::sum(V::add(a0, a1));
      y[m * ldy] = accumulate ? y[m * ldy] + s : s;
    }
  }
};

}  // namespace
}  // namespace attn::kernels::cpu::detail
