// sgemm_f32: validation, blocking and threading (shared by every path), and the scalar oracle
// path. See gemm_f32.h for the semantics and the packed layout.
#include "kernels/cpu/gemm_f32.h"

#include <attn/core/error.h>
#include <attn/core/parallel.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <vector>

#include "kernels/cpu/isa.h"

namespace attn::kernels::cpu {
namespace detail {
namespace {

// ---- the scalar oracle ------------------------------------------------------

void pack_rows_scalar(const float* src, int64_t ld, int kc, int w, int W, float* out) {
  const int npanels = (w + W - 1) / W;
  for (int q = 0; q < npanels; ++q)
    for (int k = 0; k < kc; ++k)
      for (int c = 0; c < W; ++c) {
        const int col = q * W + c;
        out[(int64_t{q} * kc + k) * W + c] = col < w ? src[int64_t{k} * ld + col] : 0.f;
      }
}

void pack_cols_scalar(const float* src, int64_t ld, int kc, int w, int W, float* out) {
  const int npanels = (w + W - 1) / W;
  for (int q = 0; q < npanels; ++q)
    for (int k = 0; k < kc; ++k)
      for (int c = 0; c < W; ++c) {
        const int col = q * W + c;
        out[(int64_t{q} * kc + k) * W + c] = col < w ? src[int64_t{col} * ld + k] : 0.f;
      }
}

constexpr int kScalarMr = 4, kScalarNr = 16;

void block_scalar(int kc, const float* a, const float* b, float* c, int64_t ldc, int m, int n, float alpha,
                  float beta) {
  float acc[kScalarMr][kScalarNr] = {};
  for (int k = 0; k < kc; ++k)
    for (int r = 0; r < kScalarMr; ++r)
      for (int j = 0; j < kScalarNr; ++j)
        acc[r][j] = std::fma(a[k * kScalarMr + r], b[k * kScalarNr + j], acc[r][j]);
  for (int r = 0; r < m; ++r)
    for (int j = 0; j < n; ++j) {
      float& out = c[r * ldc + j];
      out = beta == 0 ? alpha * acc[r][j] : std::fma(beta, out, alpha * acc[r][j]);
    }
}

void block_b_scalar(int kc, const float* a, const float* b, int64_t ldb, float* c, int64_t ldc, int m, int n,
                    float alpha, float beta) {
  float panel[kScalarNr] = {};
  float acc[kScalarMr][kScalarNr] = {};
  for (int k = 0; k < kc; ++k) {
    for (int j = 0; j < kScalarNr; ++j) panel[j] = j < n ? b[k * ldb + j] : 0.f;
    for (int r = 0; r < kScalarMr; ++r)
      for (int j = 0; j < kScalarNr; ++j) acc[r][j] = std::fma(a[k * kScalarMr + r], panel[j], acc[r][j]);
  }
  for (int r = 0; r < m; ++r)
    for (int j = 0; j < n; ++j) {
      float& out = c[r * ldc + j];
      out = beta == 0 ? alpha * acc[r][j] : std::fma(beta, out, alpha * acc[r][j]);
    }
}

constexpr F32GemmKernels kScalar{kScalarMr,    kScalarNr,      pack_rows_scalar, pack_cols_scalar,
                                 block_scalar, block_b_scalar, nullptr};

// ---- blocking and threading -------------------------------------------------

constexpr int64_t kMcPanels = 12;  // A panels per thread block: 144 rows (AVX-512), 144 · 768 · 4 = 432 KiB
constexpr int64_t kNcMax = 2048;   // columns per shared packed B block: 768 · 2048 · 4 bytes (6 MiB)
constexpr int64_t kSharedAMax = int64_t{1} << 20;  // floats (4 MiB) of op(A) packed once for split panels

constexpr double kSerialMacs = 1 << 20;  // ~10 µs of one core: below that, one thread

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// A grow-only, 64-byte aligned scratch buffer (one per thread, kept between calls so small
// products do not pay for page faults on every call).
float* scratch(std::vector<float>& buf, int64_t n) {
  if (static_cast<int64_t>(buf.size()) < n + 16) buf.resize(static_cast<size_t>(n + 16));
  auto addr = reinterpret_cast<uintptr_t>(buf.data());
  return reinterpret_cast<float*>((addr + 63) & ~uintptr_t{63});
}

// prepacked_b: op(B) in linear_packed.h's layout (kern.block_p32 set, trans_b false; B unused), or null.
// epilogue (or null): called on each finished (row block, column range) after the last k block.
void run(const F32GemmKernels& kern, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
         const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc,
         const float* prepacked_b = nullptr, const F32GemmEpilogue* epilogue = nullptr) {
  const int64_t Mr = kern.mr, Nr = kern.nr;
  // Small products (and calls inside a parallel_for) run on the calling thread.
  const bool serial = in_parallel_for() || num_threads() == 1 ||
                      static_cast<double>(M) * static_cast<double>(N) * static_cast<double>(K) < kSerialMacs;
  const int64_t threads = serial ? 1 : num_threads();
  auto for_each = [&](int64_t n, int64_t grain, const std::function<void(int64_t, int64_t, int)>& fn) {
    if (serial)
      fn(0, n, 0);
    else
      parallel_for(n, grain, fn);
  };
  // k blocks of (nearly) equal size, from K alone (gemm_f32.h: the same bits for every split).
  const int64_t nkb = ceil_div(K, kF32Kc);
  const int64_t kc = ceil_div(K, nkb);
  const int64_t nc = std::min(kNcMax / Nr * Nr, ceil_div(N, Nr) * Nr);
  // Row blocks: a multiple of the thread count when there are several, each a run of whole
  // Mr-row panels, the panels spread evenly (the blocks differ by at most one panel).
  const int64_t panels = ceil_div(M, Mr);
  int64_t mb = ceil_div(panels, kMcPanels);
  if (mb > 1) mb = std::min(panels, ceil_div(mb, threads) * threads);
  const int64_t mc = ceil_div(panels, mb) * Mr;  // rows of the largest block

  // Few rows and op(B) not transposed: the register block reads op(B) in place (packing it would
  // cost about as much as the product).
  const bool b_in_place = prepacked_b == nullptr && !trans_b && M <= kF32InPlaceBMaxRows;
  // A register block narrower than the prepacked panels (AVX2: 16 of 32 columns) reads every other 64
  // bytes of their rows; over many rows, copying its half panels into panels of its own first is faster
  // (gemm_f32.h: kF32RepackMinRows). The same values reach the same block either way.
  constexpr int64_t P = kF32PackedNr;
  const bool repack = prepacked_b != nullptr && Nr < P && M >= kF32RepackMinRows;
  const bool pack_b = !b_in_place && (prepacked_b == nullptr || repack);
  static thread_local std::vector<float> b_buf;
  float* bpack = pack_b ? scratch(b_buf, nc * kc) : nullptr;
  for (int64_t jc = 0; jc < N; jc += nc) {
    const int64_t ncur = std::min(nc, N - jc), npan = ceil_div(ncur, Nr);
    // Few row blocks: split the panels too, so that every thread has work.
    int64_t n_split = 1;
    if (threads > 1 && mb < 2 * threads) n_split = std::min(npan, ceil_div(4 * threads, mb));
    const int64_t per_split = ceil_div(npan, n_split);
    n_split = ceil_div(npan, per_split);
    // Split panels: every row block is read by n_split tasks, so when op(B) is packed (a parallel region
    // before the product's) op(A) is packed there too, once, into a buffer the tasks share (while it is
    // small), not again by each of them.
    const bool shared_a = n_split > 1 && pack_b && mb * mc * kc <= kSharedAMax;
    static thread_local std::vector<float> a_shared_buf;
    float* ashared = shared_a ? scratch(a_shared_buf, mb * mc * kc) : nullptr;
    for (int64_t pc = 0; pc < K; pc += kc) {
      const int kcur = static_cast<int>(std::min(kc, K - pc));
      // Row block ib: rows [row0(ib), row0(ib + 1)), a run of whole panels.
      auto row0 = [&](int64_t ib) { return std::min(M, ib * panels / mb * Mr); };
      // Panels of W of the w rows (op(A)) or columns (op(B)) from index i0 on, over this k block; the
      // operand X holds them with k running along its rows (k_major: X[k, i]) or along its columns (X[i, k]).
      auto pack = [&](const float* X, int64_t ld, bool k_major, int64_t i0, int w, int64_t W, float* out) {
        if (k_major)
          kern.pack_rows(X + pc * ld + i0, ld, kcur, w, static_cast<int>(W), out);
        else
          kern.pack_cols(X + i0 * ld + pc, ld, kcur, w, static_cast<int>(W), out);
      };
      // op(A)(i, k) = A[k, i] when A is transposed, else A[i, k]
      auto pack_a = [&](int64_t i0, int w, float* out) { pack(A, lda, trans_a, i0, w, Mr, out); };
      // B: chunks of panels (each a contiguous run of columns), shared by all threads; with shared_a,
      // A's row blocks as further chunks of the same parallel region.
      const int64_t pan_chunk = std::max<int64_t>(1, ceil_div(npan, 2 * threads));
      const int64_t b_chunks = pack_b ? ceil_div(npan, pan_chunk) : 0;
      const int64_t a_chunks = shared_a ? mb : 0;
      if (b_chunks + a_chunks > 0)
        for_each(b_chunks + a_chunks, 1, [&](int64_t b, int64_t e, int) {
          for (int64_t ch = b; ch < e; ++ch) {
            if (ch >= b_chunks) {
              const int64_t ib = ch - b_chunks, i0 = row0(ib);
              pack_a(i0, static_cast<int>(row0(ib + 1) - i0), ashared + ib * mc * kcur);
              continue;
            }
            const int64_t j = jc + ch * pan_chunk * Nr;
            if (repack) {  // each Nr-column panel from its part of a prepacked panel (rows P apart)
              for (int64_t pn = ch * pan_chunk; pn < std::min(npan, (ch + 1) * pan_chunk); ++pn) {
                const int64_t jj = jc + pn * Nr;
                kern.pack_rows(prepacked_b + (jj / P * K + pc) * P + jj % P, P, kcur,
                               static_cast<int>(std::min(Nr, N - jj)), static_cast<int>(Nr),
                               bpack + pn * kcur * Nr);
              }
              continue;
            }
            const int w = static_cast<int>(std::min(pan_chunk * Nr, jc + ncur - j));
            // op(B)(k, j) = B[j, k] when B is transposed, else B[k, j]
            pack(B, ldb, !trans_b, j, w, Nr, bpack + ch * pan_chunk * kcur * Nr);
          }
        });
      const float beta_k = pc == 0 ? beta : 1.f;  // later k blocks add to what the first wrote
      for_each(mb * n_split, 1, [&](int64_t b, int64_t e, int) {
        static thread_local std::vector<float> a_buf;
        float* apack = shared_a ? nullptr : scratch(a_buf, mc * kcur);
        for (int64_t t = b; t < e; ++t) {
          const int64_t ib = t / n_split, js = t % n_split;
          const int64_t i0 = row0(ib);
          const int64_t mcur = row0(ib + 1) - i0, nmp = ceil_div(mcur, Mr);
          if (shared_a)
            apack = ashared + ib * mc * kcur;
          else
            pack_a(i0, static_cast<int>(mcur), apack);
          const int64_t pn_end = std::min(npan, (js + 1) * per_split);
          for (int64_t pn = js * per_split; pn < pn_end; ++pn) {
            const int64_t j = jc + pn * Nr;
            const int n = static_cast<int>(std::min(Nr, N - j));
            for (int64_t q = 0; q < nmp; ++q) {
              const int64_t i = i0 + q * Mr;
              if (b_in_place) {
                kern.block_b(kcur, apack + q * kcur * Mr, B + pc * ldb + j, ldb, C + i * ldc + j, ldc,
                             static_cast<int>(std::min(Mr, M - i)), n, alpha, beta_k);
                continue;
              }
              if (prepacked_b != nullptr && !repack) {
                // A prepacked panel holds all K rows of 32 columns: this k block starts pc rows in, and
                // the register block's nr columns j % 32 columns in.
                kern.block_p32(kcur, apack + q * kcur * Mr, prepacked_b + (j / P * K + pc) * P + j % P,
                               C + i * ldc + j, ldc, static_cast<int>(std::min(Mr, M - i)), n, alpha, beta_k);
                continue;
              }
              kern.block(kcur, apack + q * kcur * Mr, bpack + pn * kcur * Nr, C + i * ldc + j, ldc,
                         static_cast<int>(std::min(Mr, M - i)), n, alpha, beta_k);
            }
          }
          if (epilogue != nullptr && pc + kcur == K && js * per_split < pn_end) {
            const int64_t j0 = jc + js * per_split * Nr;
            (*epilogue)(i0, mcur, j0, std::min(jc + pn_end * Nr, N) - j0);
          }
        }
      });
    }
  }
}

// The path of the active instruction set.
F32GemmPath active_path() {
  const Isa isa = active_isa();
  return isa == Isa::avx512 ? F32GemmPath::avx512
         : isa == Isa::avx2 ? F32GemmPath::avx2
                            : F32GemmPath::scalar;
}

const F32GemmKernels& kernels_of(F32GemmPath path) {
  switch (path) {
    case F32GemmPath::avx512:
      return f32_gemm_avx512_kernels();
    case F32GemmPath::avx2:
      return f32_gemm_avx2_kernels();
    case F32GemmPath::scalar:
      break;
  }
  return kScalar;
}

}  // namespace

const F32GemmKernels& f32_gemm_scalar_kernels() { return kScalar; }

void sgemm_f32_path(F32GemmPath path, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K,
                    float alpha, const float* A, int64_t lda, const float* B, int64_t ldb, float beta,
                    float* C, int64_t ldc) {
  ATTN_CHECK(M >= 0 && N >= 0 && K >= 0, "sgemm_f32: sizes must be >= 0; got M ", M, ", N ", N, ", K ", K);
  ATTN_CHECK(lda >= (trans_a ? M : K) && ldb >= (trans_b ? K : N) && ldc >= N,
             "sgemm_f32: leading dimensions too small: lda ", lda, ", ldb ", ldb, ", ldc ", ldc, " for M ", M,
             ", N ", N, ", K ", K, (trans_a ? " (A transposed)" : ""), (trans_b ? " (B transposed)" : ""));
  const Isa need = path == F32GemmPath::avx512 ? Isa::avx512
                   : path == F32GemmPath::avx2 ? Isa::avx2
                                               : Isa::scalar;
  ATTN_CHECK(isa_available(need), "sgemm_f32: the ", isa_str(need), " path needs a CPU with ", isa_str(need),
             "; this one has ", isa_str(detected_isa()));
  if (M == 0 || N == 0) return;
  if (K == 0) {  // op(A)·op(B) is all zeros
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) C[i * ldc + j] = beta == 0 ? 0.f : beta * C[i * ldc + j];
    return;
  }
  run(kernels_of(path), trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

}  // namespace detail

bool f32_gemm_fast() { return active_isa() != Isa::scalar; }

bool f32_gemm_reads_packed_b() { return active_isa() != Isa::scalar; }

int64_t f32_gemm_row_block_rows() { return detail::kMcPanels * detail::kernels_of(detail::active_path()).mr; }

void sgemm_f32_packed_b(int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
                        const float* packed_b, float beta, float* C, int64_t ldc) {
  sgemm_f32_packed_b(M, N, K, alpha, A, lda, packed_b, beta, C, ldc, F32GemmEpilogue());
}

void sgemm_f32_packed_b(int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
                        const float* packed_b, float beta, float* C, int64_t ldc,
                        const F32GemmEpilogue& epilogue) {
  ATTN_CHECK(M >= 0 && N >= 0 && K >= 0, "sgemm_f32_packed_b: sizes must be >= 0; got M ", M, ", N ", N,
             ", K ", K);
  ATTN_CHECK(lda >= K && ldc >= N, "sgemm_f32_packed_b: leading dimensions too small: lda ", lda, ", ldc ",
             ldc, " for M ", M, ", N ", N, ", K ", K);
  ATTN_CHECK(f32_gemm_reads_packed_b(),
             "sgemm_f32_packed_b: needs a vectorised path (AVX2 or AVX-512); the active one is ",
             isa_str(active_isa()));
  ATTN_CHECK(reinterpret_cast<uintptr_t>(packed_b) % 64 == 0,
             "sgemm_f32_packed_b: the packed op(B) must be 64-byte aligned (its panels are read with aligned "
             "loads); got an address ",
             reinterpret_cast<uintptr_t>(packed_b) % 64, " bytes past a 64-byte boundary");
  if (M == 0 || N == 0) return;
  if (K == 0) {
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) C[i * ldc + j] = beta == 0 ? 0.f : beta * C[i * ldc + j];
    if (epilogue) epilogue(0, M, 0, N);
    return;
  }
  detail::run(detail::kernels_of(detail::active_path()), false, false, M, N, K, alpha, A, lda, nullptr, N,
              beta, C, ldc, packed_b, epilogue ? &epilogue : nullptr);
}

void sgemm_f32(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
               int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  detail::sgemm_f32_path(detail::active_path(), trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C,
                         ldc);
}

}  // namespace attn::kernels::cpu
