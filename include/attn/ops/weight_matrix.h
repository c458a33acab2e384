// THE inference product entry of the runtime (issue 37): Y = X · Wᵀ for a weight matrix as a model
// file stores it (quantized blocks of any supported GGUF type, or f32 from F32 / F16 / BF16), with
// the kernel chosen here, never by the model: the 8-bit products (ops::q8_dot for Q4_1 with its
// repacked copy, ops::quant_dot_rows on the stored blocks of Q5_0 / Q8_0 / K-quants) where the CPU has a
// vector kernel for them, else f32 activations against the stored blocks (ops::quant_linear_rows), and
// ops::gemm for f32 weights. INFERENCE ONLY: NO AUTOGRAD.
//
// Row independence: for quantized weights every kernel here works row by row, so row m of Y depends on
// row m of X alone — the same bits whatever the other rows of the call are. The runtime relies on it:
// a sequence decodes the same tokens whichever sequences share its batched steps. f32 weights go
// through ops::gemm, whose sums may depend on M (BLAS blocking): equal within float rounding only.
#pragma once

#include <attn/ops/quantized.h>

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace attn::ops {

class WeightMatrix {
 public:
  WeightMatrix() = default;
  // Quantized blocks, borrowed (they must outlive this: a mapped file), [N, K] with K a multiple of the
  // format's block. Makes Q4_1's repacked 8-bit copy when the CPU's kernel for it pays.
  static WeightMatrix quantized(QuantFormat format, const std::byte* blocks, int64_t N, int64_t K);
  // f32 values [N, K], owned.
  static WeightMatrix dense(std::vector<float> values, int64_t N, int64_t K);
  // f32 values [N, K] (row stride K) quantized to owned Q8_0 or Q4_0 blocks (ops::quantize_blocks);
  // K a positive multiple of 32. Copies of the result share the blocks.
  static WeightMatrix quantize(QuantFormat format, const float* values, int64_t N, int64_t K);

  int64_t rows() const { return N_; }  // N
  int64_t cols() const { return K_; }  // K
  bool empty() const { return N_ == 0; }
  bool is_quantized() const { return quant_; }
  const QuantMatrix& quant() const { return q_; }  // is_quantized() only
  const float* values() const { return f32_.data(); }
  // Row n of W as f32 (exactly io::dequantize's values for blocks): out [K].
  void row(int64_t n, float* out) const;
  // Bytes this object holds besides borrowed blocks (f32 values, blocks made by quantize(), repacked
  // copy).
  int64_t owned_bytes() const;
  // Bytes of the weights as the products read them: f32 values, or the blocks (borrowed or owned) and
  // the repacked copy.
  int64_t weight_bytes() const;
  // "Q4_K", "Q8_0", ..., or "F32".
  std::string form() const;

 private:
  bool quant_ = false;
  QuantMatrix q_;
  std::vector<float> f32_;
  std::shared_ptr<const std::vector<std::byte>> blocks_;  // quantize()'s blocks (q_ points into them)
  int64_t N_ = 0, K_ = 0;
};

// One product of a linear_rows call: y [M, N] (row stride ldy) = X · Wᵀ (+ bias[N]); with accumulate,
// y += it (a residual add fused into the product).
struct LinearJob {
  const WeightMatrix* w = nullptr;
  float* y = nullptr;
  int64_t ldy = 0;
  const float* bias = nullptr;
  bool accumulate = false;
};

// Buffers for the activations of linear_rows (kept between calls: no allocation in a steady state).
struct LinearScratch {
  Q8Activations q8;       // for the repacked Q4_1 / Q8_0 products
  QuantActivations act;   // Q8_K kind (K-quants)
  QuantActivations act0;  // Q8_0 kind (Q5_0, Q8_0 without a repacked copy)
};

// Every job on the same X [M, K] (row stride ldx >= K); jobs share one quantization of X where their
// kernels take the same activations, and one pass over the thread pool. Every job's w has K columns.
// activations_8bit = false keeps f32 activations against quantized weights (slower; for comparisons
// with a reference that does not round them).
void linear_rows(std::span<const LinearJob> jobs, const float* X, int64_t M, int64_t ldx, LinearScratch& s,
                 bool activations_8bit = true);

}  // namespace attn::ops
