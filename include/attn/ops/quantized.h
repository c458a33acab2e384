// Matrix products with a weight kept in a ggml block-quantized format (the GGUF Llama's matrices).
// INFERENCE ONLY: NO AUTOGRAD. Raw f32 activation and output buffers (the caller's), single-threaded
// row ranges: the model splits the rows of its products over its own parallel region.
//
//   Y[m, n] = Σ_k X[m, k] · W[n, k]      W [N, K] in blocks of 32 along K (K a multiple of 32)
//
// Block formats (32 elements; d, m IEEE halves):
//   Q4_1 (20 bytes): d, m, 16 bytes of 4-bit quants;  w = d·q + m
//   Q8_0 (34 bytes): d, 32 signed bytes;              w = d·q
// Two ways to multiply:
//   quant_linear_rows  f32 activations; each weight block unpacked in registers (the oracle path)
//   Q8Dot              activations quantized to 8 bits per block of 32 (Q8Activations: ggml's Q8_1
//                      against Q4_1, Q8_0 against Q8_0) and integer block products (AVX512-VNNI where
//                      the CPU has it, else AVX2), against a repacked copy of the weight
//                      (QuantMatrix::pack_q8).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

namespace attn::kernels {
struct ScreenX;  // kernels/cpu/qscreen.h: one activation row prepared for GreedyScreen
}  // namespace attn::kernels

namespace attn::ops {

// q4_1 and q8_0 have every product below; the other formats (issue 19: the K-quants and 5-bit
// formats of llama.cpp's Q4_K_M files, layouts in include/attn/io/gguf.h) have the f32-activation
// products and quant_unpack_rows only (no pack_q8 / Q8Dot).
enum class QuantFormat { q4_1, q8_0, q4_0, q5_0, q5_1, q4_k, q5_k, q6_k };
inline constexpr int64_t kQuantBlock = 32;
// Bytes of one stored block (20 for Q4_1, 34 for Q8_0, 144 for Q4_K, ...).
int64_t quant_block_bytes(QuantFormat format);
// Elements of one stored block: 32, or 256 for the K-quants (K must be a multiple of it).
int64_t quant_block_elems(QuantFormat format);
const char* quant_format_name(QuantFormat format);  // "Q4_K", ...
// The format of a GGUF tensor type (ggml_type id, io::GgmlType); false when it is not quantized
// in one of the formats above.
bool quant_format_of_ggml(uint32_t ggml_type, QuantFormat* out);

// Weights to blocks (issue 38: quantization at load): w [N, K] (row stride K, K a positive multiple of
// 32) -> N rows of K / 32 stored blocks of `format`, Q8_0 or Q4_0 (ggml's reference rounding, so a file
// llama.cpp would write from the same f32 values holds the same bytes):
//   Q8_0: d = f16(max|w| / 127), q = round(w / d) in [-127, 127]
//   Q4_0: d = f16(m / -8) with m the value of largest magnitude, q = min(15, trunc(w / d + 8.5)),
//         value d·(q - 8)
// Rows split over the thread pool. Throws for another format, a bad shape or a value that is not
// finite (naming its row).
std::vector<std::byte> quantize_blocks(QuantFormat format, const float* w, int64_t N, int64_t K);

// W [N, K]: a view of N stored rows of K / 32 blocks (the GGUF tensor's bytes, not owned), and
// optionally the repacked copy the 8-bit products read (owned).
class QuantMatrix {
 public:
  QuantMatrix() = default;
  // blocks: [N, K / block_elems blocks] contiguous, alive as long as this; K a positive multiple of
  // quant_block_elems(format).
  QuantMatrix(QuantFormat format, const std::byte* blocks, int64_t N, int64_t K);
  // Builds the repacked copy for Q8Dot (rows split over the thread pool); Q4_1 ~0.63 bytes per
  // weight, Q8_0 ~1.06.
  // Q4_1 and Q8_0 only (throws for the other formats).
  void pack_q8();
  bool has_q8() const { return !packed_.empty(); }
  int64_t q8_packed_bytes() const { return static_cast<int64_t>(packed_.size()); }

  QuantFormat format() const { return format_; }
  int64_t rows() const { return N_; }  // N
  int64_t cols() const { return K_; }  // K
  const std::byte* blocks() const { return blocks_; }
  int64_t row_bytes() const;  // bytes of one stored row
  const std::byte* q8_packed() const { return packed_.data(); }

 private:
  QuantFormat format_ = QuantFormat::q4_1;
  const std::byte* blocks_ = nullptr;
  int64_t N_ = 0, K_ = 0;
  std::vector<std::byte> packed_;
};

// Rows [n0, n1) of Y = X · Wᵀ with f32 activations, on the calling thread (AVX-512 or a portable loop):
//   x [M, K] row stride ldx >= K;  y [M, N] row stride ldy >= N (columns n0..n1-1 written).
void quant_linear_rows(const QuantMatrix& w, int64_t n0, int64_t n1, const float* x, int64_t M, int64_t ldx,
                       float* y, int64_t ldy);
// The same for every format, with accumulate: y += the product (residual adds fused), else y = it.
// Each weight row is unpacked once to f32 (exactly io::dequantize's values) and multiplied with the M
// rows of X (AVX-512 or AVX2 FMAs, or a portable loop; tests compare with a double oracle).
void quant_linear_rows(const QuantMatrix& w, int64_t n0, int64_t n1, const float* x, int64_t M, int64_t ldx,
                       float* y, int64_t ldy, bool accumulate);
// Rows [n0, n1) of W as f32: out [n1 - n0, K] (row stride K), bit-identical to io::dequantize (for a
// prompt pass that multiplies many rows of X through ops::gemm).
void quant_unpack_rows(const QuantMatrix& w, int64_t n0, int64_t n1, float* out);

// M rows of K activations quantized to 8 bits per block of 32 (per block: d = f16(max|x| / 127),
// q = round(x / d)), in buffers kept between calls (no allocation once they are large enough).
class Q8Activations {
 public:
  // Grows the buffers for `rows` rows of K values (K a positive multiple of 32).
  void reserve(int64_t rows, int64_t K);
  // x [M, K] row stride ldx >= K -> this (reserves as needed).
  void quantize(const float* x, int64_t M, int64_t K, int64_t ldx);
  int64_t rows() const { return M_; }  // of the last quantize()
  int64_t cols() const { return K_; }

  // The buffers (row m of the quants at q() + m·ldq(), of the scales at d() + m·ldb(), ...).
  const int8_t* q() const { return q_.data(); }
  const float* d() const { return d_.data(); }
  const float* s() const { return s_.data(); }
  const float* sum() const { return sum_.data(); }
  int64_t ldq() const { return ldq_; }
  int64_t ldb() const { return ldb_; }

 private:
  std::vector<int8_t> q_;
  std::vector<float> d_, s_, sum_;
  int64_t ldq_ = 0, ldb_ = 0;
  int64_t M_ = 0, K_ = 0;
};

// True when the 8-bit products run a vector kernel: AVX512-VNNI, or AVX2 (vpmaddubsw) on CPUs without
// it (else a portable loop, slower than the f32 activations: callers then keep f32 activations).
bool q8_dot_fast();

// The 8-bit product, with the kernel for this CPU chosen once (q8_dot()) by a loop that calls it
// many times per token. Rows [n0, n1) of Y (+)= Xq · Wᵀ, on the calling thread:
//   w has_q8(), x quantized with x.cols() == w.cols(), y [x.rows(), N] row stride ldy >= N;
//   accumulate: y += the product (residual adds fused), else y = it.
class Q8Dot {
 public:
  void operator()(const QuantMatrix& w, int64_t n0, int64_t n1, const Q8Activations& x, float* y, int64_t ldy,
                  bool accumulate) const;

 private:
  friend Q8Dot q8_dot();
  int kernel_ = 0;  // kernels::cpu::QdotKernel
};
Q8Dot q8_dot();

// ---- issue 19: 8-bit activations for the formats of Gemma 3's GGUF (kernels/cpu/q8k.h) ----------
// llama.cpp-style integer products on the stored blocks (no repacked copy): the activation row is
// quantized once per product, then integer dot products (AVX-512 VNNI or AVX2) against Q4_0, Q4_1, Q5_0,
// Q8_0, Q4_K, Q5_K or Q6_K weights. The activations are rounded to 8 bits (an error of at most half a step,
// max|x| / 254 per block, on every value), so the result differs from quant_linear_rows by that;
// tests bound it.
//
// True for the weight formats quant_dot_rows takes.
bool quant_dot_supported(QuantFormat format);
// True when quant_dot_rows runs a vector kernel (AVX2 or AVX-512 VNNI active); else it runs the
// double oracle and callers should keep f32 activations.
bool quant_dot_fast();

// M rows of K activations in 8 bits for one weight format family: Q8_K (blocks of 256, f32 scale)
// for Q4_K / Q5_K / Q6_K, Q8_0 (blocks of 32, f16 scale) for Q4_0 / Q4_1 / Q5_0 / Q8_0; with the sums of
// every 16.
// Buffers are kept between calls.
class QuantActivations {
 public:
  // x [M, K] row stride ldx >= K -> 8 bits in the kind `format` multiplies with; K a positive multiple
  // of 256 (K-quants) or 32.
  void quantize(QuantFormat format, const float* x, int64_t M, int64_t K, int64_t ldx);
  int64_t rows() const { return M_; }
  int64_t cols() const { return K_; }
  bool k_kind() const { return k_kind_; }  // Q8_K (true) or Q8_0 blocks
  const int8_t* q() const { return q_.data(); }
  const float* d() const { return d_.data(); }
  const int32_t* bsum() const { return bsum_.data(); }

 private:
  std::vector<int8_t> q_;
  std::vector<float> d_;
  std::vector<int32_t> bsum_;
  int64_t M_ = 0, K_ = 0;
  bool k_kind_ = false;
};

// Rows [n0, n1) of Y (+)= Xq · Wᵀ on the calling thread: x quantized for w's format (same kind) with
// x.cols() == w.cols(); y [x.rows(), N] row stride ldy >= N. Several activation rows share each pass
// over a weight row (up to 4), with sums in an order that depends on how many; row_independent runs
// each activation row as a decode step does (the one-row kernel), so a row's result is the same bits
// whatever rows share the call (the runtime's batched step: ops::linear_rows).
void quant_dot_rows(const QuantMatrix& w, int64_t n0, int64_t n1, const QuantActivations& x, float* y,
                    int64_t ldy, bool accumulate, bool row_independent = false);
// ---- end issue 19 8-bit activations

// ---- issue 19 (g19): the 8-bit-activation GEMM (kernels/cpu/q8k_gemm.h); the runtime's product ----
// Tokens against one weight: the weight repacked once into panels of 16 rows (bytes per weight 0.5625
// for Q4_0, 0.625 for Q4_1, 0.75 for Q4_K, 1.0625 for Q8_0 / Q5_0, 1.25 for Q5_K / Q6_K), and tiles of 16
// weight rows x up to 12 tokens with exact integer sums per group of 16 / 32 (AVX-512 VNNI or AVX2), then the
// block scales in f32, one chain per output over the groups. Same activations (QuantActivations) and the same
// integer sums as quant_dot_rows: the results differ from it by f32 rounding only.
class QuantPanels {
 public:
  QuantPanels() = default;
  // Repacks w (rows split over the thread pool); w's blocks must outlive this. quant_dot_supported.
  explicit QuantPanels(const QuantMatrix& w);
  bool empty() const { return bytes_ == 0; }
  QuantFormat format() const { return format_; }
  int64_t rows() const { return N_; }
  int64_t cols() const { return K_; }
  int64_t bytes() const { return bytes_; }
  const std::byte* data() const { return data_.get(); }
  const std::byte* blocks() const { return blocks_; }  // the stored blocks (the scalar ISA's oracle)

 private:
  QuantFormat format_ = QuantFormat::q8_0;
  const std::byte* blocks_ = nullptr;
  int64_t N_ = 0, K_ = 0;
  // g19c: not value-initialized, so the pages are first touched by the threads that pack them (zeroing
  // 125 MB of panels on the calling thread took ~0.1 s of page faults in a prompt pass)
  std::unique_ptr<std::byte[]> data_;
  int64_t bytes_ = 0;
};

// Y [x.rows(), N] (row stride ldy >= N) (+)= Xq · Wᵀ for every row of x (quantized for w's format,
// x.cols() == w.cols()), the panels split over the thread pool. accumulate: y += the product.
// Each output is one f32 chain over the scale groups, whatever rows share the call: row m of Y is the
// same bits for any x.rows() (the runtime's batched step relies on it: ops::linear_rows).
void quant_matmul(const QuantPanels& w, const QuantActivations& x, float* y, int64_t ldy, bool accumulate);

// quant_matmul in parts, for a caller that splits the work over the pool itself (ops::linear_rows):
// prepare() once for w and x (checked as quant_matmul checks them; both must outlive the runs), then
// run() over ranges of panels of 16 weight rows, on any thread; the same values as quant_matmul.
class QuantMatmulPart {
 public:
  QuantMatmulPart();
  ~QuantMatmulPart();
  QuantMatmulPart(QuantMatmulPart&&) noexcept;
  QuantMatmulPart& operator=(QuantMatmulPart&&) noexcept;
  void prepare(const QuantPanels& w, const QuantActivations& x);
  int64_t panels() const;  // of the prepared w
  // Rows [16 p0, min(16 p1, N)) of the outputs into y [x.rows(), N] (row stride ldy >= N).
  void run(int64_t p0, int64_t p1, float* y, int64_t ldy, bool accumulate) const;

 private:
  struct Terms;
  const QuantPanels* w_ = nullptr;
  const QuantActivations* x_ = nullptr;
  std::unique_ptr<Terms> t_;
};
// True when activations quantized for weights of format a serve weights of format b too (the same
// 8-bit kind: Q5_0 with Q8_0, the K-quants among themselves); both quant_dot_supported.
bool quant_dot_same_activations(QuantFormat a, QuantFormat b);
// ---- end issue 19 (g19) GEMM

// ---- issue 19 (g19b): exact greedy over a screened vocabulary product (kernels/cpu/qscreen.h) --------
// For greedy decoding only the argmax of the logits y = W·x is needed. GreedyScreen keeps, built once
// from a Q8_0 matrix W [V, K], a 5-bit copy of it (22 bytes per 32 weights against Q8_0's 34) and, per
// call, computes for every row a screen logit and a proven bound on |screen − exact| (Hölder per block
// of 32: half the 5-bit step times ‖x_b‖₁, plus a margin for f32 rounding). Only the rows whose
// screen + bound reaches the best screen − bound can hold the maximum; their exact logits come from
// quant_dot_rows (the same kernel as the full product, so the same f32 values), and the pick is the
// first row with the largest exact logit: the index std::max_element over the full product gives.
class GreedyScreen {
 public:
  GreedyScreen() = default;
  // w: Q8_0, K a positive multiple of 64 (the rows split over the thread pool). Throws naming what was
  // expected and found, or the row whose scale is not finite. The 16 columns with the largest
  // |column_weight| (K values: e.g. a typical activation row; empty: the largest max |w| of the column)
  // get an 8-bit correction of their 5-bit error (kernels/cpu/qscreen.h): only speed depends on them.
  explicit GreedyScreen(const QuantMatrix& w, std::span<const float> column_weight = {});
  const std::vector<int32_t>& outlier_columns() const { return cols_; }
  bool empty() const { return data_.empty(); }
  int64_t rows() const { return N_; }
  int64_t cols() const { return K_; }
  int64_t bytes() const { return static_cast<int64_t>(data_.size()); }  // of the screen

  struct Pick {
    int64_t index = -1;      // the argmax row
    float logit = 0;         // its exact logit (as quant_dot_rows computes it)
    int64_t candidates = 0;  // rows whose exact logit was computed
  };
  // x: one row quantized for w (QuantActivations::quantize(QuantFormat::q8_0, ...)), x.cols() == K;
  // w: the matrix this screen was built from.
  Pick argmax(const QuantMatrix& w, const QuantActivations& x);
  // The picks of every row of x (P >= 1 rows, quantized together or alone: the same bits) into out[P],
  // each what argmax() gives for that row alone; the screen is read once for all of them.
  void argmax_rows(const QuantMatrix& w, const QuantActivations& x, Pick* out);
  // Every row's screen logit and bound for x (value [V], bound [V]), on the thread pool: for tests.
  void screen(const QuantActivations& x, float* value, float* bound);

 private:
  std::vector<kernels::ScreenX> prepare(const QuantActivations& x);
  void argmax_pass(const QuantMatrix& w, const QuantActivations& x, const kernels::ScreenX* sx, int64_t r0,
                   int64_t P, Pick* out);
  int64_t N_ = 0, K_ = 0;
  const std::byte* blocks_ = nullptr;
  std::vector<std::byte> data_;
  std::size_t data_off_ = 0;  // g19c: where the panels start in data_ (64-byte aligned when built)
  std::vector<int32_t> cols_;
  std::vector<int8_t> xq_;
  std::vector<float> g_, hb_, xo_, value_, bound_, exact_;
  std::vector<float> ho_;  // one per activation row
  std::vector<int64_t> cand_;
};
// True when GreedyScreen's pass runs the AVX-512 VNNI kernel: only then is it faster than the full
// product (measured: AVX2 11.6 ms against 10.2 for Gemma 3's 262,144 × 640 on one core); callers use
// the screen only then.
bool greedy_screen_fast();
// ---- end issue 19 (g19b) greedy screen

}  // namespace attn::ops
