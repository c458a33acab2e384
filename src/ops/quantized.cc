// Quantized matrix products (include/attn/ops/quantized.h): validation, then the kernels of
// kernels/cpu/qmatmul.h (f32 activations) and kernels/cpu/qdot.h (8-bit activations).
#include <attn/core/error.h>
#include <attn/core/parallel.h>
#include <attn/ops/quantized.h>

#include <algorithm>
#include <atomic>

#include "kernels/cpu/isa.h"
#include "kernels/cpu/kquant.h"
#include "kernels/cpu/q8k.h"
#include "kernels/cpu/q8k_gemm.h"
#include "kernels/cpu/qdot.h"
#include "kernels/cpu/qmatmul.h"

namespace attn::ops {

namespace {
kernels::QFormat kformat(QuantFormat f) {
  return f == QuantFormat::q4_1 ? kernels::QFormat::q4_1 : kernels::QFormat::q8_0;
}
bool q8_capable(QuantFormat f) { return f == QuantFormat::q4_1 || f == QuantFormat::q8_0; }
kernels::KFormat kq(QuantFormat f) {
  switch (f) {
    case QuantFormat::q4_1:
      return kernels::KFormat::q4_1;
    case QuantFormat::q8_0:
      return kernels::KFormat::q8_0;
    case QuantFormat::q4_0:
      return kernels::KFormat::q4_0;
    case QuantFormat::q5_0:
      return kernels::KFormat::q5_0;
    case QuantFormat::q5_1:
      return kernels::KFormat::q5_1;
    case QuantFormat::q4_k:
      return kernels::KFormat::q4_k;
    case QuantFormat::q5_k:
      return kernels::KFormat::q5_k;
    case QuantFormat::q6_k:
      return kernels::KFormat::q6_k;
  }
  return kernels::KFormat::q8_0;
}

void check_range(const char* op, const QuantMatrix& w, int64_t n0, int64_t n1, int64_t M, float* y,
                 int64_t ldy) {
  ATTN_CHECK(w.blocks() != nullptr, op, ": the weight matrix is empty");
  ATTN_CHECK(0 <= n0 && n0 <= n1 && n1 <= w.rows(), op, ": rows [n0, n1) must lie in [0, N = ", w.rows(),
             "]; got [", n0, ", ", n1, ")");
  ATTN_CHECK(M >= 0 && ldy >= w.rows() && (M == 0 || y != nullptr), op, ": y [M, N = ", w.rows(),
             "] needs a non-null buffer and row stride >= N; got M ", M, ", ldy ", ldy);
}
}  // namespace

int64_t quant_block_bytes(QuantFormat format) { return kernels::kformat_block_bytes(kq(format)); }
int64_t quant_block_elems(QuantFormat format) { return kernels::kformat_block_elems(kq(format)); }
const char* quant_format_name(QuantFormat format) { return kernels::kformat_name(kq(format)); }

bool quant_format_of_ggml(uint32_t t, QuantFormat* out) {
  QuantFormat f;
  switch (t) {
    case 2:
      f = QuantFormat::q4_0;
      break;
    case 3:
      f = QuantFormat::q4_1;
      break;
    case 6:
      f = QuantFormat::q5_0;
      break;
    case 7:
      f = QuantFormat::q5_1;
      break;
    case 8:
      f = QuantFormat::q8_0;
      break;
    case 12:
      f = QuantFormat::q4_k;
      break;
    case 13:
      f = QuantFormat::q5_k;
      break;
    case 14:
      f = QuantFormat::q6_k;
      break;
    default:
      return false;
  }
  if (out) *out = f;
  return true;
}

QuantMatrix::QuantMatrix(QuantFormat format, const std::byte* blocks, int64_t N, int64_t K)
    : format_(format), blocks_(blocks), N_(N), K_(K) {
  const int64_t be = quant_block_elems(format);
  ATTN_CHECK(blocks != nullptr && N > 0 && K > 0 && K % be == 0,
             "QuantMatrix: expected non-null blocks, N > 0 and K a positive multiple of ", be, " (",
             quant_format_name(format), "); got N ", N, ", K ", K);
}

int64_t QuantMatrix::row_bytes() const {
  return K_ / quant_block_elems(format_) * quant_block_bytes(format_);
}

void QuantMatrix::pack_q8() {
  ATTN_CHECK(blocks_ != nullptr, "QuantMatrix::pack_q8: the matrix is empty");
  ATTN_CHECK(q8_capable(format_), "QuantMatrix::pack_q8: 8-bit products take Q4_1 or Q8_0 weights, got ",
             quant_format_name(format_));
  const kernels::QFormat f = kformat(format_);
  const int64_t rb = kernels::qdot_row_bytes(f, K_), nrow = row_bytes();
  packed_.resize(static_cast<std::size_t>(N_ * rb));
  parallel_for(N_, 256, [&](int64_t b, int64_t e, int) {
    kernels::qdot_pack(f, blocks_ + b * nrow, e - b, K_, packed_.data() + b * rb);
  });
}

void quant_linear_rows(const QuantMatrix& w, int64_t n0, int64_t n1, const float* x, int64_t M, int64_t ldx,
                       float* y, int64_t ldy) {
  check_range("quant_linear_rows", w, n0, n1, M, y, ldy);
  ATTN_CHECK(ldx >= w.cols() && (M == 0 || x != nullptr), "quant_linear_rows: x [M, K = ", w.cols(),
             "] needs a non-null buffer and row stride >= K; got ldx ", ldx);
  // Q4_1 and Q8_0 have a block kernel for AVX-512 (qmatmul); elsewhere the row kernel (each weight row
  // unpacked once, then AVX2 FMAs against the M rows) is several times faster than its portable body.
  if (!q8_capable(w.format()) || kernels::cpu::active_isa() != kernels::cpu::Isa::avx512) {
    kernels::cpu::kquant_matmul_rows(kq(w.format()), w.blocks(), n0, n1, w.cols(), x, M, ldx, y, ldy, false);
    return;
  }
  kernels::cpu::qmatmul_rows(kformat(w.format()), w.blocks(), n0, n1, w.cols(), x, M, ldx, y, ldy);
}

void quant_linear_rows(const QuantMatrix& w, int64_t n0, int64_t n1, const float* x, int64_t M, int64_t ldx,
                       float* y, int64_t ldy, bool accumulate) {
  if (!accumulate) {
    quant_linear_rows(w, n0, n1, x, M, ldx, y, ldy);
    return;
  }
  check_range("quant_linear_rows", w, n0, n1, M, y, ldy);
  ATTN_CHECK(ldx >= w.cols() && (M == 0 || x != nullptr), "quant_linear_rows: x [M, K = ", w.cols(),
             "] needs a non-null buffer and row stride >= K; got ldx ", ldx);
  kernels::cpu::kquant_matmul_rows(kq(w.format()), w.blocks(), n0, n1, w.cols(), x, M, ldx, y, ldy, true);
}

void quant_unpack_rows(const QuantMatrix& w, int64_t n0, int64_t n1, float* out) {
  ATTN_CHECK(w.blocks() != nullptr, "quant_unpack_rows: the weight matrix is empty");
  ATTN_CHECK(0 <= n0 && n0 <= n1 && n1 <= w.rows() && (n0 == n1 || out != nullptr),
             "quant_unpack_rows: rows [n0, n1) must lie in [0, N = ", w.rows(),
             "] with a non-null output; got [", n0, ", ", n1, ")");
  kernels::cpu::kquant_unpack_rows(kq(w.format()), w.blocks(), n0, n1, w.cols(), out);
}

void Q8Activations::reserve(int64_t rows, int64_t K) {
  ATTN_CHECK(rows >= 1 && K > 0 && K % kQuantBlock == 0,
             "Q8Activations: expected rows >= 1 and K a positive ", "multiple of ", kQuantBlock,
             "; got rows ", rows, ", K ", K);
  const int64_t nbp = kernels::q8_padded_blocks(K);
  if (nbp <= ldb_ && rows * ldb_ <= static_cast<int64_t>(d_.size())) return;
  ldb_ = std::max(ldb_, nbp);
  ldq_ = ldb_ * kernels::kQBlock;
  q_.assign(static_cast<std::size_t>(rows * ldq_), 0);
  d_.assign(static_cast<std::size_t>(rows * ldb_), 0.0f);
  s_.assign(static_cast<std::size_t>(rows * ldb_), 0.0f);
  sum_.assign(static_cast<std::size_t>(rows * ldb_), 0.0f);
}

void Q8Activations::quantize(const float* x, int64_t M, int64_t K, int64_t ldx) {
  reserve(M, K);
  ATTN_CHECK(x != nullptr && ldx >= K, "Q8Activations::quantize: x [M, K = ", K,
             "] needs a non-null buffer and row stride >= K; got ldx ", ldx);
  kernels::cpu::quantize_q8(x, M, K, ldx, {q_.data(), d_.data(), s_.data(), sum_.data(), ldq_, ldb_});
  M_ = M, K_ = K;
}

bool q8_dot_fast() { return kernels::cpu::qdot_kernel() != kernels::cpu::QdotKernel::scalar; }

Q8Dot q8_dot() {
  Q8Dot d;
  d.kernel_ = static_cast<int>(kernels::cpu::qdot_kernel());
  return d;
}

void Q8Dot::operator()(const QuantMatrix& w, int64_t n0, int64_t n1, const Q8Activations& x, float* y,
                       int64_t ldy, bool accumulate) const {
  check_range("Q8Dot", w, n0, n1, x.rows(), y, ldy);
  ATTN_CHECK(w.has_q8(), "Q8Dot: the weight has no 8-bit repacked copy (QuantMatrix::pack_q8)");
  ATTN_CHECK(x.cols() == w.cols(), "Q8Dot: activations of K = ", x.cols(),
             " against a weight of K = ", w.cols());
  const kernels::Q8RowsConst xr(x.q(), x.d(), x.s(), x.sum(), x.ldq(), x.ldb());
  kernels::cpu::detail::qdot_rows_with(static_cast<kernels::cpu::QdotKernel>(kernel_), kformat(w.format()),
                                       w.q8_packed(), n0, n1, w.cols(), xr, x.rows(), y, ldy, accumulate);
}

// ---- issue 19: 8-bit activations for the formats of Gemma 3's GGUF (kernels/cpu/q8k.h) ----------
bool quant_dot_supported(QuantFormat format) { return kernels::q8k_supported(kq(format)); }
bool quant_dot_fast() { return kernels::cpu::q8k_fast(); }

void QuantActivations::quantize(QuantFormat format, const float* x, int64_t M, int64_t K, int64_t ldx) {
  ATTN_CHECK(quant_dot_supported(format), "QuantActivations: no 8-bit product for ",
             quant_format_name(format), " weights (Q4_0 Q4_1 Q5_0 Q8_0 Q4_K Q5_K Q6_K)");
  const kernels::Q8Kind kind = kernels::q8k_kind_for(kq(format));
  const int64_t B = kernels::q8k_block(kind);
  ATTN_CHECK(M >= 1 && K > 0 && K % B == 0 && x != nullptr && ldx >= K,
             "QuantActivations: expected x [M >= 1, K] with K a ", "positive multiple of ", B,
             " and row stride >= K; got M ", M, ", K ", K, ", ldx ", ldx);
  const auto need = static_cast<std::size_t>(M * K);
  if (q_.size() < need) q_.resize(need);
  if (d_.size() < need / B) d_.resize(need / B);
  if (bsum_.size() < need / 16) bsum_.resize(need / 16);
  // g19c: prompt passes and batched steps of 16 rows or more split the rows over the pool (row-wise:
  // the same values); a value that is not finite is then named by a serial pass over every row
  constexpr int64_t kRows = 8;
  const bool split = M >= 2 * kRows && num_threads() > 1 && !in_parallel_for();
  std::atomic<bool> bad{false};
  if (split) {
    parallel_for(M, kRows, [&](int64_t b, int64_t e, int) {
      try {
        kernels::cpu::q8k_quantize(kind, x + b * ldx, e - b, K, ldx, q_.data() + b * K,
                                   d_.data() + b * (K / B), bsum_.data() + b * (K / 16));
      } catch (const Error&) {
        bad = true;
      }
    });
  }
  if (!split || bad.load())
    kernels::cpu::q8k_quantize(kind, x, M, K, ldx, q_.data(), d_.data(), bsum_.data());
  M_ = M, K_ = K, k_kind_ = kind == kernels::Q8Kind::q8_k;
}

void quant_dot_rows(const QuantMatrix& w, int64_t n0, int64_t n1, const QuantActivations& x, float* y,
                    int64_t ldy, bool accumulate, bool row_independent) {
  check_range("quant_dot_rows", w, n0, n1, x.rows(), y, ldy);
  ATTN_CHECK(quant_dot_supported(w.format()), "quant_dot_rows: no 8-bit product for ",
             quant_format_name(w.format()), " weights");
  const kernels::Q8Kind kind = x.k_kind() ? kernels::Q8Kind::q8_k : kernels::Q8Kind::q8_0;
  ATTN_CHECK(x.cols() == w.cols() && kind == kernels::q8k_kind_for(kq(w.format())),
             "quant_dot_rows: activations of K = ", x.cols(), " in ", x.k_kind() ? "Q8_K" : "Q8_0",
             " blocks against ", quant_format_name(w.format()), " weights of K = ", w.cols());
  const int64_t K = x.cols(), B = kernels::q8k_block(kind);
  kernels::Q8KRows xr;
  xr.kind = kind, xr.M = x.rows(), xr.K = K;
  xr.q = x.q(), xr.d = x.d(), xr.bsum = x.bsum();
  xr.ldq = K, xr.ldd = K / B, xr.ldb = K / 16;
  if (!row_independent || xr.M == 1) {
    kernels::cpu::q8k_dot_rows(kq(w.format()), w.blocks(), n0, n1, K, xr, y, ldy, accumulate);
    return;
  }
  // One activation row at a time through the one-row kernel (the weight rows [n0, n1) stay in cache).
  for (int64_t m = 0; m < x.rows(); ++m) {
    kernels::Q8KRows one = xr;
    one.M = 1;
    one.q = xr.q + m * xr.ldq, one.d = xr.d + m * xr.ldd, one.bsum = xr.bsum + m * xr.ldb;
    kernels::cpu::q8k_dot_rows(kq(w.format()), w.blocks(), n0, n1, K, one, y + m * ldy, ldy, accumulate);
  }
}
// ---- end issue 19 8-bit activations

// ---- issue 19 (g19): the 8-bit-activation GEMM (kernels/cpu/q8k_gemm.h) ----------------------------
QuantPanels::QuantPanels(const QuantMatrix& w)
    : format_(w.format()), blocks_(w.blocks()), N_(w.rows()), K_(w.cols()) {
  ATTN_CHECK(w.blocks() != nullptr, "QuantPanels: the weight matrix is empty");
  ATTN_CHECK(quant_dot_supported(w.format()), "QuantPanels: no 8-bit product for ",
             quant_format_name(w.format()), " weights (Q4_0 Q4_1 Q5_0 Q8_0 Q4_K Q5_K Q6_K)");
  const kernels::KFormat f = kq(format_);
  const int64_t np = (N_ + kernels::kQ8PanelRows - 1) / kernels::kQ8PanelRows;
  const int64_t pb = kernels::q8k_gemm_panel_bytes(f, K_);
  data_.reset(new std::byte[static_cast<std::size_t>(np * pb)]);  // every byte written by the pack
  bytes_ = np * pb;
  parallel_for(np, 8, [&](int64_t b, int64_t e, int) {
    kernels::cpu::q8k_gemm_pack(f, blocks_, N_, K_, b, e, data_.get() + b * pb);
  });
}

struct QuantMatmulPart::Terms {
  kernels::Q8KRows xr;
  kernels::cpu::Q8GemmTerms terms;
};
QuantMatmulPart::QuantMatmulPart() : t_(std::make_unique<Terms>()) {}
QuantMatmulPart::~QuantMatmulPart() = default;
QuantMatmulPart::QuantMatmulPart(QuantMatmulPart&&) noexcept = default;
QuantMatmulPart& QuantMatmulPart::operator=(QuantMatmulPart&&) noexcept = default;

void QuantMatmulPart::prepare(const QuantPanels& w, const QuantActivations& x) {
  ATTN_CHECK(!w.empty(), "quant_matmul: the panels are empty (QuantPanels(w))");
  const kernels::KFormat f = kq(w.format());
  const kernels::Q8Kind kind = x.k_kind() ? kernels::Q8Kind::q8_k : kernels::Q8Kind::q8_0;
  ATTN_CHECK(x.rows() >= 1 && x.cols() == w.cols() && kind == kernels::q8k_kind_for(f),
             "quant_matmul: activations [", x.rows(), ", ", x.cols(), "] in ", x.k_kind() ? "Q8_K" : "Q8_0",
             " blocks against ", quant_format_name(w.format()), " weights [", w.rows(), ", ", w.cols(), "]");
  if (!t_) t_ = std::make_unique<Terms>();
  const int64_t K = x.cols(), B = kernels::q8k_block(kind);
  kernels::Q8KRows& xr = t_->xr;
  xr.kind = kind, xr.M = x.rows(), xr.K = K;
  xr.q = x.q(), xr.d = x.d(), xr.bsum = x.bsum();
  xr.ldq = K, xr.ldd = K / B, xr.ldb = K / 16;
  kernels::cpu::q8k_gemm_terms(f, xr, &t_->terms);
  w_ = &w, x_ = &x;
}

int64_t QuantMatmulPart::panels() const {
  return w_ ? (w_->rows() + kernels::kQ8PanelRows - 1) / kernels::kQ8PanelRows : 0;
}

void QuantMatmulPart::run(int64_t p0, int64_t p1, float* y, int64_t ldy, bool accumulate) const {
  ATTN_CHECK(w_ != nullptr, "quant_matmul: run() before prepare()");
  ATTN_CHECK(y != nullptr && ldy >= w_->rows(), "quant_matmul: y [", x_->rows(), ", N = ", w_->rows(),
             "] needs a non-null buffer and row stride >= N; got ldy ", ldy);
  const kernels::KFormat f = kq(w_->format());
  const int64_t pb = kernels::q8k_gemm_panel_bytes(f, w_->cols());
  kernels::cpu::q8k_gemm_panels(f, w_->data() + p0 * pb, w_->blocks(), w_->rows(), w_->cols(), p0, p1, t_->xr,
                                t_->terms, y, ldy, accumulate);
}

void quant_matmul(const QuantPanels& w, const QuantActivations& x, float* y, int64_t ldy, bool accumulate) {
  thread_local QuantMatmulPart part;
  part.prepare(w, x);
  ATTN_CHECK(y != nullptr && ldy >= w.rows(), "quant_matmul: y [", x.rows(), ", N = ", w.rows(),
             "] needs a non-null buffer and row stride >= N; got ldy ", ldy);
  const int64_t np = part.panels();
  const int64_t grain = std::max<int64_t>(1, (np + 2 * num_threads() - 1) / (2 * num_threads()));
  const QuantMatmulPart& pt = part;
  parallel_for(np, grain, [&](int64_t b, int64_t e, int) { pt.run(b, e, y, ldy, accumulate); });
}
bool quant_dot_same_activations(QuantFormat a, QuantFormat b) {
  return quant_dot_supported(a) && quant_dot_supported(b) &&
         kernels::q8k_kind_for(kq(a)) == kernels::q8k_kind_for(kq(b));
}
// ---- end issue 19 (g19) GEMM

}  // namespace attn::ops
