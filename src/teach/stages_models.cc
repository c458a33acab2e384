// The models of the explainer (teach/stages.h): each runs the engine on the text and hands the
// layer's numbers to the one JSON writer (stages.cc).
//   e5       multilingual-e5-small: BertModel's traced layer input (hidden_states) and captured
//            weights; Q, K, V, the heads' outputs, W_O and the LayerNorm from the model's own f32
//            weights (BertModel::weights_from_e5, the tensors the engine was built from), in double.
//   smollm2  runtime::Decoder::layer_trace (models/text_decoder.h): the engine's own buffers of the layer.
//   gemma3   the same, with QK norm, a sliding window on 5 of 6 layers.
#include <attn/core/error.h>
#include <attn/io/e5_container.h>
#include <attn/io/gguf.h>
#include <attn/io/model_files.h>
#include <attn/models/bert.h>
#include <attn/models/text_classifier.h>
#include <attn/models/text_decoder.h>
#include <attn/teach/stages.h>

#include <cmath>
#include <map>
#include <numeric>

#include "stages_internal.h"

namespace attn::teach {
namespace {

using stages_detail::StageInputs;

Mat from_floats(const float* p, int64_t rows, int64_t cols) {
  Mat m(rows, cols);
  for (int64_t i = 0; i < rows * cols; ++i) m.v[static_cast<std::size_t>(i)] = p[i];
  return m;
}
Mat from_floats(const std::vector<float>& v, int64_t rows, int64_t cols) {
  ATTN_CHECK(static_cast<int64_t>(v.size()) == rows * cols, "explain stages: a traced buffer has ", v.size(),
             " values; expected ", rows, " x ", cols);
  return from_floats(v.data(), rows, cols);
}
// Head `h` of rows [N, heads, D]: [N, D].
Mat head_of(const std::vector<float>& v, int64_t N, int64_t heads, int64_t D, int64_t h) {
  ATTN_CHECK(static_cast<int64_t>(v.size()) == N * heads * D, "explain stages: a traced buffer has ",
             v.size(), " values; expected ", N, " x ", heads, " x ", D);
  Mat m(N, D);
  for (int64_t i = 0; i < N; ++i)
    for (int64_t d = 0; d < D; ++d) m(i, d) = v[static_cast<std::size_t>((i * heads + h) * D + d)];
  return m;
}
std::vector<Mat> heads_of(const std::vector<float>& w, int64_t H, int64_t N) {
  ATTN_CHECK(static_cast<int64_t>(w.size()) == H * N * N, "explain stages: captured weights have ", w.size(),
             " values; expected ", H, " x ", N, " x ", N);
  std::vector<Mat> out;
  for (int64_t h = 0; h < H; ++h) out.push_back(from_floats(w.data() + h * N * N, N, N));
  return out;
}

void check_request(const StagesRequest& r, int64_t n, int64_t layers, int64_t heads) {
  ATTN_CHECK(n > 0, "the text has no tokens; type a sentence");
  ATTN_CHECK(n <= r.max_tokens, "the text has ", n, " tokens; the explainer shows at most ", r.max_tokens);
  ATTN_CHECK(r.layer >= 0 && r.layer < layers, "layer: expected 0..", layers - 1, " (the model has ", layers,
             " layers); got ", r.layer);
  ATTN_CHECK(r.head >= 0 && r.head < heads, "head: expected 0..", heads - 1, " (the model has ", heads,
             " heads); got ", r.head);
}

// ---- multilingual-e5-small --------------------------------------------------------------

class E5Stages final : public StagesModel {
 public:
  explicit E5Stages(const std::string& path)
      : enc_(models::SentenceEncoder::load_e5(path)),
        w_(models::BertModel::weights_from_e5(io::E5Container::open(path))) {}
  std::string name() const override { return "multilingual-e5-small"; }

  json::Value stages(const StagesRequest& r) override {
    const models::BertConfig& c = enc_.model().config();
    ATTN_CHECK(!r.text.empty(), "the text is empty; type a sentence");
    bool cut = false;
    models::BertInput in;
    in.ids.push_back(enc_.encode(r.text, &cut));
    const int64_t N = static_cast<int64_t>(in.ids[0].size()), C = c.hidden_size, H = c.num_heads,
                  D = c.head_dim();
    ATTN_CHECK(!cut, "the text is longer than the model's ", c.max_tokens(), " tokens");
    check_request(r, N, c.num_layers, H);
    const models::BertOutput out = enc_.model().forward(in, {.capture_attention = true, .trace = true});
    StageInputs s;
    s.model = name(), s.kind = "encoder", s.text = r.text;
    for (int32_t id : in.ids[0]) {
      s.ids.push_back(id);
      s.tokens.push_back(enc_.tokenizer().id_to_token(id));
    }
    for (int64_t t = 0; t < N; ++t) s.special.push_back(t == 0 || t == N - 1);  // <s> ... </s>
    s.layers = c.num_layers, s.heads = H, s.kv_heads = H, s.d_model = C, s.d_k = D;
    s.layer = r.layer, s.head = r.head;
    s.scale = 1.0 / std::sqrt(static_cast<double>(D));
    s.norm = "post_layer_norm", s.qk = "linear";
    const Tensor x = out.hidden_states[static_cast<std::size_t>(r.layer)].contiguous();  // [1, N, C]
    s.x = from_floats(x.data<float>(), N, C);
    const std::string p = "encoder.layer." + std::to_string(r.layer) + ".";
    s.q = project(s.x, p + "attention.self.query", r.head * D, D);
    s.k = project(s.x, p + "attention.self.key", r.head * D, D);
    const Mat v_all = project(s.x, p + "attention.self.value", 0, C);
    s.v = v_all.cols_slice(r.head * D, D);
    const Tensor cw = out.attention[static_cast<std::size_t>(r.layer)].contiguous();  // [1, H, N, N]
    s.weights = heads_of(std::vector<float>(cw.data<float>(), cw.data<float>() + cw.numel()), H, N);
    s.att = Mat(N, C);
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < N; ++i)
        for (int64_t d = 0; d < D; ++d) {
          double a = 0;
          for (int64_t j = 0; j < N; ++j) a += s.weights[h](i, j) * v_all(j, h * D + d);
          s.att(i, h * D + d) = a;
        }
    s.o = project(s.att, p + "attention.output.dense", 0, C);
    s.x_after = Mat(N, C);
    for (std::size_t i = 0; i < s.x_after.v.size(); ++i) s.x_after.v[i] = s.x.v[i] + s.o.v[i];
    s.normed_after = layer_norm(s.x_after, p + "attention.output.LayerNorm", c.layer_norm_eps);
    json::Value doc = stages_detail::stages_json(s);
    if (r.pad != 0) doc.set("padding", padding(r, in.ids[0], s.weights[static_cast<std::size_t>(r.head)]));
    return doc;
  }

 private:
  // The sentence batched with a row `pad` tokens longer (its own pieces repeated): its padded row.
  json::Value padding(const StagesRequest& r, const std::vector<int32_t>& ids, const Mat& unpadded) {
    const models::BertConfig& c = enc_.model().config();
    const int64_t N = static_cast<int64_t>(ids.size()), L = N + r.pad, D = c.head_dim();
    ATTN_CHECK(r.pad > 0 && L <= r.max_tokens && L <= c.max_tokens(), "pad: expected 1..",
               std::min<int64_t>(r.max_tokens, c.max_tokens()) - N, " (the padded row holds at most ",
               std::min<int64_t>(r.max_tokens, c.max_tokens()), " tokens; the sentence has ", N, "); got ",
               r.pad);
    models::BertInput in;
    in.ids.push_back(ids);
    std::vector<int32_t> other{ids.front()};  // <s>, the sentence's inner pieces cycled, </s>
    for (int64_t t = 0; static_cast<int64_t>(other.size()) < L - 1; ++t)
      other.push_back(N > 2 ? ids[static_cast<std::size_t>(1 + t % (N - 2))] : ids.back());
    other.push_back(ids.back());
    in.ids.push_back(other);
    const models::BertOutput out = enc_.model().forward(in, {.capture_attention = true, .trace = true});
    stages_detail::PaddingInputs p;
    p.n = N, p.pad = r.pad, p.scale = 1.0 / std::sqrt(static_cast<double>(D));
    for (int64_t t = 0; t < L; ++t) {
      p.tokens.push_back(enc_.tokenizer().id_to_token(t < N ? ids[static_cast<std::size_t>(t)]
                                                            : static_cast<int32_t>(c.pad_token_id)));
      p.other.push_back(enc_.tokenizer().id_to_token(other[static_cast<std::size_t>(t)]));
    }
    const Tensor x = out.hidden_states[static_cast<std::size_t>(r.layer)].contiguous();  // [2, L, C]
    const Mat xr = from_floats(x.data<float>(), L, c.hidden_size);  // row 0: the sentence's
    const std::string pre = "encoder.layer." + std::to_string(r.layer) + ".attention.self.";
    p.q = project(xr, pre + "query", r.head * D, D);
    p.k = project(xr, pre + "key", r.head * D, D);
    const Tensor cw = out.attention[static_cast<std::size_t>(r.layer)].contiguous();  // [2, H, L, L]
    p.weights = from_floats(cw.data<float>() + r.head * L * L, L, L);
    p.unpadded = unpadded;
    return stages_detail::padding_json(p);
  }

  const std::vector<double>& values(const std::string& name) {
    auto it = cache_.find(name);
    if (it != cache_.end()) return it->second;
    const auto t = w_.tensors.find(name);
    ATTN_CHECK(t != w_.tensors.end(), "explain stages: the model has no tensor '", name, "'");
    return cache_[name] = t->second.to_vector();
  }
  // x · W[r0 : r0 + n]ᵀ + b[r0 : r0 + n] with W [out, in] by HF name.
  Mat project(const Mat& x, const std::string& linear, int64_t r0, int64_t n) {
    const std::vector<double>& w = values(linear + ".weight");
    const std::vector<double>& b = values(linear + ".bias");
    const int64_t C = x.cols;
    Mat y(x.rows, n);
    for (int64_t i = 0; i < x.rows; ++i)
      for (int64_t o = 0; o < n; ++o) {
        const double* wr = w.data() + (r0 + o) * C;
        double a = b[static_cast<std::size_t>(r0 + o)];
        for (int64_t k = 0; k < C; ++k) a += x(i, k) * wr[k];
        y(i, o) = a;
      }
    return y;
  }
  Mat layer_norm(const Mat& x, const std::string& name, double eps) {
    const std::vector<double>& w = values(name + ".weight");
    const std::vector<double>& b = values(name + ".bias");
    Mat y(x.rows, x.cols);
    for (int64_t i = 0; i < x.rows; ++i) {
      const std::vector<double> r = x.row(i);
      const double n = static_cast<double>(x.cols);
      const double mean = std::accumulate(r.begin(), r.end(), 0.0) / n;
      double var = 0;
      for (double v : r) var += (v - mean) * (v - mean) / n;
      const double inv = 1.0 / std::sqrt(var + eps);
      for (int64_t j = 0; j < x.cols; ++j) y(i, j) = (r[j] - mean) * inv * w[j] + b[j];
    }
    return y;
  }

  models::SentenceEncoder enc_;
  models::BertWeights w_;
  std::map<std::string, std::vector<double>> cache_;
};

// ---- the decoders: the engine's own buffers ----------------------------------------------

void fill_from_trace(StageInputs& s, const models::AttentionLayerTrace& t, int64_t N, int64_t C, int64_t H,
                     int64_t Hkv, int64_t D) {
  const int64_t kvh = s.head / (H / Hkv);
  s.x = from_floats(t.x, N, C);
  s.x_normed = from_floats(t.normed, N, C);
  s.q = head_of(t.q, N, H, D, s.head);
  s.k = head_of(t.k, N, Hkv, D, kvh);
  s.v = head_of(t.v, N, Hkv, D, kvh);
  s.weights = heads_of(t.weights, H, N);
  s.att = from_floats(t.att, N, H * D);
  s.att_from_engine = true;
  s.o = from_floats(t.o, N, C);
  s.x_after = from_floats(t.x_after, N, C);
  s.normed_after = from_floats(t.normed_after, N, C);
}

// SmolLM2 and Gemma 3 on the runtime's decoder (models/text_decoder.h): its own buffers of the layer.
class DecoderStages final : public StagesModel {
 public:
  DecoderStages(const std::string& path, std::string name)
      : m_(models::TextDecoder::load(path, {.max_context = 256})), name_(std::move(name)) {}
  std::string name() const override { return name_; }

  json::Value stages(const StagesRequest& r) override {
    ATTN_CHECK(!r.text.empty(), "the text is empty; type a sentence");
    const models::runtime::DecoderConfig& c = m_.config();
    // The text as text (special-token strings stay text), after the begin-of-sequence token where the
    // tokenizer wants one.
    const std::vector<int32_t> ids = m_.encode(text::TextPieces{{r.text, false}});
    const auto N = static_cast<int64_t>(ids.size());
    check_request(r, N, c.layers, c.heads);
    const models::AttentionLayerTrace t = m_.decoder().layer_trace(ids, r.layer);
    StageInputs s;
    s.model = name(), s.kind = "decoder", s.text = r.text;
    const std::vector<std::string> shown = m_.token_strings(ids);
    for (std::size_t i = 0; i < ids.size(); ++i) {
      s.ids.push_back(ids[i]);
      s.tokens.push_back(shown[i]);
      s.special.push_back(m_.tokenizer().is_control(ids[i]));
    }
    s.layers = c.layers, s.heads = c.heads, s.kv_heads = c.kv_heads, s.d_model = c.dim, s.d_k = c.head_dim;
    s.layer = r.layer, s.head = r.head, s.causal = true;
    s.window = c.windows[static_cast<std::size_t>(r.layer)];
    s.scale = c.attn_scale > 0 ? c.attn_scale : 1.0 / std::sqrt(static_cast<double>(c.head_dim));
    s.norm = c.post_norms ? "pre_post_rms_norm" : "pre_rms_norm";
    s.qk = c.qk_norm ? "qk_norm_rope" : "rope";
    fill_from_trace(s, t, N, c.dim, c.heads, c.kv_heads, c.head_dim);
    return stages_detail::stages_json(s);
  }

 private:
  models::TextDecoder m_;
  std::string name_;
};

}  // namespace

std::string stage_model_key(const std::string& name) {
  if (name == "e5" || name == "multilingual-e5-small") return "e5";
  if (name == "smollm2" || name == "SmolLM2-135M-Instruct") return "smollm2";
  if (name == "gemma3" || name == "gemma-3-270m" || name == "Gemma-3-270M") return "gemma3";
  throw Error(
      "model: expected e5 (multilingual-e5-small), smollm2 (SmolLM2-135M-Instruct) or gemma3 "
      "(Gemma 3 270M); got '" +
      name + "'");
}

std::unique_ptr<StagesModel> StagesModel::load(const std::string& name, const std::string& path) {
  const std::string key = stage_model_key(name);
  if (key == "e5") return std::make_unique<E5Stages>(io::require_e5(path));
  if (key == "smollm2")
    return std::make_unique<DecoderStages>(io::require_smollm2_gguf(path), "SmolLM2-135M-Instruct");
  return std::make_unique<DecoderStages>(io::require_gemma3_gguf(path), "Gemma-3-270M");
}

std::vector<std::pair<std::string, std::string>> installed_stage_models() {
  std::vector<std::pair<std::string, std::string>> out;
  if (io::find_e5()) out.emplace_back("e5", "multilingual-e5-small");
  if (io::find_smollm2_gguf()) out.emplace_back("smollm2", "SmolLM2-135M-Instruct");
  if (io::find_gemma3_gguf()) out.emplace_back("gemma3", "Gemma-3-270M");
  return out;
}

json::Value explain_stages(const StagesOptions& o) {
  return StagesModel::load(o.model, o.path)->stages(o.request);
}

json::Value explain_stages(const StagesOptions& o, const std::string& classifier,
                           const CausalityRequest& causality) {
  json::Value doc = explain_stages(o);
  CausalityRequest c = causality;
  c.text = o.request.text;
  doc.set("causality", causality_panel(*models::TextClassifier::load(classifier), c));
  return doc;
}

}  // namespace attn::teach
