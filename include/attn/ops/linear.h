// The fast paths of the matrix product, beside the differentiable attn::linear / attn::matmul
// (include/attn/ops/basic.h, which itself picks the small-M kernel or the threaded BLAS split).
//
// Everything here is INFERENCE ONLY: NO AUTOGRAD (inference_linear falls back to attn::linear, and
// its autograd, whenever grad mode is on). Arguments are validated (attn::Error with the expected
// and the actual values); the raw-pointer forms write into the caller's buffers and allocate
// nothing, so the models' hot loops (encoder layers, decode steps) call them directly.
//
//   gemm             C = alpha·op(A)·op(B) + beta·C, one BLAS call (or the bf16 kernel), raw pointers
//   linear_small_m   y = x·wt + bias for few rows, weight stored transposed, no packing
//   inference_linear attn::linear plus pre-packed weights inside a PackedWeightScope (decoding)
//   quantized        QuantMatrix (GGUF Q4_1 / Q8_0 blocks), f32 or 8-bit activations
//                    (include/attn/ops/quantized.h)
#pragma once

#include <attn/core/tensor.h>

#include <cstdint>
#include <utility>
#include <vector>

namespace attn::ops {

// ---- raw products ---------------------------------------------------------------------------------
// C = alpha · op(A) · op(B) + beta · C on the calling thread's BLAS (the bf16 kernel under
// MatmulPrecision::bf16), f32, row-major:
//   A [M, K] (or, trans_a, [K, M]) row stride lda;  B [K, N] (or, trans_b, [N, K]) row stride ldb;
//   C [M, N] row stride ldc >= N.
void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
          int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc);

// Small-M linear layer (short inputs, where BLAS spends its time packing the weight):
//   y = x · wt + bias,  x [M, K] (row stride ldx), wt [K, N] (the weight transposed), bias [N] or null,
//   y [M, N] (row stride ldy). Threads split the columns.
void linear_small_m(const float* x, int64_t ldx, const float* wt, const float* bias, float* y, int64_t ldy,
                    int64_t M, int64_t N, int64_t K);
// True when linear_small_m has a vectorised body on this CPU (else callers should prefer gemm).
bool linear_small_m_fast();

// ---- pre-packed weights for decoding -----------------------------------------------------------
// While a PackedWeightScope is alive on the calling thread, inference_linear multiplies small inputs
// (1..packed_linear_max_rows() rows, f32, grad mode off, AVX-512 or AVX2) by a packed copy of the weight
// (32-column panels), made on the kPackAfter-th use of that weight in the scope and reused by every
// later call in the scope. models::generate opens one scope per call.
// Invalidation: the packed copies live exactly as long as the scope, so a weight changed between two
// scopes is repacked by the next one. Nothing may change the weights while a scope is open.
class PackedWeightScope {
 public:
  PackedWeightScope();  // becomes the calling thread's active scope (nested scopes restore the outer one)
  ~PackedWeightScope();
  PackedWeightScope(const PackedWeightScope&) = delete;
  PackedWeightScope& operator=(const PackedWeightScope&) = delete;

  // The thread's active scope, or null.
  static PackedWeightScope* active();
  // The packed form of w: [N, K] (f32, contiguous), or null for the first kPackAfter - 1 calls for this
  // weight (the caller then multiplies unpacked): packing costs a few unpacked products, so a call of
  // generate() that makes only one or two steps never pays for it.
  static constexpr int kPackAfter = 3;
  const float* packed(const Tensor& w);
  // How many weights this scope has packed (for the tests).
  int64_t packs() const { return static_cast<int64_t>(entries_.size()); }

 private:
  struct Entry {
    const void* data;
    int64_t N, K;
    Tensor buf;  // the packed panels, f32 (tensor storage is 64-byte aligned)
  };
  std::vector<Entry> entries_;
  std::vector<std::pair<const void*, int>> uses_;  // calls of packed() per weight not packed yet
  PackedWeightScope* outer_;
  Tensor arena_;            // d15b: packed weights smaller than a block share blocks of >= 4 MiB (huge pages)
  int64_t arena_used_ = 0;  // floats of arena_ handed out
};

// Largest row count that takes the packed path (default 48; env ATTN_LINEAR_PACKED=<rows>, 0 = off).
int64_t packed_linear_max_rows();

// y = x · wᵀ + b (as attn::linear): x [..., in], w [out, in], b [out] or undefined -> [..., out].
// The packed kernel when a PackedWeightScope is active, grad mode is off, x and w are f32, x is
// contiguous with 1..packed_linear_max_rows() rows and the active ISA is AVX-512 or AVX2; else attn::linear
// (which validates, and records autograd when grad mode is on).
Tensor inference_linear(const Tensor& x, const Tensor& w, const Tensor& b);

// ---- weights packed once at load (issue 15: encoder inference, models/bert.cc) -----------------
// A weight stored transposed, wt [K, N] (in -> out), copied once into 32-column panels of all K rows
// (the layout of the pre-packed decoding kernel), so that a product with few rows streams each panel
// contiguously instead of reading 32 columns of every row of wt, and a product with many rows skips
// packing op(B). Only worth it where packed_weight_fast() (AVX-512 or AVX2); elsewhere keep wt.
//   pack_weight_t:  wt [K, N] f32 contiguous -> packed f32 [ceil(N / 32) · K · 32]
//   linear_packed:  y [M, N] (row stride ldy) = x [M, K] (row stride ldx) · wt + bias (bias [N] or null),
//                   any M (a 12-row register block; threads split the panels)
//   gemm_packed:    C [M, N] (row stride ldc) = x [M, K] (row stride ldx) · wt + beta · C (beta 0: C not
//                   read): attn's own GEMM reading the panels in place when sgemm would take it for this
//                   product (AVX-512 or AVX2, fp32, ATTN_SGEMM not blas), else unpacked into a scratch
//                   wt and ops::gemm (bf16 precision, OpenBLAS, the scalar oracle)
bool packed_weight_fast();
Tensor pack_weight_t(const Tensor& wt);
// same_rows (linear_packed): row m's values are the same bits for any M (one row goes through the multi-row
// body instead of the faster one-row one): a batched step and a sequence alone then multiply alike.
void linear_packed(const float* x, int64_t ldx, const Tensor& packed, const float* bias, float* y,
                   int64_t ldy, int64_t M, int64_t N, int64_t K, bool same_rows = false);
// The packed form of a weight stored [N, K] (out, in: nn::Linear's and GGUF's layout), from raw rows.
Tensor pack_weight(const float* w, int64_t N, int64_t K);
// Rows [n0, n1) of the [N, K] weight back from its packed form: out [(n1 - n0), K].
void unpack_weight_rows(const Tensor& packed, int64_t N, int64_t K, int64_t n0, int64_t n1, float* out);
void gemm_packed(const float* x, int64_t ldx, const Tensor& packed, float beta, float* C, int64_t ldc,
                 int64_t M, int64_t N, int64_t K);
// gemm_packed, then per element of C (bias [N], not null):  bias: C += bias;  bias_gelu: C = gelu(C + bias),
// the exact (erf) GELU of ops::bias_gelu. The same values as gemm_packed followed by ops::add_bias /
// ops::bias_gelu over C, but each block of rows is finished while the thread that wrote it still has it
// in cache (one pass over C instead of two; MiniLM batch 32 x 128: the QKV bias and the FFN's GELU).
enum class GemmEpilogue { bias, bias_gelu };
// True when gemm_packed of M rows and N columns reads the panels in place (attn's own AVX-512 or AVX2
// fp32 GEMM); false when it would unpack the weight into a scratch copy first (then a caller splitting
// one product into many small ones, as BertModel's fused layers do, should not).
bool gemm_packed_in_place(int64_t M, int64_t N);
// Rows of x that one thread block of the in-place product holds (144 on AVX-512, 72 on AVX2): each
// weight panel is read once per that many rows, so a caller splitting a product should give each part
// at most that many.
int64_t gemm_packed_block_rows();
void gemm_packed(const float* x, int64_t ldx, const Tensor& packed, float beta, float* C, int64_t ldc,
                 int64_t M, int64_t N, int64_t K, GemmEpilogue epilogue, const float* bias);

}  // namespace attn::ops
