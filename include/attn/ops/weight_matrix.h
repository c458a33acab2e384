// THE inference product entry of the runtime (issue 37): Y = X · Wᵀ for a weight matrix as a model
// file stores it (quantized blocks of any supported GGUF type, or f32 from F32 / F16 / BF16), with
// the kernel chosen here, never by the model, where the CPU has a vector kernel for it:
//   - Q4_0 / Q4_1 / Q5_0 / Q8_0 / Q4_K / Q5_K / Q6_K: the 8-bit GEMM over panels made at load
//     (ops::QuantPanels, ops::quant_matmul's kernel; bytes per weight 0.5625 for Q4_0, 0.625 for Q4_1,
//     0.75 for Q4_K, 1.0625 for Q8_0 / Q5_0, 1.25 for Q5_K / Q6_K), for every row count, one token or
//     a prompt;
//   - else (a scalar CPU, Q5_1, or a matrix kept in its stored blocks) the 8-bit row product on the
//     stored blocks (ops::quant_dot_rows, row by row) or f32 activations against them
//     (ops::quant_linear_rows);
//   - f32 weights: the packed product (ops::linear_packed over 32-column panels made at load).
// INFERENCE ONLY: NO AUTOGRAD.
//
// Row independence: every kernel here computes row m of Y from row m of X alone, in an order that does not
// depend on the other rows — the same bits whatever the other rows of the call are: the panels' tiles
// as one f32 chain over the scale groups per output whatever tokens share a tile, the other quantized
// ones row by row, the f32 one as one FMA chain per output over k (linear_packed's same_rows). The runtime
// relies on it: a sequence decodes the same tokens whichever sequences share its batched steps. (An f32
// matrix made for lookups only, dense(..., multiplied = false), multiplies through ops::gemm, whose sums
// may depend on M: equal within float rounding only.)
#pragma once

#include <attn/core/tensor.h>
#include <attn/ops/quantized.h>

#include <array>
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
  // format's block. Makes the panels where the CPU has the kernel for them
  // (then the products read only those: has_panels()), unless may_copy is false (the greedy screen
  // multiplies the stored blocks: GreedyPicker::keeps_stored_blocks).
  static WeightMatrix quantized(QuantFormat format, const std::byte* blocks, int64_t N, int64_t K,
                                bool may_copy = true);
  // f32 values [N, K] (row stride K), copied: packed straight into the row-independent product's panels
  // (the values are then held only there), or, with multiplied = false (an embedding table read by row()
  // alone), copied as they are.
  static WeightMatrix dense(std::span<const float> values, int64_t N, int64_t K, bool multiplied = true);
  // f32 values [N, K] (row stride K) quantized to owned Q8_0 or Q4_0 blocks (ops::quantize_blocks);
  // K a positive multiple of 32. Copies of the result share the blocks (multiplied in place: no
  // panels or repacked copy of owned blocks).
  static WeightMatrix quantize(QuantFormat format, const float* values, int64_t N, int64_t K);

  int64_t rows() const { return N_; }  // N
  int64_t cols() const { return K_; }  // K
  bool empty() const { return N_ == 0; }
  bool is_quantized() const { return quant_; }
  const QuantMatrix& quant() const { return q_; }  // is_quantized() only
  // The products read panels, not the stored blocks (which row() still reads).
  bool has_panels() const { return panels_ != nullptr; }
  // Row n of W as f32 (exactly io::dequantize's values for blocks): out [K].
  void row(int64_t n, float* out) const;
  // Rows [n0, n1) of W as f32: out [(n1 - n0), K].
  void rows_f32(int64_t n0, int64_t n1, float* out) const;
  // Bytes this object holds besides borrowed blocks (f32 values, blocks made by quantize(), panels).
  int64_t owned_bytes() const;
  // Bytes of the weights as the products read them: f32 values, the panels (and owned blocks), or the
  // blocks (borrowed or owned).
  int64_t weight_bytes() const;
  // "Q4_K", "Q8_0", ..., or "F32".
  std::string form() const;

 private:
  friend void linear_rows(std::span<const struct LinearJob> jobs, const float* X, int64_t M, int64_t ldx,
                          struct LinearScratch& s, bool activations_8bit);
  bool quant_ = false;
  QuantMatrix q_;
  std::vector<float> f32_;  // dense, kept as given (multiplied = false)
  Tensor packed_;           // dense, packed (ops::pack_weight): what the products read
  std::shared_ptr<const std::vector<std::byte>> blocks_;  // quantize()'s blocks (q_ points into them)
  std::shared_ptr<const QuantPanels> panels_;             // what the products read, where made
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
  QuantActivations act;                  // Q8_K kind (K-quants)
  QuantActivations act0;                 // Q8_0 kind (Q4_0, Q4_1, Q5_0, Q8_0)
  std::array<QuantMatmulPart, 8> parts;  // the panels' products, per job
  std::vector<float> y;                  // an f32 product before it is added to an accumulating job's output
};

// Every job on the same X [M, K] (row stride ldx >= K); jobs share one quantization of X where their
// kernels take the same activations, and one pass over the thread pool. Every job's w has K columns.
// activations_8bit = false keeps f32 activations against quantized weights (slower; for comparisons
// with a reference that does not round them).
void linear_rows(std::span<const LinearJob> jobs, const float* X, int64_t M, int64_t ldx, LinearScratch& s,
                 bool activations_8bit = true);

// ---- greedy picks (issue 37; the screen of issue 19 g19b) ------------------------------------------
// The greedy pick of one row of logits y = x · Wᵀ: the index std::max_element gives over linear_rows'
// product of x alone (the first of equal logits), and that logit. The pick is chosen here, never by the
// model: a screened product (GreedyScreen, ops/quantized.h: a 5-bit copy of W narrows the rows, their
// exact logits come from the same one-row kernel as the full product) where it applies — W in Q8_0
// blocks without a repacked copy (a loader asks keeps_stored_blocks), K a multiple of 64 up to 4096,
// 8-bit activations — and pays
// (greedy_screen_fast(): the AVX-512 VNNI kernel); else the full product and its argmax. The screen is
// built from W once (the largest |x| of that pick decides its outlier columns, which only changes its
// speed), after `screen_after` full picks, so short generations do not pay for the build.
struct GreedyPickOptions {
  int64_t screen_after = 128;   // full picks before the screen is built (0: from the first; < 0: never)
  bool only_where_fast = true;  // false: screen wherever it applies, also where it is slower (tests)
};

class GreedyPicker {
 public:
  explicit GreedyPicker(GreedyPickOptions options = {}) : o_(options) {}
  // Whether picks over w with these activations may use the screen (once it is built).
  static bool screen_applies(const WeightMatrix& w, bool activations_8bit);
  // Whether a picker with options o screens a vocabulary matrix stored as `format` [., K]: then it
  // must keep multiplying its stored blocks (WeightMatrix::quantized(..., may_copy = false)).
  static bool keeps_stored_blocks(QuantFormat format, int64_t K, const GreedyPickOptions& o);
  bool screens(const WeightMatrix& w, bool activations_8bit) const;

  struct Pick {
    int64_t index = -1;      // -1: x or a logit the pick read is not finite
    float logit = 0;         // its logit, as linear_rows computes it (the non-finite value when -1)
    int64_t candidates = 0;  // rows whose exact logit was computed (N without the screen)
  };
  // x [K] f32, K = w.cols(). The screen reads only its candidates' logits; its 5-bit copy is built from
  // finite blocks (attn::Error naming the row otherwise), so with a finite x every logit is finite.
  Pick pick(const WeightMatrix& w, const float* x, LinearScratch& s, bool activations_8bit);
  // The picks of P rows X [P, K] (row stride ldx) into out[P], each what pick() gives for its row;
  // one screen pass (GreedyScreen::argmax_rows) or one product for all rows, so a batched step reads
  // the vocabulary once.
  void pick_rows(const WeightMatrix& w, const float* X, int64_t P, int64_t ldx, LinearScratch& s,
                 bool activations_8bit, Pick* out);
  bool screen_built() const { return !screen_.empty(); }
  const GreedyPickOptions& options() const { return o_; }

 private:
  static Pick argmax_row(const float* y, int64_t N);
  // Whether picks over w read the screen now: it applies, and is built (here, from x, once
  // screen_after full picks were made).
  bool screen_ready(const WeightMatrix& w, const float* x, bool activations_8bit);
  GreedyPickOptions o_;
  int64_t full_picks_ = 0;
  const std::byte* built_for_ = nullptr;
  GreedyScreen screen_;
  QuantActivations act_;
  std::vector<float> y_;
  std::vector<GreedyScreen::Pick> screen_picks_;
};

// ---- the encoder's products: dense f32 weights, the kernel chosen here (issue 37) -----------------
// A dense f32 weight W [N, K] (out, in) held in the layout its products read fastest on this CPU:
// 32-column panels (pack_weight_t, ops/linear.h) where packed_weight_fast() (AVX-512 or AVX2), else the
// transpose [K, N] (BLAS's B of an NN product, the rows the small-M kernel streams). Optionally with a
// quantized twin of the same matrix (Q4_1 blocks, [N, K] rows, and their repacked 8-bit copy) that
// products of few rows multiply instead (DenseLinearOptions::quantized_max_rows).
class DenseMatrix {
 public:
  DenseMatrix() = default;
  // wt [K, N] f32 (a linear's weight transposed: in -> out), copied.
  static DenseMatrix from_transposed(const Tensor& wt);
  // Adds the quantized twin: Q4_1 blocks of [N, K] (K a multiple of 32; owned), with the repacked copy
  // Q8Dot multiplies. Returns false and keeps nothing where the CPU has no vector kernel for those
  // products (q8_dot_fast(): without it they are slower than f32).
  bool add_quantized(std::vector<std::byte> q4_1_blocks);
  void drop_quantized();
  bool has_quantized() const { return qblocks_ != nullptr; }

  int64_t rows() const { return N_; }  // N
  int64_t cols() const { return K_; }  // K
  bool empty() const { return N_ == 0; }
  // True when the f32 values are held as panels (pack_weight_t) rather than [K, N].
  bool packed() const { return packed_; }
  const Tensor& f32() const { return w_; }         // the panels or [K, N]
  const QuantMatrix& quant() const { return q_; }  // has_quantized() only

 private:
  Tensor w_;
  bool packed_ = false;
  std::shared_ptr<const std::vector<std::byte>> qblocks_;  // what q_ points into
  QuantMatrix q_;
  int64_t N_ = 0, K_ = 0;
};

// The kernels dense_linear chooses from, in its order of preference:
//   q8           8-bit activations × the quantized twin (ops::Q8Dot), batches of at most quantized_max_rows
//   small        linear_packed over the panels, batches of at most kDenseSmallRows rows
//   gemm_packed  gemm_packed over the panels (attn's own GEMM reading them in place where it runs)
//   gemm         ops::gemm (BLAS) over [K, N], where the weights are not packed (no AVX2)
enum class DenseKernel { q8, small, gemm_packed, gemm };
const char* dense_kernel_name(DenseKernel k);

// Up to this many rows the small-M kernel is faster than a GEMM, which packs (or streams) the whole
// weight per row block (measured on Zen 4, 1 thread: the small-M kernel 1.6x BLAS at M = 16, 1.1x at
// M = 64-128, equal at 256-512, 0.83x at 4096; with packed weights, linear_packed against gemm_packed:
// 1.11x at 128 tokens, 1.04x at 96: docs/benchmarks-log/2026-12-01.md, issue 15).
inline constexpr int64_t kDenseSmallRows = 256;

struct DenseLinearOptions {
  // The rows of the whole batch this call is one part of (a group of sequences; 0: this call's M). The
  // kernel is chosen for the batch, so each part's rows come out as the whole batch's call would give
  // them (every kernel computes a row the same way for any split of the rows).
  int64_t batch_rows = 0;
  // Batches of at most this many rows multiply the quantized twin where there is one, with activations
  // rounded to 8 bits per block of 32 (vectors then differ slightly from f32's); 0: f32 always.
  int64_t quantized_max_rows = 0;
};

// What dense_linear's product writes:  write: Y = X · Wᵀ + bias;  write_gelu: Y = gelu(X · Wᵀ + bias)
// (the exact erf form);  accumulate: Y += X · Wᵀ + bias (a residual stream).
enum class DenseOutput { write, write_gelu, accumulate };

// Buffers of dense_linear (kept between calls: no allocation in a steady state).
struct DenseScratch {
  Q8Activations q8;
  std::vector<float> y;  // the small-M kernels' product before an accumulate
};

// The kernel dense_linear takes for a batch of batch_rows rows.
DenseKernel dense_kernel(const DenseMatrix& w, int64_t batch_rows, const DenseLinearOptions& options = {});

// X [M, K] (row stride ldx >= K), Y [M, N] (row stride ldy >= N), bias [N] (required), as `output` says;
// the kernel is dense_kernel(w, options.batch_rows or M, options). INFERENCE ONLY: NO AUTOGRAD.
// f32 kernels: within float rounding of the plain product (their sums' order is theirs).
void dense_linear(const DenseMatrix& w, const float* X, int64_t M, int64_t ldx, float* Y, int64_t ldy,
                  const float* bias, DenseOutput output, const DenseLinearOptions& options,
                  DenseScratch& scratch);

// True when the products of a batch of batch_rows rows, split in parts of at most group_rows rows (the
// smallest min_rows), read each weight panel as often as the whole batch's products would: they take
// gemm_packed, which reads the panels in place for parts of min_rows rows and whose row block holds a
// part; and the encoder's attention has its in-place kernel for head size head_dim
// (encoder_self_attention). Where it holds, an encoder runs its layers over groups of sequences
// (BertRunOptions::fuse_layers).
bool encoder_row_groups_pay(std::span<const DenseMatrix* const> weights, int64_t head_dim, int64_t batch_rows,
                            int64_t group_rows, int64_t min_rows, const DenseLinearOptions& options = {});

}  // namespace attn::ops
