// Fast fp32 row and elementwise kernels of the neural-network ops (norms,
// softmax, cross-entropy, activations, dropout).
//
// The ops (src/ops/nn_functional.cc) call these for f32 tensors when
// rows_fast() is true (kernels::cpu::active_isa() is avx512 or avx2); otherwise
// (the scalar ISA), and for f64, they use the scalar templates of nn_kernels.h
// and elementwise.h, which stay the reference (statistics in double). The
// functions here split the work over attn::parallel_for and run the range
// kernels declared at the bottom (row_kernels_avx512.cc, row_kernels_avx2.cc).
// They compute in fp32 with 16- or 8-lane partial sums; the tests
// (tests/ops/row_kernels_test.cc) hold them to the f64 reference on every tail
// length.
//
// Same contracts as the scalar templates: raw contiguous pointers, "rows" of
// C elements, weights/biases [C] or null, mean/rstd/lse in double.
#pragma once

#include <cstdint>

namespace attn::kernels::cpu {

// True when the fp32 ops should call the functions below (AVX-512 or AVX2 active).
bool rows_fast();

// ---- norms --------------------------------------------------------------------------
// x, y: [rows, C]; w, b: [C] or null; mean, rstd: [rows] (saved for backward).
void layer_norm_forward_f32(const float* x, const float* w, const float* b, float* y, double* mean,
                            double* rstd, int64_t rows, int64_t C, double eps);
// g, x, dx: [rows, C]; dx, dw, db may be null; dw, db are written (not accumulated).
void layer_norm_backward_f32(const float* g, const float* x, const float* w, const double* mean,
                             const double* rstd, float* dx, float* dw, float* db, int64_t rows, int64_t C);
// x, y: [rows, C]; w: [C] or null; rstd: [rows].
void rms_norm_forward_f32(const float* x, const float* w, float* y, double* rstd, int64_t rows, int64_t C,
                          double eps);
void rms_norm_backward_f32(const float* g, const float* x, const float* w, const double* rstd, float* dx,
                           float* dw, int64_t rows, int64_t C);

// ---- softmax over the last dim ----------------------------------------------------------
// x, y: [rows, C]; log selects log_softmax. A row of all -inf gives 0 / -inf.
void softmax_forward_f32(const float* x, float* y, int64_t rows, int64_t C, bool log);
// g, y, dx: [rows, C]; y is the forward output.
void softmax_backward_f32(const float* g, const float* y, float* dx, int64_t rows, int64_t C, bool log);

// ---- cross-entropy with label smoothing, forward and gradient in one pass ------------------
// x: [N, V] logits; target: [N] (validated; rows equal to ignore_index are
// skipped); lse: [N] out. Returns the sum over valid rows of
//   (1 - eps) · (lse - x[t]) + eps · (lse - mean_v x[v]).
// When dx ([N, V]) is not null it also receives the gradient of that sum
// scaled by gscale: (softmax - (1 - eps) · onehot(t) - eps / V) · gscale on
// valid rows, 0 on ignored ones (the softmax exponentials are computed once).
double cross_entropy_f32(const float* x, const int64_t* target, double* lse, float* dx, int64_t N, int64_t V,
                         int64_t ignore_index, double eps, double gscale);

// ---- elementwise ----------------------------------------------------------------------------
enum class Act { relu, gelu_erf, gelu_tanh, silu };
// y = act(x) over n elements.
void act_forward_f32(Act act, const float* x, float* y, int64_t n);
// dx = act'(x) · g over n elements.
void act_backward_f32(Act act, const float* x, const float* g, float* dx, int64_t n);
// y = silu(a) · b; backward: da = g · b · silu'(a), db = g · silu(a) (either may be null).
void swiglu_forward_f32(const float* a, const float* b, float* y, int64_t n);
void swiglu_backward_f32(const float* a, const float* b, const float* g, float* da, float* db, int64_t n);
// y[i] = keep(seed, i) ? x[i] / (1 - p) : 0 with the keep decision of
// nn_kernels.h (dropout_keep_flat), bit-identical to dropout_apply<float>.
void dropout_f32(const float* x, float* y, int64_t n, double p, uint64_t seed);
// Dropout fused with a neighbour in one pass over n elements, drop(v) = dropout_f32's value of v;
// each mode gives the bits of the two operations run one after the other:
//   plain      y = drop(x)
//   relu       y = drop(max(x, 0))              (dropout(relu(x)), the FFN's hidden layer)
//   add        y = other + drop(x)              (other + dropout(x), a residual connection)
//   relu_grad_out  y = x != 0 ? other / (1 - p) : 0, rounded as drop() rounds: relu's backward
//              [z > 0] · drop(other) from the forward's output x = drop(max(z, 0)), which is nonzero
//              exactly where z > 0 and the element was kept (z > 0 and kept gives z / (1 - p) >= z > 0;
//              max(NaN, 0) = +0), so no keep decision is drawn again
enum class DropMode { plain, relu, add, relu_grad_out };
void dropout_fused_f32(DropMode mode, const float* x, const float* other, float* y, int64_t n, double p,
                       uint64_t seed);

// ---- the range kernels of one instruction set -------------------------------------------------
// Each works on rows [r0, r1) (or elements [i0, i1)) of the arrays above; the functions above split the
// work over threads and call the table of the active ISA. row_kernels_avx512.cc fills one with 16-lane
// kernels, row_kernels_avx2.cc one with 8-lane kernels doing the same per element (dropout 4 elements
// per vector); both hold their statistics in fp32 lanes reduced once per row.
struct RowRangeKernels {
  void (*layer_norm_fwd)(const float* x, const float* w, const float* b, float* y, double* mean, double* rstd,
                         int64_t r0, int64_t r1, int64_t C, double eps);
  // dw_acc, db_acc: [C] fp32 accumulators (+=), may be null; dx may be null.
  void (*layer_norm_bwd)(const float* g, const float* x, const float* w, const double* mean,
                         const double* rstd, float* dx, float* dw_acc, float* db_acc, int64_t r0, int64_t r1,
                         int64_t C);
  void (*rms_norm_fwd)(const float* x, const float* w, float* y, double* rstd, int64_t r0, int64_t r1,
                       int64_t C, double eps);
  void (*rms_norm_bwd)(const float* g, const float* x, const float* w, const double* rstd, float* dx,
                       float* dw_acc, int64_t r0, int64_t r1, int64_t C);
  void (*softmax_fwd)(const float* x, float* y, int64_t r0, int64_t r1, int64_t C, bool log);
  void (*softmax_bwd)(const float* g, const float* y, float* dx, int64_t r0, int64_t r1, int64_t C, bool log);
  double (*cross_entropy)(const float* x, const int64_t* target, double* lse, float* dx, int64_t r0,
                          int64_t r1, int64_t V, int64_t ignore_index, double eps, double gscale);
  void (*act_fwd)(Act act, const float* x, float* y, int64_t i0, int64_t i1);
  void (*act_bwd)(Act act, const float* x, const float* g, float* dx, int64_t i0, int64_t i1);
  void (*swiglu_fwd)(const float* a, const float* b, float* y, int64_t i0, int64_t i1);
  void (*swiglu_bwd)(const float* a, const float* b, const float* g, float* da, float* db, int64_t i0,
                     int64_t i1);
  void (*dropout_fused)(DropMode mode, const float* x, const float* other, float* y, int64_t i0, int64_t i1,
                        double p, uint64_t seed);
};
// Call only when the CPU has the instruction set (the tests compare the two tables).
const RowRangeKernels& row_kernels_avx512();
const RowRangeKernels& row_kernels_avx2();

}  // namespace attn::kernels::cpu
