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

void GreedyScreen::prepare(const QuantActivations& x) {
  ATTN_CHECK(!empty(), "GreedyScreen: the screen is empty (built from no matrix)");
  ATTN_CHECK(x.rows() == 1 && x.cols() == K_ && !x.k_kind(),
             "GreedyScreen: expected one activation row of K = ", K_, " in Q8_0 blocks, got ", x.rows(),
             " rows of K = ", x.cols(), x.k_kind() ? " in Q8_K blocks" : " in Q8_0 blocks");
  xq_.resize(static_cast<std::size_t>(K_));
  g_.resize(static_cast<std::size_t>(K_ / 32));
  hb_.resize(static_cast<std::size_t>(K_ / 32));
  xo_.resize(static_cast<std::size_t>(kernels::kScreenOutliers));
  ATTN_CHECK(kernels::qscreen_prepare(x.q(), x.d(), K_, cols_.data(), xq_.data(), g_.data(), hb_.data(),
                                      xo_.data(), &ho_),
             "GreedyScreen: the activation row is not finite");
}

void GreedyScreen::screen(const QuantActivations& x, float* value, float* bound) {
  prepare(x);
  kernels::ScreenX sx;
  sx.xq = xq_.data(), sx.d = x.d(), sx.g = g_.data(), sx.hb = hb_.data(), sx.xo = xo_.data(), sx.ho = ho_;
  sx.K = K_;
  const std::byte* const base = data_.data() + data_off_;
  parallel_for(N_, 2048,
               [&](int64_t b, int64_t e, int) { kernels::cpu::qscreen_rows(base, b, e, sx, value, bound); });
}

GreedyScreen::Pick GreedyScreen::argmax(const QuantMatrix& w, const QuantActivations& x) {
  ATTN_CHECK(w.blocks() == blocks_ && w.rows() == N_ && w.cols() == K_ && w.format() == QuantFormat::q8_0,
             "GreedyScreen::argmax: expected the Q8_0 matrix [", N_, ", ", K_,
             "] the screen was built from, got ", quant_format_name(w.format()), " [", w.rows(), ", ",
             w.cols(), "]", w.blocks() == blocks_ ? "" : " at another address");
  value_.resize(static_cast<std::size_t>(N_));
  bound_.resize(static_cast<std::size_t>(N_));
  prepare(x);
  kernels::ScreenX sx;
  sx.xq = xq_.data(), sx.d = x.d(), sx.g = g_.data(), sx.hb = hb_.data(), sx.xo = xo_.data(), sx.ho = ho_;
  sx.K = K_;
  const std::byte* const base = data_.data() + data_off_;
  // Pass 1 (one parallel region): the screen, and each thread's best lower end (value − bound) of its
  // rows while they are in cache. The maximum's exact logit is at least the best lower end, so its
  // upper end reaches it.
  constexpr int64_t kPad = 16;  // floats between two threads' slots (their own cache lines)
  std::vector<float> lowers(static_cast<std::size_t>(num_threads() * kPad), -INFINITY);
  parallel_for(N_, 2048, [&](int64_t b, int64_t e, int t) {
    kernels::cpu::qscreen_rows(base, b, e, sx, value_.data(), bound_.data());
    float l = lowers[static_cast<std::size_t>(t * kPad)];
    for (int64_t n = b; n < e; ++n) l = std::max(l, value_[n] - bound_[n]);
    lowers[static_cast<std::size_t>(t * kPad)] = l;
  });
  float lower = -INFINITY;
  for (float l : lowers) lower = std::max(lower, l);

  // Pass 2 (one parallel region): per chunk of rows, the candidates (upper end >= lower, NaN included;
  // ascending, at the chunk's own offset in cand_), their exact logits from the row kernel of
  // quant_dot_rows (the same f32 values), and the chunk's first largest.
  constexpr int64_t kChunk = 8192;
  const int64_t chunks = (N_ + kChunk - 1) / kChunk;
  cand_.resize(static_cast<std::size_t>(N_ + chunks));  // qscreen_select writes one past its last pick
  exact_.resize(static_cast<std::size_t>(N_));
  std::vector<int64_t> chunk_count(static_cast<std::size_t>(chunks), 0),
      chunk_best(static_cast<std::size_t>(chunks), -1);
  kernels::Q8KRows xr;
  xr.kind = kernels::Q8Kind::q8_0, xr.M = 1, xr.K = K_;
  xr.q = x.q(), xr.d = x.d(), xr.bsum = x.bsum();
  xr.ldq = K_, xr.ldd = K_ / 32, xr.ldb = K_ / 16;
  parallel_for(N_, kChunk, [&](int64_t b, int64_t e, int) {
    const int64_t c = b / kChunk;
    int64_t* rows = cand_.data() + b + c;
    const int64_t count =
        kernels::cpu::qscreen_select(value_.data() + b, bound_.data() + b, e - b, lower, rows);
    for (int64_t i = 0; i < count; ++i) rows[i] += b;
    kernels::cpu::q8k_dot_row_list(kernels::KFormat::q8_0, w.blocks(), rows, count, K_, xr, exact_.data());
    int64_t best = -1;
    for (int64_t i = 0; i < count; ++i)
      if (best < 0 || exact_[rows[i]] > exact_[best]) best = rows[i];  // the first of equal maxima
    chunk_count[static_cast<std::size_t>(c)] = count;
    chunk_best[static_cast<std::size_t>(c)] = best;
  });
  Pick p;
  p.candidates = 0;
  for (int64_t c = 0; c < chunks; ++c) {  // chunks in row order: a later chunk wins only when larger
    p.candidates += chunk_count[static_cast<std::size_t>(c)];
    const int64_t n = chunk_best[static_cast<std::size_t>(c)];
    if (n >= 0 && (p.index < 0 || exact_[n] > p.logit)) p.index = n, p.logit = exact_[n];
  }
  return p;
}

}  // namespace attn::ops
