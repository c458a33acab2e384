// Front-end of the attention operator: validate, allocate, dispatch.
#include <attn/core/parallel.h>
#include <attn/ops/attention.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <string>

#include "kernels/cpu/attention_cpu.h"
#include "kernels/ref/attention_ref.h"

namespace attn {
namespace {

using kernels::AttnArgs;
using kernels::AttnGradArgs;
using kernels::AttnOut;
using kernels::Strides4;

Strides4 strides4(const Tensor& t) { return {t.stride(0), t.stride(1), t.stride(2), t.stride(3)}; }

struct Dims {
  int64_t B, H, Hkv, Lq, Lk, D;
};

bool is_float_dtype(DType t) { return t == DType::f32 || t == DType::f64 || t == DType::bf16; }

Dims check_qkv(const Tensor& q, const Tensor& k, const Tensor& v) {
  ATTN_CHECK(q.defined() && k.defined() && v.defined(), "attention: q, k and v must all be given");
  ATTN_CHECK(q.rank() == 4, "attention: q must have rank 4 [B, H, Lq, D]; got rank ", q.rank(), " ",
             shape_str(q.shape()));
  ATTN_CHECK(k.rank() == 4, "attention: k must have rank 4 [B, Hkv, Lk, D]; got rank ", k.rank(), " ",
             shape_str(k.shape()));
  ATTN_CHECK(v.rank() == 4, "attention: v must have rank 4 [B, Hkv, Lk, D]; got rank ", v.rank(), " ",
             shape_str(v.shape()));
  ATTN_CHECK(is_float_dtype(q.dtype()), "attention: q must be f32, bf16 or f64; got ", dtype_name(q.dtype()));
  ATTN_CHECK(k.dtype() == q.dtype() && v.dtype() == q.dtype(),
             "attention: q, k and v must share one dtype; got q ", dtype_name(q.dtype()), ", k ",
             dtype_name(k.dtype()), ", v ", dtype_name(v.dtype()));
  Dims d{q.size(0), q.size(1), k.size(1), q.size(2), k.size(2), q.size(3)};
  ATTN_CHECK(k.shape() == v.shape(), "attention: k and v must have the same shape [B, Hkv, Lk, D]; got k ",
             shape_str(k.shape()), " and v ", shape_str(v.shape()));
  ATTN_CHECK(k.size(0) == d.B, "attention: k must have batch B = ", d.B, " (from q ", shape_str(q.shape()),
             "); got ", k.size(0));
  ATTN_CHECK(k.size(3) == d.D, "attention: k must have head size D = ", d.D, " (from q ",
             shape_str(q.shape()), "); got ", k.size(3));
  ATTN_CHECK(d.D > 0, "attention: head size D must be > 0; got q ", shape_str(q.shape()));
  ATTN_CHECK(d.Hkv > 0 && d.H > 0 && d.H % d.Hkv == 0,
             "attention: the number of kv heads Hkv must divide the query heads H; got H = ", d.H,
             ", Hkv = ", d.Hkv);
  return d;
}

void check_options(const Dims& d, DType dtype, const AttentionOptions& o) {
  if (o.scale) {
    ATTN_CHECK(std::isfinite(*o.scale), "attention: scale must be a finite number; got ", *o.scale);
  }
  ATTN_CHECK(std::isfinite(o.softcap) && o.softcap >= 0,
             "attention: softcap must be finite and >= 0 (0 = off); got ", o.softcap);
  ATTN_CHECK(!std::isnan(o.dropout_p) && o.dropout_p >= 0 && o.dropout_p < 1,
             "attention: dropout_p must be in [0, 1); got ", o.dropout_p);
  ATTN_CHECK(o.window_left >= -1 && o.window_right >= -1,
             "attention: window sizes must be >= 0 or -1 (unbounded); got left ", o.window_left, ", right ",
             o.window_right);
  if (!o.key_lengths.empty()) {
    ATTN_CHECK(static_cast<int64_t>(o.key_lengths.size()) == d.B,
               "attention: key_lengths must hold B = ", d.B, " values; got ", o.key_lengths.size());
    for (std::size_t b = 0; b < o.key_lengths.size(); ++b)
      ATTN_CHECK(o.key_lengths[b] >= 0 && o.key_lengths[b] <= d.Lk, "attention: key_lengths[", b,
                 "] must be in [0, Lk = ", d.Lk, "]; got ", o.key_lengths[b]);
  }
  const Shape full{d.B, d.H, d.Lq, d.Lk};
  auto check_mask = [&](const Tensor& m, const char* name) {
    ATTN_CHECK(m.rank() <= 4, "attention: ", name,
               " mask must have rank <= 4 and broadcast to [B, H, Lq, Lk] = ", shape_str(full), "; got ",
               shape_str(m.shape()));
    Shape b;
    try {
      b = broadcast_shapes(m.shape(), full);
    } catch (const Error&) {
      b.clear();
    }
    ATTN_CHECK(b == full, "attention: ", name, " mask of shape ", shape_str(m.shape()),
               " does not broadcast to [B, H, Lq, Lk] = ", shape_str(full));
  };
  if (o.allow.defined()) {
    ATTN_CHECK(o.allow.dtype() == DType::u8, "attention: allow mask must be u8 (nonzero = may attend); got ",
               dtype_name(o.allow.dtype()));
    check_mask(o.allow, "allow");
  }
  if (o.bias.defined()) {
    ATTN_CHECK(is_float_dtype(o.bias.dtype()), "attention: bias mask must be a float tensor; got ",
               dtype_name(o.bias.dtype()));
    check_mask(o.bias, "bias");
  }
  if (o.capture.enabled) {
    auto check_idx = [](const std::vector<int64_t>& v, int64_t n, const char* what) {
      for (int64_t x : v)
        ATTN_CHECK(x >= 0 && x < n, "attention: capture ", what, " index must be in [0, ", n, "); got ", x);
    };
    check_idx(o.capture.batches, d.B, "batch");
    check_idx(o.capture.heads, d.H, "head");
    check_idx(o.capture.rows, d.Lq, "row");
  }
  (void)dtype;
}

std::vector<int64_t> all_or(const std::vector<int64_t>& v, int64_t n) {
  if (!v.empty()) return v;
  std::vector<int64_t> r(n);
  for (int64_t i = 0; i < n; ++i) r[i] = i;
  return r;
}

// Input prepared for a kernel computing in T: converted if needed and, for
// the fused kernel, with unit stride in the last dimension.
template <typename T>
Tensor prepare(const Tensor& t, bool unit_last) {
  Tensor x = t.dtype() == dtype_of<T>::value ? t : t.to(dtype_of<T>::value);
  if (unit_last && x.rank() > 0 && x.size(-1) > 1 && x.stride(-1) != 1) x = x.clone();
  return x;
}

template <typename T>
struct Prepared {
  Tensor q, k, v, allow, bias;
  AttnArgs<T> args;
};

// bf16_direct: q, k, v are bf16 and stay so (AttnArgs::bf16, the fused forward's bf16 kernels);
// otherwise they are converted to T.
template <typename T>
Prepared<T> make_args(const Tensor& q, const Tensor& k, const Tensor& v, const Dims& d,
                      const AttentionOptions& o, bool unit_last, bool bf16_direct = false) {
  Prepared<T> p;
  p.q = bf16_direct ? prepare<bf16>(q, unit_last) : prepare<T>(q, unit_last);
  p.k = bf16_direct ? prepare<bf16>(k, unit_last) : prepare<T>(k, unit_last);
  p.v = bf16_direct ? prepare<bf16>(v, unit_last) : prepare<T>(v, unit_last);
  AttnArgs<T>& a = p.args;
  a.B = d.B, a.H = d.H, a.Hkv = d.Hkv, a.Lq = d.Lq, a.Lk = d.Lk, a.D = d.D;
  a.sq = strides4(p.q), a.sk = strides4(p.k), a.sv = strides4(p.v);
  if (bf16_direct) {
    a.bf16 = true;
    a.q16 = &p.q.template data<bf16>()->bits;
    a.k16 = &p.k.template data<bf16>()->bits;
    a.v16 = &p.v.template data<bf16>()->bits;
  } else {
    a.q = p.q.template data<T>();
    a.k = p.k.template data<T>();
    a.v = p.v.template data<T>();
  }
  a.scale = o.scale ? *o.scale : 1.0 / std::sqrt(static_cast<double>(d.D));
  a.softcap = o.softcap;
  a.mask.Lq = d.Lq, a.mask.Lk = d.Lk;
  a.mask.causal = o.causal;
  a.mask.diag_offset = o.align == Align::bottom_right ? d.Lk - d.Lq : 0;
  a.mask.window_left = o.window_left, a.mask.window_right = o.window_right;
  a.mask.key_lengths = o.key_lengths.empty() ? nullptr : o.key_lengths.data();
  const Shape full{d.B, d.H, d.Lq, d.Lk};
  if (o.allow.defined()) {
    p.allow = o.allow.expand(full);
    a.allow = p.allow.template data<uint8_t>(), a.sallow = strides4(p.allow);
  }
  if (o.bias.defined()) {
    Tensor bt = o.bias.dtype() == dtype_of<T>::value ? o.bias : o.bias.to(dtype_of<T>::value);
    p.bias = bt.expand(full);
    a.bias = p.bias.template data<T>(), a.sbias = strides4(p.bias);
  }
  a.dropout_p = o.dropout_p;
  a.dropout_seed = o.dropout_seed;
  return p;
}

Backend resolve(const Tensor& q, const AttentionOptions& o) {
  if (o.backend == Backend::fused) {
    ATTN_CHECK(q.dtype() != DType::f64,
               "attention: the fused backend computes in fp32 and takes f32 or bf16 inputs; got f64 "
               "(use Backend::reference or Backend::automatic)");
    return Backend::fused;
  }
  if (o.backend == Backend::reference) return Backend::reference;
  return q.dtype() == DType::f64 ? Backend::reference : Backend::fused;
}

// `into`: the caller's output tensor (attention_into), checked; undefined = allocate one.
template <typename T>
AttentionResult forward_t(const Tensor& q, const Tensor& k, const Tensor& v, const Dims& d,
                          const AttentionOptions& o, Backend be, const Tensor& into = Tensor()) {
  const DType ot = dtype_of<T>::value;
  AttentionResult r;
  r.out = into.defined() ? into : Tensor::empty({d.B, d.H, d.Lq, d.D}, ot);
  r.lse = Tensor::empty({d.B, d.H, d.Lq}, ot);
  AttnOut<T> out;
  out.out = r.out.template data<T>();
  if (!r.out.is_contiguous()) out.sout = strides4(r.out);
  out.lse = r.lse.template data<T>();
  if (o.capture.enabled) {
    out.cap_b = all_or(o.capture.batches, d.B);
    out.cap_h = all_or(o.capture.heads, d.H);
    out.cap_i = all_or(o.capture.rows, d.Lq);
    r.weights = Tensor::zeros({static_cast<int64_t>(out.cap_b.size()), static_cast<int64_t>(out.cap_h.size()),
                               static_cast<int64_t>(out.cap_i.size()), d.Lk},
                              ot);
    out.weights = r.weights.template data<T>();
  }
  if (d.B * d.H * d.Lq == 0) return r;
  if (d.Lk == 0) {  // every row is fully masked
    r.out.fill(0);
    r.lse.fill(-std::numeric_limits<double>::infinity());
    return r;
  }
  bool bf16_direct = false;
  if constexpr (std::is_same_v<T, float>) {
    // bf16 q/k/v go to the fused kernel as bf16 (vdpbf16ps) when the CPU has AVX512_BF16, no weights
    // are captured, and tiles have more than 4 query rows: smaller tiles (decode without GQA) take
    // the f32 row path, which is faster there, so those inputs are converted as before.
    const int64_t rows = d.H > d.Hkv && d.Lq < 64 ? (d.H / d.Hkv) * d.Lq : d.Lq;
    bf16_direct = be == Backend::fused && q.dtype() == DType::bf16 && !o.capture.enabled && rows > 4 &&
                  kernels::cpu::fused_bf16_available();
  }
  Prepared<T> p = make_args<T>(q, k, v, d, o, be == Backend::fused, bf16_direct);
  if constexpr (std::is_same_v<T, float>) {
    if (be == Backend::fused) {
      kernels::cpu::attention_forward(p.args, out);
      return r;
    }
  }
  kernels::ref::attention_forward(p.args, out);
  return r;
}

template <typename T>
AttentionGrads backward_t(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                          const Tensor& lse, const Tensor& dout, const Dims& d, const AttentionOptions& o,
                          Backend be) {
  const DType ot = dtype_of<T>::value;
  AttentionGrads g;
  g.dq = Tensor::zeros({d.B, d.H, d.Lq, d.D}, ot);
  g.dk = Tensor::zeros({d.B, d.Hkv, d.Lk, d.D}, ot);
  g.dv = Tensor::zeros({d.B, d.Hkv, d.Lk, d.D}, ot);
  if (d.B * d.H * d.Lq * d.Lk == 0) return g;
  const bool fused = be == Backend::fused;
  Prepared<T> p = make_args<T>(q, k, v, d, o, fused);
  Tensor o_t = prepare<T>(out, fused), do_t = prepare<T>(dout, fused);
  Tensor lse_t = prepare<T>(lse, false).contiguous();
  AttnGradArgs<T> ga;
  ga.out = o_t.template data<T>(), ga.sout = strides4(o_t);
  ga.dout = do_t.template data<T>(), ga.sdout = strides4(do_t);
  ga.lse = lse_t.template data<T>();
  ga.dq = g.dq.template data<T>();
  ga.dk = g.dk.template data<T>();
  ga.dv = g.dv.template data<T>();
  if constexpr (std::is_same_v<T, float>) {
    if (fused) {
      kernels::cpu::attention_backward(p.args, ga);
      return g;
    }
  }
  kernels::ref::attention_backward(p.args, ga);
  return g;
}

}  // namespace

AttentionResult attention(const Tensor& q, const Tensor& k, const Tensor& v,
                          const AttentionOptions& options) {
  const Dims d = check_qkv(q, k, v);
  check_options(d, q.dtype(), options);
  const Backend be = resolve(q, options);
  if (q.dtype() == DType::f64) return forward_t<double>(q, k, v, d, options, be);
  return forward_t<float>(q, k, v, d, options, be);
}

AttentionResult attention_into(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                               const AttentionOptions& options) {
  const Dims d = check_qkv(q, k, v);
  check_options(d, q.dtype(), options);
  const Backend be = resolve(q, options);
  const DType want = q.dtype() == DType::f64 ? DType::f64 : DType::f32;
  const Shape shape{d.B, d.H, d.Lq, d.D};
  ATTN_CHECK(out.defined() && out.shape() == shape, "attention_into: out must have shape ", shape_str(shape),
             "; got ", out.defined() ? shape_str(out.shape()) : "undefined");
  ATTN_CHECK(out.dtype() == want, "attention_into: out must be ", dtype_name(want), " for ",
             dtype_name(q.dtype()), " inputs; got ", dtype_name(out.dtype()));
  // Rows must not overlap: unit stride in D, and the three outer strides, sorted, each at least the
  // extent of what they step over (a permutation of a dense layout passes, a broadcast does not).
  if (d.B * d.H * d.Lq > 0 && !out.is_contiguous()) {
    ATTN_CHECK(d.D == 1 || out.stride(3) == 1, "attention_into: out must have unit stride in D; got strides ",
               shape_str(out.strides()));
    std::array<std::array<int64_t, 2>, 3> dims{
        {{out.stride(0), d.B}, {out.stride(1), d.H}, {out.stride(2), d.Lq}}};
    std::sort(dims.begin(), dims.end());
    int64_t extent = d.D;  // elements spanned by what the current stride steps over
    for (const auto& [stride, size] : dims) {
      if (size == 1) continue;
      ATTN_CHECK(stride >= extent, "attention_into: out's rows overlap (strides ", shape_str(out.strides()),
                 " for shape ", shape_str(out.shape()), "); expected a non-overlapping layout");
      extent = stride * size;
    }
  }
  if (q.dtype() == DType::f64) return forward_t<double>(q, k, v, d, options, be, out);
  return forward_t<float>(q, k, v, d, options, be, out);
}

AttentionGrads attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                                  const Tensor& lse, const Tensor& dout, const AttentionOptions& options) {
  const Dims d = check_qkv(q, k, v);
  check_options(d, q.dtype(), options);
  const Shape qshape{d.B, d.H, d.Lq, d.D};
  ATTN_CHECK(out.defined() && out.shape() == qshape, "attention_backward: out must have shape ",
             shape_str(qshape), "; got ", out.defined() ? shape_str(out.shape()) : "undefined");
  ATTN_CHECK(dout.defined() && dout.shape() == qshape, "attention_backward: dout must have shape ",
             shape_str(qshape), "; got ", dout.defined() ? shape_str(dout.shape()) : "undefined");
  const Shape lshape{d.B, d.H, d.Lq};
  ATTN_CHECK(lse.defined() && lse.shape() == lshape, "attention_backward: lse must have shape ",
             shape_str(lshape), "; got ", lse.defined() ? shape_str(lse.shape()) : "undefined");
  ATTN_CHECK(is_float_dtype(out.dtype()) && is_float_dtype(dout.dtype()) && is_float_dtype(lse.dtype()),
             "attention_backward: out, lse and dout must be float tensors; got ", dtype_name(out.dtype()),
             ", ", dtype_name(lse.dtype()), ", ", dtype_name(dout.dtype()));
  const Backend be = resolve(q, options);
  if (q.dtype() == DType::f64) return backward_t<double>(q, k, v, out, lse, dout, d, options, be);
  return backward_t<float>(q, k, v, out, lse, dout, d, options, be);
}

const char* backend_name(Backend b) {
  switch (b) {
    case Backend::automatic:
      return "automatic";
    case Backend::reference:
      return "reference";
    case Backend::fused:
      return "fused";
  }
  return "?";
}

BackendChoice choose_backend(const Tensor& q, const Tensor& k, const Tensor& v,
                             const AttentionOptions& options) {
  check_qkv(q, k, v);
  const Backend be = resolve(q, options);
  std::string why;
  if (options.backend != Backend::automatic) {
    why = std::string("requested explicitly (") + backend_name(options.backend) + ")";
  } else if (be == Backend::reference) {
    why = "f64 inputs: the fused kernel computes in fp32, so the f64 reference runs";
  } else {
    why = std::string("fused CPU kernel (") + kernels::cpu::isa_name() +
          "): tiled online softmax over key blocks, threads over batch x heads x query tiles, "
          "no Lq x Lk buffer";
  }
  return {be, why};
}

bool dropout_keep(uint64_t seed, int64_t b, int64_t h, int64_t i, int64_t j, double p) {
  if (p <= 0) return true;
  return kernels::dropout_hash(seed, b, h, i, j) >= kernels::dropout_threshold(p);
}

}  // namespace attn
