// kernels/cpu/q8k_gemm.h with AVX-512 VNNI: one zmm of 16 weight rows, vpdpbusd with the token's 4
// quants broadcast (the body is q8k_gemm_body.h).
#pragma GCC push_options
#pragma GCC target("avx512vnni")
#include "kernels/cpu/q8k_gemm_body.h"

namespace attn::kernels::cpu::detail {
namespace {
struct GemmVnni {
  using I = __m512i;
  using F = __m512;
  using W = __m512i;
  static constexpr int kMR = 12;
  static constexpr bool kSigned8 = false;
  static W loadw(const uint8_t* p) { return _mm512_loadu_si512(p); }
  // The 32 bytes in both halves (zero-masking forms: the plain ones start from undefined), the
  // upper half shifted by 4 (each byte's high nibble to its low one), then every byte's low nibble.
  static W loadw4(const uint8_t* p) {
    const __m512i v = _mm512_maskz_broadcast_i64x4(static_cast<__mmask8>(0xff),
                                                   _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    const __m512i s =
        _mm512_maskz_srlv_epi64(static_cast<__mmask8>(0xff), v, _mm512_set_epi64(4, 4, 4, 4, 0, 0, 0, 0));
    return _mm512_and_si512(s, _mm512_set1_epi8(0x0f));
  }
  // Bit pair k of byte j (value j + 16 k, in 128-bit lane k) to bits 4-5: lanes 0-2 shift left by 4,
  // 2, 0, lane 3 right by 2 (32-bit shifts: the kept bits never cross a byte).
  static W loadw6(const uint8_t* p) {
    const __m512i t = _mm512_maskz_broadcast_i32x4(static_cast<__mmask16>(0xffff),
                                                   _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 32)));
    __m512i h = _mm512_maskz_sllv_epi32(static_cast<__mmask16>(0xffff), t,
                                        _mm512_set_epi32(0, 0, 0, 0, 0, 0, 0, 0, 2, 2, 2, 2, 4, 4, 4, 4));
    h = _mm512_mask_srli_epi32(h, static_cast<__mmask16>(0xf000), t, 2);
    return _mm512_or_si512(loadw4(p), _mm512_and_si512(h, _mm512_set1_epi8(0x30)));
  }
  // The nibbles, and 16 added under the byte mask of the fifth bits (bit i of the 8 bytes: value i).
  static W loadw5(const uint8_t* p) {
    __mmask64 m;
    std::memcpy(&m, p + 32, 8);
    const W v = loadw4(p);
    return _mm512_mask_add_epi8(v, m, v, _mm512_set1_epi8(0x10));
  }
  static F loadu8(const uint8_t* p) {
    return cvt(_mm512_maskz_cvtepu8_epi32(static_cast<__mmask16>(0xffff),
                                          _mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
  }
  static F loadi8(const int8_t* p) {
    return cvt(_mm512_maskz_cvtepi8_epi32(static_cast<__mmask16>(0xffff),
                                          _mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
  }
  static I bcast_i(const int32_t* p) { return _mm512_set1_epi32(*p); }
  static F loadf(const float* p) { return _mm512_loadu_ps(p); }
  // the zero-masking form (as cvt below)
  static F loadh(const uint16_t* p) {
    return _mm512_maskz_cvtph_ps(static_cast<__mmask16>(0xffff),
                                 _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  static F bcastf(const float* p) { return _mm512_set1_ps(*p); }
  // In asm: GCC 12 gives the intrinsic's accumulator a register of its own and copies it in and out
  // around every vpdpbusd (two moves each, which made the 12-token tile front-end bound); the tied
  // operand keeps each accumulator in place, and the token's 4 quants come as an embedded broadcast.
  template <bool S8>
  static I dot(I acc, W w, const int8_t* x4) {
    asm("vpdpbusd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(w), "m"(*reinterpret_cast<const int32_t*>(x4)));
    return acc;
  }
  // the zero-masking form with every lane (the unmasked one starts from _mm512_undefined_ps, which
  // GCC 12 flags as maybe-uninitialized)
  static F cvt(I v) { return _mm512_maskz_cvtepi32_ps(static_cast<__mmask16>(0xffff), v); }
  static F fma(F a, F b, F c) { return _mm512_fmadd_ps(a, b, c); }
  static F fnma(F a, F b, F c) { return _mm512_fnmadd_ps(a, b, c); }
  static F mul(F a, F b) { return _mm512_mul_ps(a, b); }
  static F zero() { return _mm512_setzero_ps(); }
  static void store(float* y, F v, int valid, bool accumulate) {
    const __mmask16 k =
        valid >= 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << valid) - 1);
    if (accumulate) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(k, y));
    _mm512_mask_storeu_ps(y, k, v);
  }
};
}  // namespace

void q8k_gemm_vnni(const Q8GemmArgs& a) { Q8Gemm<GemmVnni>::run(a); }
}  // namespace attn::kernels::cpu::detail
#pragma GCC pop_options
