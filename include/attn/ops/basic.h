// Differentiable tensor ops: matrix products, broadcasting arithmetic,
// reductions and shape ops.
//
// Every op validates its inputs (attn::Error with expected vs actual),
// allocates its output, runs a kernel and, when grad mode is on and an input
// requires grad, records its backward (include/attn/core/autograd.h).
// Float inputs are f32 (compute in fp32, BLAS for products) or f64 (reference
// loops in double, for gradient checks); inputs of one op share one dtype.
// Inputs may be non-contiguous views. Outputs are new contiguous tensors,
// except the shape ops (reshape/view/permute/transpose/slice), which return
// views of their input like the raw Tensor methods but record a backward.
#pragma once

#include <attn/core/tensor.h>

#include <cstdint>
#include <vector>

namespace attn {

// ---- products ------------------------------------------------------------------
// Batched matrix product: a [..., M, K] · b [..., K, N] -> [batch..., M, N],
// where batch is the numpy broadcast of the two batch shapes. Rank >= 2 each.
// Transposed views (a stride-1 dim among the last two) reach BLAS without a copy.
Tensor matmul(const Tensor& a, const Tensor& b);

// y = x wᵀ + b: x [..., in], w [out, in], b [out] (optional) -> [..., out].
Tensor linear(const Tensor& x, const Tensor& w, const Tensor& b = Tensor());

// ---- broadcasting arithmetic (numpy rules) ----------------------------------------
Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
// s · x
Tensor scale(const Tensor& x, double s);
// Sums x over broadcast dims so that the result has `shape` (x's shape must
// broadcast from `shape`); the adjoint of broadcasting.
Tensor sum_to(const Tensor& x, const Shape& shape);

inline Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
inline Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
inline Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
inline Tensor operator*(double s, const Tensor& x) { return scale(x, s); }
inline Tensor operator*(const Tensor& x, double s) { return scale(x, s); }

// ---- reductions -------------------------------------------------------------------
// Over all elements: a rank-0 tensor (shape []).
Tensor sum(const Tensor& x);
Tensor mean(const Tensor& x);
// Over one dim (negative counts from the end); keepdim leaves it as size 1.
Tensor sum(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor mean(const Tensor& x, int64_t dim, bool keepdim = false);

// ---- shape ops (differentiable counterparts of the raw Tensor methods) --------------
// A view of a contiguous x, else a contiguous copy; one dim may be -1.
Tensor reshape(const Tensor& x, const Shape& shape);
// A view of a contiguous x (throws otherwise, like Tensor::view).
Tensor view(const Tensor& x, const Shape& shape);
Tensor permute(const Tensor& x, const std::vector<int64_t>& dims);
Tensor transpose(const Tensor& x, int64_t d0, int64_t d1);
// Elements start, start + step, ... < end of dim (Python slice semantics, clamped).
Tensor slice(const Tensor& x, int64_t dim, int64_t start, int64_t end, int64_t step = 1);
// Joins tensors of one rank and dtype along dim; the other sizes must agree.
Tensor concat(const std::vector<Tensor>& xs, int64_t dim);

}  // namespace attn
