// Window attention front-end: validate, partition the grid into (shifted,
// padded) windows, run attn::attention on [B·nW, H, M², D], reverse the
// partition. No kernel of its own: the softmax is the attention operator's.
#include <attn/core/parallel.h>
#include <attn/ops/window_attention.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

namespace attn {
namespace {

bool is_float_dtype(DType t) { return t == DType::f32 || t == DType::f64 || t == DType::bf16; }

struct GridDims {
  int64_t B, H, Hkv, Hg, Wg, D;
};

GridDims check_qkv(const char* fn, const Tensor& q, const Tensor& k, const Tensor& v) {
  ATTN_CHECK(q.defined() && k.defined() && v.defined(), fn, ": q, k and v must all be given");
  ATTN_CHECK(q.rank() == 5, fn, ": q must have rank 5 [B, H, Hg, Wg, D]; got rank ", q.rank(), " ",
             shape_str(q.shape()));
  ATTN_CHECK(k.rank() == 5, fn, ": k must have rank 5 [B, Hkv, Hg, Wg, D]; got rank ", k.rank(), " ",
             shape_str(k.shape()));
  ATTN_CHECK(v.rank() == 5, fn, ": v must have rank 5 [B, Hkv, Hg, Wg, D]; got rank ", v.rank(), " ",
             shape_str(v.shape()));
  ATTN_CHECK(is_float_dtype(q.dtype()), fn, ": q must be f32, bf16 or f64; got ", dtype_name(q.dtype()));
  ATTN_CHECK(k.dtype() == q.dtype() && v.dtype() == q.dtype(), fn,
             ": q, k and v must share one dtype; got q ", dtype_name(q.dtype()), ", k ",
             dtype_name(k.dtype()), ", v ", dtype_name(v.dtype()));
  ATTN_CHECK(k.shape() == v.shape(), fn, ": k and v must have the same shape [B, Hkv, Hg, Wg, D]; got k ",
             shape_str(k.shape()), " and v ", shape_str(v.shape()));
  const GridDims d{q.size(0), q.size(1), k.size(1), q.size(2), q.size(3), q.size(4)};
  const Shape want{d.B, k.size(1), d.Hg, d.Wg, d.D};
  ATTN_CHECK(k.shape() == want, fn, ": k and v must match q ", shape_str(q.shape()),
             " in B, Hg, Wg and D, i.e. have shape ", shape_str(want), "; got ", shape_str(k.shape()));
  ATTN_CHECK(d.D > 0, fn, ": head size D must be > 0; got q ", shape_str(q.shape()));
  ATTN_CHECK(d.Hkv > 0 && d.H > 0 && d.H % d.Hkv == 0, fn,
             ": the number of kv heads Hkv must divide the query heads H; got H = ", d.H, ", Hkv = ", d.Hkv);
  return d;
}

void check_bias(const char* fn, const Tensor& bias, const GridDims& d, const WindowGeometry& g,
                const WindowAttentionOptions& o) {
  if (!bias.defined()) return;
  const int64_t T = g.window * g.window;
  std::string clamp_note;
  if (g.window != o.window)
    clamp_note = detail::concat(" (window clamped from ", o.window, " to ", g.window, " because the grid is ",
                                d.Hg, " x ", d.Wg, ", as Swin does)");
  ATTN_CHECK(is_float_dtype(bias.dtype()), fn, ": bias must be a float tensor [H, M², M²]; got ",
             dtype_name(bias.dtype()));
  ATTN_CHECK(bias.rank() == 3 && (bias.size(0) == d.H || bias.size(0) == 1) && bias.size(1) == T &&
                 bias.size(2) == T,
             fn, ": bias must have shape [H, M², M²] = ", shape_str({d.H, T, T}),
             " (or leading dim 1) for M = ", g.window, clamp_note, "; got ", shape_str(bias.shape()));
}

// For every slot (window w, position t = ty·M + tx) of the partition, the grid
// token it holds (y·Wg + x) or −1 for padding, and the Swin region label of the
// slot in the shifted frame (tokens may attend within one window only when their
// labels agree).
struct Partition {
  WindowGeometry g;
  int64_t nW = 0, T = 0;
  std::vector<int64_t> token;   // [nW · T]
  std::vector<uint8_t> region;  // [nW · T]
};

Partition make_partition(int64_t Hg, int64_t Wg, const WindowGeometry& g) {
  Partition p;
  p.g = g;
  p.nW = g.nWh * g.nWw;
  p.T = g.window * g.window;
  p.token.resize(static_cast<std::size_t>(p.nW * p.T));
  p.region.resize(p.token.size());
  const int64_t M = g.window, s = g.shift;
  // Swin's slices in the shifted frame: [0, P − M), [P − M, P − s), [P − s, P).
  auto label = [&](int64_t pos, int64_t P) -> int {
    return s == 0 || pos < P - M ? 0 : (pos < P - s ? 1 : 2);
  };
  for (int64_t wy = 0; wy < g.nWh; ++wy)
    for (int64_t wx = 0; wx < g.nWw; ++wx)
      for (int64_t ty = 0; ty < M; ++ty)
        for (int64_t tx = 0; tx < M; ++tx) {
          const int64_t py = wy * M + ty, px = wx * M + tx;        // position in the rolled, padded grid
          const int64_t y = (py + s) % g.Hp, x = (px + s) % g.Wp;  // where it came from
          const std::size_t i = static_cast<std::size_t>((wy * g.nWw + wx) * p.T + ty * M + tx);
          p.token[i] = y < Hg && x < Wg ? y * Wg + x : -1;
          p.region[i] = static_cast<uint8_t>(3 * label(py, g.Hp) + label(px, g.Wp));
        }
  return p;
}

// allow [nW, T, T] (u8), expanded to the operator's batch [B·nW, 1, T, T].
Tensor make_allow(const Partition& p, int64_t B) {
  Tensor m = Tensor::empty({p.nW, p.T, p.T}, DType::u8);  // m: [nW, T, T]
  uint8_t* a = m.data<uint8_t>();
  for (int64_t w = 0; w < p.nW; ++w)
    for (int64_t i = 0; i < p.T; ++i)
      for (int64_t j = 0; j < p.T; ++j) {
        const std::size_t si = static_cast<std::size_t>(w * p.T + i),
                          sj = static_cast<std::size_t>(w * p.T + j);
        a[(w * p.T + i) * p.T + j] = p.token[si] >= 0 && p.token[sj] >= 0 && p.region[si] == p.region[sj];
      }
  if (B == 1) return m.view({p.nW, 1, p.T, p.T});
  return m.unsqueeze(0).expand({B, p.nW, p.T, p.T}).contiguous().view({B * p.nW, 1, p.T, p.T});
}

// Row-wise copy of E-byte elements; `row` elements per row with source stride `st` (in elements).
void copy_row(char* dst, const char* src, int64_t row, int64_t st, std::size_t esize) {
  if (st == 1 || row == 1) {
    std::memcpy(dst, src, static_cast<std::size_t>(row) * esize);
    return;
  }
  for (int64_t e = 0; e < row; ++e) std::memcpy(dst + e * esize, src + e * st * esize, esize);
}

// Grid -> windows. src: [B, Hs, Hg, Wg, R] (R = D, or a rank-4 [B, Hs, Hg, Wg] with R = 1),
// any strides. Returns a contiguous [B·nW, Hs, T, R] (rank 3 when src is rank 4), pads = `pad`.
Tensor to_windows(const Tensor& src, const Partition& p, double pad) {
  const bool has_row = src.rank() == 5;
  const int64_t B = src.size(0), Hs = src.size(1), Wg = src.size(3);
  const int64_t R = has_row ? src.size(4) : 1;
  const int64_t sr = has_row ? src.stride(4) : 1;
  Tensor dst = has_row ? Tensor::empty({B * p.nW, Hs, p.T, R}, src.dtype())
                       : Tensor::empty({B * p.nW, Hs, p.T}, src.dtype());
  const Tensor pad_row = Tensor::full({R}, pad, src.dtype());
  const std::size_t es = dtype_size(src.dtype());
  const char* sb = static_cast<const char*>(src.raw_data());
  char* db = static_cast<char*>(dst.raw_data());
  const char* pb = static_cast<const char*>(pad_row.raw_data());
  const int64_t s0 = src.stride(0), s1 = src.stride(1), s2 = src.stride(2), s3 = src.stride(3);
  parallel_for(B * p.nW * Hs, 8, [&](int64_t begin, int64_t end, int) {
    for (int64_t r = begin; r < end; ++r) {  // r = (b·nW + w)·Hs + h
      const int64_t h = r % Hs, w = (r / Hs) % p.nW, b = r / (Hs * p.nW);
      for (int64_t t = 0; t < p.T; ++t) {
        char* d = db + ((r * p.T + t) * R) * static_cast<int64_t>(es);
        const int64_t tok = p.token[static_cast<std::size_t>(w * p.T + t)];
        if (tok < 0) {
          std::memcpy(d, pb, static_cast<std::size_t>(R) * es);
          continue;
        }
        const int64_t y = tok / Wg, x = tok % Wg;
        copy_row(d, sb + (b * s0 + h * s1 + y * s2 + x * s3) * static_cast<int64_t>(es), R, sr, es);
      }
    }
  });
  return dst;
}

// Windows -> grid. src: contiguous [B·nW, Hs, T, R] (or [B·nW, Hs, T]); returns
// [B, Hs, Hg, Wg, R] (or [B, Hs, Hg, Wg]). Padding slots are dropped; every grid
// token is held by exactly one slot, so every output element is written.
Tensor from_windows(const Tensor& src, const Partition& p, int64_t B, int64_t Hg, int64_t Wg) {
  const bool has_row = src.rank() == 4;
  const int64_t Hs = src.size(1), R = has_row ? src.size(3) : 1;
  Tensor dst =
      has_row ? Tensor::empty({B, Hs, Hg, Wg, R}, src.dtype()) : Tensor::empty({B, Hs, Hg, Wg}, src.dtype());
  const std::size_t es = dtype_size(src.dtype());
  const std::size_t row_bytes = static_cast<std::size_t>(R) * es;
  const char* sb = static_cast<const char*>(src.raw_data());
  char* db = static_cast<char*>(dst.raw_data());
  const int64_t N = Hg * Wg;
  parallel_for(B * p.nW * Hs, 8, [&](int64_t begin, int64_t end, int) {
    for (int64_t r = begin; r < end; ++r) {  // r = (b·nW + w)·Hs + h
      const int64_t h = r % Hs, w = (r / Hs) % p.nW, b = r / (Hs * p.nW);
      for (int64_t t = 0; t < p.T; ++t) {
        const int64_t tok = p.token[static_cast<std::size_t>(w * p.T + t)];
        if (tok < 0) continue;
        std::memcpy(db + ((b * Hs + h) * N + tok) * static_cast<int64_t>(row_bytes),
                    sb + (r * p.T + t) * static_cast<int64_t>(row_bytes), row_bytes);
      }
    }
  });
  return dst;
}

AttentionOptions inner_options(const WindowAttentionOptions& o, const Partition& p, int64_t B) {
  AttentionOptions a;
  a.scale = o.scale;
  a.backend = o.backend;
  a.bias = o.bias;  // [H or 1, T, T] broadcasts over the B·nW windows
  if (p.g.masked()) a.allow = make_allow(p, B);
  return a;
}

void check_scale(const char* fn, const WindowAttentionOptions& o) {
  if (o.scale) ATTN_CHECK(std::isfinite(*o.scale), fn, ": scale must be a finite number; got ", *o.scale);
}

}  // namespace

WindowGeometry window_geometry(int64_t Hg, int64_t Wg, const WindowAttentionOptions& o) {
  ATTN_CHECK(o.window >= 1, "window_attention: window M must be >= 1; got ", o.window);
  ATTN_CHECK(o.shift >= 0 && o.shift < o.window,
             "window_attention: shift must be in [0, window M = ", o.window, "); got ", o.shift);
  ATTN_CHECK(Hg >= 0 && Wg >= 0, "window_attention: grid sizes must be >= 0; got ", Hg, " x ", Wg);
  WindowGeometry g{};
  g.Hg = Hg;
  g.Wg = Wg;
  g.window = o.window;
  g.shift = o.shift;
  const int64_t small = std::min(Hg, Wg);
  if (small >= 1 && small <= g.window) {  // Swin: a window as large as the grid, and no shift
    g.window = small;
    g.shift = 0;
  }
  g.nWh = (Hg + g.window - 1) / g.window;
  g.nWw = (Wg + g.window - 1) / g.window;
  g.Hp = g.nWh * g.window;
  g.Wp = g.nWw * g.window;
  return g;
}

Tensor swin_relative_position_bias(const Tensor& table, int64_t window) {
  ATTN_CHECK(window >= 1, "swin_relative_position_bias: window M must be >= 1; got ", window);
  ATTN_CHECK(table.defined(), "swin_relative_position_bias: table must be given");
  const int64_t M = window, span = 2 * M - 1;
  ATTN_CHECK(table.rank() == 2 && table.size(0) == span * span && table.size(1) >= 1,
             "swin_relative_position_bias: table must have shape [(2M - 1)², H] = [", span * span,
             ", H] for M = ", M, "; got ", shape_str(table.shape()));
  ATTN_CHECK(table.dtype() == DType::f32 || table.dtype() == DType::f64 || table.dtype() == DType::bf16,
             "swin_relative_position_bias: table must be a float tensor; got ", dtype_name(table.dtype()));
  const DType ot = table.dtype() == DType::f64 ? DType::f64 : DType::f32;
  const Tensor t = table.to(DType::f64);  // t: [(2M − 1)², H], contiguous
  const double* tp = t.data<double>();
  const int64_t H = table.size(1), T = M * M;
  Tensor bias = Tensor::empty({H, T, T}, DType::f64);  // bias: [H, T, T]
  double* bp = bias.data<double>();
  for (int64_t i = 0; i < T; ++i)
    for (int64_t j = 0; j < T; ++j) {
      const int64_t dy = i / M - j / M, dx = i % M - j % M;
      const int64_t idx = (dy + M - 1) * span + (dx + M - 1);
      for (int64_t h = 0; h < H; ++h) bp[(h * T + i) * T + j] = tp[idx * H + h];
    }
  return ot == DType::f64 ? bias : bias.to(ot);
}

WindowAttentionResult window_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                       const WindowAttentionOptions& options) {
  const char* fn = "window_attention";
  const GridDims d = check_qkv(fn, q, k, v);
  check_scale(fn, options);
  const WindowGeometry g = window_geometry(d.Hg, d.Wg, options);
  check_bias(fn, options.bias, d, g, options);
  const DType ot = q.dtype() == DType::f64 ? DType::f64 : DType::f32;
  WindowAttentionResult r;
  if (d.B * d.H * d.Hg * d.Wg == 0) {
    r.out = Tensor::empty({d.B, d.H, d.Hg, d.Wg, d.D}, ot);
    r.lse = Tensor::empty({d.B, d.H, d.Hg, d.Wg}, ot);
    return r;
  }
  const Partition p = make_partition(d.Hg, d.Wg, g);
  const Tensor qw = to_windows(q, p, 0.0);  // qw: [B·nW, H, T, D]
  const Tensor kw = to_windows(k, p, 0.0);  // kw: [B·nW, Hkv, T, D]
  const Tensor vw = to_windows(v, p, 0.0);  // vw: [B·nW, Hkv, T, D]
  const AttentionResult a = attention(qw, kw, vw, inner_options(options, p, d.B));
  r.out = from_windows(a.out, p, d.B, d.Hg, d.Wg);  // [B, H, Hg, Wg, D]
  r.lse = from_windows(a.lse, p, d.B, d.Hg, d.Wg);  // [B, H, Hg, Wg]
  return r;
}

AttentionGrads window_attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                                         const Tensor& lse, const Tensor& dout,
                                         const WindowAttentionOptions& options) {
  const char* fn = "window_attention_backward";
  const GridDims d = check_qkv(fn, q, k, v);
  check_scale(fn, options);
  const WindowGeometry g = window_geometry(d.Hg, d.Wg, options);
  check_bias(fn, options.bias, d, g, options);
  const Shape qshape{d.B, d.H, d.Hg, d.Wg, d.D};
  ATTN_CHECK(out.defined() && out.shape() == qshape, fn, ": out must have shape ", shape_str(qshape),
             "; got ", out.defined() ? shape_str(out.shape()) : "undefined");
  ATTN_CHECK(dout.defined() && dout.shape() == qshape, fn, ": dout must have shape ", shape_str(qshape),
             "; got ", dout.defined() ? shape_str(dout.shape()) : "undefined");
  const Shape lshape{d.B, d.H, d.Hg, d.Wg};
  ATTN_CHECK(lse.defined() && lse.shape() == lshape, fn, ": lse must have shape ", shape_str(lshape),
             "; got ", lse.defined() ? shape_str(lse.shape()) : "undefined");
  ATTN_CHECK(is_float_dtype(out.dtype()) && is_float_dtype(dout.dtype()) && is_float_dtype(lse.dtype()), fn,
             ": out, lse and dout must be float tensors; got ", dtype_name(out.dtype()), ", ",
             dtype_name(lse.dtype()), ", ", dtype_name(dout.dtype()));
  const DType ot = q.dtype() == DType::f64 ? DType::f64 : DType::f32;
  AttentionGrads gr;
  if (d.B * d.H * d.Hg * d.Wg == 0) {
    gr.dq = Tensor::zeros(qshape, ot);
    gr.dk = Tensor::zeros(k.shape(), ot);
    gr.dv = Tensor::zeros(v.shape(), ot);
    return gr;
  }
  const Partition p = make_partition(d.Hg, d.Wg, g);
  const Tensor qw = to_windows(q, p, 0.0);      // [B·nW, H, T, D]
  const Tensor kw = to_windows(k, p, 0.0);      // [B·nW, Hkv, T, D]
  const Tensor vw = to_windows(v, p, 0.0);      // [B·nW, Hkv, T, D]
  const Tensor ow = to_windows(out, p, 0.0);    // [B·nW, H, T, D]; padded rows are fully masked: out 0
  const Tensor dow = to_windows(dout, p, 0.0);  // [B·nW, H, T, D]
  const Tensor lw = to_windows(lse, p, -std::numeric_limits<double>::infinity());  // [B·nW, H, T]
  const AttentionGrads a = attention_backward(qw, kw, vw, ow, lw, dow, inner_options(options, p, d.B));
  gr.dq = from_windows(a.dq, p, d.B, d.Hg, d.Wg);  // [B, H, Hg, Wg, D]
  gr.dk = from_windows(a.dk, p, d.B, d.Hg, d.Wg);  // [B, Hkv, Hg, Wg, D]
  gr.dv = from_windows(a.dv, p, d.B, d.Hg, d.Wg);  // [B, Hkv, Hg, Wg, D]
  return gr;
}

}  // namespace attn
