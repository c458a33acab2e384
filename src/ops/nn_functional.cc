// Differentiable neural-network ops: forward and, next to it, the backward that
// differentiates it (the comment over each backward quotes the forward line).
#include <attn/core/autograd.h>
#include <attn/ops/basic.h>
#include <attn/ops/nn_functional.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/nn_kernels.h"
#include "kernels/cpu/row_kernels.h"
#include "ops/op_util.h"

namespace attn {

using namespace ops_detail;  // NOLINT: helpers of this folder
namespace kc = kernels::cpu;

namespace {

// Integer ids of any strides as i64 in row-major order.
std::vector<int64_t> read_ids(const Tensor& t, const char* op, const char* name) {
  ATTN_CHECK(t.defined(), op, ": ", name, " is undefined");
  ATTN_CHECK(t.dtype() == DType::i64 || t.dtype() == DType::i32, op, ": ", name, " must be i64 or i32; got ",
             dtype_name(t.dtype()), " ", shape_str(t.shape()));
  const Tensor c = contiguous_fast(t);
  std::vector<int64_t> ids(static_cast<std::size_t>(c.numel()));
  if (c.dtype() == DType::i64) {
    std::memcpy(ids.data(), c.data<int64_t>(), ids.size() * sizeof(int64_t));
  } else {
    const int32_t* p = c.data<int32_t>();
    for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = p[i];
  }
  return ids;
}

// Optional per-channel parameter [C] (weight or bias of a norm).
void check_channel_param(const Tensor& p, const Tensor& x, int64_t C, const char* op, const char* name) {
  if (!p.defined()) return;
  check_float(p, op, name);
  check_same_dtype(x, p, op, "x", name);
  ATTN_CHECK(p.rank() == 1 && p.size(0) == C, op, ": ", name, " must be [C] = [", C, "] (C = last dim of x ",
             shape_str(x.shape()), "); got ", shape_str(p.shape()));
}

template <typename T>
const T* ptr_or_null(const Tensor& t) {
  return t.defined() ? t.data<T>() : nullptr;
}

// True when T is float and the fast fp32 row kernels (kernels/cpu/row_kernels.h,
// AVX-512 or AVX2) are active; f64 and the scalar ISA use the templates of nn_kernels.h.
template <typename T>
bool fast_rows() {
  if constexpr (std::is_same_v<T, float>) {
    return kc::rows_fast();
  } else {
    return false;
  }
}

// Elementwise op y = f(x) with backward dx = df(x, dy); f and df are generic
// lambdas (called with float or double). `act` names the same function in the
// fast fp32 kernels (kernels/cpu/row_kernels.h), used for f32 when active.
template <typename F, typename DF>
Tensor unary_op(const char* name, kc::Act act, const Tensor& x, F f, DF df) {
  check_float(x, name, "x");
  const Tensor xc = contiguous_fast(x);
  Tensor y = Tensor::empty(x.shape(), x.dtype());
  dispatch_float(x.dtype(), [&](auto t) {
    using T = decltype(t);
    if constexpr (std::is_same_v<T, float>) {
      if (fast_rows<T>()) return kc::act_forward_f32(act, xc.data<T>(), y.data<T>(), x.numel());
    }
    kc::unary_map<T>(x.numel(), xc.data<T>(), y.data<T>(), [&](T v) { return static_cast<T>(f(v)); });
  });
  if (needs_grad(x)) {
    record(name, y, {x}, [xc = xc.detach(), df, act](const Tensor& g, const GradNeeds&) {
      // forward: y = f(x)   =>   dx = f'(x) · dy
      const Tensor gc = contiguous_fast(g);
      Tensor dx = Tensor::empty(xc.shape(), xc.dtype());
      dispatch_float(xc.dtype(), [&](auto t) {
        using T = decltype(t);
        if constexpr (std::is_same_v<T, float>) {
          if (fast_rows<T>())
            return kc::act_backward_f32(act, xc.data<T>(), gc.data<T>(), dx.data<T>(), xc.numel());
        }
        kc::binary_map<T>(xc.numel(), xc.data<T>(), gc.data<T>(), dx.data<T>(),
                          [&](T v, T gv) { return static_cast<T>(df(v, gv)); });
      });
      return std::vector<Tensor>{dx};
    });
  }
  return y;
}

template <typename T>
T sigmoid(T x) {
  return T(1) / (T(1) + std::exp(-x));
}

constexpr double kSqrt2OverPi = 0.7978845608028654;  // √(2/π)
constexpr double kInvSqrt2 = 0.7071067811865476;     // 1/√2
constexpr double kInvSqrt2Pi = 0.3989422804014327;   // 1/√(2π)
constexpr double kGeluTanhC = 0.044715;

}  // namespace

// ============================================================================
// embedding and positions
// ============================================================================
Tensor embedding(const Tensor& ids, const Tensor& table) {
  check_float(table, "embedding", "table");
  ATTN_CHECK(table.rank() == 2, "embedding: table must be [V, C]; got ", shape_str(table.shape()));
  const std::vector<int64_t> id = read_ids(ids, "embedding", "ids");
  const int64_t V = table.size(0), C = table.size(1), N = static_cast<int64_t>(id.size());
  for (int64_t i = 0; i < N; ++i)
    ATTN_CHECK(id[i] >= 0 && id[i] < V, "embedding: id ", id[i], " (at flat position ", i,
               ") is out of range for a table of V = ", V, " rows; ids must be in [0, ", V, ")");
  Shape oshape = ids.shape();
  oshape.push_back(C);
  Tensor out = Tensor::empty(oshape, table.dtype());
  const Tensor tc = contiguous_fast(table);
  dispatch_float(table.dtype(), [&](auto t) {
    using T = decltype(t);
    // out[i, :] = table[id[i], :]
    for (int64_t i = 0; i < N; ++i)
      std::memcpy(out.data<T>() + i * C, tc.data<T>() + id[i] * C, sizeof(T) * C);
  });
  if (needs_grad(table)) {
    record("embedding", out, {table}, [id, V, C, dt = table.dtype()](const Tensor& g, const GradNeeds&) {
      // forward: out[i, :] = table[id[i], :]   =>   dtable[id[i], :] += dout[i, :]
      const Tensor gc = contiguous_fast(g);
      Tensor dt_ = Tensor::zeros({V, C}, dt);
      dispatch_float(dt, [&](auto t) {
        using T = decltype(t);
        T* d = dt_.data<T>();
        const T* pg = gc.data<T>();
        // Threads own disjoint column blocks, so repeated ids never race; every
        // element is summed in id order, as in a serial loop.
        const int64_t nt = num_threads();
        const int64_t block = std::max<int64_t>(16, (C + nt - 1) / nt);
        parallel_for(C, block, [&](int64_t c0, int64_t c1, int) {
          for (std::size_t i = 0; i < id.size(); ++i) {
            T* dr = d + id[i] * C;
            const T* gr = pg + static_cast<int64_t>(i) * C;
            for (int64_t c = c0; c < c1; ++c) dr[c] += gr[c];
          }
        });
      });
      return std::vector<Tensor>{dt_};
    });
  }
  return out;
}

Tensor position_ids(int64_t L, int64_t offset) {
  ATTN_CHECK(L >= 0 && offset >= 0, "position_ids: L and offset must be >= 0; got L = ", L,
             ", offset = ", offset);
  Tensor t = Tensor::empty({L}, DType::i64);
  for (int64_t i = 0; i < L; ++i) t.data<int64_t>()[i] = offset + i;
  return t;
}

Tensor sinusoidal_positions(int64_t L, int64_t C, int64_t offset, DType dtype) {
  ATTN_CHECK(L >= 0 && C > 0 && offset >= 0,
             "sinusoidal_positions: expected L >= 0, C > 0, offset >= 0; got L = ", L, ", C = ", C,
             ", offset = ", offset);
  ATTN_CHECK(dtype == DType::f32 || dtype == DType::f64,
             "sinusoidal_positions: dtype must be f32 or f64; got ", dtype_name(dtype));
  Tensor pe = Tensor::empty({L, C}, DType::f64);
  double* p = pe.data<double>();
  for (int64_t l = 0; l < L; ++l) {
    const double pos = static_cast<double>(offset + l);
    for (int64_t c = 0; c < C; ++c) {
      // PE(pos, 2i) = sin(pos / 10000^(2i/C)),  PE(pos, 2i+1) = cos(pos / 10000^(2i/C))
      const int64_t two_i = c - c % 2;
      const double angle = pos / std::pow(10000.0, static_cast<double>(two_i) / static_cast<double>(C));
      p[l * C + c] = c % 2 == 0 ? std::sin(angle) : std::cos(angle);
    }
  }
  return dtype == DType::f64 ? pe : pe.to(dtype);
}

// ============================================================================
// rope
// ============================================================================
Tensor rope(const Tensor& x, const RopeOptions& o) {
  check_float(x, "rope", "x");
  ATTN_CHECK(x.rank() >= 2, "rope: x must be [..., L, D]; got ", shape_str(x.shape()));
  const int64_t L = x.size(-2), D = x.size(-1);
  ATTN_CHECK(D % 2 == 0, "rope: the head size D must be even; got x ", shape_str(x.shape()), " with D = ", D);
  ATTN_CHECK(std::isfinite(o.base) && o.base > 0, "rope: base must be a finite number > 0; got ", o.base);
  ATTN_CHECK(o.offset >= 0, "rope: offset must be >= 0; got ", o.offset);
  const int64_t half = D / 2;
  std::vector<double> cos_t(static_cast<std::size_t>(L * half)), sin_t(cos_t.size());
  for (int64_t l = 0; l < L; ++l)
    for (int64_t i = 0; i < half; ++i) {
      // theta = pos · base^(-2i/D)
      const double theta = static_cast<double>(o.offset + l) *
                           std::pow(o.base, -2.0 * static_cast<double>(i) / static_cast<double>(D));
      cos_t[l * half + i] = std::cos(theta);
      sin_t[l * half + i] = std::sin(theta);
    }
  const bool inter = o.layout == RopeLayout::interleaved;
  const Tensor xc = contiguous_fast(x);
  Tensor y = Tensor::empty(x.shape(), x.dtype());
  const int64_t rows = x.numel() / std::max<int64_t>(D, 1);
  if (L > 0 && D > 0) {
    dispatch_float(x.dtype(), [&](auto t) {
      using T = decltype(t);
      kc::rope_apply<T>(xc.data<T>(), y.data<T>(), rows, L, D, cos_t.data(), sin_t.data(), inter, 1.0);
    });
  }
  if (needs_grad(x)) {
    record("rope", y, {x},
           [cos_t = std::move(cos_t), sin_t = std::move(sin_t), rows, L, D, inter](const Tensor& g,
                                                                                   const GradNeeds&) {
             // forward: y_a = a·cos - b·sin,  y_b = a·sin + b·cos   (a rotation R)
             // => dx = Rᵀ dy: the rotation by -theta
             const Tensor gc = contiguous_fast(g);
             Tensor dx = Tensor::empty(g.shape(), g.dtype());
             if (L > 0 && D > 0) {
               dispatch_float(g.dtype(), [&](auto t) {
                 using T = decltype(t);
                 kc::rope_apply<T>(gc.data<T>(), dx.data<T>(), rows, L, D, cos_t.data(), sin_t.data(), inter,
                                   -1.0);
               });
             }
             return std::vector<Tensor>{dx};
           });
  }
  return y;
}

// ============================================================================
// layer_norm, rms_norm
// ============================================================================
Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps) {
  check_float(x, "layer_norm", "x");
  ATTN_CHECK(x.rank() >= 1, "layer_norm: x must be [..., C]; got a rank-0 tensor");
  ATTN_CHECK(std::isfinite(eps) && eps >= 0, "layer_norm: eps must be finite and >= 0; got ", eps);
  const int64_t C = x.size(-1);
  check_channel_param(weight, x, C, "layer_norm", "weight");
  check_channel_param(bias, x, C, "layer_norm", "bias");
  const int64_t rows = C == 0 ? 0 : x.numel() / C;
  const Tensor xc = contiguous_fast(x), wc = weight.defined() ? contiguous_fast(weight) : Tensor(),
               bc = bias.defined() ? contiguous_fast(bias) : Tensor();
  Tensor y = Tensor::empty(x.shape(), x.dtype());
  Tensor mean = Tensor::empty({rows}, DType::f64), rstd = Tensor::empty({rows}, DType::f64);
  dispatch_float(x.dtype(), [&](auto t) {
    using T = decltype(t);
    if constexpr (std::is_same_v<T, float>) {
      if (fast_rows<T>()) {
        kc::layer_norm_forward_f32(xc.data<T>(), ptr_or_null<T>(wc), ptr_or_null<T>(bc), y.data<T>(),
                                   mean.data<double>(), rstd.data<double>(), rows, C, eps);
        return;
      }
    }
    kc::layer_norm_forward<T>(xc.data<T>(), ptr_or_null<T>(wc), ptr_or_null<T>(bc), y.data<T>(),
                              mean.data<double>(), rstd.data<double>(), rows, C, eps);
  });
  if (needs_grad(x, weight, bias)) {
    record("layer_norm", y, {x, weight, bias},
           [xc = xc.detach(), wc = wc.detach(), mean, rstd, rows, C](const Tensor& g, const GradNeeds& need) {
             // forward: y = (x - mean) · rstd · w + b
             const Tensor gc = contiguous_fast(g);
             Tensor dx = need[0] ? Tensor::empty(xc.shape(), xc.dtype()) : Tensor();
             Tensor dw = need[1] ? Tensor::empty({C}, xc.dtype()) : Tensor();
             Tensor db = need[2] ? Tensor::empty({C}, xc.dtype()) : Tensor();
             dispatch_float(xc.dtype(), [&](auto t) {
               using T = decltype(t);
               T* pdx = dx.defined() ? dx.data<T>() : nullptr;
               T* pdw = dw.defined() ? dw.data<T>() : nullptr;
               T* pdb = db.defined() ? db.data<T>() : nullptr;
               if constexpr (std::is_same_v<T, float>) {
                 if (fast_rows<T>()) {
                   kc::layer_norm_backward_f32(gc.data<T>(), xc.data<T>(), ptr_or_null<T>(wc),
                                               mean.data<double>(), rstd.data<double>(), pdx, pdw, pdb, rows,
                                               C);
                   return;
                 }
               }
               kc::layer_norm_backward<T>(gc.data<T>(), xc.data<T>(), ptr_or_null<T>(wc), mean.data<double>(),
                                          rstd.data<double>(), pdx, pdw, pdb, rows, C);
             });
             return std::vector<Tensor>{dx, dw, db};
           });
  }
  return y;
}

Tensor rms_norm(const Tensor& x, const Tensor& weight, double eps) {
  check_float(x, "rms_norm", "x");
  ATTN_CHECK(x.rank() >= 1, "rms_norm: x must be [..., C]; got a rank-0 tensor");
  ATTN_CHECK(std::isfinite(eps) && eps >= 0, "rms_norm: eps must be finite and >= 0; got ", eps);
  const int64_t C = x.size(-1);
  check_channel_param(weight, x, C, "rms_norm", "weight");
  const int64_t rows = C == 0 ? 0 : x.numel() / C;
  const Tensor xc = contiguous_fast(x), wc = weight.defined() ? contiguous_fast(weight) : Tensor();
  Tensor y = Tensor::empty(x.shape(), x.dtype());
  Tensor rstd = Tensor::empty({rows}, DType::f64);
  dispatch_float(x.dtype(), [&](auto t) {
    using T = decltype(t);
    if constexpr (std::is_same_v<T, float>) {
      if (fast_rows<T>()) {
        kc::rms_norm_forward_f32(xc.data<T>(), ptr_or_null<T>(wc), y.data<T>(), rstd.data<double>(), rows, C,
                                 eps);
        return;
      }
    }
    kc::rms_norm_forward<T>(xc.data<T>(), ptr_or_null<T>(wc), y.data<T>(), rstd.data<double>(), rows, C, eps);
  });
  if (needs_grad(x, weight)) {
    record("rms_norm", y, {x, weight},
           [xc = xc.detach(), wc = wc.detach(), rstd, rows, C](const Tensor& g, const GradNeeds& need) {
             // forward: y = x · rstd · w,  rstd = 1 / sqrt(mean(x²) + eps)
             const Tensor gc = contiguous_fast(g);
             Tensor dx = need[0] ? Tensor::empty(xc.shape(), xc.dtype()) : Tensor();
             Tensor dw = need[1] ? Tensor::empty({C}, xc.dtype()) : Tensor();
             dispatch_float(xc.dtype(), [&](auto t) {
               using T = decltype(t);
               T* pdx = dx.defined() ? dx.data<T>() : nullptr;
               T* pdw = dw.defined() ? dw.data<T>() : nullptr;
               if constexpr (std::is_same_v<T, float>) {
                 if (fast_rows<T>()) {
                   kc::rms_norm_backward_f32(gc.data<T>(), xc.data<T>(), ptr_or_null<T>(wc),
                                             rstd.data<double>(), pdx, pdw, rows, C);
                   return;
                 }
               }
               kc::rms_norm_backward<T>(gc.data<T>(), xc.data<T>(), ptr_or_null<T>(wc), rstd.data<double>(),
                                        pdx, pdw, rows, C);
             });
             return std::vector<Tensor>{dx, dw};
           });
  }
  return y;
}

// ============================================================================
// activations
// ============================================================================
Tensor relu(const Tensor& x) {
  return unary_op(
      "relu", kc::Act::relu, x, [](auto v) { return v > 0 ? v : decltype(v)(0); },
      // forward: y = max(x, 0)
      [](auto v, auto g) { return v > 0 ? g : decltype(v)(0); });
}

Tensor gelu(const Tensor& x, std::string_view approximate) {
  const bool tanh_form = approximate == "tanh";
  ATTN_CHECK(tanh_form || approximate == "none" || approximate == "erf",
             "gelu: approximate must be \"none\" (exact, erf; \"erf\" also accepted) or \"tanh\"; got \"",
             std::string(approximate), "\"");
  if (tanh_form) {
    return unary_op(
        "gelu_tanh", kc::Act::gelu_tanh, x,
        [](auto v) {
          using T = decltype(v);
          return T(0.5) * v * (T(1) + std::tanh(T(kSqrt2OverPi) * (v + T(kGeluTanhC) * v * v * v)));
        },
        [](auto v, auto g) {
          // forward: y = 0.5 x (1 + tanh(u)),  u = √(2/π) (x + 0.044715 x³)
          using T = decltype(v);
          const T th = std::tanh(T(kSqrt2OverPi) * (v + T(kGeluTanhC) * v * v * v));
          const T du = T(kSqrt2OverPi) * (T(1) + T(3 * kGeluTanhC) * v * v);
          return g * (T(0.5) * (T(1) + th) + T(0.5) * v * (T(1) - th * th) * du);
        });
  }
  return unary_op(
      "gelu", kc::Act::gelu_erf, x,
      [](auto v) {
        using T = decltype(v);
        return T(0.5) * v * (T(1) + std::erf(v * T(kInvSqrt2)));
      },
      [](auto v, auto g) {
        // forward: y = x Φ(x) = 0.5 x (1 + erf(x/√2))   =>   dy/dx = Φ(x) + x φ(x)
        using T = decltype(v);
        return g * (T(0.5) * (T(1) + std::erf(v * T(kInvSqrt2))) +
                    v * T(kInvSqrt2Pi) * std::exp(T(-0.5) * v * v));
      });
}

Tensor silu(const Tensor& x) {
  return unary_op(
      "silu", kc::Act::silu, x, [](auto v) { return v * sigmoid(v); },
      [](auto v, auto g) {
        // forward: y = x σ(x)   =>   dy/dx = σ(x) (1 + x (1 - σ(x)))
        using T = decltype(v);
        const T s = sigmoid(v);
        return g * s * (T(1) + v * (T(1) - s));
      });
}

Tensor swiglu(const Tensor& a, const Tensor& b) {
  check_float(a, "swiglu", "a");
  check_float(b, "swiglu", "b");
  check_same_dtype(a, b, "swiglu", "a", "b");
  ATTN_CHECK(a.shape() == b.shape(), "swiglu: a and b must have the same shape; got a ", shape_str(a.shape()),
             " and b ", shape_str(b.shape()));
  const Tensor ac = contiguous_fast(a), bc = contiguous_fast(b);
  Tensor y = Tensor::empty(a.shape(), a.dtype());
  dispatch_float(a.dtype(), [&](auto t) {
    using T = decltype(t);
    if constexpr (std::is_same_v<T, float>) {
      if (fast_rows<T>()) return kc::swiglu_forward_f32(ac.data<T>(), bc.data<T>(), y.data<T>(), a.numel());
    }
    kc::binary_map<T>(a.numel(), ac.data<T>(), bc.data<T>(), y.data<T>(),
                      [](T u, T v) { return u * sigmoid(u) * v; });
  });
  if (needs_grad(a, b)) {
    record("swiglu", y, {a, b}, [ac = ac.detach(), bc = bc.detach()](const Tensor& g, const GradNeeds& need) {
      // forward: y = silu(a) · b   =>   da = dy · b · silu'(a),  db = dy · silu(a)
      const Tensor gc = contiguous_fast(g);
      Tensor da = need[0] ? Tensor::empty(ac.shape(), ac.dtype()) : Tensor();
      Tensor db = need[1] ? Tensor::empty(ac.shape(), ac.dtype()) : Tensor();
      dispatch_float(ac.dtype(), [&](auto t) {
        using T = decltype(t);
        const T *pa = ac.data<T>(), *pb = bc.data<T>(), *pg = gc.data<T>();
        T* pda = da.defined() ? da.data<T>() : nullptr;
        T* pdb = db.defined() ? db.data<T>() : nullptr;
        if constexpr (std::is_same_v<T, float>) {
          if (fast_rows<T>()) return kc::swiglu_backward_f32(pa, pb, pg, pda, pdb, ac.numel());
        }
        parallel_for(ac.numel(), 16384, [&](int64_t s, int64_t e, int) {
          for (int64_t i = s; i < e; ++i) {
            const T sg = sigmoid(pa[i]);
            if (pda) pda[i] = pg[i] * pb[i] * sg * (T(1) + pa[i] * (T(1) - sg));
            if (pdb) pdb[i] = pg[i] * pa[i] * sg;
          }
        });
      });
      return std::vector<Tensor>{da, db};
    });
  }
  return y;
}

// ============================================================================
// dropout
// ============================================================================
Tensor dropout(const Tensor& x, double p, bool train, uint64_t seed) {
  check_float(x, "dropout", "x");
  ATTN_CHECK(!std::isnan(p) && p >= 0 && p < 1, "dropout: p must be in [0, 1); got ", p);
  if (!train || p == 0) return x;
  const Tensor xc = contiguous_fast(x);
  Tensor y = Tensor::empty(x.shape(), x.dtype());
  dispatch_float(x.dtype(), [&](auto t) {
    using T = decltype(t);
    if constexpr (std::is_same_v<T, float>) {
      if (fast_rows<T>()) return kc::dropout_f32(xc.data<T>(), y.data<T>(), x.numel(), p, seed);
    }
    kc::dropout_apply<T>(xc.data<T>(), y.data<T>(), x.numel(), p, seed);
  });
  if (needs_grad(x)) {
    record("dropout", y, {x}, [p, seed](const Tensor& g, const GradNeeds&) {
      // forward: y[i] = x[i] · keep(seed, i) / (1 - p)   (the mask is recomputed, not saved)
      const Tensor gc = contiguous_fast(g);
      Tensor dx = Tensor::empty(g.shape(), g.dtype());
      dispatch_float(g.dtype(), [&](auto t) {
        using T = decltype(t);
        if constexpr (std::is_same_v<T, float>) {
          if (fast_rows<T>()) return kc::dropout_f32(gc.data<T>(), dx.data<T>(), g.numel(), p, seed);
        }
        kc::dropout_apply<T>(gc.data<T>(), dx.data<T>(), g.numel(), p, seed);
      });
      return std::vector<Tensor>{dx};
    });
  }
  return y;
}

Tensor relu_dropout(const Tensor& x, double p, bool train, uint64_t seed) {
  check_float(x, "relu_dropout", "x");
  ATTN_CHECK(!std::isnan(p) && p >= 0 && p < 1, "relu_dropout: p must be in [0, 1); got ", p);
  if (!train || p == 0 || !fast_rows<float>() || x.dtype() != DType::f32)
    return dropout(relu(x), p, train, seed);
  const Tensor xc = contiguous_fast(x);
  Tensor y = Tensor::empty(x.shape(), x.dtype());
  kc::dropout_fused_f32(kc::DropMode::relu, xc.data<float>(), nullptr, y.data<float>(), x.numel(), p, seed);
  if (needs_grad(x)) {
    record("relu_dropout", y, {x}, [yc = y.detach(), p](const Tensor& g, const GradNeeds&) {
      // forward: y[i] = max(x[i], 0) · keep(seed, i) / (1 - p)   =>   dx[i] = [x[i] > 0] · drop(g)[i],
      // and [x[i] > 0 and kept] = [y[i] != 0]: read from y, without drawing the keep decisions again
      const Tensor gc = contiguous_fast(g);
      Tensor dx = Tensor::empty(yc.shape(), yc.dtype());
      kc::dropout_fused_f32(kc::DropMode::relu_grad_out, yc.data<float>(), gc.data<float>(), dx.data<float>(),
                            yc.numel(), p, 0);
      return std::vector<Tensor>{dx};
    });
  }
  return y;
}

Tensor add_dropout(const Tensor& r, const Tensor& x, double p, bool train, uint64_t seed) {
  check_float(x, "add_dropout", "x");
  check_float(r, "add_dropout", "r");
  ATTN_CHECK(!std::isnan(p) && p >= 0 && p < 1, "add_dropout: p must be in [0, 1); got ", p);
  if (!train || p == 0 || !fast_rows<float>() || x.dtype() != DType::f32 || r.dtype() != DType::f32 ||
      r.shape() != x.shape())
    return add(r, dropout(x, p, train, seed));  // also broadcasts r and reports mismatched shapes
  const Tensor xc = contiguous_fast(x), rc = contiguous_fast(r);
  Tensor y = Tensor::empty(x.shape(), x.dtype());
  kc::dropout_fused_f32(kc::DropMode::add, xc.data<float>(), rc.data<float>(), y.data<float>(), x.numel(), p,
                        seed);
  if (needs_grad(r, x)) {
    record("add_dropout", y, {r, x}, [p, seed](const Tensor& g, const GradNeeds& need) {
      // forward: y = r + drop(x)   =>   dr = dy, dx = drop(dy) (the same mask)
      Tensor dx;
      if (need[1]) {
        const Tensor gc = contiguous_fast(g);
        dx = Tensor::empty(g.shape(), g.dtype());
        kc::dropout_f32(gc.data<float>(), dx.data<float>(), g.numel(), p, seed);
      }
      return std::vector<Tensor>{need[0] ? g : Tensor(), dx};
    });
  }
  return y;
}

// ============================================================================
// softmax, log_softmax
// ============================================================================
namespace {

Tensor softmax_impl(const Tensor& x, bool log) {
  const char* name = log ? "log_softmax" : "softmax";
  check_float(x, name, "x");
  ATTN_CHECK(x.rank() >= 1, name, ": x must have rank >= 1; got a rank-0 tensor");
  const int64_t C = x.size(-1);
  const int64_t rows = C == 0 ? 0 : x.numel() / C;
  const Tensor xc = contiguous_fast(x);
  Tensor y = Tensor::empty(x.shape(), x.dtype());
  dispatch_float(x.dtype(), [&](auto t) {
    using T = decltype(t);
    if constexpr (std::is_same_v<T, float>) {
      if (fast_rows<T>()) return kc::softmax_forward_f32(xc.data<T>(), y.data<T>(), rows, C, log);
    }
    kc::softmax_forward<T>(xc.data<T>(), y.data<T>(), rows, C, log);
  });
  if (needs_grad(x)) {
    record(name, y, {x}, [y = y.detach(), rows, C, log](const Tensor& g, const GradNeeds&) {
      // forward: softmax y = exp(x - lse);  log_softmax y = x - lse
      const Tensor gc = contiguous_fast(g);
      Tensor dx = Tensor::empty(y.shape(), y.dtype());
      dispatch_float(y.dtype(), [&](auto t) {
        using T = decltype(t);
        if constexpr (std::is_same_v<T, float>) {
          if (fast_rows<T>())
            return kc::softmax_backward_f32(gc.data<T>(), y.data<T>(), dx.data<T>(), rows, C, log);
        }
        kc::softmax_backward<T>(gc.data<T>(), y.data<T>(), dx.data<T>(), rows, C, log);
      });
      return std::vector<Tensor>{dx};
    });
  }
  return y;
}

}  // namespace

Tensor softmax(const Tensor& x) { return softmax_impl(x, false); }
Tensor log_softmax(const Tensor& x) { return softmax_impl(x, true); }

// ============================================================================
// cross_entropy
// ============================================================================
Tensor cross_entropy(const Tensor& logits, const Tensor& targets, const CrossEntropyOptions& o) {
  check_float(logits, "cross_entropy", "logits");
  ATTN_CHECK(logits.rank() == 2, "cross_entropy: logits must be [N, V]; got ", shape_str(logits.shape()));
  ATTN_CHECK(!std::isnan(o.label_smoothing) && o.label_smoothing >= 0 && o.label_smoothing <= 1,
             "cross_entropy: label_smoothing must be in [0, 1]; got ", o.label_smoothing);
  const int64_t N = logits.size(0), V = logits.size(1);
  ATTN_CHECK(targets.defined() && targets.rank() == 1 && targets.size(0) == N,
             "cross_entropy: targets must be [N] = [", N, "] (from logits ", shape_str(logits.shape()),
             "); got ", targets.defined() ? shape_str(targets.shape()) : "undefined");
  const std::vector<int64_t> tg = read_ids(targets, "cross_entropy", "targets");
  int64_t valid = 0;
  for (int64_t i = 0; i < N; ++i) {
    if (tg[i] == o.ignore_index) continue;
    ATTN_CHECK(tg[i] >= 0 && tg[i] < V, "cross_entropy: target ", tg[i], " at row ", i,
               " is out of range for V = ", V, " classes; targets must be in [0, ", V,
               ") or equal ignore_index = ", o.ignore_index);
    ++valid;
  }
  const Tensor xc = contiguous_fast(logits);
  Tensor lse = Tensor::empty({N}, DType::f64);
  Tensor loss = Tensor::empty({}, logits.dtype());
  if (logits.dtype() == DType::f32 && kc::rows_fast()) {
    // One pass over the logits: the loss and, when a gradient is wanted, d loss / d logits
    // for dloss = 1 (the exponentials are computed once); backward only rescales it.
    const bool grad = needs_grad(logits);
    Tensor dx = grad ? Tensor::empty({N, V}, DType::f32) : Tensor();
    const double gs = valid == 0 ? 0.0 : 1.0 / static_cast<double>(valid);
    const double total =
        kc::cross_entropy_f32(xc.data<float>(), tg.data(), lse.data<double>(),
                              grad ? dx.data<float>() : nullptr, N, V, o.ignore_index, o.label_smoothing, gs);
    // loss = sum over valid rows / number of valid rows (0 when none is valid)
    loss.data<float>()[0] = static_cast<float>(valid == 0 ? 0.0 : total / static_cast<double>(valid));
    if (grad) {
      record("cross_entropy", loss, {logits}, [dx](const Tensor& g, const GradNeeds&) {
        // forward: loss = mean over valid r of (1-ε)(lse_r - x[r, t_r]) + ε (lse_r - mean_v x[r, v])
        // => dx[r, v] = (softmax[r, v] - (1-ε) [v = t_r] - ε/V) / valid, saved for dloss = 1
        const double gl = g.to_vector()[0];
        return std::vector<Tensor>{gl == 1.0 ? dx : scale(dx, gl)};
      });
    }
    return loss;
  }
  dispatch_float(logits.dtype(), [&](auto t) {
    using T = decltype(t);
    const double total = kc::cross_entropy_forward<T>(xc.data<T>(), tg.data(), lse.data<double>(), N, V,
                                                      o.ignore_index, o.label_smoothing);
    // loss = sum over valid rows / number of valid rows (0 when none is valid)
    loss.data<T>()[0] = static_cast<T>(valid == 0 ? 0.0 : total / static_cast<double>(valid));
  });
  if (needs_grad(logits)) {
    record("cross_entropy", loss, {logits},
           [xc = xc.detach(), tg, lse, valid, N, V, o](const Tensor& g, const GradNeeds&) {
             // forward: loss = mean over valid r of (1-ε)(lse_r - x[r, t_r]) + ε (lse_r - mean_v x[r, v])
             // => dx[r, v] = (softmax[r, v] - (1-ε) [v = t_r] - ε/V) · dloss / valid
             const double gs = valid == 0 ? 0.0 : g.to_vector()[0] / static_cast<double>(valid);
             Tensor dx = Tensor::empty({N, V}, xc.dtype());
             dispatch_float(xc.dtype(), [&](auto t) {
               using T = decltype(t);
               kc::cross_entropy_backward<T>(xc.data<T>(), tg.data(), lse.data<double>(), dx.data<T>(), N, V,
                                             o.ignore_index, o.label_smoothing, gs);
             });
             return std::vector<Tensor>{dx};
           });
  }
  return loss;
}

// ============================================================================
// attention
// ============================================================================
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const AttentionOptions& options) {
  AttentionOptions o = options;
  o.capture = WeightCapture{};
  AttentionResult r = attention(q, k, v, o);
  Tensor out = r.out;
  if (needs_grad(q, k, v)) {
    record("attention", out, {q, k, v},
           [q = q.detach(), k = k.detach(), v = v.detach(), out_s = r.out.detach(), lse = r.lse, o](
               const Tensor& g, const GradNeeds&) {
             // forward: out, lse = attention(q, k, v, options)
             AttentionGrads gr = attention_backward(q, k, v, out_s, lse, g, o);
             return std::vector<Tensor>{gr.dq, gr.dk, gr.dv};
           });
  }
  return out;
}

}  // namespace attn
