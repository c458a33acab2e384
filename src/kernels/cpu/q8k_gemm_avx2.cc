// kernels/cpu/q8k_gemm.h on AVX2: 16 weight rows in two ymm, vpmaddubsw (every pair below 32767 for
// the unsigned quants here: at most 2 · 63 · 127) then vpmaddwd with ones; Q8_0 as signed quants
// with the sign trick (|w| and x · sign(w)), since q + 128 would saturate (the body is q8k_gemm_body.h).
#include "kernels/cpu/q8k_gemm_body.h"
#include "kernels/cpu/vec_avx2.h"

namespace attn::kernels::cpu::detail {
namespace {
struct GemmAvx2 {
  struct I {
    __m256i a, b;
  };
  struct F {
    __m256 a, b;
  };
  using W = I;
  static constexpr int kMR = 3;
  static constexpr bool kSigned8 = true;
  static W loadw(const uint8_t* p) {
    return {_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)),
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 32))};
  }
  static W loadw4(const uint8_t* p) {
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)), m = _mm256_set1_epi8(0x0f);
    return {_mm256_and_si256(v, m), _mm256_and_si256(_mm256_srli_epi16(v, 4), m)};
  }
  // Bit pair k of byte j (value j + 16 k) to bits 4-5: lanes of values 0-15 and 16-31 shift it left
  // by 4 and 2, those of 32-47 and 48-63 right by 0 and 2 (32-bit shifts: the kept bits never cross a
  // byte).
  static W loadw6(const uint8_t* p) {
    const W lo = loadw4(p);
    const __m256i t = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 32)));
    const __m256i m = _mm256_set1_epi8(0x30);
    return {_mm256_or_si256(
                lo.a, _mm256_and_si256(_mm256_sllv_epi32(t, _mm256_setr_epi32(4, 4, 4, 4, 2, 2, 2, 2)), m)),
            _mm256_or_si256(
                lo.b, _mm256_and_si256(_mm256_srlv_epi32(t, _mm256_setr_epi32(0, 0, 0, 0, 2, 2, 2, 2)), m))};
  }
  // The nibbles, and bit 4 from the fifth-bit plane: each 32-bit half (values 0-31, 32-63) spread to a
  // byte per bit, masked to 0x10.
  static __m256i fifth_bits(uint32_t m) {
    return _mm256_and_si256(avx2::expand_bits(m), _mm256_set1_epi8(0x10));
  }
  static W loadw5(const uint8_t* p) {
    const W lo = loadw4(p);
    uint32_t m0, m1;
    std::memcpy(&m0, p + 32, 4);
    std::memcpy(&m1, p + 36, 4);
    return {_mm256_or_si256(lo.a, fifth_bits(m0)), _mm256_or_si256(lo.b, fifth_bits(m1))};
  }
  static F loadu8(const uint8_t* p) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    return {_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(v)),
            _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(v, 8)))};
  }
  static F loadi8(const int8_t* p) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    return {_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(v)),
            _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(v, 8)))};
  }
  static I bcast_i(const int32_t* p) { return {_mm256_set1_epi32(*p), _mm256_set1_epi32(*p)}; }
  static F loadf(const float* p) { return {_mm256_loadu_ps(p), _mm256_loadu_ps(p + 8)}; }
  static F loadh(const uint16_t* p) {
    return {_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))),
            _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 8)))};
  }
  static F bcastf(const float* p) { return {_mm256_set1_ps(*p), _mm256_set1_ps(*p)}; }
  template <bool S8>
  static __m256i dot1(__m256i acc, __m256i w, __m256i x) {
    __m256i p;
    if constexpr (S8) {
      const __m256i ws = _mm256_xor_si256(w, _mm256_set1_epi8(static_cast<char>(0x80)));
      p = _mm256_maddubs_epi16(_mm256_sign_epi8(ws, ws), _mm256_sign_epi8(x, ws));
    } else {
      p = _mm256_maddubs_epi16(w, x);
    }
    return _mm256_add_epi32(acc, _mm256_madd_epi16(p, _mm256_set1_epi16(1)));
  }
  template <bool S8>
  static I dot(I acc, W w, const int8_t* x4) {
    int32_t v;
    std::memcpy(&v, x4, 4);
    const __m256i x = _mm256_set1_epi32(v);
    return {dot1<S8>(acc.a, w.a, x), dot1<S8>(acc.b, w.b, x)};
  }
  static F cvt(I v) { return {_mm256_cvtepi32_ps(v.a), _mm256_cvtepi32_ps(v.b)}; }
  static F fma(F a, F b, F c) { return {_mm256_fmadd_ps(a.a, b.a, c.a), _mm256_fmadd_ps(a.b, b.b, c.b)}; }
  static F fnma(F a, F b, F c) { return {_mm256_fnmadd_ps(a.a, b.a, c.a), _mm256_fnmadd_ps(a.b, b.b, c.b)}; }
  static F mul(F a, F b) { return {_mm256_mul_ps(a.a, b.a), _mm256_mul_ps(a.b, b.b)}; }
  static F zero() { return {_mm256_setzero_ps(), _mm256_setzero_ps()}; }
  static void store(float* y, F v, int valid, bool accumulate) {
    alignas(32) float t[16];
    _mm256_store_ps(t, v.a);
    _mm256_store_ps(t + 8, v.b);
    for (int i = 0; i < valid; ++i) y[i] = accumulate ? y[i] + t[i] : t[i];
  }
};
}  // namespace

void q8k_gemm_avx2(const Q8GemmArgs& a) { Q8Gemm<GemmAvx2>::run(a); }
}  // namespace attn::kernels::cpu::detail
