// The attention-export format (include/attn/viz/export.h): every kind of
// validation error of the one reader, and that the export of every producer
// (the builders, the decoder and encoder-decoder layouts, attributions, the demos)
// is written by the one writer, read back by the one reader and comes back exact.
#include <attn/core/error.h>
#include <attn/io/json.h>
#include <attn/viz/attention.h>
#include <attn/viz/export.h>
#include <attn/viz/view.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "testing/testing.h"
#include "viz/viz_test_util.h"

namespace attn::viz {
namespace {

using namespace attn::viz::testing;

// ---- validation: each kind of error ------------------------------------------------

struct BadExport {
  const char* name;
  std::string text;
  std::vector<std::string> expected;  // substrings of the error message
};

// Joins layers built separately (each "[[...]]" from layers_json with L = 1) into one list.
std::string join_layers(const std::vector<std::string>& layers) {
  std::string s = "[";
  for (std::size_t i = 0; i < layers.size(); ++i) {
    if (i) s += ',';
    s.append(layers[i], 1, layers[i].size() - 2);
  }
  return s + "]";
}

double one(int, int, int, int) { return 1.0; }

const std::string kNanText = "{\"tokens\":[\"a\"],\"attention\":[[[[[NaN]]]]]}";

std::vector<BadExport> bad_exports() {
  const std::vector<std::string> t3 = {"a", "b", "c"};
  const std::string good = self_export(t3, 2, 2, uniform3);
  // Two tokens, one layer, one head: rows given as text.
  auto two = [](const std::string& rows) {
    return "{\"tokens\":[\"a\",\"b\"],\"attention\":[[[" + rows + "]]]}";
  };
  std::vector<BadExport> v;
  v.push_back({"truncated", good.substr(0, 40), {"malformed JSON", "at byte 40", "got end of input"}});
  v.push_back(
      {"nan_literal", kNanText, {"malformed JSON", "at byte " + std::to_string(kNanText.find("NaN"))}});
  v.push_back({"not_object", "[1,2]", {"expected a JSON object", "got array"}});
  v.push_back({"missing_attention", "{\"tokens\":[\"a\"]}", {"missing \"attention\""}});
  v.push_back({"missing_tokens", "{\"attention\":[[[[[1]]]]]}", {"missing \"tokens\""}});
  v.push_back({"rows",
               "{\"tokens\":[\"a\",\"b\",\"c\"],\"attention\":" +
                   join_layers({layers_json(1, 2, 3, 3, uniform3), layers_json(1, 2, 2, 3, uniform3)}) + "}",
               {"attention layer 1, head 0: expected 3 rows (one per query token); got 2"}});
  v.push_back(
      {"ragged",
       "{\"tokens\":[\"a\",\"b\",\"c\"],\"attention\":[[[[[0.5,0.5,0],[0.5,0.5,0],[0.5,0.5,0]],"
       "[[0.5,0.5,0],[0.5,0.5,0],[0.5,0.5]]]]]}",
       {"attention layer 0, head 1, row 2 (query 'c'): expected 3 columns (one per key token); got 2"}});
  v.push_back({"null_weight",
               two("[[0.5,0.5],[null,1]]"),
               {"head 0, row 1 (query 'b'), column 0: expected a number; got null", "NaN"}});
  v.push_back({"negative",
               two("[[0.5,0.5],[-0.25,1.25]]"),
               {"row 1 (query 'b'), column 0: weight -0.25 is negative"}});
  v.push_back({"row_sum",
               two("[[0.5,0.4],[0.5,0.5]]"),
               {"row 0 (query 'a'): weights sum to 0.9", "expected 1 within 0.001", "fully masked"}});
  v.push_back({"row_sum_just_outside",
               two("[[0.5,0.5011],[0.5,0.5]]"),
               {"row 0 (query 'a'): weights sum to 1.0011"}});
  v.push_back({"batch",
               "{\"tokens\":[\"a\"],\"attention\":[[[[[1]]]],[[[[1]]],[[[1]]]]]}",
               {"attention layer 1: expected batch size 1", "got 2 batch entries"}});
  v.push_back({"heads_differ",
               "{\"tokens\":[\"a\"],\"attention\":" +
                   join_layers({layers_json(1, 2, 1, 1, one), layers_json(1, 1, 1, 1, one)}) + "}",
               {"attention layer 1 has 1 heads; expected 2 like layer 0"}});
  v.push_back({"layer_names",
               "{\"tokens\":[\"a\"],\"attention\":[[[[[1]]]]],\"layer_names\":[\"x\",\"y\"]}",
               {"\"layer_names\" has 2 names; expected 1"}});
  // Encoder-decoder: cross layers are [1, H, N_dec, N_enc]; here rows have 3 columns instead of 2.
  v.push_back(
      {"cross_shape",
       "{\"encoder_tokens\":[\"x\",\"y\"],\"decoder_tokens\":[\"p\",\"q\",\"r\"],\"cross_attention\":" +
           layers_json(1, 1, 3, 3, uniform3) + "}",
       {"cross_attention layer 0, head 0, row 0 (decoder (target) 'p'): expected 2 columns (one per "
        "encoder (source) token); got 3"}});
  // The optional attribution: tokens and scores must match the export's tokens.
  const std::string ab =
      "{\"tokens\":[\"a\",\"b\"],\"attention\":[[[[[0.5,0.5],[0.5,0.5]]]]],\"attribution\":";
  v.push_back({"attribution_length",
               ab + "{\"tokens\":[\"a\",\"b\"],\"methods\":{\"ig\":[0.5]}}}",
               {"attribution method \"ig\" has 1 scores; expected 2 (one per token)"}});
  v.push_back({"attribution_tokens",
               ab + "{\"tokens\":[\"a\"],\"methods\":{\"ig\":[0.5]}}}",
               {"attribution has 1 tokens; expected 2"}});
  v.push_back({"attribution_token_text",
               ab + "{\"tokens\":[\"a\",\"c\"],\"methods\":{\"ig\":[0.5,1]}}}",
               {"attribution token 1 is 'c'; expected 'b'"}});
  v.push_back({"attribution_null",
               ab + "{\"tokens\":[\"a\",\"b\"],\"methods\":{\"ig\":[0.5,null]}}}",
               {"attribution method \"ig\", token 1 ('b'): expected a number; got null", "NaN"}});
  v.push_back({"attribution_no_methods",
               ab + "{\"tokens\":[\"a\",\"b\"],\"methods\":{}}}",
               {"attribution needs \"methods\""}});
  v.push_back({"mixed_layouts",
               "{\"tokens\":[\"a\"],\"attention\":[[[[[1]]]]],\"encoder_tokens\":[\"a\"]}",
               {"mixes the self-attention layout"}});
  return v;
}

class ExportBad : public ::testing::TestWithParam<BadExport> {};

TEST_P(ExportBad, IsRefusedWithAClearMessage) {
  const BadExport& c = GetParam();
  ASSERT_FALSE(c.expected.empty());
  EXPECT_ERROR_CONTAINS(parse_export(c.text), c.expected);
}

INSTANTIATE_TEST_SUITE_P(Kinds, ExportBad, ::testing::ValuesIn(bad_exports()),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(Export, AcceptsFullyMaskedRowsAndSumsWithinTolerance) {
  // Row 0 fully masked (all 0), row 1 sums to 1 + 0.0009 (inside the 1e-3 tolerance).
  const Export e = parse_export("{\"tokens\":[\"a\",\"b\"],\"attention\":[[[[[0,0],[0.5009,0.5]]]]]}");
  EXPECT_NE(terminal_heatmap(e, {}).find("(fully masked)"), std::string::npos);
}

TEST(Export, SetNamesTheKeysPresent) {
  const Export e = parse_export(self_export({"a"}, 1, 1, one));
  EXPECT_EQ(&e.set("attention"), &e.sets.front());
  EXPECT_ERROR_CONTAINS(e.set("cross_attention"), {"export has no \"cross_attention\"; it has attention"});
}

// ---- the writer and the reader: every producer round-trips exactly -------------------

TEST(ExportRoundTrip, ParsedTextWithAllOptionalFields) {
  const std::vector<std::string> tokens = {"</script>", "\"q\"", "back\\slash", "伞"};
  auto w = [](int l, int h, int i, int j) {
    const double a = 1.0 / 3 + 0.01 * (l + h), b = (1 - a) / 3;
    return j == i ? a : b;
  };
  const std::string text =
      "{\"model\":\"m <b>\",\"text\":\"t\",\"layer_names\":[\"x\",\"y\"],\"tokens\":" + tokens_json(tokens) +
      ",\"attention\":" + layers_json(2, 3, 4, 4, w) + "}";
  const Export e = parse_export(text);
  EXPECT_EQ(e.model, "m <b>");
  EXPECT_EQ(e.layer_names, (std::vector<std::string>{"x", "y"}));
  ASSERT_EQ(e.sets.size(), 1u);
  EXPECT_EQ(e.sets[0].layers[1].at(2, 3, 3), w(1, 2, 3, 3));
  expect_round_trip(e);
  // The writer writes the same JSON document the hand-written text holds.
  EXPECT_TRUE(json::parse(export_json(e)) == json::parse(text));
}

TEST(ExportRoundTrip, SelfAttentionFromCapturedTensors) {
  // Weights that need all 9 float digits; a non-contiguous tensor (transposed view).
  std::vector<float> v(2 * 3 * 3);
  for (int h = 0; h < 2; ++h)
    for (int i = 0; i < 3; ++i) {
      const float a = 1.0f / 7 + 0.1f * static_cast<float>(h + i);
      for (int j = 0; j < 3; ++j) v[static_cast<std::size_t>((h * 3 + i) * 3 + j)] = j == i ? a : (1 - a) / 2;
    }
  const Tensor w = Tensor::from(v, {1, 2, 3, 3});
  const Tensor wt = w.transpose(2, 3).contiguous().transpose(2, 3);  // same values, other strides
  ASSERT_FALSE(wt.is_contiguous());
  const Layer l0 = layer_from_weights(w), l1 = layer_from_weights(wt);
  EXPECT_EQ(l0.heads, 2);
  EXPECT_EQ(l0.rows, 3);
  EXPECT_TRUE(l0.w == l1.w);
  EXPECT_EQ(l0.at(1, 2, 2), static_cast<double>(v[17]));
  const Export e = self_attention_export({"m", "a b c", {"a", "b", "c"}, {l0, l1}});
  EXPECT_EQ(e.layer_names, (std::vector<std::string>{"layer 0", "layer 1"}));
  EXPECT_EQ(e.sets[0].key, "attention");
  expect_round_trip(e);
  EXPECT_ERROR_CONTAINS(layer_from_weights(Tensor::zeros({2, 3, 3})),
                        {"expected captured weights [1, H, rows, cols]"});
  EXPECT_ERROR_CONTAINS(layer_from_floats({1, 2}, 1, 1, 1), {"expected 1 x 1 x 1 = 1 weights; got 2"});
}

TEST(ExportRoundTrip, DecoderAttention) {
  // A causal 2-layer, 2-head capture as runtime::Decoder::attention_weights returns it.
  DecoderAttention a;
  a.tokens = {"The", " cat", " <0xE4>"};
  a.heads = 2;
  for (int l = 0; l < 2; ++l) {
    std::vector<float> w;
    for (int h = 0; h < 2; ++h)
      for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 3; ++j) w.push_back(j > i ? 0.0f : 1.0f / static_cast<float>(i + 1));
    a.layers.push_back(w);
  }
  const Export e = export_decoder_attention(a, "SmolLM2-135M-Instruct", "The cat");
  EXPECT_EQ(e.model, "SmolLM2-135M-Instruct");
  EXPECT_EQ(e.text, "The cat");
  EXPECT_EQ(e.tokens, a.tokens);
  EXPECT_EQ(e.sets[0].key, "attention");
  ASSERT_EQ(e.sets[0].layers.size(), 2u);
  EXPECT_EQ(e.sets[0].layers[1].at(1, 2, 0), static_cast<double>(1.0f / 3));
  EXPECT_EQ(e.layer_names.back(), "layer 1");
  expect_round_trip(e);
  a.windows = {2, 0};  // a sliding layer names its window, and the other layer is global
  const Export w = export_decoder_attention(a, "m", "The cat");
  EXPECT_EQ(w.layer_names[0], "layer 0 (sliding, window 2)");
  EXPECT_EQ(w.layer_names[1], "layer 1 (global)");
  a.windows = {2};
  EXPECT_ERROR_CONTAINS(export_decoder_attention(a, "m", "x"), {"1 layer windows for 2 layers"});
}

TEST(ExportRoundTrip, EncoderDecoder) {
  auto layer = [](int64_t rows, int64_t cols) {
    std::vector<float> w;
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j) w.push_back(1.0f / static_cast<float>(cols));
    return layer_from_floats(w, 1, rows, cols);
  };
  EncoderDecoderInput in;
  in.model = "attn translate: m";
  in.text = "我 -> I";
  in.encoder_tokens = {"我", "爱"};
  in.decoder_tokens = {"<s>", "I", "love"};
  in.encoder = {layer(2, 2)};
  in.decoder = {layer(3, 3), layer(3, 3)};
  in.cross = {layer(3, 2), layer(3, 2)};
  const Export e = encoder_decoder_export(in);
  ASSERT_EQ(e.sets.size(), 3u);
  EXPECT_EQ(e.sets[2].key, "cross_attention");
  EXPECT_EQ(e.sets[2].row_tokens, in.decoder_tokens);
  EXPECT_EQ(e.sets[2].col_tokens, in.encoder_tokens);
  EXPECT_TRUE(e.layer_names.empty());
  expect_round_trip(e);
  // Only cross-attention is also an export; none at all is not.
  EncoderDecoderInput cross_only = in;
  cross_only.encoder.clear();
  cross_only.decoder.clear();
  expect_round_trip(encoder_decoder_export(cross_only));
  cross_only.cross.clear();
  EXPECT_ERROR_CONTAINS(encoder_decoder_export(cross_only), {"needs encoder, decoder or cross-attention"});
}

TEST(ExportRoundTrip, Translation) {
  // What models::TranslationModel::capture returns for 3 source and 2 generated tokens.
  auto uniform = [](int64_t rows, int64_t cols, int64_t heads) {
    return Tensor::full({1, heads, rows, cols}, 1.0 / static_cast<double>(cols));
  };
  auto causal = [](int64_t n) {
    std::vector<float> w;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < n; ++j) w.push_back(j > i ? 0.0f : 1.0f / static_cast<float>(i + 1));
    return Tensor::from(w, {1, 1, n, n});
  };
  models::Translation t;
  t.source = "我爱";
  t.src_tokens = {"我", "爱", "</s>"};
  t.tgt_tokens = {"I", "love"};
  t.text = "I love";
  models::AttentionCapture cap;
  cap.encoder = {uniform(3, 3, 2), uniform(3, 3, 2)};
  cap.decoder = {causal(3), causal(3)};
  cap.cross = {uniform(3, 3, 1), uniform(3, 3, 1)};
  const Export e = export_translation(t, cap, "attn translate: model.attn");
  EXPECT_TRUE(e.encoder_decoder);
  EXPECT_EQ(e.model, "attn translate: model.attn");
  EXPECT_EQ(e.text, "我爱 -> I love");
  EXPECT_EQ(e.encoder_tokens, t.src_tokens);
  EXPECT_EQ(e.decoder_tokens, (std::vector<std::string>{"<s>", "I", "love"}));
  ASSERT_EQ(e.sets.size(), 3u);
  EXPECT_EQ(e.set("encoder_attention").layers[1].heads, 2);
  EXPECT_EQ(e.set("decoder_attention").layers[0].at(0, 1, 1), 0.5);
  EXPECT_EQ(e.set("cross_attention").layers[0].at(0, 2, 0), static_cast<double>(1.0f / 3));
  expect_round_trip(e);
  // A capture that does not fit the tokens is refused by the writer.
  cap.cross = {uniform(3, 2, 1)};
  EXPECT_ERROR_CONTAINS(
      save_export(temp_path("bad_translation.json").string(), export_translation(t, cap, "m")),
      {"cross_attention layer 0, head 0, row 0 (decoder (target) '<s>'): expected 3 columns"});
}

TEST(ExportRoundTrip, Attribution) {
  const std::vector<std::string> tokens = {"[CLS]", "好", "</b>"};
  Export e = self_attention_export(
      {"classifier", "好", tokens, {parse_export(self_export(tokens, 1, 2, uniform3)).sets[0].layers[0]}});
  Attribution a;
  a.tokens = tokens;
  a.target = "pos";
  a.baseline = "pad";
  a.steps = 16;
  a.has_completeness = true;
  a.completeness_error = -1.0 / 9;
  a.methods = {{"ig", {0.0, 1.0 / 3, -2.0 / 7}}, {"input_x_grad", {1e-300, -0.1, 12345.678}}};
  e.attribution = a;
  expect_round_trip(e);
}

TEST(ExportRoundTrip, Demos) {
  expect_round_trip(demo_self_attention(synthetic_example()));
  expect_round_trip(demo_translation(synthetic_translation()));
}

TEST(ExportWriter, RefusesWhatTheReaderWouldRefuseAndWritesNothing) {
  const fs::path p = temp_path("refused.json");
  fs::remove(p);
  Export e = parse_export(self_export({"a", "b", "c"}, 1, 1, uniform3));
  e.sets[0].layers[0].w[4] = std::nan("");  // written as null, refused naming where
  EXPECT_ERROR_CONTAINS(
      save_export(p.string(), e),
      {"attention layer 0, head 0, row 1 (query 'b'), column 1: expected a number; got null"});
  e.sets[0].layers[0].w[4] = 2;
  EXPECT_ERROR_CONTAINS(save_export(p.string(), e), {"row 1 (query 'b'): weights sum to"});
  EXPECT_FALSE(fs::exists(p));
}

TEST(ExportWriter, WritesNothingWhenTheDirectoryIsMissing) {
  const fs::path out = temp_path("no_such_dir") / "export.json";
  const Export e = parse_export(self_export({"a"}, 1, 1, one));
  EXPECT_ERROR_CONTAINS(save_export(out.string(), e), {"cannot create the temporary file", out.string()});
  EXPECT_ERROR_CONTAINS(save_export(out.string(), e, "--save-attention"),
                        {"--save-attention: cannot create"});
  EXPECT_FALSE(fs::exists(out.parent_path()));
}

}  // namespace
}  // namespace attn::viz
