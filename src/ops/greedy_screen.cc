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
  data_.resize(static_cast<std::size_t>(N_ * kernels::qscreen_row_bytes(K_)));
  std::vector<int64_t> bad(64, -1);
  parallel_for(N_, 1024, [&](int64_t b, int64_t e, int t) {
    if (!kernels::cpu::qscreen_build(w.blocks(), b, e, K_, cols_.data(), data_.data())) {
      for (int64_t n = b; n < e; ++n)
        if (!kernels::cpu::qscreen_build(w.blocks(), n, n + 1, K_, cols_.data(), data_.data())) {
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
  parallel_for(N_, 2048, [&](int64_t b, int64_t e, int) {
    kernels::cpu::qscreen_rows(data_.data(), b, e, sx, value, bound);
  });
}

GreedyScreen::Pick GreedyScreen::argmax(const QuantMatrix& w, const QuantActivations& x) {
  ATTN_CHECK(w.blocks() == blocks_ && w.rows() == N_ && w.cols() == K_ && w.format() == QuantFormat::q8_0,
             "GreedyScreen::argmax: expected the Q8_0 matrix [", N_, ", ", K_,
             "] the screen was built from, got ", quant_format_name(w.format()), " [", w.rows(), ", ",
             w.cols(), "]", w.blocks() == blocks_ ? "" : " at another address");
  value_.resize(static_cast<std::size_t>(N_));
  bound_.resize(static_cast<std::size_t>(N_));
  screen(x, value_.data(), bound_.data());

  // The best lower end: the maximum's exact logit is at least this, so its upper end reaches it.
  float lower = -INFINITY;
  for (int64_t n = 0; n < N_; ++n) lower = std::max(lower, value_[n] - bound_[n]);
  cand_.resize(static_cast<std::size_t>(N_) + 1);
  cand_.resize(static_cast<std::size_t>(
      kernels::cpu::qscreen_select(value_.data(), bound_.data(), N_, lower, cand_.data())));
  exact_.resize(static_cast<std::size_t>(N_));
  const int64_t C = static_cast<int64_t>(cand_.size());
  kernels::Q8KRows xr;
  xr.kind = kernels::Q8Kind::q8_0, xr.M = 1, xr.K = K_;
  xr.q = x.q(), xr.d = x.d(), xr.bsum = x.bsum();
  xr.ldq = K_, xr.ldd = K_ / 32, xr.ldb = K_ / 16;
  // the row kernel of quant_dot_rows (the same f32 values), over the listed rows
  auto exact_rows = [&](int64_t b, int64_t e) {
    kernels::cpu::q8k_dot_row_list(kernels::KFormat::q8_0, w.blocks(), cand_.data() + b, e - b, K_, xr,
                                   exact_.data());
  };
  if (C >= 1024)
    parallel_for(C, 256, [&](int64_t b, int64_t e, int) { exact_rows(b, e); });
  else
    exact_rows(0, C);
  Pick p;
  p.candidates = C;
  for (int64_t n : cand_) {
    const float v = exact_[n];
    if (p.index < 0 || v > p.logit) p.index = n, p.logit = v;  // the first of equal maxima
  }
  return p;
}

}  // namespace attn::ops
