// attn's own single-precision matrix product (AVX-512 and AVX2 micro-kernels), so that the speed
// and the result of a product do not depend on which kernel OpenBLAS's CPU detection picks.
//
// sgemm_f32 has exactly the semantics of kernels::cpu::sgemm (gemm.h): row-major,
// C = alpha · op(A) · op(B) + beta · C, fp32 in and out, all four transpose combinations, any
// leading dimensions, beta = 0 never reads C (it may be uninitialised or NaN).
//
// Goto-style blocking: op(B) is packed once per (k, n) block into panels of Nr columns, shared
// by all threads; each thread packs Mr-row panels of op(A) and runs an Mr × Nr register block
// (AVX-512: 12 × 32, 24 zmm accumulators; AVX2: 6 × 16, 12 ymm accumulators; scalar: 4 × 16).
//
// Results are the same bits on every path and for every split: element C[i, j] is
//   acc_b = fma(a[i, k], b[k, j], acc_b) over k in order, within k blocks whose bounds depend
//           on K only (kF32Kc),
//   C = fma(beta_b, C, alpha · acc_b) per k block (beta_b = beta for the first, 1 after; beta = 0:
//       C = alpha · acc_b),
// whatever the instruction set, the thread count or the rows and columns a call is given. That is
// what lets the tests assert bit-identity between the paths and between split and unsplit products.
#pragma once

#include <cstdint>
#include <functional>

namespace attn::kernels::cpu {

void sgemm_f32(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
               int64_t lda,                         // A: [M, K] or, transposed, [K, M]
               const float* B, int64_t ldb,         // B: [K, N] or, transposed, [N, K]
               float beta, float* C, int64_t ldc);  // C: [M, N]

// True when sgemm_f32 runs a vectorised body (the active instruction set is AVX2 or AVX-512);
// otherwise it runs the scalar oracle, correct but slow.
bool f32_gemm_fast();

// sgemm_f32(false, false, ...) with op(B) = B [K, N] given already packed in the layout of
// linear_packed.h (32-column panels over all K rows: packed_b[p · K · 32 + k · 32 + j] = B[k, 32p + j],
// zero past N; 64-byte aligned, as Tensor storage is), as a model packs its weights once at load:
// the product packs only op(A).
// The vectorised paths read that layout: AVX-512 a whole 32-column panel per register block, AVX2 each
// 16-column half (block_p32 below). Call only when f32_gemm_reads_packed_b(); throws attn::Error
// otherwise. The same bits as sgemm_f32(false, false, M, N, K, alpha, A, lda, B, N, beta, C, ldc) on the
// active path.
void sgemm_f32_packed_b(int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
                        const float* packed_b, float beta, float* C, int64_t ldc);
// The same product with a row epilogue: once the last k block of rows [row0, row0 + rows) and
// columns [col0, col0 + cols) is in C, epilogue(row0, rows, col0, cols) runs on the thread that
// wrote them, while they are still in its cache (models/bert.cc: bias + GELU of the FFN, the bias of
// the QKV product). The blocks of one call tile C exactly once; C holds the product when it runs.
using F32GemmEpilogue = std::function<void(int64_t row0, int64_t rows, int64_t col0, int64_t cols)>;
void sgemm_f32_packed_b(int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
                        const float* packed_b, float beta, float* C, int64_t ldc,
                        const F32GemmEpilogue& epilogue);
// True when the active instruction set runs sgemm_f32_packed_b (AVX-512 or AVX2; the scalar oracle
// does not read the panels).
bool f32_gemm_reads_packed_b();
// Rows of op(A) one thread block of sgemm_f32 holds on the active path (12 register-block panels: 144
// rows on AVX-512, 72 on AVX2, 48 scalar): a product reads all of op(B) once per that many rows.
int64_t f32_gemm_row_block_rows();

namespace detail {

enum class F32GemmPath { scalar, avx2, avx512 };

// sgemm_f32 through one path (the tests compare every path with the reference and with each
// other). Throws attn::Error when the path's instruction set is not available here.
void sgemm_f32_path(F32GemmPath path, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K,
                    float alpha, const float* A, int64_t lda,  // A: [M, K] or, transposed, [K, M]
                    const float* B, int64_t ldb,               // B: [K, N] or, transposed, [N, K]
                    float beta, float* C, int64_t ldc);        // C: [M, N]

// Values of k per block (the k blocks are ceil(K / kF32Kc) nearly equal runs). 768 rather than 256:
// K = 384 (MiniLM) in one block instead of two, so C is written once, not read back and rewritten;
// K = 1536 in two blocks of 768, not six of 256 (gemm_f32_bench, 1 thread: MiniLM batch-32 shapes
// 89-98 -> 101-106 GFLOP/s, training shapes unchanged or faster; docs/benchmarks-log/2026-12-01.md, branch
// d15). The A block (144 rows x 768 x 4 bytes = 432 KiB) and one B panel (96 KiB) stay in a 1 MiB L2.
inline constexpr int64_t kF32Kc = 768;

// The packing and register-block functions of one path.
//
// Packed layout: a panel of W columns (W = nr for op(B), mr for op(A)) over kc values of k is
// out[k * W + c] = x[k, c] (0 for columns c >= w). Panel q of a call starts at out + q · kc · W.
struct F32GemmKernels {
  int mr, nr;
  // Element (k, c) at src[k * ld + c] (rows of k contiguous over c). out: [ceil(w/W), kc, W]
  void (*pack_rows)(const float* src, int64_t ld, int kc, int w, int W, float* out);
  // Element (k, c) at src[c * ld + k] (each column contiguous over k). out: [ceil(w/W), kc, W]
  void (*pack_cols)(const float* src, int64_t ld, int kc, int w, int W, float* out);
  // The mr × nr block: acc = Σ_k a[k, r] · b[k, j] (fma, k in order), then for the m × n valid
  // part C = fma(beta, C, alpha · acc) (beta = 0: C = alpha · acc, C not read).
  // a: [kc, mr]  b: [kc, nr]  c: [m, n] with row stride ldc
  void (*block)(int kc, const float* a, const float* b, float* c, int64_t ldc, int m, int n, float alpha,
                float beta);
  // The same block with op(B) read in place (not transposed): row k of the block's columns at
  // b + k · ldb, only columns [0, n) read. For few rows, where packing op(B) would cost as much as
  // the product. The same arithmetic per element as block.
  void (*block_b)(int kc, const float* a, const float* b, int64_t ldb, float* c, int64_t ldc, int m, int n,
                  float alpha, float beta);
  // The same block reading nr columns of a panel in linear_packed.h's layout (sgemm_f32_packed_b): row k
  // at b + k · kF32PackedNr, every column there (zero past N), 32-byte aligned. The same arithmetic per
  // element as block. Null on the scalar path.
  void (*block_p32)(int kc, const float* a, const float* b, float* c, int64_t ldc, int m, int n, float alpha,
                    float beta);
};

// Columns per panel of the pre-packed op(B) (linear_packed.h); nr of every path divides it.
inline constexpr int64_t kF32PackedNr = 32;
// From this many rows of op(A) on, a path whose nr is below kF32PackedNr (AVX2) copies the prepacked
// panels into panels of its own width, as it packs a plain op(B), instead of reading them in place
// (block_p32). AVX2, 1 thread, N 1152, K 384, best of 2 s, in place against a plain op(B) packed by the
// product (what the copy amounts to): 95-98 / 90-92 GFLOP/s at M 256, even at 512, 93-95 / 96-99 at
// 1024, 89-99 / 96-104 at 2048.
inline constexpr int64_t kF32RepackMinRows = 512;

// Most rows for which sgemm_f32 reads a non-transposed op(B) in place instead of packing it.
inline constexpr int64_t kF32InPlaceBMaxRows = 96;
const F32GemmKernels& f32_gemm_scalar_kernels();
const F32GemmKernels& f32_gemm_avx2_kernels();    // only call when AVX2 and FMA are available
const F32GemmKernels& f32_gemm_avx512_kernels();  // only call when AVX-512 is available

}  // namespace detail
}  // namespace attn::kernels::cpu
