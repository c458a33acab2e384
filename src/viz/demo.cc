// `attn view --demo` and `--demo-translation`: exports computed by the engine
// (attn::attention with weight capture), so the viewer works before
// pretrained models exist. The inputs are illustrative, not learned:
//
//  * demo_self_attention: the caller's worked example (the `attn explain`
//    sentence 今天 下雨 ， 我 没 带 伞 with its hand-chosen embeddings X [7, 8]).
//    Layer 0 has 4 heads of d_k = 4: heads 0 and 1 use the example's W_Q, W_K,
//    W_V (columns 0..3 and 4..7, exactly the two heads of `attn explain
//    --multi-head`); heads 2 and 3 use seeded random projections. Layer 1 reads
//    X1 = X + concat(head 0, head 1 outputs) · W_O (the multi-head output as a
//    residual) through 4 seeded heads.
//  * demo_translation: the example as encoder (source) input and its English
//    translation as decoder (target) input with the caller's embeddings.
//    Encoder self-attention = the two layers above; decoder self-attention: 2
//    causal layers of 4 seeded heads; cross-attention: 2 layers of 4 seeded
//    heads plus a word-alignment prior added as attention bias (+3 on the
//    aligned source word), so the heads show a translation alignment with
//    head-to-head variation.
#include <attn/core/error.h>
#include <attn/ops/attention.h>
#include <attn/viz/view.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace attn::viz {
namespace {

// A small dense row-major matrix of doubles.
struct Mat {
  int64_t rows = 0, cols = 0;
  std::vector<double> v;  // [rows, cols]

  Mat() = default;
  Mat(int64_t r, int64_t c) : rows(r), cols(c), v(static_cast<std::size_t>(r * c), 0.0) {}
  Mat(int64_t r, int64_t c, std::vector<double> values) : rows(r), cols(c), v(std::move(values)) {}
  double& operator()(int64_t r, int64_t c) { return v[static_cast<std::size_t>(r * cols + c)]; }
  double operator()(int64_t r, int64_t c) const { return v[static_cast<std::size_t>(r * cols + c)]; }
  Mat cols_slice(int64_t first, int64_t count) const {  // columns [first, first + count)
    Mat m(rows, count);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < count; ++c) m(r, c) = (*this)(r, first + c);
    return m;
  }
};

// a: [n, m], b: [m, p] -> [n, p], by the schoolbook sum (the order `attn explain` uses).
Mat matmul(const Mat& a, const Mat& b) {
  Mat out(a.rows, b.cols);
  for (int64_t i = 0; i < a.rows; ++i)
    for (int64_t j = 0; j < b.cols; ++j) {
      double s = 0;
      for (int64_t k = 0; k < a.cols; ++k) s += a(i, k) * b(k, j);
      out(i, j) = s;
    }
  return out;
}

constexpr int64_t kHeads = 4;
constexpr int64_t kDk = 4;
constexpr uint64_t kSeed = 2017;

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// [rows, cols] uniform in [-gain, gain], a pure function of (seed, stream).
Mat seeded(int64_t rows, int64_t cols, uint64_t stream, double gain) {
  uint64_t state = kSeed * 1000003ull + stream;
  Mat m(rows, cols);
  for (double& x : m.v)
    x = gain * (2.0 * static_cast<double>(splitmix64(state) >> 11) / 9007199254740992.0 - 1.0);
  return m;
}

// The shortest decimal that reads back as the same float, as a double, so the
// export stores "0.14285715" rather than the float's 17-digit double expansion.
double short_float(float f) {
  char buf[32];
  for (int prec = 6; prec <= 9; ++prec) {
    std::snprintf(buf, sizeof buf, "%.*g", prec, static_cast<double>(f));
    if (std::strtof(buf, nullptr) == f) break;
  }
  return std::strtod(buf, nullptr);
}

// Projections of one head: [d_model, dk] each.
struct HeadW {
  Mat q, k, v;
};

// Stacks x · W for every head: [1, H, N, dk] f32.
Tensor project(const Mat& x, const std::vector<HeadW>& heads, Mat HeadW::*which) {
  const int64_t H = static_cast<int64_t>(heads.size()), N = x.rows, dk = (heads[0].*which).cols;
  std::vector<float> data(static_cast<std::size_t>(H * N * dk));
  for (int64_t h = 0; h < H; ++h) {
    const Mat p = matmul(x, heads[static_cast<std::size_t>(h)].*which);  // p: [N, dk]
    for (std::size_t i = 0; i < p.v.size(); ++i)
      data[static_cast<std::size_t>(h * N * dk) + i] = static_cast<float>(p.v[i]);
  }
  return Tensor::from(data, {1, H, N, dk});
}

struct LayerRun {
  Layer layer;
  Tensor out;  // out: [1, H, Nq, dk]
};

// One attention layer: queries from xq [Nq, d_model], keys and values from
// xk [Nk, d_model]; bias (optional) [1, 1, Nq, Nk].
LayerRun run_layer(const Mat& xq, const Mat& xk, const std::vector<HeadW>& heads, bool causal,
                   const Tensor& bias = {}) {
  const Tensor q = project(xq, heads, &HeadW::q);  // q: [1, H, Nq, dk]
  const Tensor k = project(xk, heads, &HeadW::k);  // k: [1, H, Nk, dk]
  const Tensor v = project(xk, heads, &HeadW::v);  // v: [1, H, Nk, dk]
  AttentionOptions o;
  o.causal = causal;
  o.bias = bias;
  o.capture.enabled = true;
  const AttentionResult r = attention(q, k, v, o);
  const Tensor w = r.weights.contiguous();  // w: [1, H, Nq, Nk]
  LayerRun run;
  run.layer.heads = w.size(1);
  run.layer.rows = w.size(2);
  run.layer.cols = w.size(3);
  const float* p = w.data<float>();
  run.layer.w.reserve(static_cast<std::size_t>(w.numel()));
  for (int64_t i = 0; i < w.numel(); ++i) run.layer.w.push_back(short_float(p[i]));
  run.out = r.out;
  return run;
}

std::vector<HeadW> seeded_heads(int64_t d_model, uint64_t stream, double gain) {
  std::vector<HeadW> heads;
  for (int64_t h = 0; h < kHeads; ++h) {
    const uint64_t s = stream + 16 * static_cast<uint64_t>(h);
    heads.push_back(
        {seeded(d_model, kDk, s, gain), seeded(d_model, kDk, s + 1, gain), seeded(d_model, kDk, s + 2, 1.0)});
  }
  return heads;
}

// The example as matrices, checked.
struct ExampleMats {
  Mat X, WQ, WK, WV, WO;
  int64_t n() const { return X.rows; }
  int64_t d_model() const { return X.cols; }
};

ExampleMats example_mats(const DemoExample& ex) {
  const auto N = static_cast<int64_t>(ex.words.size()), dm = ex.d_model;
  ATTN_CHECK(N > 0, "view demo: the example has no words; expected at least one");
  ATTN_CHECK(dm >= 2 * kDk, "view demo: d_model is ", dm, "; expected at least ", 2 * kDk,
             " (two heads of d_k = ", kDk, ")");
  ATTN_CHECK(static_cast<int64_t>(ex.x.size()) == N * dm, "view demo: X has ", ex.x.size(),
             " values; expected ", N, " words x ", dm, " = ", N * dm);
  for (const auto* w : {&ex.wq, &ex.wk, &ex.wv, &ex.wo})
    ATTN_CHECK(static_cast<int64_t>(w->size()) == dm * dm, "view demo: a projection has ", w->size(),
               " values; expected [", dm, ", ", dm, "] = ", dm * dm);
  return {Mat(N, dm, ex.x), Mat(dm, dm, ex.wq), Mat(dm, dm, ex.wk), Mat(dm, dm, ex.wv), Mat(dm, dm, ex.wo)};
}

// The two encoder layers of the demo.
std::vector<Layer> encoder_layers(const ExampleMats& ex) {
  const int64_t dm = ex.d_model();
  std::vector<HeadW> l0 = seeded_heads(dm, 100, 1.5);
  for (int64_t h = 0; h < 2; ++h)  // heads 0 and 1: the example's projections
    l0[static_cast<std::size_t>(h)] = {ex.WQ.cols_slice(h * kDk, kDk), ex.WK.cols_slice(h * kDk, kDk),
                                       ex.WV.cols_slice(h * kDk, kDk)};
  LayerRun r0 = run_layer(ex.X, ex.X, l0, false);
  // X1 = X + concat(out of heads 0, 1) · W_O
  const int64_t N = ex.n();
  Mat concat(N, dm);
  for (int64_t h = 0; h < 2; ++h)
    for (int64_t i = 0; i < N; ++i)
      for (int64_t d = 0; d < kDk; ++d) concat(i, h * kDk + d) = r0.out.at({0, h, i, d});
  const Mat proj = matmul(concat, ex.WO);
  Mat x1 = ex.X;
  for (std::size_t i = 0; i < x1.v.size(); ++i) x1.v[i] += proj.v[i];
  LayerRun r1 = run_layer(x1, x1, seeded_heads(dm, 200, 1.5), false);
  return {std::move(r0.layer), std::move(r1.layer)};
}

}  // namespace

Export demo_self_attention(const DemoExample& ex) {
  Export e;
  e.model = "attn demo: the attn explain example, 2 layers x 4 heads (illustrative, not learned)";
  e.text = ex.gloss;
  e.tokens = ex.words;
  e.layer_names = {"layer 0 (heads 0-1: explain's W_Q/W_K/W_V)", "layer 1 (seeded)"};
  AttentionSet s{"attention", "self-attention", ex.words, ex.words, encoder_layers(example_mats(ex))};
  e.sets.push_back(std::move(s));
  return e;
}

Export demo_translation(const DemoTranslation& in) {
  const DemoExample& ex = in.source;
  const ExampleMats m = example_mats(ex);
  const std::vector<std::string>& target = in.target;
  const int64_t Nd = static_cast<int64_t>(target.size()), Ne = m.n(), dm = m.d_model();
  ATTN_CHECK(Nd > 0, "view demo: the translation has no target words; expected at least one");
  ATTN_CHECK(static_cast<int64_t>(in.align.size()) == Nd, "view demo: align has ", in.align.size(),
             " entries; expected one per target word (", Nd, ")");
  for (std::size_t i = 0; i < in.align.size(); ++i)
    ATTN_CHECK(in.align[i] >= 0 && in.align[i] < Ne, "view demo: align[", i, "] is ", in.align[i],
               "; expected a source position in 0..", Ne - 1);
  ATTN_CHECK(static_cast<int64_t>(in.target_x.size()) == Nd * dm, "view demo: the target embeddings have ",
             in.target_x.size(), " values; expected ", Nd, " words x ", dm, " = ", Nd * dm);
  const Mat y(Nd, dm, in.target_x);  // decoder embeddings
  std::vector<float> prior(static_cast<std::size_t>(Nd * Ne), 0.0f);
  for (int64_t i = 0; i < Nd; ++i)
    prior[static_cast<std::size_t>(i * Ne + in.align[static_cast<std::size_t>(i)])] = 3;
  const Tensor bias = Tensor::from(prior, {1, 1, Nd, Ne});  // bias: [1, 1, Nd, Ne]

  std::string source;  // the sentence as written: its words without spaces
  for (const auto& w : ex.words) source += w;
  Export e;
  e.encoder_decoder = true;
  e.model =
      "attn demo translation: 2 layers x 4 heads (illustrative, not learned; cross-attention has a "
      "hand-chosen alignment prior)";
  e.text = source + " -> " + ex.gloss;
  e.encoder_tokens = ex.words;
  e.decoder_tokens = target;
  e.sets.push_back({"encoder_attention", "encoder self-attention", ex.words, ex.words, encoder_layers(m)});
  AttentionSet dec{"decoder_attention", "decoder self-attention", target, target, {}};
  AttentionSet cross{"cross_attention", "cross-attention", target, ex.words, {}};
  for (uint64_t l = 0; l < 2; ++l) {
    dec.layers.push_back(run_layer(y, y, seeded_heads(dm, 300 + 100 * l, 1.5), true).layer);
    cross.layers.push_back(run_layer(y, m.X, seeded_heads(dm, 500 + 100 * l, 1.0), false, bias).layer);
  }
  e.sets.push_back(std::move(dec));
  e.sets.push_back(std::move(cross));
  return e;
}

}  // namespace attn::viz
