// sgemm_bf16: validation, blocking and threading (shared by both paths), and the scalar
// oracle path. See gemm_bf16.h for the semantics and gemm_bf16_kernels.h for the layout.
#include "kernels/cpu/gemm_bf16.h"

#include <attn/core/dtype.h>
#include <attn/core/error.h>
#include <attn/core/parallel.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <vector>

#include "kernels/cpu/gemm_bf16_kernels.h"
#include "kernels/cpu/isa.h"

namespace attn::kernels::cpu {
namespace detail {
namespace {

// ---- the scalar oracle ------------------------------------------------------

uint32_t pair(float lo, float hi) {
  return uint32_t{bf16::from_float(lo)} | uint32_t{bf16::from_float(hi)} << 16;
}

void pack_rows_scalar(const float* src, int64_t ld, int kc, int w, int W, uint32_t* out) {
  const int kp = (kc + 1) / 2, npanels = (w + W - 1) / W;
  for (int c = 0; c < npanels * W; ++c)
    for (int p = 0; p < kp; ++p) {
      const bool in = c < w;
      const float lo = in ? src[int64_t{2 * p} * ld + c] : 0.f;
      const float hi = in && 2 * p + 1 < kc ? src[int64_t{2 * p + 1} * ld + c] : 0.f;
      out[(int64_t{c / W} * kp + p) * W + c % W] = pair(lo, hi);
    }
}

void pack_cols_scalar(const float* src, int64_t ld, int kc, int w, int W, uint32_t* out) {
  const int kp = (kc + 1) / 2, npanels = (w + W - 1) / W;
  for (int c = 0; c < npanels * W; ++c)
    for (int p = 0; p < kp; ++p) {
      const bool in = c < w;
      const float lo = in ? src[int64_t{c} * ld + 2 * p] : 0.f;
      const float hi = in && 2 * p + 1 < kc ? src[int64_t{c} * ld + 2 * p + 1] : 0.f;
      out[(int64_t{c / W} * kp + p) * W + c % W] = pair(lo, hi);
    }
}

float lo_of(uint32_t x) { return bf16::to_float(static_cast<uint16_t>(x)); }
float hi_of(uint32_t x) { return bf16::to_float(static_cast<uint16_t>(x >> 16)); }

// vdpbf16ps per lane: acc += a.hi · b.hi, then acc += a.lo · b.lo (each product exact in fp32).
void block_scalar(int kp, const uint32_t* a, const uint32_t* b, float* c, int64_t ldc, int m, int n,
                  float alpha, float beta) {
  constexpr int R = kBf16Mr, Nr = kBf16Nr;
  float acc[R][Nr] = {};
  for (int p = 0; p < kp; ++p)
    for (int r = 0; r < R; ++r)
      for (int j = 0; j < Nr; ++j) {
        const uint32_t x = a[int64_t{p} * R + r], y = b[int64_t{p} * Nr + j];
        acc[r][j] += hi_of(x) * hi_of(y);
        acc[r][j] += lo_of(x) * lo_of(y);
      }
  for (int r = 0; r < m; ++r)
    for (int j = 0; j < n; ++j) {
      float& out = c[r * ldc + j];
      out = beta == 0 ? alpha * acc[r][j] : alpha * acc[r][j] + beta * out;
    }
}

constexpr Bf16GemmKernels kScalar{pack_rows_scalar, pack_cols_scalar, block_scalar};

// ---- blocking and threading -------------------------------------------------

constexpr int64_t kKcMax = 384;   // k per block: a 32-column B panel is kKcMax·64 bytes (24 KiB, in L1)
constexpr int64_t kMcMax = 144;   // rows of A per thread block: 144·kKcMax·2 bytes (108 KiB, in L2)
constexpr int64_t kNcMax = 2048;  // columns per shared packed B block: kKcMax·kNcMax·2 bytes (1.5 MiB)

constexpr double kSerialMacs = 1 << 21;  // ~10 µs of one core: below that, one thread

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// A grow-only, 64-byte aligned scratch buffer (one per thread, kept between calls so small
// products do not pay for page faults on every call).
uint32_t* scratch(std::vector<uint32_t>& buf, int64_t n) {
  if (static_cast<int64_t>(buf.size()) < n + 16) buf.resize(static_cast<size_t>(n + 16));
  auto addr = reinterpret_cast<uintptr_t>(buf.data());
  return reinterpret_cast<uint32_t*>((addr + 63) & ~uintptr_t{63});
}

void run(const Bf16GemmKernels& kern, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K,
         float alpha, const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C,
         int64_t ldc) {
  constexpr int64_t Mr = kBf16Mr, Nr = kBf16Nr;
  // Small products run on the calling thread: waking the pool costs more than they take.
  const bool serial = static_cast<double>(M) * static_cast<double>(N) * static_cast<double>(K) < kSerialMacs;
  const int64_t threads = serial ? 1 : num_threads();
  auto for_each = [&](int64_t n, int64_t grain, const std::function<void(int64_t, int64_t, int)>& fn) {
    if (serial)
      fn(0, n, 0);
    else
      parallel_for(n, grain, fn);
  };
  // k blocks of (nearly) equal, even size; n blocks of kNcMax; m blocks of a multiple of Mr.
  const int64_t nkb = ceil_div(K, kKcMax);
  const int64_t kc = (ceil_div(K, nkb) + 1) / 2 * 2;
  const int64_t nc = std::min(kNcMax, ceil_div(N, Nr) * Nr);
  // Row blocks: a multiple of the thread count when there are several, each a run of whole
  // Mr-row panels, the panels spread evenly (the blocks differ by at most one panel).
  const int64_t panels = ceil_div(M, Mr);
  int64_t mb = ceil_div(M, kMcMax);
  if (mb > 1) mb = std::min(panels, ceil_div(mb, threads) * threads);
  const int64_t mc = ceil_div(panels, mb) * Mr;  // rows of the largest block

  static thread_local std::vector<uint32_t> b_buf;
  uint32_t* bpack = scratch(b_buf, nc * (kc / 2));
  for (int64_t jc = 0; jc < N; jc += nc) {
    const int64_t ncur = std::min(nc, N - jc), npan = ceil_div(ncur, Nr);
    // Few row blocks: split the panels too, so that every thread has work.
    int64_t n_split = 1;
    if (threads > 1 && mb < 2 * threads) n_split = std::min(npan, ceil_div(4 * threads, mb));
    const int64_t per_split = ceil_div(npan, n_split);
    n_split = ceil_div(npan, per_split);
    for (int64_t pc = 0; pc < K; pc += kc) {
      const int kcur = static_cast<int>(std::min(kc, K - pc)), kp = (kcur + 1) / 2;
      // B: chunks of panels (each a contiguous run of columns), shared by all threads.
      const int64_t pan_chunk = std::max<int64_t>(1, ceil_div(npan, 2 * threads));
      for_each(ceil_div(npan, pan_chunk), 1, [&](int64_t b, int64_t e, int) {
        for (int64_t ch = b; ch < e; ++ch) {
          const int64_t j = jc + ch * pan_chunk * Nr;
          const int w = static_cast<int>(std::min(pan_chunk * Nr, jc + ncur - j));
          uint32_t* out = bpack + ch * pan_chunk * kp * Nr;
          if (trans_b)
            kern.pack_cols(B + j * ldb + pc, ldb, kcur, w, Nr, out);  // op(B)(k, j) = B[j, k]
          else
            kern.pack_rows(B + pc * ldb + j, ldb, kcur, w, Nr, out);  // op(B)(k, j) = B[k, j]
        }
      });
      const float beta_k = pc == 0 ? beta : 1.f;  // later k blocks add to what the first wrote
      for_each(mb * n_split, 1, [&](int64_t b, int64_t e, int) {
        static thread_local std::vector<uint32_t> a_buf;
        uint32_t* apack = scratch(a_buf, mc * kp);
        for (int64_t t = b; t < e; ++t) {
          const int64_t ib = t / n_split, js = t % n_split;
          const int64_t i0 = ib * panels / mb * Mr;
          const int64_t mcur = std::min(M, (ib + 1) * panels / mb * Mr) - i0, nmp = ceil_div(mcur, Mr);
          const int w = static_cast<int>(mcur);
          if (trans_a)
            kern.pack_rows(A + pc * lda + i0, lda, kcur, w, Mr, apack);  // op(A)(i, k) = A[k, i]
          else
            kern.pack_cols(A + i0 * lda + pc, lda, kcur, w, Mr, apack);  // op(A)(i, k) = A[i, k]
          const int64_t pn_end = std::min(npan, (js + 1) * per_split);
          for (int64_t pn = js * per_split; pn < pn_end; ++pn) {
            const int64_t j = jc + pn * Nr;
            const int n = static_cast<int>(std::min(Nr, N - j));
            for (int64_t q = 0; q < nmp; ++q) {
              const int64_t i = i0 + q * Mr;
              kern.block(kp, apack + q * kp * Mr, bpack + pn * kp * Nr, C + i * ldc + j, ldc,
                         static_cast<int>(std::min(Mr, M - i)), n, alpha, beta_k);
            }
          }
        }
      });
    }
  }
}

}  // namespace

const Bf16GemmKernels& bf16_gemm_scalar_kernels() { return kScalar; }

void sgemm_bf16_path(Bf16GemmPath path, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K,
                     float alpha, const float* A, int64_t lda, const float* B, int64_t ldb, float beta,
                     float* C, int64_t ldc) {
  ATTN_CHECK(M >= 0 && N >= 0 && K >= 0, "sgemm_bf16: sizes must be >= 0; got M ", M, ", N ", N, ", K ", K);
  ATTN_CHECK(lda >= (trans_a ? M : K) && ldb >= (trans_b ? K : N) && ldc >= N,
             "sgemm_bf16: leading dimensions too small: lda ", lda, ", ldb ", ldb, ", ldc ", ldc, " for M ",
             M, ", N ", N, ", K ", K, (trans_a ? " (A transposed)" : ""), (trans_b ? " (B transposed)" : ""));
  ATTN_CHECK(path == Bf16GemmPath::scalar || bf16_gemm_available(),
             "sgemm_bf16: the AVX-512 path needs AVX-512 active and AVX512_BF16; active ISA ",
             isa_str(active_isa()), ", AVX512_BF16 ", cpu_has_avx512_bf16() ? "yes" : "no");
  if (M == 0 || N == 0) return;
  if (K == 0) {  // op(A)·op(B) is all zeros
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) C[i * ldc + j] = beta == 0 ? 0.f : beta * C[i * ldc + j];
    return;
  }
  run(path == Bf16GemmPath::avx512 ? bf16_gemm_avx512_kernels() : kScalar, trans_a, trans_b, M, N, K, alpha,
      A, lda, B, ldb, beta, C, ldc);
}

}  // namespace detail

bool bf16_gemm_available() { return active_isa() == Isa::avx512 && cpu_has_avx512_bf16(); }

void sgemm_bf16(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
                int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  detail::sgemm_bf16_path(bf16_gemm_available() ? detail::Bf16GemmPath::avx512 : detail::Bf16GemmPath::scalar,
                          trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

}  // namespace attn::kernels::cpu
