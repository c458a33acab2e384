// kernels/cpu/q8k_gemm.h: packing, the activation terms and the ISA dispatch.
#include "kernels/cpu/q8k_gemm.h"

#include <attn/core/error.h>
#include <attn/core/f16.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/cpu/isa.h"

namespace attn::kernels {
namespace {

// The integer offset c of the panels (value = s · (q - c) - o); Q8_0 on the AVX2 kernel keeps the
// signed quants (vpmaddubsw would saturate on [0, 255] x [-127, 127] pairs): c = 0 there.
int32_t offset_of(KFormat f, bool signed_q8) {
  switch (f) {
    case KFormat::q8_0:
      return signed_q8 ? 0 : 128;
    case KFormat::q4_0:
      return 8;
    case KFormat::q5_0:
      return 16;
    case KFormat::q6_k:
      return 32;
    default:
      return 0;
  }
}

float half(const std::byte* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return f16_to_f32(h);
}

// One stored row -> its unsigned quants q[K] (Q8_0: q + 128) and the per-group scale s[G] and min o[G]
// (Q4_1, Q4_K, Q5_K; else 0) of the panels. Every scale is an f16 times a small integer: exact in f32, the
// same values kernels::detail::q8k_unpack_int gives in double.
void pack_row(KFormat f, const std::byte* row, int64_t K, uint8_t* q, float* s, float* o) {
  const auto* u = reinterpret_cast<const uint8_t*>(row);
  switch (f) {
    case KFormat::q8_0:
      for (int64_t b = 0; b < K / 32; ++b, u += 34) {
        s[b] = half(reinterpret_cast<const std::byte*>(u)), o[b] = 0;
        for (int i = 0; i < 32; ++i) q[32 * b + i] = static_cast<uint8_t>(u[2 + i] ^ 0x80u);
      }
      break;
    case KFormat::q4_0:
      for (int64_t b = 0; b < K / 32; ++b, u += 18) {
        s[b] = half(reinterpret_cast<const std::byte*>(u)), o[b] = 0;
        for (int i = 0; i < 16; ++i) {
          q[32 * b + i] = static_cast<uint8_t>(u[2 + i] & 0xf);
          q[32 * b + 16 + i] = static_cast<uint8_t>(u[2 + i] >> 4);
        }
      }
      break;
    case KFormat::q4_1:  // value d·q + m: the min enters as -m
      for (int64_t b = 0; b < K / 32; ++b, u += 20) {
        s[b] = half(reinterpret_cast<const std::byte*>(u)),
        o[b] = -half(reinterpret_cast<const std::byte*>(u + 2));
        for (int i = 0; i < 16; ++i) {
          q[32 * b + i] = static_cast<uint8_t>(u[4 + i] & 0xf);
          q[32 * b + 16 + i] = static_cast<uint8_t>(u[4 + i] >> 4);
        }
      }
      break;
    case KFormat::q5_0:
      for (int64_t b = 0; b < K / 32; ++b, u += 22) {
        s[b] = half(reinterpret_cast<const std::byte*>(u)), o[b] = 0;
        uint32_t qh;
        std::memcpy(&qh, u + 2, 4);
        for (int i = 0; i < 16; ++i) {
          q[32 * b + i] = static_cast<uint8_t>((u[6 + i] & 0xf) | (((qh >> i) & 1u) << 4));
          q[32 * b + 16 + i] = static_cast<uint8_t>((u[6 + i] >> 4) | (((qh >> (16 + i)) & 1u) << 4));
        }
      }
      break;
    case KFormat::q4_k:
    case KFormat::q5_k: {
      const bool five = f == KFormat::q5_k;
      for (int64_t b = 0; b < K / 256; ++b, u += five ? 176 : 144) {
        const float d = half(reinterpret_cast<const std::byte*>(u)),
                    dmin = half(reinterpret_cast<const std::byte*>(u + 2));
        const uint8_t* sc = u + 4;
        const uint8_t* qh = five ? u + 16 : nullptr;
        const uint8_t* qs = u + (five ? 48 : 16);
        for (int j = 0; j < 8; ++j) {
          int scj, mj;
          k_scale_min(sc, j, &scj, &mj);
          s[8 * b + j] = d * static_cast<float>(scj);
          o[8 * b + j] = dmin * static_cast<float>(mj);
          uint8_t* out = q + 256 * b + 32 * j;
          const int sh = 4 * (j % 2);
          for (int i = 0; i < 32; ++i) {
            int v = (qs[32 * (j / 2) + i] >> sh) & 0xf;
            if (five) v |= ((qh[i] >> j) & 1) << 4;
            out[i] = static_cast<uint8_t>(v);
          }
        }
      }
      break;
    }
    case KFormat::q6_k:
      for (int64_t b = 0; b < K / 256; ++b, u += 210) {
        const uint8_t* ql = u;
        const uint8_t* qh = u + 128;
        const auto* sc = reinterpret_cast<const int8_t*>(u + 192);
        const float d = half(reinterpret_cast<const std::byte*>(u + 208));
        for (int c = 0; c < 8; ++c) {
          const int h = c / 4, tt = c % 4;
          uint8_t* out = q + 256 * b + 32 * c;
          for (int i = 0; i < 32; ++i) {
            const int lo = (ql[64 * h + 32 * (tt % 2) + i] >> (4 * (tt / 2))) & 0xf;
            const int hi = (qh[32 * h + i] >> (2 * tt)) & 3;
            out[i] = static_cast<uint8_t>(lo | (hi << 4));
          }
        }
        for (int g = 0; g < 16; ++g) s[16 * b + g] = d * static_cast<float>(sc[g]), o[16 * b + g] = 0;
      }
      break;
    default:
      break;
  }
}

// Q4_K / Q5_K / Q6_K (q8k_gemm_int_scales): the blocks' integer scale (and min) of each group and the
// f16 bits of their multipliers d (and dmin) per block of 256, as stored.
void pack_int_scales(KFormat f, const std::byte* row, int64_t K, uint8_t* sc, uint8_t* mn, uint16_t* d,
                     uint16_t* dm) {
  const auto* u = reinterpret_cast<const uint8_t*>(row);
  for (int64_t b = 0; b < K / 256; ++b) {
    if (f == KFormat::q4_k || f == KFormat::q5_k) {  // the same scale bytes, 144 or 176 per block
      const uint8_t* blk = u + (f == KFormat::q4_k ? 144 : 176) * b;
      std::memcpy(d + b, blk, 2);
      std::memcpy(dm + b, blk + 2, 2);
      for (int j = 0; j < 8; ++j) {
        int scj, mj;
        k_scale_min(blk + 4, j, &scj, &mj);
        sc[8 * b + j] = static_cast<uint8_t>(scj);
        mn[8 * b + j] = static_cast<uint8_t>(mj);
      }
    } else {  // Q6_K: signed scales, kept as their bytes
      const uint8_t* blk = u + 210 * b;
      std::memcpy(d + b, blk + 208, 2);
      std::memcpy(sc + 16 * b, blk + 192, 16);
    }
  }
}

bool use_vnni() { return cpu::active_isa() == cpu::Isa::avx512 && cpu::cpu_has_avx512_vnni(); }

void check(KFormat f, int64_t N, int64_t K, int64_t p0, int64_t p1) {
  ATTN_CHECK(q8k_supported(f), "q8k_gemm: weight format ", kformat_name(f),
             " has no 8-bit activation product (Q4_0 Q4_1 Q5_0 Q8_0 Q4_K Q5_K Q6_K)");
  ATTN_CHECK(N > 0 && K > 0 && K % kformat_block_elems(f) == 0,
             "q8k_gemm: need N > 0 and K a positive multiple of ", kformat_block_elems(f), " for ",
             kformat_name(f), "; got N ", N, ", K ", K);
  const int64_t np = (N + kQ8PanelRows - 1) / kQ8PanelRows;
  ATTN_CHECK(0 <= p0 && p0 <= p1 && p1 <= np, "q8k_gemm: panels [p0, p1) must lie in [0, ", np, "]; got [",
             p0, ", ", p1, ")");
}
}  // namespace

int64_t q8k_gemm_group(KFormat f) { return f == KFormat::q6_k ? 16 : 32; }
bool q8k_gemm_has_mins(KFormat f) { return f == KFormat::q4_1 || f == KFormat::q4_k || f == KFormat::q5_k; }
bool q8k_gemm_half_scales(KFormat f) {
  return f == KFormat::q8_0 || f == KFormat::q4_0 || f == KFormat::q4_1 || f == KFormat::q5_0;
}
bool q8k_gemm_nibbles(KFormat f) { return f == KFormat::q4_0 || f == KFormat::q4_1 || f == KFormat::q4_k; }
bool q8k_gemm_six_bits(KFormat f) { return f == KFormat::q6_k; }
bool q8k_gemm_five_bits(KFormat f) { return f == KFormat::q5_0 || f == KFormat::q5_k; }
bool q8k_gemm_int_scales(KFormat f) { return f == KFormat::q4_k || f == KFormat::q5_k || f == KFormat::q6_k; }
Q8PanelLayout q8k_gemm_layout(KFormat f, int64_t K) {
  const int64_t R = kQ8PanelRows, G = K / q8k_gemm_group(f);
  const int64_t per_scale = q8k_gemm_int_scales(f) ? 1 : q8k_gemm_half_scales(f) ? 2 : 4;
  const int64_t mults = q8k_gemm_int_scales(f) ? K / 256 * R * 2 : 0;  // the f16 d (and dmin) per 256
  const bool mins = q8k_gemm_has_mins(f);
  Q8PanelLayout l{};
  l.scales = K / 4 *
             (q8k_gemm_six_bits(f)    ? 48
              : q8k_gemm_five_bits(f) ? 40
              : q8k_gemm_nibbles(f)   ? 32
                                      : 64);  // the quants' bytes
  l.mins = l.scales + G * R * per_scale;
  l.d = l.mins + (mins ? G * R * per_scale : 0);
  l.dmin = l.d + mults;
  l.bytes = l.dmin + (mins ? mults : 0);
  return l;
}
int64_t q8k_gemm_panel_bytes(KFormat f, int64_t K) { return q8k_gemm_layout(f, K).bytes; }

namespace cpu {
void q8k_gemm_pack(KFormat f, const std::byte* w, int64_t N, int64_t K, int64_t p0, int64_t p1,
                   std::byte* out) {
  check(f, N, K, p0, p1);
  const int64_t rb = K / kformat_block_elems(f) * kformat_block_bytes(f), gs = q8k_gemm_group(f), G = K / gs;
  const Q8PanelLayout lay = q8k_gemm_layout(f, K);
  const int64_t pb = lay.bytes;
  // nibbles: Q4_0 / Q4_1 / Q4_K's quants, and the low four bits of Q5_0 / Q5_K / Q6_K (their high bit or
  // bit pairs follow each step's nibbles)
  const bool mins = q8k_gemm_has_mins(f), half_scales = q8k_gemm_half_scales(f), six = q8k_gemm_six_bits(f),
             five = q8k_gemm_five_bits(f), nibbles = q8k_gemm_nibbles(f) || six || five,
             int_scales = q8k_gemm_int_scales(f);
  const int64_t step = lay.scales / (K / 4), NB = K / 256;
  std::vector<uint8_t> q(K), sci(G), mni(G);
  std::vector<uint16_t> dh(NB), dmh(NB);
  std::vector<float> sv(G), ov(G);
  for (int64_t p = p0; p < p1; ++p) {
    auto* pq = reinterpret_cast<uint8_t*>(out + (p - p0) * pb);
    uint8_t* ps = pq + lay.scales;  // f32, f16 or byte scales, by the format
    uint8_t* pm = pq + lay.mins;
    auto* pd = reinterpret_cast<uint16_t*>(pq + lay.d);
    auto* pdm = reinterpret_cast<uint16_t*>(pq + lay.dmin);
    // Rows past N: 0; nibbles are or-ed into their bytes.
    if ((p + 1) * kQ8PanelRows > N || nibbles) std::memset(pq, 0, static_cast<std::size_t>(pb));
    for (int64_t r = 0; r < kQ8PanelRows; ++r) {
      const int64_t n = p * kQ8PanelRows + r;
      if (n >= N) break;
      pack_row(f, w + n * rb, K, q.data(), sv.data(), ov.data());
      // step k4's 64 values: value i (row i / 4, k i % 4) in byte i % 32, low or high; Q6_K's high bit
      // pair in byte 32 + i % 16, bits 2 (i / 16) and up; Q5_0 / Q5_K's fifth bit in bit i % 8 of byte
      // 32 + i / 8
      if (nibbles)
        for (int64_t k4 = 0; k4 < K / 4; ++k4)
          for (int j = 0; j < 4; ++j) {
            const int i = static_cast<int>(r) * 4 + j;
            const int v = q[4 * k4 + j];
            pq[k4 * step + i % 32] |= static_cast<uint8_t>(i < 32 ? v & 0xf : (v & 0xf) << 4);
            if (six) pq[k4 * step + 32 + i % 16] |= static_cast<uint8_t>((v >> 4) << (2 * (i / 16)));
            if (five) pq[k4 * step + 32 + i / 8] |= static_cast<uint8_t>(((v >> 4) & 1) << (i % 8));
          }
      else
        for (int64_t k4 = 0; k4 < K / 4; ++k4) std::memcpy(pq + k4 * 64 + r * 4, q.data() + 4 * k4, 4);
      if (int_scales) {
        pack_int_scales(f, w + n * rb, K, sci.data(), mni.data(), dh.data(), dmh.data());
        for (int64_t g = 0; g < G; ++g) ps[g * kQ8PanelRows + r] = sci[g];
        for (int64_t b = 0; b < NB; ++b) pd[b * kQ8PanelRows + r] = dh[b];
        if (mins) {
          for (int64_t g = 0; g < G; ++g) pm[g * kQ8PanelRows + r] = mni[g];
          for (int64_t b = 0; b < NB; ++b) pdm[b * kQ8PanelRows + r] = dmh[b];
        }
      } else if (half_scales) {  // the f16 each scale (and Q4_1's -m) came from: exact both ways
        for (int64_t g = 0; g < G; ++g)
          reinterpret_cast<uint16_t*>(ps)[g * kQ8PanelRows + r] = f32_to_f16(sv[g]);
        if (mins)
          for (int64_t g = 0; g < G; ++g)
            reinterpret_cast<uint16_t*>(pm)[g * kQ8PanelRows + r] = f32_to_f16(ov[g]);
      } else {
        for (int64_t g = 0; g < G; ++g) reinterpret_cast<float*>(ps)[g * kQ8PanelRows + r] = sv[g];
        if (mins)
          for (int64_t g = 0; g < G; ++g) reinterpret_cast<float*>(pm)[g * kQ8PanelRows + r] = ov[g];
      }
    }
  }
}

void q8k_gemm_terms(KFormat f, const Q8KRows& x, Q8GemmTerms* t) {
  ATTN_CHECK(q8k_supported(f) && x.kind == q8k_kind_for(f) && x.K > 0 && x.K % kformat_block_elems(f) == 0,
             "q8k_gemm_terms: activations of K = ", x.K, " kind ", x.kind == Q8Kind::q8_k ? "Q8_K" : "Q8_0",
             " do not fit ", kformat_name(f), " weights");
  const int64_t gs = q8k_gemm_group(f), G = x.K / gs, B = q8k_block(x.kind), per = gs / 16;
  const int32_t c = offset_of(f, !use_vnni());
  t->G = G;
  t->signed_q8 = f == KFormat::q8_0 && !use_vnni();
  t->off.resize(static_cast<std::size_t>(x.M * G));
  t->dx.resize(static_cast<std::size_t>(x.M * G));
  t->mn.resize(static_cast<std::size_t>(x.M * G));
  for (int64_t m = 0; m < x.M; ++m)
    for (int64_t g = 0; g < G; ++g) {
      int32_t s = 0;
      for (int64_t i = 0; i < per; ++i) s += x.bsum[m * x.ldb + g * per + i];
      const float d = x.d[m * x.ldd + g * gs / B];
      t->off[m * G + g] = -c * s;
      t->dx[m * G + g] = d;
      t->mn[m * G + g] = d * static_cast<float>(s);
    }
}

void q8k_gemm_panels(KFormat f, const std::byte* panels, const std::byte* w_blocks, int64_t N, int64_t K,
                     int64_t p0, int64_t p1, const Q8KRows& x, const Q8GemmTerms& terms, float* y,
                     int64_t ldy, bool accumulate) {
  check(f, N, K, p0, p1);
  ATTN_CHECK(x.K == K && x.kind == q8k_kind_for(f) && terms.G == K / q8k_gemm_group(f) &&
                 static_cast<int64_t>(terms.dx.size()) >= x.M * terms.G,
             "q8k_gemm_panels: activations of K = ", x.K, " (", x.M, " rows, terms for ",
             terms.G ? static_cast<int64_t>(terms.dx.size()) / terms.G : 0, ") against ", kformat_name(f),
             " weights of K = ", K);
  ATTN_CHECK(ldy >= N, "q8k_gemm_panels: ldy ", ldy, " < N ", N);
  ATTN_CHECK(terms.signed_q8 == (f == KFormat::q8_0 && !use_vnni()),
             "q8k_gemm_panels: the activation terms were made for another ISA (q8k_gemm_terms after "
             "force_isa)");
  if (p0 == p1 || x.M == 0) return;
  const int64_t n0 = p0 * kQ8PanelRows, n1 = std::min(N, p1 * kQ8PanelRows);
  const Isa isa = active_isa();
  if (isa == Isa::scalar) {
    ref::q8k_dot_rows(f, w_blocks, n0, n1, K, x, y, ldy, accumulate);
    return;
  }
  const detail::Q8GemmArgs a{f,   panels,    q8k_gemm_panel_bytes(f, K), p1 - p0, N, n0, K, &x, &terms, y,
                             ldy, accumulate};
  if (use_vnni())
    detail::q8k_gemm_vnni(a);
  else
    detail::q8k_gemm_avx2(a);
}
}  // namespace cpu
}  // namespace attn::kernels
