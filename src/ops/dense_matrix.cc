// The encoder's product entry (include/attn/ops/weight_matrix.h, DenseMatrix): the kernel chosen here.
#include <attn/core/error.h>
#include <attn/core/parallel.h>
#include <attn/ops/inference.h>
#include <attn/ops/linear.h>
#include <attn/ops/weight_matrix.h>

#include <algorithm>
#include <cstring>

#include "kernels/cpu/encoder_kernels.h"

namespace attn::ops {

DenseMatrix DenseMatrix::from_transposed(const Tensor& wt) {
  ATTN_CHECK(wt.defined() && wt.rank() == 2 && wt.dtype() == DType::f32 && wt.numel() > 0,
             "dense matrix: expected a non-empty f32 [K, N] (a weight transposed); got ",
             wt.defined() ? wt.str() : "none");
  DenseMatrix m;
  m.K_ = wt.size(0);
  m.N_ = wt.size(1);
  const Tensor c = wt.contiguous();
  m.packed_ = packed_weight_fast();
  m.w_ = m.packed_ ? pack_weight_t(c) : c;
  return m;
}

bool DenseMatrix::add_quantized(std::vector<std::byte> q4_1_blocks) {
  ATTN_CHECK(N_ > 0 && K_ % kQuantBlock == 0, "dense matrix: a quantized twin needs K a multiple of ",
             kQuantBlock, "; got [", N_, ", ", K_, "]");
  const auto want = static_cast<std::size_t>(N_ * (K_ / kQuantBlock) * 20);
  ATTN_CHECK(q4_1_blocks.size() == want, "dense matrix: ", q4_1_blocks.size(), " bytes of Q4_1 blocks for [",
             N_, ", ", K_, "]; expected ", want, " (20 bytes per 32 weights)");
  if (!q8_dot_fast()) {
    drop_quantized();
    return false;
  }
  auto blocks = std::make_shared<const std::vector<std::byte>>(std::move(q4_1_blocks));
  QuantMatrix q(QuantFormat::q4_1, blocks->data(), N_, K_);
  q.pack_q8();
  q_ = std::move(q);
  qblocks_ = std::move(blocks);
  return true;
}

void DenseMatrix::drop_quantized() {
  q_ = QuantMatrix();
  qblocks_.reset();
}

const char* dense_kernel_name(DenseKernel k) {
  switch (k) {
    case DenseKernel::q8:
      return "q8";
    case DenseKernel::small:
      return "small";
    case DenseKernel::gemm_packed:
      return "gemm_packed";
    case DenseKernel::gemm:
      return "gemm";
  }
  return "?";
}

DenseKernel dense_kernel(const DenseMatrix& w, int64_t batch_rows, const DenseLinearOptions& options) {
  if (w.has_quantized() && batch_rows <= options.quantized_max_rows) return DenseKernel::q8;
  // Unpacked weights (no AVX2) go to BLAS at any M: the small-M kernel over [K, N] has a vector body only
  // on AVX-512, where the weights are packed.
  if (!w.packed()) return DenseKernel::gemm;
  return batch_rows <= kDenseSmallRows ? DenseKernel::small : DenseKernel::gemm_packed;
}

namespace {

// y [M, N] (row stride ldy) = bias broadcast over the rows.
void fill_rows(float* y, int64_t ldy, const float* bias, int64_t M, int64_t N) {
  parallel_for(M, 16, [&](int64_t r0, int64_t r1, int) {
    for (int64_t r = r0; r < r1; ++r)
      std::memcpy(y + r * ldy, bias, static_cast<std::size_t>(N) * sizeof(float));
  });
}

// y [M, N] (row stride ldy) += a [M, N] (row stride a_stride; 0: the bias [N] on every row).
void add_rows(float* y, int64_t ldy, const float* a, int64_t a_stride, int64_t M, int64_t N) {
  if (a_stride == 0 && ldy == N) {
    kernels::cpu::add_bias(y, a, M, N);
    return;
  }
  parallel_for(M, std::max<int64_t>(1, 4096 / N), [&](int64_t r0, int64_t r1, int) {
    for (int64_t r = r0; r < r1; ++r) {
      float* yr = y + r * ldy;
      const float* ar = a + r * a_stride;
      for (int64_t n = 0; n < N; ++n) yr[n] += ar[n];
    }
  });
}

// y [M, N] (row stride ldy) = gelu(y + bias) (bias [N] or null).
void bias_gelu_rows(float* y, int64_t ldy, const float* bias, int64_t M, int64_t N) {
  if (ldy == N) {
    bias_gelu(y, bias, M, N);
    return;
  }
  parallel_for(M, std::max<int64_t>(1, 4096 / N), [&](int64_t r0, int64_t r1, int) {
    for (int64_t r = r0; r < r1; ++r) kernels::cpu::bias_gelu(y + r * ldy, bias, 1, N);
  });
}

// Y (+)= X · Wᵀ with the quantized twin: rows of W split over the pool (Q8Dot).
void q8_product(const DenseMatrix& w, const float* X, int64_t M, int64_t ldx, float* Y, int64_t ldy,
                bool accumulate, Q8Activations& xq) {
  const int64_t K = w.cols();
  xq.quantize(X, M, K, ldx);
  const Q8Dot dot = q8_dot();
  const int64_t grain = std::max<int64_t>(16, 32768 / std::max<int64_t>(1, K * M)) / 16 * 16;
  parallel_for(w.rows(), grain,
               [&](int64_t n0, int64_t n1, int) { dot(w.quant(), n0, n1, xq, Y, ldy, accumulate); });
}

}  // namespace

// Each kernel's steps keep the order of sums BertModel's forward had before it moved here: the bias is the
// small-M kernels' starting value, the epilogue of gemm_packed, BLAS's C (beta 1) before a write, and an
// add after an accumulate (where the model's LayerNorm used to add it).
void dense_linear(const DenseMatrix& w, const float* X, int64_t M, int64_t ldx, float* Y, int64_t ldy,
                  const float* bias, DenseOutput output, const DenseLinearOptions& options, DenseScratch& s) {
  const int64_t N = w.rows(), K = w.cols();
  ATTN_CHECK(!w.empty(), "dense_linear: an empty weight matrix");
  ATTN_CHECK(M >= 0 && ldx >= K && ldy >= N, "dense_linear: expected M >= 0, ldx >= K = ", K,
             " and ldy >= N = ", N, "; got M ", M, ", ldx ", ldx, ", ldy ", ldy);
  ATTN_CHECK(M == 0 || (X != nullptr && Y != nullptr && bias != nullptr),
             "dense_linear: X, Y and the bias [N] must be non-null");
  ATTN_CHECK(options.batch_rows == 0 || options.batch_rows >= M, "dense_linear: batch_rows ",
             options.batch_rows, " is fewer than this call's ", M, " rows; expected 0 or at least M");
  if (M == 0) return;
  const bool acc = output == DenseOutput::accumulate, gelu = output == DenseOutput::write_gelu;
  switch (dense_kernel(w, options.batch_rows > 0 ? options.batch_rows : M, options)) {
    case DenseKernel::q8:
      if (output == DenseOutput::write) fill_rows(Y, ldy, bias, M, N);
      q8_product(w, X, M, ldx, Y, ldy, output == DenseOutput::write || acc, s.q8);
      if (gelu) bias_gelu_rows(Y, ldy, bias, M, N);
      if (acc) add_rows(Y, ldy, bias, 0, M, N);
      return;
    case DenseKernel::small: {
      float* out = Y;
      int64_t ldo = ldy;
      if (acc) {  // the product beside the stream, then added to it
        s.y.resize(static_cast<std::size_t>(M * N));
        out = s.y.data();
        ldo = N;
      }
      linear_packed(X, ldx, w.f32(), bias, out, ldo, M, N, K);
      if (gelu) bias_gelu_rows(Y, ldy, nullptr, M, N);
      if (acc) add_rows(Y, ldy, out, N, M, N);
      return;
    }
    case DenseKernel::gemm_packed:
      gemm_packed(X, ldx, w.f32(), acc ? 1.0f : 0.0f, Y, ldy, M, N, K,
                  gelu ? GemmEpilogue::bias_gelu : GemmEpilogue::bias, bias);
      return;
    case DenseKernel::gemm:
      if (output == DenseOutput::write) fill_rows(Y, ldy, bias, M, N);
      gemm(false, false, M, N, K, 1.0f, X, ldx, w.f32().data<float>(), N, gelu ? 0.0f : 1.0f, Y, ldy);
      if (gelu) bias_gelu_rows(Y, ldy, bias, M, N);
      if (acc) add_rows(Y, ldy, bias, 0, M, N);
      return;
  }
}

bool encoder_row_groups_pay(std::span<const DenseMatrix* const> weights, int64_t head_dim, int64_t batch_rows,
                            int64_t group_rows, int64_t min_rows, const DenseLinearOptions& options) {
  if (weights.empty() || !encoder_attention_fast(head_dim) || gemm_packed_block_rows() < group_rows)
    return false;
  for (const DenseMatrix* w : weights)
    if (w == nullptr || dense_kernel(*w, batch_rows, options) != DenseKernel::gemm_packed ||
        !gemm_packed_in_place(min_rows, w->rows()))
      return false;
  return true;
}

}  // namespace attn::ops
