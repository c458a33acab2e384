// kernels/cpu/q8k_gemm.h: packing, the activation terms and the ISA dispatch.
#include "kernels/cpu/q8k_gemm.h"

#include <attn/core/error.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/cpu/isa.h"

namespace attn::kernels {
namespace {
bool k45(KFormat f) { return f == KFormat::q4_k || f == KFormat::q5_k; }

// The integer offset c of the panels (value = s · (q - c) - o); Q8_0 on the AVX2 kernel keeps the
// signed quants (vpmaddubsw would saturate on [0, 255] x [-127, 127] pairs): c = 0 there.
int32_t offset_of(KFormat f, bool signed_q8) {
  switch (f) {
    case KFormat::q8_0:
      return signed_q8 ? 0 : 128;
    case KFormat::q5_0:
      return 16;
    case KFormat::q6_k:
      return 32;
    default:
      return 0;
  }
}

bool use_vnni() { return cpu::active_isa() == cpu::Isa::avx512 && cpu::cpu_has_avx512_vnni(); }

void check(KFormat f, int64_t N, int64_t K, int64_t p0, int64_t p1) {
  ATTN_CHECK(q8k_supported(f), "q8k_gemm: weight format ", kformat_name(f),
             " has no 8-bit activation product (Q5_0 Q8_0 Q4_K Q5_K Q6_K)");
  ATTN_CHECK(N > 0 && K > 0 && K % kformat_block_elems(f) == 0,
             "q8k_gemm: need N > 0 and K a positive multiple of ", kformat_block_elems(f), " for ",
             kformat_name(f), "; got N ", N, ", K ", K);
  const int64_t np = (N + kQ8PanelRows - 1) / kQ8PanelRows;
  ATTN_CHECK(0 <= p0 && p0 <= p1 && p1 <= np, "q8k_gemm: panels [p0, p1) must lie in [0, ", np, "]; got [",
             p0, ", ", p1, ")");
}
}  // namespace

int64_t q8k_gemm_group(KFormat f) { return f == KFormat::q6_k ? 16 : 32; }
int64_t q8k_gemm_panel_bytes(KFormat f, int64_t K) {
  const int64_t G = K / q8k_gemm_group(f);
  return kQ8PanelRows * K + 2 * G * kQ8PanelRows * static_cast<int64_t>(sizeof(float));
}

namespace cpu {
void q8k_gemm_pack(KFormat f, const std::byte* w, int64_t N, int64_t K, int64_t p0, int64_t p1,
                   std::byte* out) {
  check(f, N, K, p0, p1);
  const int64_t rb = K / kformat_block_elems(f) * kformat_block_bytes(f), gs = q8k_gemm_group(f), G = K / gs;
  const int64_t pb = q8k_gemm_panel_bytes(f, K);
  const int32_t c = offset_of(f, false);  // panels hold q + 128 for Q8_0 on every ISA
  std::vector<int32_t> q(K);
  std::vector<double> sw(K / 16), tw(K / 16);
  for (int64_t p = p0; p < p1; ++p) {
    auto* pq = reinterpret_cast<uint8_t*>(out + (p - p0) * pb);
    float* ps = reinterpret_cast<float*>(pq + kQ8PanelRows * K);
    float* po = ps + G * kQ8PanelRows;
    std::memset(pq, 0, static_cast<std::size_t>(pb));
    for (int64_t r = 0; r < kQ8PanelRows; ++r) {
      const int64_t n = p * kQ8PanelRows + r;
      if (n >= N) break;
      kernels::detail::q8k_unpack_int(f, w + n * rb, K, q.data(), sw.data(), tw.data());
      for (int64_t k = 0; k < K; ++k) {
        const int32_t v = f == KFormat::q8_0 ? q[k] + c : q[k];
        pq[(k / 4) * 64 + r * 4 + k % 4] = static_cast<uint8_t>(v);
      }
      for (int64_t g = 0; g < G; ++g) {
        const int64_t g16 = g * gs / 16;
        ps[g * kQ8PanelRows + r] = static_cast<float>(sw[g16]);
        po[g * kQ8PanelRows + r] = k45(f) ? static_cast<float>(tw[g16]) : 0.0f;
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
