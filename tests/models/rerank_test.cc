// Hugging Face encoder folders and cross-encoders (models/bert_rerank.h) against transformers on small
// random-weight checkpoints (tests/models/data/hf_encoders, written with tests/models/data/
// rerank_reference.{json,safetensors} by python/reference/rerank_fixtures.py): the pair ids and token
// types of `tokenizers` (longest_first truncation), the logits of BertForSequenceClassification and
// XLMRobertaForSequenceClassification (F32, F16, BF16 in 3 shards), the attention weights equal to
// output_attentions, an XLMRobertaModel folder as a CLS-pooled sentence encoder; and bad folders (a
// missing or truncated shard, a config that disagrees with the tensors, an unsupported tokenizer model,
// more than one label) refused by name.
#include <attn/core/error.h>
#include <attn/io/files.h>
#include <attn/io/json.h>
#include <attn/io/safetensors.h>
#include <attn/models/bert_rerank.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "testing/fixture_values.h"
#include "testing/testing.h"

namespace attn::models {
namespace {

namespace fs = std::filesystem;

std::string folder(const std::string& name) {
  return testing::source_path("tests/models/data/hf_encoders/" + name);
}

const json::Value& reference() {
  static const json::Value v =
      json::parse(testing::read_text(testing::source_path("tests/models/data/rerank_reference.json")));
  return v;
}

const io::SafeTensorsFile& reference_tensors() {
  static const io::SafeTensorsFile f =
      io::SafeTensorsFile::open(testing::source_path("tests/models/data/rerank_reference.safetensors"));
  return f;
}

// A copy of a fixture folder to break (removed with the test's temporary folder).
struct Scratch {
  fs::path dir;
  explicit Scratch(const std::string& from) {
    dir = fs::temp_directory_path() /
          ("attn_rerank_" + std::to_string(::getpid()) + "_" + fs::path(from).filename().string());
    fs::remove_all(dir);
    fs::copy(folder(from), dir, fs::copy_options::recursive);
  }
  ~Scratch() { fs::remove_all(dir); }
  std::string path(const std::string& f = "") const { return f.empty() ? dir.string() : (dir / f).string(); }
  void write(const std::string& f, const std::string& text) const {
    std::ofstream(path(f), std::ios::binary | std::ios::trunc) << text;
  }
};

// `text` with the first `from` replaced by `to` (a failure when absent).
std::string replaced(std::string text, const std::string& from, const std::string& to) {
  const std::size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return at == std::string::npos ? text : text.replace(at, from.size(), to);
}

class CrossEncoderParity : public ::testing::TestWithParam<const char*> {};

TEST_P(CrossEncoderParity, PairIdsAndLogitsEqualTransformers) {
  const std::string name = GetParam();
  const CrossEncoder ce = CrossEncoder::load(folder(name));
  EXPECT_EQ(ce.max_seq_length(), reference().at("max_length").as_int64());
  std::vector<PairEncoding> pairs;
  std::vector<float> want;
  int truncated = 0;
  for (const json::Value& p : reference().at(name).at("pairs").items()) {
    const PairEncoding e = ce.encode_pair(p.at("query").as_string(), p.at("document").as_string());
    EXPECT_EQ(e.ids, testing::ids_of(p.at("ids"))) << testing::printable(p.at("document").as_string());
    EXPECT_EQ(e.type_ids, testing::ids_of(p.at("type_ids")))
        << testing::printable(p.at("document").as_string());
    truncated += e.truncated;
    pairs.push_back({testing::ids_of(p.at("ids")), testing::ids_of(p.at("type_ids")), false});
    want.push_back(static_cast<float>(p.at("logits").at(std::size_t{0}).as_double()));
  }
  EXPECT_GE(truncated, 2);  // the long document, the long query
  // Batched (padded) and one by one: the same logits, within f32 rounding of transformers'.
  const std::vector<float> got = ce.logits(pairs, 4);
  for (std::size_t i = 0; i < pairs.size(); ++i) {
    EXPECT_NEAR(got[i], want[i], 2e-5) << "pair " << i;
    EXPECT_NEAR(ce.logits({pairs[i]})[0], got[i], 1e-5) << "pair " << i;
  }
  std::vector<std::string> docs;
  std::string query;
  for (const json::Value& p : reference().at(name).at("pairs").items())
    if (p.at("query").as_string() ==
        reference().at(name).at("pairs").at(std::size_t{0}).at("query").as_string()) {
      query = p.at("query").as_string();
      docs.push_back(p.at("document").as_string());
    }
  const RerankScores s = ce.score(query, docs);
  for (std::size_t i = 0; i < docs.size(); ++i) EXPECT_NEAR(s.scores[i], sigmoid(want[i]), 1e-5);
  RerankOptions raw;
  raw.raw_scores = true;
  EXPECT_NEAR(ce.score(query, docs, raw).scores[0], want[0], 2e-5);
}

TEST_P(CrossEncoderParity, AttentionEqualsOutputAttentions) {
  const std::string name = GetParam();
  const CrossEncoder ce = CrossEncoder::load(folder(name));
  const json::Value& p = reference().at(name).at("pairs").at(std::size_t{0});
  const PairAttention a = ce.attention(p.at("query").as_string(), p.at("document").as_string());
  ASSERT_EQ(static_cast<int64_t>(a.layers.size()), ce.model().config().num_layers);
  for (std::size_t l = 0; l < a.layers.size(); ++l) {
    const Tensor want = reference_tensors().load(name + ".attn." + std::to_string(l));  // [H, L, L]
    EXPECT_ALL_CLOSE(a.layers[l].view(want.shape()), want, (testing::Tolerance{2e-6, 1e-5})) << "layer " << l;
  }
  EXPECT_NEAR(a.logit, p.at("logits").at(std::size_t{0}).as_double(), 2e-5);
  EXPECT_EQ(a.tokens.size(), p.at("ids").size());
}

// BertRunOptions::first_token_only (what logits() and CLS pooling run): hidden [B, 1, C] equal to the full
// forward's first rows within f32 rounding (the same bits where the products are row-invariant, not
// asserted: a BLAS product's rows depend on the row count); ignored with captured attention or a trace.
TEST_P(CrossEncoderParity, FirstTokenOnlyIsTheFullForwardsFirstRow) {
  const CrossEncoder ce = CrossEncoder::load(folder(GetParam()));
  BertInput in;
  for (const json::Value& p : reference().at(GetParam()).at("pairs").items()) {
    in.ids.push_back(testing::ids_of(p.at("ids")));
    in.type_ids.push_back(testing::ids_of(p.at("type_ids")));
  }
  const BertOutput full = ce.model().forward(in);
  BertRunOptions first;
  first.first_token_only = true;
  const BertOutput got = ce.model().forward(in, first);
  const int64_t B = full.hidden.size(0), L = full.hidden.size(1), C = full.hidden.size(2);
  ASSERT_GT(L, 2);
  ASSERT_EQ(got.hidden.shape(), (Shape{B, 1, C}));
  EXPECT_EQ(got.lengths, full.lengths);
  EXPECT_ALL_CLOSE(got.hidden.view({B, C}), full.hidden.select(1, 0).contiguous(),
                   (testing::Tolerance{1e-5, 1e-5}));
  for (const bool capture : {false, true}) {
    BertRunOptions o = first;
    o.capture_attention = capture;
    o.trace = !capture;
    const BertOutput r = ce.model().forward(in, o);
    EXPECT_EQ(r.hidden.shape(), full.hidden.shape()) << (capture ? "capture_attention" : "trace");
  }
  BertRunOptions lower = first;
  lower.layers = ce.model().config().num_layers - 1;  // stops below the last layer: every token
  EXPECT_EQ(ce.model().forward(in, lower).hidden.shape(), full.hidden.shape());
}

INSTANTIATE_TEST_SUITE_P(Folders, CrossEncoderParity,
                         ::testing::Values("bert_cls", "bert_cls_f16", "xlmr_cls", "xlmr_cls_bf16_sharded"));

TEST(HfEncoder, XlmRobertaFolderIsAClsPooledSentenceEncoder) {
  const SentenceEncoder enc = SentenceEncoder::load(folder("xlmr_model"));
  EXPECT_EQ(enc.pooling(), Pooling::cls);
  EXPECT_EQ(enc.model().config().position_offset, 2);
  EXPECT_STREQ(enc.tokenizer().kind(), "unigram");
  std::vector<std::string> texts;
  for (const json::Value& t : reference().at("xlmr_model").at("texts").items()) {
    bool cut = false;
    EXPECT_EQ(enc.encode(t.at("text").as_string(), &cut), testing::ids_of(t.at("ids")));
    texts.push_back(t.at("text").as_string());
  }
  EmbedOptions o;
  o.normalize = false;
  const Embeddings e = enc.embed(texts, o);
  const int64_t C = enc.dim();
  for (std::size_t i = 0; i < texts.size(); ++i) {
    const json::Value& want = reference().at("xlmr_model").at("texts").at(i).at("cls");
    for (int64_t c = 0; c < C; ++c)
      ASSERT_NEAR(e.vectors.data<float>()[static_cast<int64_t>(i) * C + c],
                  want.at(static_cast<std::size_t>(c)).as_double(), 2e-5)
          << "text " << i << " dim " << c;
  }
}

TEST(HfEncoder, ShardedFolderReadsAsOneSet) {
  const io::SafeTensorsSet s = io::SafeTensorsSet::open_folder(folder("xlmr_cls_bf16_sharded"));
  EXPECT_EQ(s.files().size(), 3u);
  EXPECT_TRUE(s.contains("classifier.out_proj.weight"));
  EXPECT_EQ(s.info("roberta.embeddings.word_embeddings.weight").dtype, io::StDType::BF16);
}

TEST(HfEncoderBad, MissingOrTruncatedShardIsNamed) {
  {
    Scratch s("xlmr_cls_bf16_sharded");
    fs::remove(s.path("model-00002-of-00003.safetensors"));
    EXPECT_ERROR_CONTAINS(CrossEncoder::load(s.path()),
                          {"model.safetensors.index.json", "model-00002-of-00003", "is not in the folder"});
  }
  {
    Scratch s("xlmr_cls_bf16_sharded");
    fs::resize_file(s.path("model-00003-of-00003.safetensors"), 2000);
    EXPECT_ERROR_CONTAINS(CrossEncoder::load(s.path()), {"model-00003-of-00003.safetensors"});
  }
  {
    Scratch s("xlmr_cls_bf16_sharded");
    s.write("model.safetensors.index.json",
            replaced(io::read_file(s.path("model.safetensors.index.json"), "index"),
                     "\"classifier.dense.bias\": \"model-", "\"classifier.dense.bias\": \"../model-"));
    EXPECT_ERROR_CONTAINS(CrossEncoder::load(s.path()), {"weight_map", "classifier.dense.bias", "no path"});
  }
}

TEST(HfEncoderBad, ConfigThatDisagreesWithTheTensorsIsNamed) {
  Scratch s("bert_cls");
  s.write("config.json", replaced(io::read_file(s.path("config.json"), "config"), "\"intermediate_size\": 64",
                                  "\"intermediate_size\": 48"));
  EXPECT_ERROR_CONTAINS(CrossEncoder::load(s.path()),
                        {"does not match the config", "intermediate 48", "mis-shaped",
                         "bert.encoder.layer.0.intermediate.dense.weight"});
}

TEST(HfEncoderBad, UnsupportedTokenizerAndLabelsAndArchitectureAreNamed) {
  {
    Scratch s("xlmr_cls");
    s.write("tokenizer.json", replaced(io::read_file(s.path("tokenizer.json"), "tok"),
                                       "\"type\": \"Unigram\"", "\"type\": \"BPE\""));
    EXPECT_ERROR_CONTAINS(CrossEncoder::load(s.path()), {"tokenizer model \"BPE\"", "WordPiece", "Unigram"});
  }
  {
    Scratch s("bert_cls");
    s.write("config.json", replaced(io::read_file(s.path("config.json"), "config"), "\"0\": \"LABEL_0\"",
                                    "\"0\": \"LABEL_0\", \"1\": \"LABEL_1\""));
    EXPECT_ERROR_CONTAINS(CrossEncoder::load(s.path()), {"2 labels", "num_labels 1"});
  }
  EXPECT_ERROR_CONTAINS(
      CrossEncoder::load(folder("xlmr_model")),
      {"XLMRobertaModel", "BertForSequenceClassification or XLMRobertaForSequenceClassification"});
  const CrossEncoder ce = CrossEncoder::load(folder("bert_cls"));
  EXPECT_ERROR_CONTAINS(ce.score("q", {}), {"no documents"});
  EXPECT_ERROR_CONTAINS(ce.score("q", {"ok", std::string("\xff")}), {"documents[1]"});
}

}  // namespace
}  // namespace attn::models
