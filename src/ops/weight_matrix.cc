// The runtime's product entry (include/attn/ops/weight_matrix.h): one door that picks the kernel.
#include <attn/core/error.h>
#include <attn/core/parallel.h>
#include <attn/ops/linear.h>
#include <attn/ops/weight_matrix.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>

#include "kernels/cpu/qdot.h"

namespace attn::ops {

namespace {
// The panels wherever the 8-bit GEMM has a vector kernel (AVX2, AVX-512 VNNI): for a prompt pass or a
// batched step they multiply 1.2-1.6x (Q8_0) and 2-5x (K-quants) faster than the row products, whose
// kernels take one to four activation rows per weight row read (bench/qdot_bench, the panels column).
bool panels_pay(QuantFormat format) { return quant_dot_supported(format) && quant_dot_fast(); }
}  // namespace

WeightMatrix WeightMatrix::quantized(QuantFormat format, const std::byte* blocks, int64_t N, int64_t K,
                                     bool may_copy) {
  ATTN_CHECK(N > 0 && K > 0 && K % quant_block_elems(format) == 0,
             "weight matrix: ", quant_format_name(format), " needs N > 0 and K a positive multiple of ",
             quant_block_elems(format), "; got [", N, ", ", K, "]");
  ATTN_CHECK(blocks != nullptr, "weight matrix: no blocks");
  WeightMatrix w;
  w.quant_ = true;
  w.q_ = QuantMatrix(format, blocks, N, K);
  w.N_ = N;
  w.K_ = K;
  // The panels. Blocks in a file mapping may then be given back (io::GgufFile::release_pages): only
  // row(), embedding lookups and the scalar ISA's oracle read them afterwards.
  if (may_copy && panels_pay(format)) w.panels_ = std::make_shared<const QuantPanels>(w.q_);
  return w;
}

WeightMatrix WeightMatrix::dense(std::span<const float> values, int64_t N, int64_t K, bool multiplied) {
  ATTN_CHECK(N > 0 && K > 0 && static_cast<int64_t>(values.size()) == N * K, "weight matrix: ", values.size(),
             " values for [", N, ", ", K, "]; expected ", N * K);
  WeightMatrix w;
  if (multiplied)
    w.packed_ = pack_weight(values.data(), N, K);
  else
    w.f32_.assign(values.begin(), values.end());
  w.N_ = N;
  w.K_ = K;
  return w;
}

WeightMatrix WeightMatrix::quantize(QuantFormat format, const float* values, int64_t N, int64_t K) {
  auto blocks = std::make_shared<const std::vector<std::byte>>(quantize_blocks(format, values, N, K));
  // Owned blocks would be held twice with panels (load-time quantization is there to save memory): they
  // keep multiplying in place.
  WeightMatrix w = quantized(format, blocks->data(), N, K, false);
  w.blocks_ = std::move(blocks);
  return w;
}

void WeightMatrix::row(int64_t n, float* out) const {
  ATTN_CHECK(n >= 0 && n < N_, "weight matrix: row ", n, " out of range [0, ", N_, ")");
  rows_f32(n, n + 1, out);
}

void WeightMatrix::rows_f32(int64_t n0, int64_t n1, float* out) const {
  ATTN_CHECK(0 <= n0 && n0 <= n1 && n1 <= N_, "weight matrix: rows [", n0, ", ", n1, ") out of range [0, ",
             N_, ")");
  if (quant_)
    quant_unpack_rows(q_, n0, n1, out);
  else if (packed_.defined())
    unpack_weight_rows(packed_, N_, K_, n0, n1, out);
  else
    std::memcpy(out, f32_.data() + n0 * K_, static_cast<std::size_t>((n1 - n0) * K_) * sizeof(float));
}

int64_t WeightMatrix::owned_bytes() const {
  int64_t b = static_cast<int64_t>(f32_.size() * sizeof(float));
  if (packed_.defined()) b += packed_.numel() * static_cast<int64_t>(sizeof(float));
  if (panels_) b += panels_->bytes();
  if (blocks_) b += static_cast<int64_t>(blocks_->size());
  return b;
}

int64_t WeightMatrix::weight_bytes() const {
  if (!quant_ || has_panels()) return owned_bytes();  // a borrowed matrix with panels: the panels
  const int64_t stored = N_ * (K_ / quant_block_elems(q_.format())) * quant_block_bytes(q_.format());
  return owned_bytes() + (blocks_ ? 0 : stored);
}

std::string WeightMatrix::form() const { return quant_ ? quant_format_name(q_.format()) : "F32"; }

namespace {

enum class Kind { panels, qdot_k, qdot_0, f32act, dense };

Kind kind_of(const WeightMatrix& w, bool q8) {
  if (!w.is_quantized()) return Kind::dense;
  if (!q8) return Kind::f32act;
  const QuantMatrix& q = w.quant();
  if (w.has_panels()) return Kind::panels;
  if (quant_dot_supported(q.format()) && quant_dot_fast()) {
    // Q4_0 / Q4_1 / Q5_0 / Q8_0 multiply Q8_0 activations; the K-quants Q8_K ones.
    return quant_dot_same_activations(q.format(), QuantFormat::q8_0) ? Kind::qdot_0 : Kind::qdot_k;
  }
  return Kind::f32act;
}

}  // namespace

void linear_rows(std::span<const LinearJob> jobs, const float* X, int64_t M, int64_t ldx, LinearScratch& s,
                 bool activations_8bit) {
  ATTN_CHECK(!jobs.empty() && jobs.size() <= 8, "linear_rows: 1 to 8 jobs, got ", jobs.size());
  ATTN_CHECK(M >= 1, "linear_rows: M must be >= 1, got ", M);
  const int64_t K = jobs[0].w->cols();
  ATTN_CHECK(ldx >= K, "linear_rows: ldx ", ldx, " < K ", K);
  std::array<Kind, 8> kinds{};
  int64_t total = 0;
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    const LinearJob& j = jobs[i];
    ATTN_CHECK(j.w && !j.w->empty() && j.w->cols() == K, "linear_rows: job ", i, " has ",
               j.w ? j.w->cols() : 0, " columns; expected ", K);
    ATTN_CHECK(j.y && j.ldy >= j.w->rows(), "linear_rows: job ", i, " output stride ", j.ldy, " < N ",
               j.w->rows());
    kinds[i] = kind_of(*j.w, activations_8bit);
    if (kinds[i] != Kind::dense) total += j.w->rows();
  }
  // The f32 weights: each the packed product over the pool, one FMA chain per output (same_rows), beside
  // the output first when it accumulates; a lookup-only table through ops::gemm.
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    if (kinds[i] != Kind::dense) continue;
    const LinearJob& j = jobs[i];
    const int64_t N = j.w->rows();
    if (!j.w->packed_.defined()) {
      gemm(false, true, M, N, K, 1.0f, X, ldx, j.w->f32_.data(), K, j.accumulate ? 1.0f : 0.0f, j.y, j.ldy);
      continue;
    }
    float* out = j.y;
    int64_t ldo = j.ldy;
    if (j.accumulate) {
      s.y.resize(static_cast<std::size_t>(M * N));
      out = s.y.data();
      ldo = N;
    }
    linear_packed(X, ldx, j.w->packed_, nullptr, out, ldo, M, N, K, true);
    if (j.accumulate)
      for (int64_t m = 0; m < M; ++m)
        for (int64_t n = 0; n < N; ++n) j.y[m * j.ldy + n] += out[m * N + n];
  }
  if (total > 0) {
    // One quantization of X per activation kind (Q8_K for the K-quants, Q8_0 for the others).
    QuantActivations* act_k = nullptr;
    QuantActivations* act_0 = nullptr;
    std::array<QuantActivations*, 8> acts{};
    for (std::size_t i = 0; i < jobs.size(); ++i) {
      if (kinds[i] != Kind::panels && kinds[i] != Kind::qdot_k && kinds[i] != Kind::qdot_0) continue;
      const QuantFormat f = jobs[i].w->quant().format();
      const bool kind_0 = quant_dot_same_activations(f, QuantFormat::q8_0);
      QuantActivations*& a = kind_0 ? act_0 : act_k;
      if (!a) {
        a = kind_0 ? &s.act0 : &s.act;
        a->quantize(f, X, M, K, ldx);
      }
      acts[i] = a;
      if (kinds[i] == Kind::panels) s.parts[i].prepare(*jobs[i].w->panels_, *a);
    }
    // The work in units of 16 output rows (a panel), every job's after the previous one's.
    std::array<int64_t, 9> unit0{};
    for (std::size_t i = 0; i < jobs.size(); ++i)
      unit0[i + 1] = unit0[i] + (kinds[i] == Kind::dense ? 0 : (jobs[i].w->rows() + 15) / 16);
    const int64_t grain = std::max<int64_t>(1, 2048 / std::max<int64_t>(1, K * M));
    parallel_for(unit0[jobs.size()], grain, [&](int64_t b, int64_t e, int) {
      for (std::size_t i = 0; i < jobs.size(); ++i) {
        const int64_t u0 = std::max(b, unit0[i]) - unit0[i], u1 = std::min(e, unit0[i + 1]) - unit0[i];
        if (kinds[i] == Kind::dense || u0 >= u1) continue;
        const LinearJob& j = jobs[i];
        const int64_t lo = u0 * 16, hi = std::min(u1 * 16, j.w->rows());
        switch (kinds[i]) {
          case Kind::panels:
            s.parts[i].run(u0, u1, j.y, j.ldy, j.accumulate);
            break;
          case Kind::qdot_k:
          case Kind::qdot_0:
            quant_dot_rows(j.w->quant(), lo, hi, *acts[i], j.y, j.ldy, j.accumulate, true);
            break;
          default:  // one activation row at a time: the multi-row kernels sum in an order that depends on M
            for (int64_t m = 0; m < M; ++m)
              quant_linear_rows(j.w->quant(), lo, hi, X + m * ldx, 1, ldx, j.y + m * j.ldy, j.ldy,
                                j.accumulate);
            break;
        }
      }
    });
  }
  for (const LinearJob& j : jobs) {
    if (!j.bias) continue;
    const int64_t N = j.w->rows();
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n) j.y[m * j.ldy + n] += j.bias[n];
  }
}

// ---- greedy picks ----

namespace {
// The matrices GreedyScreen takes (Q8_0 rows of K, a multiple of 64 up to 4096), and whether a picker
// with these options screens at all.
bool screen_shape(QuantFormat format, int64_t K) {
  return format == QuantFormat::q8_0 && K % 64 == 0 && K <= 4096;
}
bool screening(const GreedyPickOptions& o) {
  return o.screen_after >= 0 && (!o.only_where_fast || greedy_screen_fast());
}
}  // namespace

bool GreedyPicker::screen_applies(const WeightMatrix& w, bool activations_8bit) {
  // The full product of one Q8_0 row is then quant_dot_rows over Q8_0 activations (kind_of: qdot_0),
  // the kernel whose values the screen's candidates get: the same logits, so the same pick.
  return activations_8bit && w.is_quantized() && screen_shape(w.quant().format(), w.cols()) &&
         kind_of(w, true) == Kind::qdot_0;
}

bool GreedyPicker::keeps_stored_blocks(QuantFormat format, int64_t K, const GreedyPickOptions& o) {
  return screening(o) && screen_shape(format, K);
}

bool GreedyPicker::screens(const WeightMatrix& w, bool activations_8bit) const {
  return screening(o_) && screen_applies(w, activations_8bit);
}

GreedyPicker::Pick GreedyPicker::pick(const WeightMatrix& w, const float* x, LinearScratch& s,
                                      bool activations_8bit) {
  ATTN_CHECK(!w.empty() && x != nullptr, "GreedyPicker: expected a weight matrix and a row, got ", w.rows(),
             " rows");
  // A non-finite activation makes logits non-finite: no pick (the screen refuses such a row too).
  for (int64_t i = 0; i < w.cols(); ++i)
    if (!std::isfinite(x[i])) return {-1, x[i], 0};
  Pick p;
  pick_rows(w, x, 1, w.cols(), s, activations_8bit, &p);
  return p;
}

bool GreedyPicker::screen_ready(const WeightMatrix& w, const float* x, bool activations_8bit) {
  if (!screens(w, activations_8bit)) return false;
  const bool built = !screen_.empty() && built_for_ == w.quant().blocks();
  if (!built && full_picks_ >= o_.screen_after) {  // outlier columns where x is largest
    screen_ = GreedyScreen(w.quant(), std::span<const float>(x, static_cast<std::size_t>(w.cols())));
    built_for_ = w.quant().blocks();
  }
  return !screen_.empty() && built_for_ == w.quant().blocks();
}

GreedyPicker::Pick GreedyPicker::argmax_row(const float* y, int64_t N) {
  int64_t best = 0;
  for (int64_t n = 0; n < N; ++n) {
    if (!std::isfinite(y[n])) return {-1, y[n], N};
    if (y[n] > y[best]) best = n;
  }
  return {best, y[best], N};
}

void GreedyPicker::pick_rows(const WeightMatrix& w, const float* X, int64_t P, int64_t ldx, LinearScratch& s,
                             bool activations_8bit, Pick* out) {
  ATTN_CHECK(P >= 0 && (P == 0 || (X != nullptr && out != nullptr && ldx >= w.cols())),
             "GreedyPicker::pick_rows: expected P >= 0 rows of K = ", w.cols(), " (row stride >= K), got P ",
             P, ", ldx ", ldx);
  if (P == 0) return;
  const int64_t N = w.rows(), K = w.cols();
  const bool finite = std::all_of(X, X + (P - 1) * ldx + K, [](float v) { return std::isfinite(v); });
  if (!finite) {  // row by row: a bad row alone
    for (int64_t r = 0; r < P; ++r) out[r] = pick(w, X + r * ldx, s, activations_8bit);
    return;
  }
  if (screen_ready(w, X, activations_8bit)) {
    // Every row through the screen at once (its copy read once per step): each row's candidates get
    // the exact logits they get alone, so each pick is the one it gets alone.
    act_.quantize(QuantFormat::q8_0, X, P, K, ldx);  // row-wise: each row's bits alone
    screen_picks_.resize(static_cast<std::size_t>(P));
    screen_.argmax_rows(w.quant(), act_, screen_picks_.data());
    for (int64_t r = 0; r < P; ++r) {
      const GreedyScreen::Pick& p = screen_picks_[static_cast<std::size_t>(r)];
      out[r] = {std::isfinite(p.logit) ? p.index : -1, p.logit, p.candidates};
    }
    return;
  }
  // One product for every row (the weights read once): for quantized weights each row's logits are
  // the bits each gets alone (linear_rows is row by row), so the picks are the same.
  y_.resize(static_cast<std::size_t>(P * N));
  const LinearJob job{&w, y_.data(), N};
  linear_rows({&job, 1}, X, P, ldx, s, activations_8bit);
  for (int64_t r = 0; r < P; ++r) out[r] = argmax_row(y_.data() + r * N, N);
  full_picks_ += P;
}

}  // namespace attn::ops
