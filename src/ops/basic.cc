// Differentiable basic ops: forward and, next to it, the backward that
// differentiates it (the comment over each backward quotes the forward line).
#include <attn/core/autograd.h>
#include <attn/core/config.h>
#include <attn/core/parallel.h>
#include <attn/ops/basic.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/encoder_kernels.h"
#include "ops/op_util.h"

namespace attn {

namespace ops_detail {

void check_float(const Tensor& t, const char* op, const char* name) {
  ATTN_CHECK(t.defined(), op, ": ", name, " is undefined");
  ATTN_CHECK(t.dtype() == DType::f32 || t.dtype() == DType::f64, op, ": ", name, " must be f32 or f64; got ",
             dtype_name(t.dtype()), " ", shape_str(t.shape()));
}

void check_same_dtype(const Tensor& a, const Tensor& b, const char* op, const char* na, const char* nb) {
  ATTN_CHECK(a.dtype() == b.dtype(), op, ": ", na, " and ", nb, " must share one dtype; got ", na, " ",
             dtype_name(a.dtype()), " and ", nb, " ", dtype_name(b.dtype()));
}

int64_t wrap_dim(int64_t dim, int64_t rank, const char* op) {
  const int64_t d = dim < 0 ? dim + rank : dim;
  ATTN_CHECK(d >= 0 && d < rank, op, ": dim ", dim, " out of range for rank ", rank);
  return d;
}

namespace {

// Copies the strided elements of src (element size es, shape, element
// strides) into the contiguous dst, row by row over the last dim.
void strided_copy(const char* src, char* dst, std::size_t es, const Shape& shape, const Shape& strides) {
  const int64_t r = static_cast<int64_t>(shape.size());
  const int64_t inner = shape[r - 1], is = strides[r - 1];
  int64_t rows = 1;
  for (int64_t d = 0; d + 1 < r; ++d) rows *= shape[d];
  const std::size_t row_bytes = static_cast<std::size_t>(inner) * es;
  parallel_for(rows, std::max<int64_t>(1, 16384 / std::max<int64_t>(1, inner)),
               [&](int64_t r0, int64_t r1, int) {
                 for (int64_t row = r0; row < r1; ++row) {
                   int64_t off = 0, rem = row;
                   for (int64_t d = r - 2; d >= 0; --d) {
                     off += (rem % shape[d]) * strides[d];
                     rem /= shape[d];
                   }
                   const char* s = src + off * static_cast<int64_t>(es);
                   char* o = dst + row * static_cast<int64_t>(row_bytes);
                   if (is == 1) {
                     std::memcpy(o, s, row_bytes);
                   } else if (es == 4) {
                     for (int64_t j = 0; j < inner; ++j) std::memcpy(o + 4 * j, s + 4 * j * is, 4);
                   } else if (es == 8) {
                     for (int64_t j = 0; j < inner; ++j) std::memcpy(o + 8 * j, s + 8 * j * is, 8);
                   } else {
                     for (int64_t j = 0; j < inner; ++j)
                       std::memcpy(o + es * j, s + static_cast<int64_t>(es) * j * is, es);
                   }
                 }
               });
}

}  // namespace

Tensor contiguous_fast(const Tensor& t) {
  if (!t.defined() || t.is_contiguous() || t.rank() == 0 || t.numel() == 0) return t.contiguous();
  Tensor out = Tensor::empty(t.shape(), t.dtype());
  strided_copy(static_cast<const char*>(t.raw_data()), static_cast<char*>(out.raw_data()),
               dtype_size(t.dtype()), t.shape(), t.strides());
  return out;
}

Tensor reshape_fast(const Tensor& t, const Shape& shape) { return contiguous_fast(t).view(shape); }

}  // namespace ops_detail

using namespace ops_detail;  // NOLINT: helpers of this folder

namespace {

// ---- matmul helpers ----------------------------------------------------------------

// How BLAS reads the last two dims [R, C] of t: element (i, j) at i·ld + j
// (trans = false) or at j·ld + i (trans = true).
struct MatLayout {
  bool trans;
  int64_t ld;
};

// Returns t, or a contiguous copy when its last two dims cannot be handed to
// BLAS as they are; sets the layout.
Tensor blas_ready(const Tensor& t, MatLayout* lay) {
  const int64_t R = t.size(-2), C = t.size(-1), s0 = t.stride(-2), s1 = t.stride(-1);
  if ((s1 == 1 || C == 1) && (R == 1 || s0 >= std::max<int64_t>(C, 1))) {
    *lay = {false, R == 1 ? std::max<int64_t>(C, 1) : s0};
    return t;
  }
  if ((s0 == 1 || R == 1) && (C == 1 || s1 >= std::max<int64_t>(R, 1))) {
    *lay = {true, C == 1 ? std::max<int64_t>(R, 1) : s1};
    return t;
  }
  *lay = {false, std::max<int64_t>(C, 1)};
  return contiguous_fast(t);
}

// Element strides of t's batch dims (all but the last two) broadcast to `batch`.
std::vector<int64_t> batch_strides(const Tensor& t, const Shape& batch) {
  const int64_t tb = t.rank() - 2, nb = static_cast<int64_t>(batch.size());
  std::vector<int64_t> s(nb, 0);
  for (int64_t d = 0; d < tb; ++d) {
    const int64_t od = nb - tb + d;
    s[od] = t.size(d) == 1 ? 0 : t.stride(d);
  }
  return s;
}

template <typename T>
void matmul_kernel(const Tensor& a, const Tensor& b, Tensor& out, const Shape& batch) {
  // a: [..., M, K], b: [..., K, N], out: [batch..., M, N] contiguous
  const int64_t M = a.size(-2), K = a.size(-1), N = b.size(-1);
  MatLayout la, lb;
  const Tensor ar = blas_ready(a, &la), br = blas_ready(b, &lb);
  int64_t nbatch = 1;
  for (int64_t s : batch) nbatch *= s;
  if (nbatch == 0 || M == 0 || N == 0) return;
  T* po = out.data<T>();
  // One product when b has no batch dims and a's rows are one contiguous block.
  if (b.rank() == 2 && ar.is_contiguous() && !la.trans) {
    gemm<T>(false, lb.trans, nbatch * M, N, K, 1.0, ar.data<T>(), std::max<int64_t>(K, 1), br.data<T>(),
            lb.ld, 0.0, po, N);
    return;
  }
  const std::vector<int64_t> sa = batch_strides(ar, batch), sb = batch_strides(br, batch);
  const int64_t nb = static_cast<int64_t>(batch.size());
  for (int64_t bi = 0; bi < nbatch; ++bi) {
    int64_t oa = 0, ob = 0, rem = bi;
    for (int64_t d = nb - 1; d >= 0; --d) {
      const int64_t idx = rem % batch[d];
      rem /= batch[d];
      oa += idx * sa[d];
      ob += idx * sb[d];
    }
    gemm<T>(la.trans, lb.trans, M, N, K, 1.0, ar.data<T>() + oa, la.ld, br.data<T>() + ob, lb.ld, 0.0,
            po + bi * M * N, N);
  }
}

Shape batch_of(const Tensor& t) { return Shape(t.shape().begin(), t.shape().end() - 2); }

// ---- elementwise helpers ------------------------------------------------------------

template <typename F>
Tensor broadcast_binary(const Tensor& a, const Tensor& b, const char* op, F f) {
  check_float(a, op, "a");
  check_float(b, op, "b");
  check_same_dtype(a, b, op, "a", "b");
  Shape shape;
  try {
    shape = broadcast_shapes(a.shape(), b.shape());
  } catch (const Error&) {
    ATTN_CHECK(false, op, ": shapes ", shape_str(a.shape()), " and ", shape_str(b.shape()),
               " do not broadcast (numpy rules: trailing dims equal or 1)");
  }
  Tensor out = Tensor::empty(shape, a.dtype());
  const Shape kshape = shape.empty() ? Shape{1} : shape;
  const Tensor ae = a.expand(shape), be = b.expand(shape);
  const Shape sa = shape.empty() ? Shape{0} : ae.strides(), sb = shape.empty() ? Shape{0} : be.strides();
  dispatch_float(a.dtype(), [&](auto t) {
    using T = decltype(t);
    kernels::cpu::binary_strided<T>(kshape, ae.data<T>(), sa, be.data<T>(), sb, out.data<T>(), f);
  });
  return out;
}

// Checks that `to` broadcasts to `from` (the contract of sum_to).
void check_sum_to(const Shape& from, const Shape& to) {
  bool ok = to.size() <= from.size();
  if (ok) {
    try {
      ok = broadcast_shapes(to, from) == from;
    } catch (const Error&) {
      ok = false;
    }
  }
  ATTN_CHECK(ok, "sum_to: shape ", shape_str(to), " must broadcast to the input's shape ", shape_str(from));
}

}  // namespace

// ============================================================================
// matmul
// ============================================================================
Tensor matmul(const Tensor& a, const Tensor& b) {
  check_float(a, "matmul", "a");
  check_float(b, "matmul", "b");
  check_same_dtype(a, b, "matmul", "a", "b");
  ATTN_CHECK(a.rank() >= 2 && b.rank() >= 2, "matmul: a [..., M, K] and b [..., K, N] need rank >= 2; got a ",
             shape_str(a.shape()), " and b ", shape_str(b.shape()));
  ATTN_CHECK(a.size(-1) == b.size(-2), "matmul: a [..., M, K] and b [..., K, N] must agree in K; got a ",
             shape_str(a.shape()), " (K = ", a.size(-1), ") and b ", shape_str(b.shape()),
             " (K = ", b.size(-2), ")");
  Shape batch;
  try {
    batch = broadcast_shapes(batch_of(a), batch_of(b));
  } catch (const Error&) {
    ATTN_CHECK(false, "matmul: batch dims of a ", shape_str(a.shape()), " and b ", shape_str(b.shape()),
               " do not broadcast");
  }
  Shape oshape = batch;
  oshape.push_back(a.size(-2));
  oshape.push_back(b.size(-1));
  Tensor out = Tensor::empty(oshape, a.dtype());
  dispatch_float(a.dtype(), [&](auto t) { matmul_kernel<decltype(t)>(a, b, out, batch); });
  if (needs_grad(a, b)) {
    record("matmul", out, {a, b}, [a = a.detach(), b = b.detach()](const Tensor& g, const GradNeeds& need) {
      // forward: out = a · b   (per batch, batch dims broadcast)
      Tensor da, db;
      if (need[0]) da = sum_to(matmul(g, b.transpose(-1, -2)), a.shape());
      if (need[1]) {
        if (b.rank() == 2 && a.rank() > 2) {  // fold a's batch into rows: one product
          const Tensor a2 = a.reshape({-1, a.size(-1)}), g2 = g.reshape({-1, g.size(-1)});
          db = matmul(a2.transpose(0, 1), g2);
        } else {
          db = sum_to(matmul(a.transpose(-1, -2), g), b.shape());
        }
      }
      return std::vector<Tensor>{da, db};
    });
  }
  return out;
}

// ============================================================================
// linear
// ============================================================================
namespace {
// From 2 up to this many rows, in inference mode (grad mode off), fp32 linear() uses the small-M
// kernel that reads nn::Linear's [out, in] weight in place, instead of BLAS, which repacks the
// whole weight matrix on every call (decoding calls it with M = batch rows). Measured with
// decode_bench (docs/benchmarks-log/2026-11-29.md, "Small-M linear"): faster at 8 and 32 rows, even at 64,
// slower at 128; 1 row stays on BLAS (its gemv does not pack). ATTN_LINEAR_SMALL_M=<rows>
// overrides the limit (0: off).
int64_t linear_small_m_rows() {
  static const int64_t rows = runtime_config().linear_small_m;
  return rows;
}
}  // namespace

Tensor linear(const Tensor& x, const Tensor& w, const Tensor& b) {
  check_float(x, "linear", "x");
  check_float(w, "linear", "w");
  check_same_dtype(x, w, "linear", "x", "w");
  ATTN_CHECK(w.rank() == 2, "linear: w must be [out, in]; got ", shape_str(w.shape()));
  ATTN_CHECK(x.rank() >= 1 && x.size(-1) == w.size(1), "linear: x [..., in] must have in = ", w.size(1),
             " (from w ", shape_str(w.shape()), "); got x ", shape_str(x.shape()));
  const int64_t in = w.size(1), out_f = w.size(0);
  if (b.defined()) {
    check_float(b, "linear", "b");
    check_same_dtype(x, b, "linear", "x", "b");
    ATTN_CHECK(b.rank() == 1 && b.size(0) == out_f, "linear: b must be [out] = [", out_f, "]; got ",
               shape_str(b.shape()));
  }
  Shape oshape = x.shape();
  oshape.back() = out_f;
  Tensor y = Tensor::empty(oshape, x.dtype());
  const int64_t R = x.numel() / std::max<int64_t>(in, 1);
  const Tensor x2 = reshape_fast(x, {R, in});  // x2: [R, in]
  const Tensor wc = contiguous_fast(w);        // wc: [out, in]
  if (x.dtype() == DType::f32 && !grad_mode_enabled() && R >= 2 && R <= linear_small_m_rows() &&
      x2.is_contiguous() && kernels::cpu::linear_small_m_fast()) {
    const Tensor bc = b.defined() ? contiguous_fast(b) : Tensor();
    kernels::cpu::linear_small_m_nt(x2.data<float>(), in, wc.data<float>(),
                                    b.defined() ? bc.data<float>() : nullptr, y.data<float>(), out_f, R,
                                    out_f, in);
    return y;
  }
  dispatch_float(x.dtype(), [&](auto t) {
    using T = decltype(t);
    T* py = y.data<T>();  // y: [R, out]
    if (b.defined()) {
      const Tensor bc = contiguous_fast(b);
      const T* pb = bc.data<T>();  // pb: [out]; copied into every row, then gemm adds with beta = 1
      parallel_for(R, row_grain(out_f), [&](int64_t r0, int64_t r1, int) {
        for (int64_t r = r0; r < r1; ++r) std::memcpy(py + r * out_f, pb, sizeof(T) * out_f);
      });
    }
    gemm<T>(false, true, R, out_f, in, 1.0, x2.data<T>(), std::max<int64_t>(in, 1), wc.data<T>(),
            std::max<int64_t>(in, 1), b.defined() ? 1.0 : 0.0, py, out_f);
  });
  if (needs_grad(x, w, b)) {  // b may be undefined: it then never requires grad
    record("linear", y, b.defined() ? std::vector<Tensor>{x, w, b} : std::vector<Tensor>{x, w},
           [x2 = x2.detach(), wc = wc.detach(), xshape = x.shape(), has_b = b.defined()](
               const Tensor& g, const GradNeeds& need) {
             // forward: y[r, o] = sum_i x[r, i] · w[o, i] + b[o]
             const int64_t R = x2.size(0), in = x2.size(1), out_f = wc.size(0);
             const Tensor g2 = reshape_fast(g, {R, out_f});  // g2: [R, out]
             Tensor dx, dw, db;
             dispatch_float(g.dtype(), [&](auto t) {
               using T = decltype(t);
               if (need[0]) {  // dx[r, i] = sum_o g[r, o] · w[o, i]
                 dx = Tensor::empty({R, in}, g.dtype());
                 gemm<T>(false, false, R, in, out_f, 1.0, g2.data<T>(), out_f, wc.data<T>(), in, 0.0,
                         dx.data<T>(), in);
                 dx = dx.view(xshape);
               }
               if (need[1]) {  // dw[o, i] = sum_r g[r, o] · x[r, i]
                 dw = Tensor::empty({out_f, in}, g.dtype());
                 gemm<T>(true, false, out_f, in, R, 1.0, g2.data<T>(), out_f, x2.data<T>(), in, 0.0,
                         dw.data<T>(), in);
               }
               if (has_b && need[2]) {  // db[o] = sum_r g[r, o]
                 db = Tensor::empty({out_f}, g.dtype());
                 kernels::cpu::sum_dim<T>(g2.data<T>(), db.data<T>(), 1, R, out_f);
               }
             });
             return has_b ? std::vector<Tensor>{dx, dw, db} : std::vector<Tensor>{dx, dw};
           });
  }
  return y;
}

// ============================================================================
// add, sub, mul, scale, sum_to
// ============================================================================
Tensor add(const Tensor& a, const Tensor& b) {
  Tensor out = broadcast_binary(a, b, "add", [](auto x, auto y) { return x + y; });
  if (needs_grad(a, b)) {
    record("add", out, {a, b}, [as = a.shape(), bs = b.shape()](const Tensor& g, const GradNeeds& need) {
      // forward: out = a + b   (broadcast)
      return std::vector<Tensor>{need[0] ? sum_to(g, as) : Tensor(), need[1] ? sum_to(g, bs) : Tensor()};
    });
  }
  return out;
}

Tensor sub(const Tensor& a, const Tensor& b) {
  Tensor out = broadcast_binary(a, b, "sub", [](auto x, auto y) { return x - y; });
  if (needs_grad(a, b)) {
    record("sub", out, {a, b}, [as = a.shape(), bs = b.shape()](const Tensor& g, const GradNeeds& need) {
      // forward: out = a - b   (broadcast)
      return std::vector<Tensor>{need[0] ? sum_to(g, as) : Tensor(),
                                 need[1] ? sum_to(scale(g, -1.0), bs) : Tensor()};
    });
  }
  return out;
}

Tensor mul(const Tensor& a, const Tensor& b) {
  Tensor out = broadcast_binary(a, b, "mul", [](auto x, auto y) { return x * y; });
  if (needs_grad(a, b)) {
    record("mul", out, {a, b}, [a = a.detach(), b = b.detach()](const Tensor& g, const GradNeeds& need) {
      // forward: out = a * b   (broadcast)
      return std::vector<Tensor>{need[0] ? sum_to(mul(g, b), a.shape()) : Tensor(),
                                 need[1] ? sum_to(mul(g, a), b.shape()) : Tensor()};
    });
  }
  return out;
}

Tensor scale(const Tensor& x, double s) {
  check_float(x, "scale", "x");
  const Tensor xc = contiguous_fast(x);
  Tensor out = Tensor::empty(x.shape(), x.dtype());
  dispatch_float(x.dtype(), [&](auto t) {
    using T = decltype(t);
    const T st = static_cast<T>(s);
    kernels::cpu::unary_map<T>(x.numel(), xc.data<T>(), out.data<T>(), [st](T v) { return st * v; });
  });
  if (needs_grad(x)) {
    record("scale", out, {x}, [s](const Tensor& g, const GradNeeds&) {
      // forward: out = s · x
      return std::vector<Tensor>{scale(g, s)};
    });
  }
  return out;
}

Tensor sum_to(const Tensor& x, const Shape& shape) {
  check_float(x, "sum_to", "x");
  if (x.shape() == shape) return x;
  check_sum_to(x.shape(), shape);
  Tensor out = Tensor::zeros(shape, x.dtype());
  const Tensor xc = contiguous_fast(x);
  // Strides that address `out` from an index of x's shape (0 on summed dims).
  const Tensor oe = out.expand(x.shape());
  dispatch_float(x.dtype(), [&](auto t) {
    using T = decltype(t);
    kernels::cpu::sum_to_strided<T>(x.shape(), xc.data<T>(), out.data<T>(), oe.strides(), out.numel());
  });
  if (needs_grad(x)) {
    record("sum_to", out, {x}, [xs = x.shape()](const Tensor& g, const GradNeeds&) {
      // forward: out = x summed over the dims where `shape` broadcasts
      return std::vector<Tensor>{g.expand(xs)};
    });
  }
  return out;
}

// ============================================================================
// sum, mean
// ============================================================================
namespace {

Tensor reduce_all(const Tensor& x, bool average, const char* op) {
  check_float(x, op, "x");
  const Tensor xc = contiguous_fast(x);
  const int64_t n = x.numel();
  Tensor out = Tensor::empty({}, x.dtype());
  dispatch_float(x.dtype(), [&](auto t) {
    using T = decltype(t);
    T r;
    kernels::cpu::sum_dim<T>(xc.data<T>(), &r, 1, n, 1);
    out.data<T>()[0] = average ? static_cast<T>(static_cast<double>(r) / static_cast<double>(n)) : r;
  });
  if (needs_grad(x)) {
    record(op, out, {x}, [xs = x.shape(), n, average](const Tensor& g, const GradNeeds&) {
      // forward: out = sum_i x[i]  (mean: / n)
      const Tensor gs = average ? scale(g, 1.0 / static_cast<double>(n)) : g;
      return std::vector<Tensor>{gs.expand(xs)};
    });
  }
  return out;
}

Tensor reduce_dim(const Tensor& x, int64_t dim, bool keepdim, bool average, const char* op) {
  check_float(x, op, "x");
  const int64_t d = wrap_dim(dim, x.rank(), op);
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < d; ++i) outer *= x.size(i);
  for (int64_t i = d + 1; i < x.rank(); ++i) inner *= x.size(i);
  const int64_t n = x.size(d);
  Shape kshape = x.shape();
  kshape[d] = 1;
  Shape oshape = x.shape();
  oshape.erase(oshape.begin() + d);
  Tensor out = Tensor::empty(keepdim ? kshape : oshape, x.dtype());
  const Tensor xc = contiguous_fast(x);
  dispatch_float(x.dtype(), [&](auto t) {
    using T = decltype(t);
    T* po = out.data<T>();
    kernels::cpu::sum_dim<T>(xc.data<T>(), po, outer, n, inner);
    if (average)
      for (int64_t i = 0; i < out.numel(); ++i)
        po[i] = static_cast<T>(static_cast<double>(po[i]) / static_cast<double>(n));
  });
  if (needs_grad(x)) {
    record(op, out, {x}, [xs = x.shape(), kshape, n, average](const Tensor& g, const GradNeeds&) {
      // forward: out[o, i] = sum_k x[o, k, i]  (mean: / n)
      Tensor gk = g.reshape(kshape);
      if (average) gk = scale(gk, 1.0 / static_cast<double>(n));
      return std::vector<Tensor>{gk.expand(xs)};
    });
  }
  return out;
}

}  // namespace

Tensor sum(const Tensor& x) { return reduce_all(x, false, "sum"); }
Tensor mean(const Tensor& x) { return reduce_all(x, true, "mean"); }
Tensor sum(const Tensor& x, int64_t dim, bool keepdim) { return reduce_dim(x, dim, keepdim, false, "sum"); }
Tensor mean(const Tensor& x, int64_t dim, bool keepdim) { return reduce_dim(x, dim, keepdim, true, "mean"); }

// ============================================================================
// shape ops
// ============================================================================
Tensor reshape(const Tensor& x, const Shape& shape) {
  ATTN_CHECK(x.defined(), "reshape: x is undefined");
  Tensor y = reshape_fast(x, shape);
  if (needs_grad(x)) {
    record("reshape", y, {x}, [xs = x.shape()](const Tensor& g, const GradNeeds&) {
      // forward: y = x.reshape(shape)
      return std::vector<Tensor>{reshape_fast(g, xs)};
    });
  }
  return y;
}

Tensor view(const Tensor& x, const Shape& shape) {
  ATTN_CHECK(x.defined(), "view: x is undefined");
  Tensor y = x.view(shape);
  if (needs_grad(x)) {
    record("view", y, {x}, [xs = x.shape()](const Tensor& g, const GradNeeds&) {
      // forward: y = x.view(shape)
      return std::vector<Tensor>{reshape_fast(g, xs)};
    });
  }
  return y;
}

Tensor permute(const Tensor& x, const std::vector<int64_t>& dims) {
  ATTN_CHECK(x.defined(), "permute: x is undefined");
  Tensor y = x.permute(dims);
  if (needs_grad(x)) {
    std::vector<int64_t> inv(dims.size());
    for (std::size_t i = 0; i < dims.size(); ++i) inv[wrap_dim(dims[i], x.rank(), "permute")] = i;
    record("permute", y, {x}, [inv](const Tensor& g, const GradNeeds&) {
      // forward: y = x.permute(dims)   =>   dx = dy.permute(dims⁻¹)
      return std::vector<Tensor>{g.permute(inv)};
    });
  }
  return y;
}

Tensor transpose(const Tensor& x, int64_t d0, int64_t d1) {
  ATTN_CHECK(x.defined(), "transpose: x is undefined");
  Tensor y = x.transpose(d0, d1);
  if (needs_grad(x)) {
    record("transpose", y, {x}, [d0, d1](const Tensor& g, const GradNeeds&) {
      // forward: y = x.transpose(d0, d1)
      return std::vector<Tensor>{g.transpose(d0, d1)};
    });
  }
  return y;
}

Tensor slice(const Tensor& x, int64_t dim, int64_t start, int64_t end, int64_t step) {
  ATTN_CHECK(x.defined(), "slice: x is undefined");
  Tensor y = x.slice(dim, start, end, step);
  if (needs_grad(x)) {
    record("slice", y, {x},
           [xs = x.shape(), dt = x.dtype(), dim, start, end, step](const Tensor& g, const GradNeeds&) {
             // forward: y = x.slice(dim, start, end, step)   =>   dx = 0 outside the slice, dy inside
             Tensor dx = Tensor::zeros(xs, dt);
             Tensor region = dx.slice(dim, start, end, step);
             region.copy_from(g);
             return std::vector<Tensor>{dx};
           });
  }
  return y;
}

Tensor concat(const std::vector<Tensor>& xs, int64_t dim) {
  ATTN_CHECK(!xs.empty(), "concat: needs at least one tensor; got none");
  const Tensor& x0 = xs[0];
  ATTN_CHECK(x0.defined(), "concat: tensor 0 is undefined");
  const int64_t d = wrap_dim(dim, x0.rank(), "concat");
  Shape oshape = x0.shape();
  oshape[d] = 0;
  for (std::size_t i = 0; i < xs.size(); ++i) {
    const Tensor& x = xs[i];
    ATTN_CHECK(x.defined(), "concat: tensor ", i, " is undefined");
    ATTN_CHECK(x.dtype() == x0.dtype(), "concat: all tensors must share one dtype; tensor 0 is ",
               dtype_name(x0.dtype()), ", tensor ", i, " is ", dtype_name(x.dtype()));
    bool ok = x.rank() == x0.rank();
    for (int64_t k = 0; ok && k < x.rank(); ++k) ok = k == d || x.size(k) == x0.size(k);
    ATTN_CHECK(ok, "concat: tensor ", i, " has shape ", shape_str(x.shape()),
               "; expected the shape of tensor 0 ", shape_str(x0.shape()), " except in dim ", d);
    oshape[d] += x.size(d);
  }
  Tensor out = Tensor::empty(oshape, x0.dtype());
  std::vector<int64_t> offsets;
  int64_t off = 0;
  for (const Tensor& x : xs) {
    offsets.push_back(off);
    out.slice(d, off, off + x.size(d)).copy_from(x);
    off += x.size(d);
  }
  if (needs_grad_any(xs)) {
    std::vector<int64_t> sizes;
    for (const Tensor& x : xs) sizes.push_back(x.size(d));
    record("concat", out, xs, [d, offsets, sizes](const Tensor& g, const GradNeeds& need) {
      // forward: out.slice(d, offsets[i], offsets[i] + sizes[i]) = xs[i]
      std::vector<Tensor> gx(sizes.size());
      for (std::size_t i = 0; i < sizes.size(); ++i)
        if (need[i]) gx[i] = g.slice(d, offsets[i], offsets[i] + sizes[i]);
      return gx;
    });
  }
  return out;
}

}  // namespace attn
