// Pre-packed weights for decoding and the raw products (include/attn/ops/linear.h).
#include <attn/core/autograd.h>
#include <attn/core/config.h>
#include <attn/core/error.h>
#include <attn/core/parallel.h>
#include <attn/ops/basic.h>
#include <attn/ops/linear.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "kernels/cpu/encoder_kernels.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/gemm_f32.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/linear_packed.h"

namespace attn::ops {

void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
          int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  ATTN_CHECK(M >= 0 && N >= 0 && K >= 0, "gemm: M, N and K must be >= 0; got ", M, ", ", N, ", ", K);
  ATTN_CHECK(lda >= std::max<int64_t>(1, trans_a ? M : K) && ldb >= std::max<int64_t>(1, trans_b ? K : N) &&
                 ldc >= std::max<int64_t>(1, N),
             "gemm: row strides too small for M ", M, ", N ", N, ", K ", K, ": lda ", lda, ", ldb ", ldb,
             ", ldc ", ldc);
  ATTN_CHECK(M * N == 0 || (C != nullptr && (K == 0 || (A != nullptr && B != nullptr))),
             "gemm: A, B and C must be non-null");
  kernels::cpu::sgemm(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

void linear_small_m(const float* x, int64_t ldx, const float* wt, const float* bias, float* y, int64_t ldy,
                    int64_t M, int64_t N, int64_t K) {
  ATTN_CHECK(M >= 0 && N >= 1 && K >= 1, "linear_small_m: expected M >= 0, N >= 1, K >= 1; got ", M, ", ", N,
             ", ", K);
  ATTN_CHECK(ldx >= K && ldy >= N, "linear_small_m: row strides must be ldx >= K = ", K,
             " and ldy >= N = ", N, "; got ", ldx, ", ", ldy);
  ATTN_CHECK(M == 0 || (x != nullptr && wt != nullptr && y != nullptr),
             "linear_small_m: x, wt and y must be non-null");
  kernels::cpu::linear_small_m(x, ldx, wt, bias, y, ldy, M, N, K);
}

bool linear_small_m_fast() { return kernels::cpu::linear_small_m_fast(); }

namespace {
thread_local PackedWeightScope* tls_scope = nullptr;
constexpr int64_t kArenaFloats = int64_t{1} << 20;  // 4 MiB
}  // namespace

PackedWeightScope::PackedWeightScope() : outer_(tls_scope) { tls_scope = this; }
PackedWeightScope::~PackedWeightScope() { tls_scope = outer_; }
PackedWeightScope* PackedWeightScope::active() { return tls_scope; }

const float* PackedWeightScope::packed(const Tensor& w) {
  ATTN_CHECK(w.defined() && w.dtype() == DType::f32 && w.rank() == 2 && w.is_contiguous(),
             "PackedWeightScope: weight must be a contiguous f32 [N, K]; got ",
             w.defined() ? w.str() : "none");
  const void* data = w.data<float>();
  const int64_t N = w.size(0), K = w.size(1);
  for (const Entry& e : entries_)
    if (e.data == data && e.N == N && e.K == K) return e.buf.data<float>();
  auto use = std::find_if(uses_.begin(), uses_.end(), [&](const auto& u) { return u.first == data; });
  if (use == uses_.end()) use = uses_.insert(uses_.end(), {data, 0});
  if (++use->second < kPackAfter) return nullptr;
  uses_.erase(use);
  const int64_t size = kernels::cpu::linear_packed_size(N, K);
  Tensor buf;
  if (size >= kArenaFloats) {
    buf = Tensor::empty({size}, DType::f32);
  } else {
    // Blocks of >= 4 MiB start on a 2 MiB boundary and get transparent huge pages (src/core/allocator.cc),
    // so the hardware prefetchers stream a panel without stopping at every 4 KiB page boundary; the
    // decoder's 256 KiB and 1 MiB weights would otherwise sit on 4 KiB pages.
    if (!arena_.defined() || arena_used_ + size > arena_.numel()) {
      arena_ = Tensor::empty({kArenaFloats}, DType::f32);
      arena_used_ = 0;
    }
    buf = arena_.slice(0, arena_used_, arena_used_ + size);
    arena_used_ += (size + 15) / 16 * 16;  // the next weight starts on a 64-byte boundary too
  }
  kernels::cpu::pack_linear_weight(w.data<float>(), N, K, buf.data<float>());
  entries_.push_back({data, N, K, buf});
  return buf.data<float>();
}

int64_t packed_linear_max_rows() {
  static const int64_t rows = runtime_config().linear_packed;
  return rows;
}

Tensor inference_linear(const Tensor& x, const Tensor& w, const Tensor& b) {
  PackedWeightScope* scope = PackedWeightScope::active();
  if (scope == nullptr || grad_mode_enabled() || !x.defined() || !w.defined() || x.dtype() != DType::f32 ||
      w.dtype() != DType::f32 || w.rank() != 2 || !w.is_contiguous() || !x.is_contiguous() || x.rank() < 1 ||
      x.size(-1) != w.size(1) || w.size(1) == 0 ||
      (b.defined() &&
       (b.dtype() != DType::f32 || b.rank() != 1 || b.size(0) != w.size(0) || !b.is_contiguous())) ||
      kernels::cpu::active_isa() == kernels::cpu::Isa::scalar)
    return linear(x, w, b);  // validates and reports bad shapes
  const int64_t K = w.size(1), N = w.size(0), M = x.numel() / K;
  // One row (decoding at batch 1) takes the packed path too: the product is bound by streaming the
  // weights, and one contiguous 32-column panel at a time streams faster than BLAS's matrix-vector
  // kernel reading the rows in place (docs/benchmarks-log/2026-12-01.md, branch d15).
  if (M < 1 || M > packed_linear_max_rows()) return linear(x, w, b);
  const float* packed = scope->packed(w);
  if (packed == nullptr) return linear(x, w, b);  // not used often enough yet
  Shape shape = x.shape();
  shape.back() = N;
  Tensor y = Tensor::empty(shape, DType::f32);  // y: [..., N]
  kernels::cpu::linear_packed(x.data<float>(), K, packed, b.defined() ? b.data<float>() : nullptr,
                              y.data<float>(), N, M, N, K);
  return y;
}

// ---- weights packed once at load --------------------------------------------------------------

bool packed_weight_fast() { return kernels::cpu::active_isa() != kernels::cpu::Isa::scalar; }

namespace {
void check_packed(const char* what, const Tensor& packed, int64_t N, int64_t K) {
  ATTN_CHECK(N >= 1 && K >= 1, what, ": expected N >= 1 and K >= 1; got N ", N, ", K ", K);
  ATTN_CHECK(packed.defined() && packed.dtype() == DType::f32 && packed.is_contiguous() &&
                 packed.numel() == kernels::cpu::linear_packed_size(N, K),
             what, ": expected the packed form of a [", K, ", ", N, "] weight (f32, ",
             kernels::cpu::linear_packed_size(N, K), " floats, from pack_weight_t); got ",
             packed.defined() ? packed.str() : "none");
  ATTN_CHECK(reinterpret_cast<uintptr_t>(packed.data<float>()) % 64 == 0, what,
             ": the packed weight must start on a 64-byte boundary (a tensor from pack_weight_t, not a view "
             "into one)");
}
}  // namespace

Tensor pack_weight_t(const Tensor& wt) {
  ATTN_CHECK(wt.defined() && wt.dtype() == DType::f32 && wt.rank() == 2 && wt.size(0) >= 1 && wt.size(1) >= 1,
             "pack_weight_t: expected an f32 [K, N] weight; got ", wt.defined() ? wt.str() : "none");
  const Tensor c = wt.contiguous();
  const int64_t K = c.size(0), N = c.size(1);
  Tensor packed = Tensor::empty({kernels::cpu::linear_packed_size(N, K)}, DType::f32);
  kernels::cpu::pack_linear_weight_t(c.data<float>(), K, N, packed.data<float>());
  return packed;
}

Tensor pack_weight(const float* w, int64_t N, int64_t K) {
  ATTN_CHECK(w != nullptr && N >= 1 && K >= 1,
             "pack_weight: expected a non-null [N, K] weight with N, K >= 1; got [", N, ", ", K, "]");
  Tensor packed = Tensor::empty({kernels::cpu::linear_packed_size(N, K)}, DType::f32);
  kernels::cpu::pack_linear_weight(w, N, K, packed.data<float>());
  return packed;
}

void unpack_weight_rows(const Tensor& packed, int64_t N, int64_t K, int64_t n0, int64_t n1, float* out) {
  check_packed("unpack_weight_rows", packed, N, K);
  ATTN_CHECK(0 <= n0 && n0 <= n1 && n1 <= N && (out != nullptr || n0 == n1), "unpack_weight_rows: rows [", n0,
             ", ", n1, ") are not within [0, ", N, ")");
  const float* p = packed.data<float>();
  constexpr int64_t P = kernels::cpu::kPackedPanel;
  for (int64_t n = n0; n < n1; ++n) {
    const float* col = p + (n / P) * K * P + n % P;
    float* o = out + (n - n0) * K;
    for (int64_t k = 0; k < K; ++k) o[k] = col[k * P];
  }
}

void linear_packed(const float* x, int64_t ldx, const Tensor& packed, const float* bias, float* y,
                   int64_t ldy, int64_t M, int64_t N, int64_t K, bool same_rows) {
  check_packed("linear_packed", packed, N, K);
  ATTN_CHECK(M >= 0 && ldx >= K && ldy >= N, "linear_packed: expected M >= 0, ldx >= K = ", K,
             " and ldy >= N = ", N, "; got M ", M, ", ldx ", ldx, ", ldy ", ldy);
  ATTN_CHECK(M == 0 || (x != nullptr && y != nullptr), "linear_packed: x and y must be non-null");
  if (M == 0) return;
  kernels::cpu::linear_packed(x, ldx, packed.data<float>(), bias, y, ldy, M, N, K, same_rows);
}

bool gemm_packed_in_place(int64_t M, int64_t N) {
  return M >= 1 && N >= 1 && kernels::cpu::f32_gemm_reads_packed_b() &&
         kernels::cpu::sgemm_path(M, N, false) == kernels::cpu::SgemmPath::own_f32;
}

int64_t gemm_packed_block_rows() { return kernels::cpu::f32_gemm_row_block_rows(); }

void gemm_packed(const float* x, int64_t ldx, const Tensor& packed, float beta, float* C, int64_t ldc,
                 int64_t M, int64_t N, int64_t K) {
  check_packed("gemm_packed", packed, N, K);
  ATTN_CHECK(M >= 0 && ldx >= K && ldc >= N, "gemm_packed: expected M >= 0, ldx >= K = ", K,
             " and ldc >= N = ", N, "; got M ", M, ", ldx ", ldx, ", ldc ", ldc);
  ATTN_CHECK(M == 0 || (x != nullptr && C != nullptr), "gemm_packed: x and C must be non-null");
  if (M == 0) return;
  if (gemm_packed_in_place(M, N)) {
    kernels::cpu::sgemm_f32_packed_b(M, N, K, 1.0f, x, ldx, packed.data<float>(), beta, C, ldc);
    return;
  }
  // Another kernel decides (bf16 precision, OpenBLAS, the scalar oracle): give it the plain [K, N] layout.
  thread_local std::vector<float> wt;
  wt.resize(static_cast<std::size_t>(K * N));
  kernels::cpu::unpack_linear_weight_t(packed.data<float>(), K, N, wt.data(), N);
  kernels::cpu::sgemm(false, false, M, N, K, 1.0f, x, ldx, wt.data(), N, beta, C, ldc);
}

void gemm_packed(const float* x, int64_t ldx, const Tensor& packed, float beta, float* C, int64_t ldc,
                 int64_t M, int64_t N, int64_t K, GemmEpilogue epilogue, const float* bias) {
  check_packed("gemm_packed", packed, N, K);
  ATTN_CHECK(M >= 0 && ldx >= K && ldc >= N, "gemm_packed: expected M >= 0, ldx >= K = ", K,
             " and ldc >= N = ", N, "; got M ", M, ", ldx ", ldx, ", ldc ", ldc);
  ATTN_CHECK(M == 0 || (x != nullptr && C != nullptr), "gemm_packed: x and C must be non-null");
  ATTN_CHECK(bias != nullptr, "gemm_packed: the bias epilogues need a bias [N] = [", N, "]; got null");
  if (M == 0) return;
  // rows [r0, r0 + rows) x columns [c0, c0 + cols) of C, one row at a time (C's rows are ldc apart).
  auto finish = [&](int64_t r0, int64_t rows, int64_t c0, int64_t cols) {
    for (int64_t r = r0; r < r0 + rows; ++r) {
      float* row = C + r * ldc + c0;
      if (epilogue == GemmEpilogue::bias)
        kernels::cpu::add_bias(row, bias + c0, 1, cols);
      else
        kernels::cpu::bias_gelu(row, bias + c0, 1, cols);
    }
  };
  if (gemm_packed_in_place(M, N)) {
    kernels::cpu::sgemm_f32_packed_b(M, N, K, 1.0f, x, ldx, packed.data<float>(), beta, C, ldc, finish);
    return;
  }
  gemm_packed(x, ldx, packed, beta, C, ldc, M, N, K);
  parallel_for(M, std::max<int64_t>(1, 4096 / N),
               [&](int64_t r0, int64_t r1, int) { finish(r0, r1 - r0, 0, N); });
}

}  // namespace attn::ops
