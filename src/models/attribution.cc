#include <attn/core/autograd.h>
#include <attn/core/error.h>
#include <attn/models/attribution.h>
#include <attn/ops/basic.h>

#include <algorithm>
#include <cmath>
#include <numeric>

namespace attn::models {
namespace {

// Puts the model in eval mode with grad recording on and its parameters frozen
// (no .grad accumulated into them) for its lifetime; restores everything after.
class AttributionScope {
 public:
  explicit AttributionScope(EncoderClassifier& m)
      : model_(m), training_(m.is_training()), grad_mode_(grad_mode_enabled()) {
    model_.eval();
    set_grad_mode_enabled(true);
    for (auto& [name, p] : model_.named_parameters()) {
      if (!p.requires_grad()) continue;
      frozen_.push_back(p);
      p.set_requires_grad(false);
    }
  }
  ~AttributionScope() {
    for (auto& p : frozen_) p.set_requires_grad(true);
    model_.train(training_);
    set_grad_mode_enabled(grad_mode_);
  }
  AttributionScope(const AttributionScope&) = delete;
  AttributionScope& operator=(const AttributionScope&) = delete;

 private:
  EncoderClassifier& model_;
  bool training_, grad_mode_;
  std::vector<Tensor> frozen_;
};

// Runs the model on n token-embedding rows (tokens: [n, L, C], a leaf that
// requires grad) and returns the target logits [n]; fills grad [n, L, C].
std::vector<double> logits_and_grad(EncoderClassifier& model, const std::vector<float>& tokens, int64_t n,
                                    int64_t L, int64_t C, int64_t target, std::vector<double>& grad) {
  Tensor e = Tensor::from(tokens, {n, L, C});  // e: [n, L, C]
  e.set_requires_grad(true);
  ClassifierCall call;
  ModelOutput out = model.forward_embeddings(e, call);
  Tensor f = slice(out.logits, 1, target, target + 1);  // [n, 1]
  sum(f).backward();  // rows are independent: d(Σ f_k)/d e_k = ∂f_k/∂e_k
  grad = e.grad().to_vector();
  return f.detach().to_vector();
}

std::vector<double> ranks(const std::vector<double>& v) {
  const std::size_t n = v.size();
  std::vector<std::size_t> idx(n);
  std::iota(idx.begin(), idx.end(), 0);
  std::stable_sort(idx.begin(), idx.end(), [&](std::size_t a, std::size_t b) { return v[a] < v[b]; });
  std::vector<double> r(n);
  for (std::size_t i = 0; i < n;) {
    std::size_t j = i;
    while (j + 1 < n && v[idx[j + 1]] == v[idx[i]]) ++j;
    const double avg = 0.5 * static_cast<double>(i + j) + 1.0;  // ranks from 1, ties averaged
    for (std::size_t k = i; k <= j; ++k) r[idx[k]] = avg;
    i = j + 1;
  }
  return r;
}

}  // namespace

const char* baseline_name(AttributionBaseline b) { return b == AttributionBaseline::pad ? "pad" : "zeros"; }

const char* rule_name(AttributionRule r) {
  return r == AttributionRule::trapezoid ? "trapezoid" : "midpoint";
}

AttributionBaseline parse_baseline(const std::string& s) {
  if (s == "pad") return AttributionBaseline::pad;
  if (s == "zeros") return AttributionBaseline::zeros;
  throw Error("attribution baseline must be \"pad\" (every token [PAD]) or \"zeros\"; got \"" + s + "\"");
}

Attribution attribute(EncoderClassifier& model, const std::vector<int64_t>& ids,
                      const AttributionOptions& o) {
  const TransformerConfig& c = model.config();
  const int64_t L = static_cast<int64_t>(ids.size()), C = c.d_model, K = c.num_classes;
  ATTN_CHECK(L >= 1 && L <= c.max_len, "attribute: expected 1 to ", c.max_len, " token ids (max_len); got ",
             L);
  ATTN_CHECK(o.target >= -1 && o.target < K, "attribute: target class must be in [0, ", K,
             ") or -1 (the predicted class); got ", o.target);
  ATTN_CHECK(o.steps >= 1 && o.steps <= 100000, "attribute: steps must be in [1, 100000]; got ", o.steps);
  ATTN_CHECK(o.batch >= 1, "attribute: batch must be >= 1; got ", o.batch);
  ATTN_CHECK(o.baseline != AttributionBaseline::pad || (c.pad_id >= 0 && c.pad_id < c.src_vocab),
             "attribute: the pad baseline needs pad_id in [0, src_vocab = ", c.src_vocab, "); got ",
             c.pad_id);

  for (int64_t k : o.keep)
    ATTN_CHECK(k >= 0 && k < L, "attribute: a kept position must be in [0, ", L,
               ") (the input's tokens); got ", k);

  AttributionScope scope(model);
  Attribution a;
  a.kept = o.keep;
  std::sort(a.kept.begin(), a.kept.end());
  a.kept.erase(std::unique(a.kept.begin(), a.kept.end()), a.kept.end());
  a.steps = o.steps;
  a.baseline = o.baseline;
  a.rule = o.rule;

  // The input's token embeddings e [L, C] and the baseline b [L, C].
  const Tensor id_t = Tensor::from(ids, {1, L});
  std::vector<double> e, b(static_cast<std::size_t>(L * C), 0.0);
  {
    NoGradGuard ng;
    e = model.embed_tokens(id_t).to_vector();
    if (o.baseline == AttributionBaseline::pad) {
      const std::vector<int64_t> pads(static_cast<std::size_t>(L), c.pad_id);
      b = model.embed_tokens(Tensor::from(pads, {1, L})).to_vector();
    }
    for (int64_t k : a.kept) std::copy(e.begin() + k * C, e.begin() + (k + 1) * C, b.begin() + k * C);
    // The prediction and the exact [CLS] attention of every layer.
    ModelOutput out = model.forward(id_t, {}, Tensor(), /*capture_cls=*/true);
    a.logits = out.logits.to_vector();
    for (const Tensor& w : out.cls_attention) {  // w: [1, H, L]
      const int64_t H = w.size(1);
      const std::vector<double> v = w.to_vector();
      std::vector<double> avg(static_cast<std::size_t>(L), 0.0);
      for (int64_t h = 0; h < H; ++h)
        for (int64_t j = 0; j < L; ++j) avg[j] += v[h * L + j] / static_cast<double>(H);
      a.cls_attention.push_back(std::move(avg));
      a.cls_attention_heads.clear();  // the last layer's, per head
      for (int64_t h = 0; h < H; ++h)
        a.cls_attention_heads.emplace_back(v.begin() + h * L, v.begin() + (h + 1) * L);
    }
  }
  a.predicted = std::max_element(a.logits.begin(), a.logits.end()) - a.logits.begin();
  a.target = o.target >= 0 ? o.target : a.predicted;
  {
    const double mx = a.logits[a.predicted];
    double z = 0;
    for (double l : a.logits) z += std::exp(l - mx);
    for (double l : a.logits) a.probs.push_back(std::exp(l - mx) / z);
  }

  // Integrated gradients: the points α and their weights (trapezoid over k/m, k = 0..m; or midpoint
  // over (k + ½)/m plus α = 0 and α = 1 with weight 0 for f(b) and f(e)), in batches.
  const int64_t m = o.steps;
  std::vector<double> alphas, weights;
  if (o.rule == AttributionRule::trapezoid) {
    for (int64_t k = 0; k <= m; ++k) {
      alphas.push_back(static_cast<double>(k) / static_cast<double>(m));
      weights.push_back((k == 0 || k == m ? 0.5 : 1.0) / static_cast<double>(m));
    }
  } else {
    alphas = {0.0, 1.0};
    weights = {0.0, 0.0};
    for (int64_t k = 0; k < m; ++k) {
      alphas.push_back((static_cast<double>(k) + 0.5) / static_cast<double>(m));
      weights.push_back(1.0 / static_cast<double>(m));
    }
  }
  const int64_t points = static_cast<int64_t>(alphas.size());
  // Batches of (nearly) equal size, at most o.batch points each: 52 points at 16 run as 4 × 13, not
  // 16 + 16 + 16 + 4 (a small last batch multiplies as slowly per row as a whole one).
  const int64_t batches = (points + o.batch - 1) / o.batch, per_batch = (points + batches - 1) / batches;
  std::vector<double> avg_grad(static_cast<std::size_t>(L * C), 0.0);  // Σ_k w_k ∂f/∂e(α_k)
  std::vector<double> g, grad_input;  // grad_input: ∂f/∂e at α = 1, the input itself
  for (int64_t k0 = 0; k0 < points; k0 += per_batch) {
    const int64_t n = std::min(per_batch, points - k0);
    std::vector<float> pts(static_cast<std::size_t>(n * L * C));
    for (int64_t r = 0; r < n; ++r) {
      const double alpha = alphas[static_cast<std::size_t>(k0 + r)];
      for (int64_t x = 0; x < L * C; ++x)
        pts[r * L * C + x] = static_cast<float>(b[x] + alpha * (e[x] - b[x]));
    }
    const std::vector<double> f = logits_and_grad(model, pts, n, L, C, a.target, g);
    for (int64_t r = 0; r < n; ++r) {
      const std::size_t k = static_cast<std::size_t>(k0 + r);
      for (int64_t x = 0; x < L * C; ++x) avg_grad[x] += weights[k] * g[r * L * C + x];
      if (alphas[k] == 0.0) a.f_baseline = f[r];
      if (alphas[k] == 1.0) {
        a.f_input = f[r];
        grad_input.assign(g.begin() + r * L * C, g.begin() + (r + 1) * L * C);
      }
    }
  }

  // input × gradient at e, from the point α = 1 (the input exactly: b + 1 · (e − b) rounds to e in f32).
  a.input_x_grad.assign(static_cast<std::size_t>(L), 0.0);
  a.input_x_grad_norm.assign(static_cast<std::size_t>(L), 0.0);
  for (int64_t i = 0; i < L; ++i) {
    double s = 0, s2 = 0;
    for (int64_t ch = 0; ch < C; ++ch) {
      const double p = e[i * C + ch] * grad_input[i * C + ch];
      s += p;
      s2 += p * p;
    }
    a.input_x_grad[i] = s;
    a.input_x_grad_norm[i] = std::sqrt(s2);
  }
  a.integrated_gradients.assign(static_cast<std::size_t>(L), 0.0);
  for (int64_t i = 0; i < L; ++i)
    for (int64_t ch = 0; ch < C; ++ch)
      a.integrated_gradients[i] += (e[i * C + ch] - b[i * C + ch]) * avg_grad[i * C + ch];
  a.ig_sum = std::accumulate(a.integrated_gradients.begin(), a.integrated_gradients.end(), 0.0);
  a.completeness_error = a.ig_sum - (a.f_input - a.f_baseline);
  return a;
}

double spearman(const std::vector<double>& a, const std::vector<double>& b) {
  ATTN_CHECK(a.size() == b.size() && a.size() >= 2, "spearman: expected two lists of one length >= 2; got ",
             a.size(), " and ", b.size());
  const std::vector<double> ra = ranks(a), rb = ranks(b);
  const double n = static_cast<double>(a.size()), mean = (n + 1) / 2;
  double sab = 0, saa = 0, sbb = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    sab += (ra[i] - mean) * (rb[i] - mean);
    saa += (ra[i] - mean) * (ra[i] - mean);
    sbb += (rb[i] - mean) * (rb[i] - mean);
  }
  if (saa == 0 || sbb == 0) return 0.0;
  return sab / std::sqrt(saa * sbb);
}

}  // namespace attn::models
