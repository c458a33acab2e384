// `attn tutorial` (attn/teach/tutorial.h): the numbers of every section,
// computed by the engine, as language-neutral JSON. The text is rendered from
// them in tutorial_text.cc.
#include <attn/core/error.h>
#include <attn/core/parallel.h>
#include <attn/io/e5_container.h>
#include <attn/io/model_files.h>
#include <attn/models/attribution.h>
#include <attn/models/text_classifier.h>
#include <attn/ops/attention.h>
#include <attn/tasks/translate.h>
#include <attn/teach/attribution.h>
#include <attn/teach/explain.h>
#include <attn/teach/tutorial.h>
#include <attn/text/segment.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>

#include "quiz_internal.h"  // Rng, engine_softmax, engine_visible, MaskSpec

namespace attn::teach {
namespace {

using quiz::MaskSpec;

constexpr int64_t kMaxTokens = 256;  // section 1 composes N x N visibility per layer
// The tutorial's table (its section on softmax): the scores and the weights it printed.
const std::vector<double> kTutorialScores = {0.2, 2.5, 0.8, 0.3, 0.4, 2.0};
const std::vector<double> kTutorialPrinted = {0.06, 0.42, 0.11, 0.07, 0.07, 0.27};

json::Value shape_json(const Shape& s) { return integers(s); }

std::vector<std::vector<bool>> engine_grid(const MaskSpec& m) {
  std::vector<std::vector<bool>> g;
  for (int64_t r = 0; r < m.lq; ++r) g.push_back(quiz::engine_visible(m, r));
  return g;
}

json::Value grid_json(const std::vector<std::vector<bool>>& g) {
  json::Value rows = json::Value::array();
  for (const auto& r : g) {
    std::vector<int64_t> v;
    for (bool b : r) v.push_back(b ? 1 : 0);
    rows.push_back(integers(v));
  }
  return rows;
}

// ---- 1 why attention ---------------------------------------------------------------

json::Value section_why(const TutorialOptions& o) {
  const std::string sentence = o.sentence.empty() ? kTutorialSentence : o.sentence;
  std::string how;
  const std::vector<std::string> tokens = tutorial_tokens(sentence, &how, o.dictionary);
  const int64_t n = static_cast<int64_t>(tokens.size());
  ATTN_CHECK(n >= 2 && n <= kMaxTokens, "--sentence: expected 2..", kMaxTokens, " tokens; got ", n,
             " (split: ", how, ")");
  json::Value j = json::Value::object();
  put(j, {{"sentence", jv(sentence)}, {"split", jv(how)}, {"tokens", strings(tokens)}, {"n", jv(n)}});
  const int64_t rnn = engine_path_length(n, 2);
  ATTN_CHECK(rnn == n - 1, "tutorial: the engine's RNN path ", rnn, " differs from N - 1 = ", n - 1);
  json::Value cnn = json::Value::array();
  for (int64_t k : {3, 5}) {
    const int64_t layers = engine_path_length(n, k), formula = (n - 1 + k - 2) / (k - 1);
    ATTN_CHECK(layers == formula, "tutorial: the engine's CNN layers ", layers, " (k = ", k,
               ") differ from ceil((N-1)/(k-1)) = ", formula);
    cnn.push_back(json::Value::object({{"k", jv(k)}, {"layers", jv(layers)}, {"sequential", jv(layers)}}));
  }
  const int64_t att = engine_path_length(n, 0);
  ATTN_CHECK(att == 1, "tutorial: the engine's self-attention path is ", att, "; expected 1");
  put(j, {{"rnn", json::Value::object({{"path", jv(rnn)}, {"sequential", jv(n)}})},
          {"cnn", cnn},
          {"attention", json::Value::object({{"path", jv(att)}, {"sequential", jv(1)}})}});
  return j;
}

// ---- 2 Q/K/V and the four steps ---------------------------------------------------------

json::Value section_qkv() {
  const Example ex = default_example();
  const int64_t n = ex.n(), dk = kSingleHeadDk, query = 4;  // 没
  const Mat Q = matmul(ex.X, ex.WQ).cols_slice(0, dk), K = matmul(ex.X, ex.WK).cols_slice(0, dk),
            V = matmul(ex.X, ex.WV).cols_slice(0, dk);
  std::vector<double> scores, scaled, weights;
  const double scale = 1 / std::sqrt(static_cast<double>(dk));
  for (int64_t j = 0; j < n; ++j) scores.push_back(dot(Q.row(query), K.row(j)));
  for (double s : scores) scaled.push_back(s * scale);
  double mx = scaled[0], sum = 0;
  for (double s : scaled) mx = std::max(mx, s);
  for (double s : scaled) sum += std::exp(s - mx);
  for (double s : scaled) weights.push_back(std::exp(s - mx) / sum);
  std::vector<double> out(static_cast<std::size_t>(dk), 0.0);
  for (int64_t j = 0; j < n; ++j)
    for (int64_t c = 0; c < dk; ++c)
      out[static_cast<std::size_t>(c)] += weights[static_cast<std::size_t>(j)] * V(j, c);

  // The engine on the same Q, K, V: attn::attention (fp64 reference), the query's weights captured.
  const Tensor q = Tensor::from(Q.v, {1, 1, n, dk}), k = Tensor::from(K.v, {1, 1, n, dk}),
               v = Tensor::from(V.v, {1, 1, n, dk});
  AttentionOptions ao;
  ao.backend = Backend::reference;
  ao.capture.enabled = true;
  ao.capture.rows = {query};
  const AttentionResult r = attention(q, k, v, ao);
  const std::vector<double> ew = r.weights.to_vector(), all_out = r.out.to_vector();
  double diff_w = 0, diff_o = 0;
  for (int64_t j = 0; j < n; ++j)
    diff_w =
        std::max(diff_w, std::fabs(ew[static_cast<std::size_t>(j)] - weights[static_cast<std::size_t>(j)]));
  for (int64_t c = 0; c < dk; ++c)
    diff_o = std::max(diff_o, std::fabs(all_out[static_cast<std::size_t>(query * dk + c)] -
                                        out[static_cast<std::size_t>(c)]));
  ATTN_CHECK(diff_w <= 1e-12 && diff_o <= 1e-12,
             "tutorial: the engine's weights differ from the four steps by ", diff_w, " (output ", diff_o,
             "); expected <= 1e-12");
  const auto best = static_cast<int64_t>(std::max_element(weights.begin(), weights.end()) - weights.begin());
  // `attn explain`'s walkthrough of the same query gives the same weights (it is the deeper command).
  WalkthroughOptions wo;
  wo.query = "没";
  const json::Value walk = walkthrough(wo).json.at("steps").at("weights");
  for (int64_t j = 0; j < n; ++j)
    ATTN_CHECK(std::fabs(walk.at(static_cast<std::size_t>(j)).as_double() -
                         weights[static_cast<std::size_t>(j)]) <= 1e-12,
               "tutorial: attn explain's walkthrough weight ", j, " differs from the four steps");

  // The tutorial's table against the true softmax of its scores (the engine, fp64).
  const std::vector<double> soft = quiz::engine_softmax(kTutorialScores, 1.0);
  ScoresOptions so;
  so.scores = kTutorialScores;
  const json::Value explained = softmax_scores(so).json.at("weights");  // `attn explain --scores`
  for (std::size_t j = 0; j < soft.size(); ++j)
    ATTN_CHECK(std::fabs(explained.at(j).as_double() - soft[j]) <= 1e-12,
               "tutorial: attn explain --scores weight ", j, " differs from the engine's softmax");
  double printed_sum = 0, max_gap = 0;
  for (std::size_t i = 0; i < soft.size(); ++i) {
    printed_sum += kTutorialPrinted[i];
    max_gap = std::max(max_gap, std::fabs(soft[i] - kTutorialPrinted[i]));
  }
  json::Value j = json::Value::object();
  put(j, {{"words", strings(ex.words)},
          {"query", jv(query)},
          {"d_k", jv(dk)},
          {"q", numbers(Q.row(query))},
          {"scores", numbers(scores)},
          {"scale", jv(scale)},
          {"scaled", numbers(scaled)},
          {"weights", numbers(weights)},
          {"output", numbers(out)},
          {"best", jv(best)},
          {"engine_weights", numbers(std::vector<double>(ew.begin(), ew.begin() + n))},
          {"engine_max_abs_diff", jv(std::max(diff_w, diff_o))},
          {"table",
           json::Value::object({{"scores", numbers(kTutorialScores)},
                                {"printed", numbers(kTutorialPrinted)},
                                {"printed_sum", jv(printed_sum)},
                                {"softmax", numbers(soft)},
                                {"max_abs_gap", jv(max_gap)},
                                {"ratio_1_5_softmax", jv(std::exp(kTutorialScores[1] - kTutorialScores[5]))},
                                {"ratio_1_5_printed", jv(kTutorialPrinted[1] / kTutorialPrinted[5])}})}});
  return j;
}

// ---- 3 multi-head -------------------------------------------------------------------------

int64_t flops_of(int64_t n, int64_t d, int64_t heads) {
  CostOptions c;
  c.n = n, c.d = d, c.heads = heads;
  return cost(c).json.at("flops_total").as_int64();
}

json::Value section_multihead() {
  const Example ex = default_example();
  const int64_t n = ex.n(), d = ex.d_model(), h = 2, dk = d / h, query = 4;
  const Mat Q = matmul(ex.X, ex.WQ), K = matmul(ex.X, ex.WK), V = matmul(ex.X, ex.WV);
  // [N, d] -> [1, h, N, d_k]: head i takes columns i·d_k .. (i+1)·d_k.
  auto heads_of = [&](const Mat& m) {
    std::vector<double> t(static_cast<std::size_t>(h * n * dk));
    for (int64_t i = 0; i < h; ++i)
      for (int64_t r = 0; r < n; ++r)
        for (int64_t c = 0; c < dk; ++c) t[static_cast<std::size_t>((i * n + r) * dk + c)] = m(r, i * dk + c);
    return Tensor::from(t, {1, h, n, dk});
  };
  AttentionOptions ao;
  ao.backend = Backend::reference;
  ao.capture.enabled = true;
  ao.capture.rows = {query};
  const AttentionResult r = attention(heads_of(Q), heads_of(K), heads_of(V), ao);
  const std::vector<double> w = r.weights.to_vector(), o = r.out.to_vector();  // [1, h, 1, N], [1, h, N, d_k]
  Mat concat(n, d);
  for (int64_t i = 0; i < h; ++i)
    for (int64_t rr = 0; rr < n; ++rr)
      for (int64_t c = 0; c < dk; ++c)
        concat(rr, i * dk + c) = o[static_cast<std::size_t>((i * n + rr) * dk + c)];
  const Mat out = matmul(concat, ex.WO);
  json::Value heads = json::Value::array();
  for (int64_t i = 0; i < h; ++i) {
    std::vector<double> row(w.begin() + i * n, w.begin() + (i + 1) * n);
    const auto best = static_cast<int64_t>(std::max_element(row.begin(), row.end()) - row.begin());
    heads.push_back(json::Value::object({{"weights", numbers(row)}, {"best", jv(best)}}));
  }
  json::Value costs = json::Value::array();
  for (const auto& [cn, cd, ch] :
       std::vector<std::tuple<int64_t, int64_t, int64_t>>{{n, d, h}, {512, 768, 12}}) {
    const int64_t multi = flops_of(cn, cd, ch), one = flops_of(cn, cd, 1);
    costs.push_back(
        json::Value::object({{"n", jv(cn)},
                             {"d_model", jv(cd)},
                             {"heads", jv(ch)},
                             {"flops_multi", jv(multi)},
                             {"flops_one_head", jv(one)},
                             {"flops_h_times", jv(ch * one)},
                             {"ratio", jv(static_cast<double>(multi) / static_cast<double>(one))}}));
  }
  json::Value j = json::Value::object();
  put(j, {{"words", strings(ex.words)},
          {"query", jv(query)},
          {"heads", jv(h)},
          {"d_model", jv(d)},
          {"d_k", jv(dk)},
          {"per_head", heads},
          {"concat", numbers(concat.row(query))},
          {"output", numbers(out.row(query))},
          {"shapes", json::Value::object({{"q", shape_json(heads_of(Q).shape())},
                                          {"weights", shape_json(Shape({1, h, n, n}))},
                                          {"head_out", shape_json(r.out.shape())},
                                          {"concat", integers({n, d})},
                                          {"w_o", integers({d, d})},
                                          {"out", integers({n, d})}})},
          {"cost", costs}});
  return j;
}

// ---- 4 three places -----------------------------------------------------------------------

std::string existing(const std::string& given, const std::vector<std::string>& defaults, bool find) {
  if (!given.empty()) {
    ATTN_CHECK(std::filesystem::is_regular_file(given), "expected a model file; '", given,
               "' does not exist");
    return given;
  }
  if (find)
    for (const auto& d : defaults)
      if (std::filesystem::is_regular_file(d)) return d;
  return "";
}

json::Value section_places(const TutorialOptions& o) {
  const std::vector<std::string> src = {"I", "did", "not", "bring", "an", "umbrella"};
  const std::vector<std::string> tgt = {"我", "没", "带", "伞"};
  const std::vector<std::string> enc = default_example().words;
  MaskSpec self_m, causal_m, cross_m;
  self_m.lq = self_m.lk = static_cast<int64_t>(enc.size());
  causal_m.lq = causal_m.lk = static_cast<int64_t>(tgt.size());
  causal_m.causal = true;
  cross_m.lq = static_cast<int64_t>(tgt.size());
  cross_m.lk = static_cast<int64_t>(src.size());
  json::Value places = json::Value::array();
  places.push_back(json::Value::object({{"place", jv("encoder_self")},
                                        {"queries", strings(enc)},
                                        {"keys", strings(enc)},
                                        {"visible", grid_json(engine_grid(self_m))}}));
  places.push_back(json::Value::object({{"place", jv("decoder_masked_self")},
                                        {"queries", strings(tgt)},
                                        {"keys", strings(tgt)},
                                        {"visible", grid_json(engine_grid(causal_m))}}));
  places.push_back(json::Value::object({{"place", jv("cross")},
                                        {"queries", strings(tgt)},
                                        {"keys", strings(src)},
                                        {"visible", grid_json(engine_grid(cross_m))}}));
  json::Value j = json::Value::object({{"places", places}});
  const std::string model = existing(o.translation_model, {tasks::kDefaultTranslatorModel}, o.find_models);
  j.set("translation_model", model.empty() ? json::Value() : jv(model));
  if (!model.empty()) {
    tasks::TranslateOptions t;
    t.model = model;
    t.sentences = {"I did not bring an umbrella."};
    t.beam = 1;
    t.max_new = 24;  // a short walk: the alignment of the first characters
    const tasks::TranslateResult tr = tasks::translate_sentences(t);
    j.set("translation", tr.json);
    j.set("translation_text", jv(tr.text));
  }
  return j;
}

// ---- 5 misconceptions ---------------------------------------------------------------------

Tensor random_f32(const Shape& s, quiz::Rng& rng) {
  int64_t count = 1;
  for (int64_t x : s) count *= x;
  std::vector<float> v(static_cast<std::size_t>(count));
  for (float& x : v) x = static_cast<float>(rng.uniform() * 2 - 1);
  return Tensor::from(v, s);
}

// Best of 3 wall times of attn::attention, in milliseconds.
double time_ms(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionOptions& ao) {
  double best = 1e300;
  for (int rep = 0; rep < 3; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    const AttentionResult r = attention(q, k, v, ao);
    const auto t1 = std::chrono::steady_clock::now();
    ATTN_CHECK(r.out.shape() == q.shape(), "tutorial: unexpected output shape ", shape_str(r.out.shape()));
    best = std::min(best, std::chrono::duration<double, std::milli>(t1 - t0).count());
  }
  return best;
}

json::Value attribution_json_of(const std::string& path) {
  const std::unique_ptr<models::TextClassifier> model = models::TextClassifier::load(path);
  const std::string text = "质量很好，物流也快，就是包装有点简陋";
  const std::vector<models::Classification> c = model->classify({text}, true);
  const AttributionInput in = attribution_input(*model, text, c[0]);
  AttributionReportOptions ro;
  ro.attribution.steps = 16;
  const AttributionResult r = attribute_prediction(model->model(), in, ro);
  json::Value j = json::Value::object();
  put(j, {{"model", jv(path)},
          {"text", jv(text)},
          {"label", jv(in.labels.at(static_cast<std::size_t>(c[0].label)))},
          {"tokens", strings(in.tokens)},
          {"attention_last", numbers(r.attention_last)},
          {"integrated_gradients", numbers(r.a.integrated_gradients)},
          {"rho_last_ig", jv(r.rho_last_ig)},
          {"rho_mean_ig", jv(r.rho_mean_ig)},
          {"ig_steps", jv(ro.attribution.steps)}});
  return j;
}

json::Value section_misconceptions(const TutorialOptions& o) {
  // (a) self and cross attention: the same call, queries and keys from different sequences.
  const int64_t d = 8;
  AttentionOptions cap;
  cap.backend = Backend::reference;
  cap.capture.enabled = true;
  const Tensor self = Tensor::zeros({1, 1, 7, d}, DType::f64), dec = Tensor::zeros({1, 1, 4, d}, DType::f64),
               encs = Tensor::zeros({1, 1, 6, d}, DType::f64);
  const AttentionResult rs = attention(self, self, self, cap), rc = attention(dec, encs, encs, cap);
  json::Value kinds =
      json::Value::object({{"self", json::Value::object({{"q", shape_json(self.shape())},
                                                         {"kv", shape_json(self.shape())},
                                                         {"weights", shape_json(rs.weights.shape())},
                                                         {"out", shape_json(rs.out.shape())}})},
                           {"cross", json::Value::object({{"q", shape_json(dec.shape())},
                                                          {"kv", shape_json(encs.shape())},
                                                          {"weights", shape_json(rc.weights.shape())},
                                                          {"out", shape_json(rc.out.shape())}})}});

  // (b) O(N²): time one head (d_k = 64) at each N, full and windowed; memory from the cost model.
  const int64_t dk = 64, w = o.window;
  ATTN_CHECK(w >= 1 && w <= 4096, "--window: expected 1..4096; got ", w);
  quiz::Rng rng(17);
  json::Value runs = json::Value::array();
  for (const int64_t n : o.lengths) {
    ATTN_CHECK(n >= 16 && n <= 8192, "tutorial: lengths must be in 16..8192; got ", n);
    const Tensor q = random_f32({1, 1, n, dk}, rng), k = random_f32({1, 1, n, dk}, rng),
                 v = random_f32({1, 1, n, dk}, rng);
    AttentionOptions full, win;
    win.window_left = win.window_right = w;
    CostOptions c;
    c.n = n, c.d = dk, c.heads = 1;
    const json::Value mem = cost(c).json.at("memory");
    // Visible pairs of the window, counted row by row (each row i sees max(0, i-w)..min(N-1, i+w)).
    int64_t pairs = 0;
    for (int64_t i = 0; i < n; ++i) pairs += std::min(n - 1, i + w) - std::max<int64_t>(0, i - w) + 1;
    json::Value run = json::Value::object();
    put(run, {{"n", jv(n)},
              {"pairs_full", jv(n * n)},
              {"pairs_window", jv(pairs)},
              {"flops_full", jv(4 * n * n * dk)},
              {"flops_window", jv(4 * pairs * dk)},
              {"naive_scores_bytes", mem.at("naive_scores_bytes")},
              {"fused_scratch_bytes", mem.at("fused_scratch_bytes")},
              {"backend", jv(choose_backend(q, k, v, full).reason)},
              {"ms_full", o.measure ? jv(time_ms(q, k, v, full)) : json::Value()},
              {"ms_window", o.measure ? jv(time_ms(q, k, v, win)) : json::Value()}});
    runs.push_back(std::move(run));
  }
  json::Value j = json::Value::object();
  put(j, {{"kinds", kinds},
          {"d_k", jv(dk)},
          {"window", jv(w)},
          {"threads", jv(num_threads())},
          {"measured", jv(o.measure)},
          {"runs", runs}});
  // (c) attention is not attribution, on a trained classifier.
  const std::string model =
      existing(o.classifier, {"runs/classify/model.attn", "runs/classify-e5/model.attn"}, o.find_models);
  j.set("attribution", model.empty() ? json::Value() : attribution_json_of(model));
  return j;
}

// ---- 6 self-test --------------------------------------------------------------------------

json::Value section_selftest(const TutorialOptions& o) {
  json::Value j = json::Value::object();
  // Q1: softmax by hand.
  const std::vector<double> s1 = {1.0, 2.0, 3.0};
  std::vector<double> e1;
  for (double s : s1) e1.push_back(std::exp(s));
  j.set("q1", json::Value::object({{"scores", numbers(s1)},
                                   {"exp", numbers(e1)},
                                   {"weights", numbers(quiz::engine_softmax(s1, 1))}}));
  // Q2: the variance of q·k for random unit-variance components grows as d_k; after /√d_k it is 1.
  quiz::Rng rng(2017);
  json::Value var = json::Value::array();
  const int64_t samples = 4000;
  for (const int64_t dk : {4, 16, 64, 256}) {
    double sum = 0, sum2 = 0;
    for (int64_t t = 0; t < samples; ++t) {
      double dotp = 0;
      for (int64_t i = 0; i < dk; ++i) dotp += rng.normal() * rng.normal();
      sum += dotp, sum2 += dotp * dotp;
    }
    const double mean = sum / samples, variance = sum2 / samples - mean * mean;
    var.push_back(json::Value::object({{"d_k", jv(dk)},
                                       {"variance", jv(variance)},
                                       {"scaled_variance", jv(variance / static_cast<double>(dk))}}));
  }
  j.set("q2", json::Value::object({{"samples", jv(samples)}, {"by_d_k", var}}));
  // Q3: multi-head shapes, by the engine: d_model 512, 8 heads, N 10.
  {
    const int64_t n = 10, dm = 512, h = 8;
    const Tensor q = Tensor::zeros({1, h, n, dm / h}, DType::f64);
    AttentionOptions ao;
    ao.backend = Backend::reference;
    ao.capture.enabled = true;
    const AttentionResult r = attention(q, q, q, ao);
    j.set("q3", json::Value::object({{"n", jv(n)},
                                     {"d_model", jv(dm)},
                                     {"heads", jv(h)},
                                     {"d_k", jv(dm / h)},
                                     {"x", integers({n, dm})},
                                     {"qkv", shape_json(q.shape())},
                                     {"weights", shape_json(r.weights.shape())},
                                     {"head_out", shape_json(r.out.shape())},
                                     {"concat", integers({n, dm})},
                                     {"out", integers({n, dm})}}));
  }
  // Q4: masks: in a decoder of 5 tokens, what position 2 sees; in an encoder, everything.
  {
    MaskSpec c, e;
    c.lq = c.lk = e.lq = e.lk = 5;
    c.causal = true;
    auto seen = [](const std::vector<bool>& v) {
      std::vector<int64_t> p;
      for (std::size_t i = 0; i < v.size(); ++i)
        if (v[i]) p.push_back(static_cast<int64_t>(i));
      return p;
    };
    j.set("q4", json::Value::object({{"n", jv(5)},
                                     {"query", jv(2)},
                                     {"decoder_sees", integers(seen(quiz::engine_visible(c, 2)))},
                                     {"encoder_sees", integers(seen(quiz::engine_visible(e, 2)))}}));
  }
  // Q5: an encoder-only classifier reading [CLS] of a 100-token review, with e5's real config.
  std::optional<std::string> e5;
  if (!o.e5.empty()) {
    e5 = io::require_e5(o.e5);
  } else if (o.find_models) {
    e5 = io::find_e5();
  }
  if (e5) {
    const io::E5HfConfig c = io::E5Container::open(*e5).hf_config();
    const int64_t n = 100, dm = c.hidden_size, h = c.num_attention_heads, dk = dm / h;
    const Tensor q = Tensor::zeros({1, h, n, dk}, DType::f32);
    AttentionOptions ao;
    ao.capture.enabled = true;
    const AttentionResult r = attention(q, q, q, ao);
    j.set("q5", json::Value::object({{"e5", jv(*e5)},
                                     {"n", jv(n)},
                                     {"layers", jv(c.num_hidden_layers)},
                                     {"d_model", jv(dm)},
                                     {"heads", jv(h)},
                                     {"d_k", jv(dk)},
                                     {"ffn", jv(c.intermediate_size)},
                                     {"vocab", jv(c.vocab_size)},
                                     {"qkv", shape_json(q.shape())},
                                     {"weights", shape_json(r.weights.shape())},
                                     {"head_out", shape_json(r.out.shape())},
                                     {"attention_params", jv(4 * dm * dm + 4 * dm)},
                                     {"pairs_per_layer", jv(h * n * n)}}));
  } else {
    j.set("q5", json::Value());
  }
  return j;
}

}  // namespace

std::vector<std::string> tutorial_tokens(const std::string& sentence, std::string* how,
                                         const std::string& dictionary) {
  text::SplitOptions so;
  so.dictionary = dictionary;
  text::SentenceSplit split = text::segment_sentence(sentence, so);
  if (how) *how = text::split_method_name(split.method);
  return std::move(split.words);
}

int64_t engine_path_length(int64_t n, int64_t k) {
  ATTN_CHECK(n >= 2 && n <= kMaxTokens, "tutorial: path length needs 2..", kMaxTokens, " tokens; got ", n);
  ATTN_CHECK(k == 0 || k >= 2, "tutorial: a kernel needs k >= 2 (0: unmasked attention); got ", k);
  MaskSpec m;
  m.lq = m.lk = n;
  if (k > 0) {
    m.causal = true;
    m.window_left = k - 1;
  }
  const std::vector<std::vector<bool>> sees = engine_grid(m);
  std::vector<bool> reached(static_cast<std::size_t>(n), false);  // outputs that depend on input 0
  reached[0] = true;
  for (int64_t layer = 1; layer <= n; ++layer) {
    std::vector<bool> next(reached.size(), false);
    for (std::size_t r = 0; r < next.size(); ++r)
      for (std::size_t c = 0; c < next.size() && !next[r]; ++c) next[r] = sees[r][c] && reached[c];
    reached = next;
    if (reached.back()) return layer;
  }
  ATTN_CHECK(false, "tutorial: the first token never reaches the last within ", n, " layers");
  return -1;
}

json::Value tutorial_data(const TutorialOptions& o) {
  ATTN_CHECK(o.section >= 0 && o.section <= kTutorialSections, "--section: expected 1..", kTutorialSections,
             "; got ", o.section);
  json::Value sections = json::Value::array();
  for (int s = 1; s <= kTutorialSections; ++s) {
    if (o.section != 0 && o.section != s) continue;
    json::Value data = s == 1   ? section_why(o)
                       : s == 2 ? section_qkv()
                       : s == 3 ? section_multihead()
                       : s == 4 ? section_places(o)
                       : s == 5 ? section_misconceptions(o)
                                : section_selftest(o);
    static const char* kIds[] = {"why-attention",  "qkv",      "multi-head", "three-places",
                                 "misconceptions", "self-test"};
    sections.push_back(json::Value::object({{"section", jv(s)}, {"id", jv(kIds[s - 1])}, {"data", data}}));
  }
  return json::Value::object({{"command", jv("tutorial")}, {"sections", sections}});
}

Report tutorial(const TutorialOptions& o) {
  Report r;
  json::Value data = tutorial_data(o);
  r.text = tutorial_text(data, o.lang);
  r.json = json::Value::object({{"command", jv("tutorial")}, {"lang", jv(lang_name(o.lang))}});
  r.json.set("sections", data.at("sections"));
  return r;
}

}  // namespace attn::teach
