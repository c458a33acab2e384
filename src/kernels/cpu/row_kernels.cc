// Threading of the fp32 row kernels (row_kernels.h): parallel_for over rows
// (or element ranges), each chunk run by the AVX-512 or AVX2 range kernel. Column sums
// of the norm backwards (dw, db) go through per-chunk fp32 accumulators added
// into per-thread double partials, then reduced in a fixed thread order.
#include "kernels/cpu/row_kernels.h"

#include <attn/core/parallel.h>

#include <algorithm>
#include <vector>

#include "kernels/cpu/isa.h"

namespace attn::kernels::cpu {
namespace {

// The range kernels of the active ISA: AVX-512, else AVX2 (the functions below run only when rows_fast()).
const RowRangeKernels& rk() {
  return active_isa() == Isa::avx512 ? row_kernels_avx512() : row_kernels_avx2();
}

// Rows per chunk: about 16K elements, at least 1.
int64_t grain_rows(int64_t row_len) { return std::max<int64_t>(1, 16384 / std::max<int64_t>(1, row_len)); }
constexpr int64_t kElemGrain = 16384;

// Per-thread column sums for dw/db: runs body(r0, r1, acc_w, acc_b) on chunks
// with zeroed fp32 accumulators, adds them into double partials, then writes
// the column sums to out_w / out_b (null = not wanted).
template <typename Body>
void rows_with_column_sums(int64_t rows, int64_t C, float* out_w, float* out_b, Body body) {
  const int nt = num_threads();
  const std::size_t cs = static_cast<std::size_t>(C);
  std::vector<double> pw(out_w ? nt * cs : 0, 0.0), pb(out_b ? nt * cs : 0, 0.0);
  std::vector<float> scratch(static_cast<std::size_t>(nt) * 2 * cs);
  parallel_for(rows, grain_rows(C), [&](int64_t r0, int64_t r1, int tid) {
    float* aw = out_w ? scratch.data() + static_cast<std::size_t>(tid) * 2 * cs : nullptr;
    float* ab = out_b ? scratch.data() + static_cast<std::size_t>(tid) * 2 * cs + cs : nullptr;
    if (aw) std::fill(aw, aw + C, 0.f);
    if (ab) std::fill(ab, ab + C, 0.f);
    body(r0, r1, aw, ab);
    for (std::size_t c = 0; c < cs; ++c) {
      if (aw) pw[tid * cs + c] += aw[c];
      if (ab) pb[tid * cs + c] += ab[c];
    }
  });
  for (std::size_t c = 0; c < cs; ++c) {
    double sw = 0, sb = 0;
    for (int t = 0; t < nt; ++t) {
      if (out_w) sw += pw[t * cs + c];
      if (out_b) sb += pb[t * cs + c];
    }
    if (out_w) out_w[c] = static_cast<float>(sw);
    if (out_b) out_b[c] = static_cast<float>(sb);
  }
}

}  // namespace

bool rows_fast() { return active_isa() == Isa::avx512 || active_isa() == Isa::avx2; }

void layer_norm_forward_f32(const float* x, const float* w, const float* b, float* y, double* mean,
                            double* rstd, int64_t rows, int64_t C, double eps) {
  const RowRangeKernels& k = rk();
  parallel_for(rows, grain_rows(C), [&](int64_t r0, int64_t r1, int) {
    k.layer_norm_fwd(x, w, b, y, mean, rstd, r0, r1, C, eps);
  });
}

void layer_norm_backward_f32(const float* g, const float* x, const float* w, const double* mean,
                             const double* rstd, float* dx, float* dw, float* db, int64_t rows, int64_t C) {
  const RowRangeKernels& k = rk();
  rows_with_column_sums(rows, C, dw, db, [&](int64_t r0, int64_t r1, float* aw, float* ab) {
    k.layer_norm_bwd(g, x, w, mean, rstd, dx, aw, ab, r0, r1, C);
  });
}

void rms_norm_forward_f32(const float* x, const float* w, float* y, double* rstd, int64_t rows, int64_t C,
                          double eps) {
  const RowRangeKernels& k = rk();
  parallel_for(rows, grain_rows(C),
               [&](int64_t r0, int64_t r1, int) { k.rms_norm_fwd(x, w, y, rstd, r0, r1, C, eps); });
}

void rms_norm_backward_f32(const float* g, const float* x, const float* w, const double* rstd, float* dx,
                           float* dw, int64_t rows, int64_t C) {
  const RowRangeKernels& k = rk();
  rows_with_column_sums(rows, C, dw, nullptr, [&](int64_t r0, int64_t r1, float* aw, float*) {
    k.rms_norm_bwd(g, x, w, rstd, dx, aw, r0, r1, C);
  });
}

void softmax_forward_f32(const float* x, float* y, int64_t rows, int64_t C, bool log) {
  const RowRangeKernels& k = rk();
  parallel_for(rows, grain_rows(C),
               [&](int64_t r0, int64_t r1, int) { k.softmax_fwd(x, y, r0, r1, C, log); });
}

void softmax_backward_f32(const float* g, const float* y, float* dx, int64_t rows, int64_t C, bool log) {
  const RowRangeKernels& k = rk();
  parallel_for(rows, grain_rows(C),
               [&](int64_t r0, int64_t r1, int) { k.softmax_bwd(g, y, dx, r0, r1, C, log); });
}

double cross_entropy_f32(const float* x, const int64_t* target, double* lse, float* dx, int64_t N, int64_t V,
                         int64_t ignore_index, double eps, double gscale) {
  const RowRangeKernels& k = rk();
  std::vector<double> part(static_cast<std::size_t>(num_threads()), 0.0);
  parallel_for(N, grain_rows(V), [&](int64_t r0, int64_t r1, int tid) {
    part[static_cast<std::size_t>(tid)] +=
        k.cross_entropy(x, target, lse, dx, r0, r1, V, ignore_index, eps, gscale);
  });
  double total = 0;
  for (double p : part) total += p;
  return total;
}

void act_forward_f32(Act act, const float* x, float* y, int64_t n) {
  const RowRangeKernels& k = rk();
  parallel_for(n, kElemGrain, [&](int64_t i0, int64_t i1, int) { k.act_fwd(act, x, y, i0, i1); });
}

void act_backward_f32(Act act, const float* x, const float* g, float* dx, int64_t n) {
  const RowRangeKernels& k = rk();
  parallel_for(n, kElemGrain, [&](int64_t i0, int64_t i1, int) { k.act_bwd(act, x, g, dx, i0, i1); });
}

void swiglu_forward_f32(const float* a, const float* b, float* y, int64_t n) {
  const RowRangeKernels& k = rk();
  parallel_for(n, kElemGrain, [&](int64_t i0, int64_t i1, int) { k.swiglu_fwd(a, b, y, i0, i1); });
}

void swiglu_backward_f32(const float* a, const float* b, const float* g, float* da, float* db, int64_t n) {
  const RowRangeKernels& k = rk();
  parallel_for(n, kElemGrain, [&](int64_t i0, int64_t i1, int) { k.swiglu_bwd(a, b, g, da, db, i0, i1); });
}

void dropout_f32(const float* x, float* y, int64_t n, double p, uint64_t seed) {
  dropout_fused_f32(DropMode::plain, x, nullptr, y, n, p, seed);
}

void dropout_fused_f32(DropMode mode, const float* x, const float* other, float* y, int64_t n, double p,
                       uint64_t seed) {
  const RowRangeKernels& k = rk();
  parallel_for(n, kElemGrain,
               [&](int64_t i0, int64_t i1, int) { k.dropout_fused(mode, x, other, y, i0, i1, p, seed); });
}

}  // namespace attn::kernels::cpu
