// ops::GreedyScreen (include/attn/ops/quantized.h): exact greedy argmax over a screened Q8_0 product.
#include <attn/core/error.h>
#include <attn/core/f16.h>
#include <attn/core/parallel.h>
#include <attn/ops/quantized.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/cpu/isa.h"
#include "kernels/cpu/q8k.h"
#include "kernels/cpu/qscreen.h"

namespace attn::ops {

bool greedy_screen_fast() {
  return kernels::cpu::active_isa() == kernels::cpu::Isa::avx512 && kernels::cpu::cpu_has_avx512_vnni();
}

GreedyScreen::GreedyScreen(const QuantMatrix& w, std::span<const float> column_weight)
    : N_(w.rows()), K_(w.cols()), blocks_(w.blocks()) {
  ATTN_CHECK(w.blocks() != nullptr && N_ > 0, "GreedyScreen: expected a non-empty Q8_0 matrix, got ", N_,
             " rows");
  ATTN_CHECK(w.format() == QuantFormat::q8_0, "GreedyScreen: expected Q8_0 weights, got ",
             quant_format_name(w.format()));
  ATTN_CHECK(K_ > 0 && K_ % 64 == 0,
             "GreedyScreen: K must be a positive multiple of 64 (blocks go in pairs), got ", K_);
  ATTN_CHECK(K_ <= 4096, "GreedyScreen: K must be at most 4096, got ", K_);
  ATTN_CHECK(column_weight.empty() || static_cast<int64_t>(column_weight.size()) == K_,
             "GreedyScreen: column_weight must have K = ", K_, " values (or none), got ",
             column_weight.size());
  std::vector<double> weight(static_cast<std::size_t>(K_), 0.0);
  if (!column_weight.empty()) {
    for (int64_t j = 0; j < K_; ++j) weight[j] = std::fabs(static_cast<double>(column_weight[j]));
  } else {  // the largest |w| of every column
    const int64_t nb = K_ / 32;
    for (int64_t n = 0; n < N_; ++n)
      for (int64_t b = 0; b < nb; ++b) {
        const std::byte* blk = w.blocks() + (n * nb + b) * 34;
        uint16_t h;
        std::memcpy(&h, blk, 2);
        const double d = std::fabs(static_cast<double>(f16_to_f32(h)));
        for (int i = 0; i < 32; ++i)
          weight[32 * b + i] =
              std::max(weight[32 * b + i], d * std::abs(static_cast<int>(static_cast<int8_t>(blk[2 + i]))));
      }
  }
  std::vector<int32_t> order(static_cast<std::size_t>(K_));
  for (int64_t j = 0; j < K_; ++j) order[j] = static_cast<int32_t>(j);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return weight[a] > weight[b]; });
  cols_.assign(order.begin(), order.begin() + kernels::kScreenOutliers);
  std::sort(cols_.begin(), cols_.end());
  data_.assign(static_cast<std::size_t>(kernels::qscreen_bytes(N_, K_) + 64), std::byte{0});
  // the panels from a 64-byte boundary (their loads then stay inside cache lines); the offset is kept,
  // so a copy of the screen stays correct wherever its buffer lands
  data_off_ = (64 - reinterpret_cast<uintptr_t>(data_.data()) % 64) % 64;
  std::byte* const base = data_.data() + data_off_;
  std::vector<int64_t> bad(64, -1);
  parallel_for(N_, 1024, [&](int64_t b, int64_t e, int t) {
    if (!kernels::cpu::qscreen_build(w.blocks(), b, e, K_, cols_.data(), base)) {
      for (int64_t n = b; n < e; ++n)
        if (!kernels::cpu::qscreen_build(w.blocks(), n, n + 1, K_, cols_.data(), base)) {
          bad[static_cast<std::size_t>(t) % bad.size()] = n;
          break;
        }
    }
  });
  for (int64_t n : bad)
    if (n >= 0) {
      data_.clear();
      throw Error(detail::concat("GreedyScreen: row ", n,
                                 " has a scale that is not finite (or its 5-bit scale ",
                                 "overflows f16); expected finite Q8_0 blocks"));
    }
}

// The activation side of every row of x (kernels/cpu/qscreen.h), one ScreenX per row.
std::vector<kernels::ScreenX> GreedyScreen::prepare(const QuantActivations& x) {
  ATTN_CHECK(!empty(), "GreedyScreen: the screen is empty (built from no matrix)");
  ATTN_CHECK(x.rows() >= 1 && x.cols() == K_ && !x.k_kind(),
             "GreedyScreen: expected activation rows of K = ", K_, " in Q8_0 blocks, got ", x.rows(),
             " rows of K = ", x.cols(), x.k_kind() ? " in Q8_K blocks" : " in Q8_0 blocks");
  const int64_t P = x.rows(), nb = K_ / 32, no = kernels::kScreenOutliers;
  xq_.resize(static_cast<std::size_t>(P * K_));
  g_.resize(static_cast<std::size_t>(P * nb));
  hb_.resize(static_cast<std::size_t>(P * nb));
  xo_.resize(static_cast<std::size_t>(P * no));
  ho_.resize(static_cast<std::size_t>(P));
  std::vector<kernels::ScreenX> sx(static_cast<std::size_t>(P));
  for (int64_t r = 0; r < P; ++r) {
    ATTN_CHECK(kernels::qscreen_prepare(x.q() + r * K_, x.d() + r * nb, K_, cols_.data(), xq_.data() + r * K_,
                                        g_.data() + r * nb, hb_.data() + r * nb, xo_.data() + r * no,
                                        ho_.data() + r),
               "GreedyScreen: activation row ", r, " is not finite");
    kernels::ScreenX& s = sx[static_cast<std::size_t>(r)];
    s.xq = xq_.data() + r * K_, s.d = x.d() + r * nb, s.g = g_.data() + r * nb, s.hb = hb_.data() + r * nb;
    s.xo = xo_.data() + r * no, s.ho = ho_[static_cast<std::size_t>(r)], s.K = K_;
  }
  return sx;
}

void GreedyScreen::screen(const QuantActivations& x, float* value, float* bound) {
  ATTN_CHECK(x.rows() == 1, "GreedyScreen::screen: expected one activation row of K = ", K_, ", got ",
             x.rows(), " rows");
  const std::vector<kernels::ScreenX> sx = prepare(x);
  const std::byte* const base = data_.data() + data_off_;
  parallel_for(N_, 2048, [&](int64_t b, int64_t e, int) {
    kernels::cpu::qscreen_rows(base, b, e, sx[0], value, bound);
  });
}

GreedyScreen::Pick GreedyScreen::argmax(const QuantMatrix& w, const QuantActivations& x) {
  ATTN_CHECK(x.rows() == 1, "GreedyScreen::argmax: expected one activation row of K = ", K_, ", got ",
             x.rows(), " rows (argmax_rows takes many)");
  Pick p;
  argmax_rows(w, x, &p);
  return p;
}

void GreedyScreen::argmax_rows(const QuantMatrix& w, const QuantActivations& x, Pick* out) {
  ATTN_CHECK(w.blocks() == blocks_ && w.rows() == N_ && w.cols() == K_ && w.format() == QuantFormat::q8_0,
             "GreedyScreen::argmax: expected the Q8_0 matrix [", N_, ", ", K_,
             "] the screen was built from, got ", quant_format_name(w.format()), " [", w.rows(), ", ",
             w.cols(), "]", w.blocks() == blocks_ ? "" : " at another address");
  const std::vector<kernels::ScreenX> sx = prepare(x);
  // At most kRowsPerPass rows per pass over the copy: their values and bounds (8 bytes per row and
  // vocabulary entry: 34 MB for Gemma 3's 16 rows) are the scratch this keeps.
  constexpr int64_t kRowsPerPass = 16;
  for (int64_t r0 = 0; r0 < x.rows(); r0 += kRowsPerPass)
    argmax_pass(w, x, sx.data() + r0, r0, std::min(kRowsPerPass, x.rows() - r0), out + r0);
}

// Rows [r0, r0 + P) of x (sx: theirs) in one pass over the copy.
void GreedyScreen::argmax_pass(const QuantMatrix& w, const QuantActivations& x, const kernels::ScreenX* sx,
                               int64_t r0, int64_t P, Pick* out) {
  value_.resize(static_cast<std::size_t>(P * N_));
  bound_.resize(static_cast<std::size_t>(P * N_));
  const std::byte* const base = data_.data() + data_off_;
  // Pass 1 (one parallel region): the screen of every row (each panel read once for all of them), and
  // each thread's best lower end (value − bound) of each row while its values are in cache. The
  // maximum's exact logit is at least the best lower end, so its upper end reaches it.
  const int64_t T = num_threads(), pad = (P + 15) / 16 * 16;  // a thread's slots on their own lines
  std::vector<float> lowers(static_cast<std::size_t>(T * pad), -INFINITY);
  parallel_for(N_, 2048, [&](int64_t b, int64_t e, int t) {
    kernels::cpu::qscreen_rows_multi(base, b, e, sx, P, value_.data(), bound_.data(), N_);
    for (int64_t r = 0; r < P; ++r) {
      float& l = lowers[static_cast<std::size_t>(t * pad + r)];
      l = kernels::cpu::qscreen_lower(value_.data() + r * N_ + b, bound_.data() + r * N_ + b, e - b, l);
    }
  });
  std::vector<float> lower(static_cast<std::size_t>(P), -INFINITY);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t r = 0; r < P; ++r)
      lower[r] = std::max(lower[r], lowers[static_cast<std::size_t>(t * pad + r)]);

  // Pass 2 (one parallel region over rows × chunks of the vocabulary): per chunk the candidates (upper
  // end >= lower, NaN included; ascending), their exact logits from the row kernel of quant_dot_rows
  // (the same f32 values), and the chunk's first largest.
  constexpr int64_t kChunk = 8192;
  const int64_t chunks = (N_ + kChunk - 1) / kChunk, rb = K_ / 32 * 34;
  cand_.resize(static_cast<std::size_t>(T * (kChunk + 1)));  // qscreen_select writes one past its last pick
  exact_.resize(static_cast<std::size_t>(T * kChunk));
  std::vector<int64_t> chunk_count(static_cast<std::size_t>(P * chunks), 0),
      chunk_best(static_cast<std::size_t>(P * chunks), -1);
  std::vector<float> chunk_logit(static_cast<std::size_t>(P * chunks), 0.0f);
  parallel_for(P * chunks, 1, [&](int64_t i0, int64_t i1, int t) {
    int64_t* rows = cand_.data() + t * (kChunk + 1);
    float* exact = exact_.data() + t * kChunk;
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t r = i / chunks, c = i % chunks, b = c * kChunk, e = std::min(N_, b + kChunk);
      const int64_t count = kernels::cpu::qscreen_select(value_.data() + r * N_ + b,
                                                         bound_.data() + r * N_ + b, e - b, lower[r], rows);
      kernels::Q8KRows xr;
      xr.kind = kernels::Q8Kind::q8_0, xr.M = 1, xr.K = K_;
      const int64_t xr_row = r0 + r;
      xr.q = x.q() + xr_row * K_, xr.d = x.d() + xr_row * (K_ / 32), xr.bsum = x.bsum() + xr_row * (K_ / 16);
      xr.ldq = K_, xr.ldd = K_ / 32, xr.ldb = K_ / 16;
      kernels::cpu::q8k_dot_row_list(kernels::KFormat::q8_0, w.blocks() + b * rb, rows, count, K_, xr, exact);
      int64_t best = -1;
      for (int64_t j = 0; j < count; ++j)
        if (best < 0 || exact[rows[j]] > exact[best]) best = rows[j];  // the first of equal maxima
      chunk_count[static_cast<std::size_t>(i)] = count;
      chunk_best[static_cast<std::size_t>(i)] = best < 0 ? -1 : b + best;
      if (best >= 0) chunk_logit[static_cast<std::size_t>(i)] = exact[best];
    }
  });
  for (int64_t r = 0; r < P; ++r) {
    Pick p;
    p.candidates = 0;
    for (int64_t c = 0; c < chunks; ++c) {  // chunks in row order: a later chunk wins only when larger
      const auto i = static_cast<std::size_t>(r * chunks + c);
      p.candidates += chunk_count[i];
      if (chunk_best[i] >= 0 && (p.index < 0 || chunk_logit[i] > p.logit))
        p.index = chunk_best[i], p.logit = chunk_logit[i];
    }
    out[r] = p;
  }
}

}  // namespace attn::ops
