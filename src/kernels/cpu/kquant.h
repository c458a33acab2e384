// Matrix products and row unpacking for the ggml block formats beyond Q4_1 / Q8_0 (issue 19: the
// K-quants of Gemma 3's GGUF), with f32 activations.
//
//   Y[m, n] = Σ_k X[m, k] · W[n, k]     X f32 [M, K] (row stride ldx), Y f32 [M, N] (row stride ldy)
//
// W is N rows of K / block_elems blocks, each row contiguous (a GGUF tensor of shape [N, K]); the
// block layouts are those of io::dequantize (include/attn/io/gguf.h): Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 (32
// elements) and Q4_K Q5_K Q6_K (256). Each weight row is unpacked to f32 (exactly io::dequantize's
// values: products and sums rounded one at a time, no FMA) into a per-thread buffer in L1, then
// multiplied with the rows of X (AVX-512 or AVX2 FMAs, or a portable loop).
#pragma once

#include <attn/io/gguf.h>

#include <cstddef>
#include <cstdint>

namespace attn::kernels {

enum class KFormat { q4_0, q4_1, q5_0, q5_1, q8_0, q4_k, q5_k, q6_k };

// The 6-bit scale s and min m of sub-block j (0..7) of a Q4_K / Q5_K block, from its 12 packed bytes sc.
// Internal linkage: the ISA bodies inline it, and an ISA object must define no weak symbol
// (tests: isa_objects_define_no_weak_symbols).
namespace {
inline void k_scale_min(const uint8_t* sc, int j, int* s, int* m) {
  if (j < 4) {
    *s = sc[j] & 63;
    *m = sc[j + 4] & 63;
  } else {
    *s = (sc[j + 4] & 0xf) | ((sc[j - 4] >> 6) << 4);
    *m = (sc[j + 4] >> 4) | ((sc[j] >> 6) << 4);
  }
}
}  // namespace

int64_t kformat_block_elems(KFormat f);
int64_t kformat_block_bytes(KFormat f);
const char* kformat_name(KFormat f);
// The GGUF tensor type of the format (io::dequantize reads its blocks).
io::GgmlType kformat_ggml_type(KFormat f);

namespace ref {
// The oracle: every weight as io::dequantize gives it, products summed in double.
// w: [N, K / block_elems blocks], x: [M, K], y: [M, N]
void kquant_matmul(KFormat f, const std::byte* w, int64_t N, int64_t K, const float* x, int64_t M,
                   int64_t ldx, float* y, int64_t ldy);
}  // namespace ref

namespace cpu {
// Rows [n0, n1) of Y (columns n0..n1-1), single-threaded, on the active ISA. K a positive multiple
// of the block size. accumulate: y += the product, else y = it.
void kquant_matmul_rows(KFormat f, const std::byte* w, int64_t n0, int64_t n1, int64_t K, const float* x,
                        int64_t M, int64_t ldx, float* y, int64_t ldy, bool accumulate);
// Rows [n0, n1) of W unpacked to f32: out [n1 - n0, K] (row stride K), bit-identical to io::dequantize.
void kquant_unpack_rows(KFormat f, const std::byte* w, int64_t n0, int64_t n1, int64_t K, float* out);

namespace detail {
// One row of K weights -> out [K]; the ISA variants (false when the format has no vector unpack).
void kquant_unpack_row_scalar(KFormat f, const std::byte* row, int64_t K, float* out);
bool kquant_unpack_row_avx2(KFormat f, const std::byte* row, int64_t K, float* out);
bool kquant_unpack_row_avx512(KFormat f, const std::byte* row, int64_t K, float* out);
// Σ_k wrow[k] · x[m, k] for m < M, written (or added) to y[m · ldy].
void kquant_dots_avx2(const float* wrow, int64_t K, const float* x, int64_t M, int64_t ldx, float* y,
                      int64_t ldy, bool accumulate);
void kquant_dots_avx512(const float* wrow, int64_t K, const float* x, int64_t M, int64_t ldx, float* y,
                        int64_t ldy, bool accumulate);
}  // namespace detail
}  // namespace cpu
}  // namespace attn::kernels
