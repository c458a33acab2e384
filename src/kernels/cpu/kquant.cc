// kernels/cpu/kquant.h: formats, the double oracle, the portable path and the ISA dispatch.
#include "kernels/cpu/kquant.h"

#include <attn/core/error.h>
#include <attn/io/gguf.h>

#include <vector>

#include "kernels/cpu/isa.h"

namespace attn::kernels {
namespace {
io::GgmlType ggml_of(KFormat f) {
  switch (f) {
    case KFormat::q4_0:
      return io::GgmlType::Q4_0;
    case KFormat::q4_1:
      return io::GgmlType::Q4_1;
    case KFormat::q5_0:
      return io::GgmlType::Q5_0;
    case KFormat::q5_1:
      return io::GgmlType::Q5_1;
    case KFormat::q8_0:
      return io::GgmlType::Q8_0;
    case KFormat::q4_k:
      return io::GgmlType::Q4_K;
    case KFormat::q5_k:
      return io::GgmlType::Q5_K;
    case KFormat::q6_k:
      return io::GgmlType::Q6_K;
  }
  return io::GgmlType::F32;
}

void check_args(KFormat f, int64_t K, int64_t M, int64_t ldx, int64_t ldy, int64_t N) {
  const int64_t be = kformat_block_elems(f);
  ATTN_CHECK(K > 0 && K % be == 0, "kquant ", kformat_name(f), ": K must be a positive multiple of ", be,
             ", got ", K);
  ATTN_CHECK(M >= 0 && N >= 0, "kquant: M and N must be >= 0, got M=", M, " N=", N);
  ATTN_CHECK(ldx >= K, "kquant: ldx must be >= K=", K, ", got ", ldx);
  ATTN_CHECK(ldy >= N, "kquant: ldy must be >= N=", N, ", got ", ldy);
}

int64_t row_bytes(KFormat f, int64_t K) { return K / kformat_block_elems(f) * kformat_block_bytes(f); }
}  // namespace

int64_t kformat_block_elems(KFormat f) { return io::ggml_block_elems(ggml_of(f)); }
int64_t kformat_block_bytes(KFormat f) { return io::ggml_block_bytes(ggml_of(f)); }
const char* kformat_name(KFormat f) { return io::ggml_type_name(ggml_of(f)); }
io::GgmlType kformat_ggml_type(KFormat f) { return ggml_of(f); }

namespace ref {
void kquant_matmul(KFormat f, const std::byte* w, int64_t N, int64_t K, const float* x, int64_t M,
                   int64_t ldx, float* y, int64_t ldy) {
  check_args(f, K, M, ldx, ldy, N);
  std::vector<float> wr(K);
  for (int64_t n = 0; n < N; ++n) {
    io::dequantize(ggml_of(f), w + n * row_bytes(f, K), K, wr.data());
    for (int64_t m = 0; m < M; ++m) {
      double acc = 0;
      for (int64_t k = 0; k < K; ++k) acc += static_cast<double>(wr[k]) * static_cast<double>(x[m * ldx + k]);
      y[m * ldy + n] = static_cast<float>(acc);
    }
  }
}
}  // namespace ref

namespace cpu {
namespace detail {
void kquant_unpack_row_scalar(KFormat f, const std::byte* row, int64_t K, float* out) {
  io::dequantize(ggml_of(f), row, K, out);
}
}  // namespace detail

namespace {
void unpack_row(Isa isa, KFormat f, const std::byte* row, int64_t K, float* out) {
  if (isa == Isa::avx512 && detail::kquant_unpack_row_avx512(f, row, K, out)) return;
  if (isa == Isa::avx2 && detail::kquant_unpack_row_avx2(f, row, K, out)) return;
  detail::kquant_unpack_row_scalar(f, row, K, out);
}
}  // namespace

void kquant_unpack_rows(KFormat f, const std::byte* w, int64_t n0, int64_t n1, int64_t K, float* out) {
  check_args(f, K, 0, K, 0, 0);
  ATTN_CHECK(0 <= n0 && n0 <= n1, "kquant_unpack_rows: need 0 <= n0 <= n1, got ", n0, ", ", n1);
  const Isa isa = active_isa();
  const int64_t rb = row_bytes(f, K);
  for (int64_t n = n0; n < n1; ++n) unpack_row(isa, f, w + n * rb, K, out + (n - n0) * K);
}

void kquant_matmul_rows(KFormat f, const std::byte* w, int64_t n0, int64_t n1, int64_t K, const float* x,
                        int64_t M, int64_t ldx, float* y, int64_t ldy, bool accumulate) {
  check_args(f, K, M, ldx, ldy, n1);
  ATTN_CHECK(0 <= n0 && n0 <= n1, "kquant_matmul_rows: need 0 <= n0 <= n1, got ", n0, ", ", n1);
  const Isa isa = active_isa();
  const int64_t rb = row_bytes(f, K);
  thread_local std::vector<float> wr;
  if (static_cast<int64_t>(wr.size()) < K) wr.resize(K);
  for (int64_t n = n0; n < n1; ++n) {
    unpack_row(isa, f, w + n * rb, K, wr.data());
    if (isa == Isa::avx512) {
      detail::kquant_dots_avx512(wr.data(), K, x, M, ldx, y + n, ldy, accumulate);
    } else if (isa == Isa::avx2) {
      detail::kquant_dots_avx2(wr.data(), K, x, M, ldx, y + n, ldy, accumulate);
    } else {
      for (int64_t m = 0; m < M; ++m) {
        float s = 0;
        for (int64_t k = 0; k < K; ++k) s += wr[k] * x[m * ldx + k];
        y[m * ldy + n] = accumulate ? y[m * ldy + n] + s : s;
      }
    }
  }
}
}  // namespace cpu
}  // namespace attn::kernels
