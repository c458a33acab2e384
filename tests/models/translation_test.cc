// English -> Chinese translation pieces (models/translation.h): the parallel
// corpus reader (attribution, deduplication, file:line errors), the tokenizers
// (round trip, JSON round trip), the split, and the captured attention of
// EncoderDecoder::attention against step-by-step decoding.
#include <attn/core/autograd.h>
#include <attn/data/split.h>
#include <attn/models/task_model.h>
#include <attn/models/translation.h>

#include <cmath>
#include <string>
#include <vector>

#include "testing/testing.h"
#include "testing/tolerances.h"
#include "text/text_test_util.h"

namespace attn {
namespace {

using models::ParallelCorpus;
using testing::TempDir;

const std::string kBom = "\xEF\xBB\xBF";

std::string corpus_text() {
  return kBom +
         "Hi.\t嗨。\tCC-BY 2.0 (France) Attribution: tatoeba.org #1 (a) & #2 (b)\n"
         "Hi.\t你好。\tCC-BY 2.0 (France) Attribution: tatoeba.org #1 (a) & #3 (c)\n"
         "Run.\t你用跑的。\tCC-BY 2.0 (France) Attribution: tatoeba.org #4 (d) & #5 (e)\n"
         "Hi.\t嗨。\tCC-BY 2.0 (France) Attribution: tatoeba.org #6 (f) & #7 (g)\n"
         "I  see.\t我明白了。\tCC-BY 2.0 (France) Attribution: tatoeba.org #8 (h) & #9 (i)\r\n";
}

TEST(ParallelCorpus, ReadsPairsAttributionAndDeduplicates) {
  TempDir dir;
  const ParallelCorpus c = models::read_parallel_corpus(dir.file("cmn.txt", corpus_text()));
  EXPECT_EQ(c.lines_read, 5);
  ASSERT_EQ(c.data.size(), 4);  // the second "Hi. 嗨。" is a duplicate
  EXPECT_EQ(c.dedup.duplicates_removed, 1);
  EXPECT_EQ(c.data.examples[0].text, "Hi.");
  EXPECT_EQ(c.data.examples[0].pair, "嗨。");
  EXPECT_EQ(c.data.examples[3].text, "I see.");  // normalised
  EXPECT_EQ(c.data.examples[3].line, 5);
  ASSERT_EQ(c.attribution.size(), 4u);
  EXPECT_EQ(c.attribution[0],
            "CC-BY 2.0 (France) Attribution: tatoeba.org #1 (a) & #2 (b)");  // the first copy's
  EXPECT_EQ(c.attribution[3], "CC-BY 2.0 (France) Attribution: tatoeba.org #8 (h) & #9 (i)");  // no '\r'
  const ParallelCorpus first2 = models::read_parallel_corpus(dir.file("cmn2.txt", corpus_text()), 2);
  EXPECT_EQ(first2.lines_read, 2);
  EXPECT_EQ(first2.data.size(), 2);
}

TEST(ParallelCorpus, TwoColumnsHaveNoAttribution) {
  TempDir dir;
  const ParallelCorpus c = models::read_parallel_corpus(dir.file("p.tsv", "Hello.\t你好。\nBye.\t再见。\n"));
  ASSERT_EQ(c.data.size(), 2);
  EXPECT_EQ(c.attribution, (std::vector<std::string>{"", ""}));
}

TEST(ParallelCorpus, BadInputNamesFileAndLine) {
  TempDir dir;
  EXPECT_ERROR_CONTAINS(models::read_parallel_corpus(dir.path("missing.txt")),
                        {"missing.txt", "cannot open"});
  EXPECT_ERROR_CONTAINS(models::read_parallel_corpus(dir.file("notab.txt", "Hi.\t嗨。\tx\nRun. 跑\n")),
                        {"notab.txt", "line 2", "expected 3 tab-separated fields", "got 1"});
  EXPECT_ERROR_CONTAINS(models::read_parallel_corpus(dir.file("onecol.txt", "Hi. 嗨。\n")),
                        {"onecol.txt", "column 1 does not exist"});
  EXPECT_ERROR_CONTAINS(models::read_parallel_corpus(dir.file("bad.txt", "Hi.\t嗨。\tx\nGo.\t\xE5\x8E\tx\n")),
                        {"bad.txt", "line 2", "truncated"});
  EXPECT_ERROR_CONTAINS(models::read_parallel_corpus(dir.file("empty.txt", kBom)), {"empty.txt", "empty"});
}

const std::vector<std::string> kEnglish = {
    "I didn't bring an umbrella because it was raining.", "He gets up at seven every morning.",
    "It was raining, so I stayed home.", "Tom bought a car in 2019.", "I like cats and dogs."};
const std::vector<std::string> kChinese = {"我没带伞，因为下雨了。", "他每天早上七点起床。",
                                           "下雨了，所以我待在家里。", "汤姆在2019年买了一辆车。",
                                           "我喜欢猫和狗。"};

models::TranslationTokenizers small_tokenizers() {
  models::TranslationTokenizerOptions o;
  o.src_vocab_size = 120;
  o.min_char_freq = 1;
  return models::TranslationTokenizers::train(kEnglish, kChinese, o);
}

TEST(TranslationTokenizers, RoundTripBothSides) {
  const auto tok = small_tokenizers();
  for (const auto& s : kChinese) {
    const std::vector<int32_t> ids = tok.tgt().encode(s);
    for (int32_t id : ids) EXPECT_NE(id, text::Vocab::kUnk) << s;
    EXPECT_EQ(tok.tgt().decode(ids), s);
  }
  for (const auto& s : kEnglish) {
    const std::vector<int32_t> ids = tok.src().encode(s);
    std::string lower = s;
    for (char& ch : lower) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    EXPECT_EQ(tok.src().decode(ids), lower);
  }
  EXPECT_EQ(tok.tgt().tokenize("汤姆在2019年"), (std::vector<std::string>{"汤", "姆", "在", "2019", "年"}));
}

TEST(TranslationTokenizers, JsonRoundTripGivesTheSameIds) {
  const auto tok = small_tokenizers();
  const json::Value j = json::parse(json::dump(tok.to_json()));
  const auto back = models::TranslationTokenizers::from_json(j);
  EXPECT_EQ(back.src().vocab(), tok.src().vocab());
  EXPECT_EQ(back.tgt().vocab(), tok.tgt().vocab());
  for (const auto& s : kEnglish) EXPECT_EQ(back.src().encode(s), tok.src().encode(s));
  for (const auto& s : kChinese) EXPECT_EQ(back.tgt().encode(s), tok.tgt().encode(s));
  json::Value broken = j;
  broken.set("target_tokenizer", json::Value::object());
  EXPECT_ERROR_CONTAINS(models::TranslationTokenizers::from_json(broken), {"target_tokenizer", "kind"});
}

TEST(TranslationSplit, SameSeedSameSplitOtherSeedOther) {
  TempDir dir;
  std::string text;
  for (int i = 0; i < 200; ++i)
    text += "Sentence " + std::to_string(i) + ".\t句子" + std::to_string(i) + "。\tA\n";
  const ParallelCorpus c = models::read_parallel_corpus(dir.file("c.txt", text));
  data::SplitOptions o;
  o.train = 0.9, o.valid = 0.05, o.test = 0.05, o.seed = 7, o.stratify = false;
  const data::Split a = data::make_split(c.data, o), b = data::make_split(c.data, o);
  EXPECT_EQ(a, b);
  EXPECT_EQ(a.test.size(), 10u);
  data::check_split(a, c.data);
  o.seed = 8;
  EXPECT_NE(data::make_split(c.data, o).test, a.test);
}

// A micro model over the small tokenizers (random weights).
std::unique_ptr<models::Translator> micro_translator(uint64_t seed) {
  auto tok = small_tokenizers();
  models::TransformerConfig c = models::TransformerConfig::preset("micro");
  c.src_vocab = tok.src().vocab().size();
  c.tgt_vocab = tok.tgt().vocab().size();
  c.share_embeddings = false;
  c.max_len = 32;
  c.seed = seed;
  return std::make_unique<models::Translator>(std::make_unique<models::EncoderDecoder>(c), std::move(tok), 32,
                                              12);
}

TEST(Translator, AlignmentEqualsTeacherForcedCrossAttention) {
  auto tr = micro_translator(5);
  models::GenerateOptions go;
  go.max_new_tokens = 8;
  for (auto kind : {models::SearchKind::greedy, models::SearchKind::beam}) {
    go.search = kind;
    go.beam = 3;
    const auto out = tr->translate({"I like cats.", "It was raining, so I stayed home."}, go, true);
    ASSERT_EQ(out.size(), 2u);
    for (const auto& t : out) {
      ASSERT_EQ(t.alignment.size(), t.tgt_ids.size() + (t.stopped ? 1 : 0));
      ASSERT_EQ(t.src_tokens.back(), "</s>");
      const models::AttentionCapture cap = tr->capture(t.src_ids, t.tgt_ids);
      const int64_t L = tr->model().config().decoder_layers;
      ASSERT_EQ(static_cast<int64_t>(cap.cross.size()), L);
      ASSERT_EQ(static_cast<int64_t>(cap.encoder.size()), L);
      const Tensor last = cap.cross.back();  // [1, H, Lt, Ls]
      const int64_t H = last.size(1), Lt = last.size(2), Ls = last.size(3);
      ASSERT_EQ(Lt, static_cast<int64_t>(t.tgt_ids.size()) + 1);
      ASSERT_EQ(Ls, static_cast<int64_t>(t.src_ids.size()));
      for (std::size_t r = 0; r < t.alignment.size(); ++r) {
        ASSERT_EQ(static_cast<int64_t>(t.alignment[r].size()), Ls);
        double row_sum = 0;
        for (int64_t j = 0; j < Ls; ++j) {
          double mean = 0;
          for (int64_t h = 0; h < H; ++h) mean += last.at({0, h, static_cast<int64_t>(r), j}) / H;
          EXPECT_NEAR(t.alignment[r][j], mean, testing::tol::kKvCache.abs + testing::tol::kKvCache.rel * mean)
              << "row " << r << " column " << j;
          row_sum += t.alignment[r][j];
        }
        EXPECT_NEAR(row_sum, 1.0, 1e-5);
      }
      // The decoder's self-attention is causal.
      const Tensor d = cap.decoder.front();
      for (int64_t i = 0; i < Lt; ++i)
        for (int64_t j = i + 1; j < Lt; ++j) EXPECT_EQ(d.at({0, 0, i, j}), 0.0);
    }
  }
}

TEST(Translator, ModelFileRoundTripAndWrongTask) {
  TempDir dir;
  auto tr = micro_translator(9);
  json::Value data = tr->tokenizers().to_json();
  data.set("max_src_len", json::Value::integer(32));
  data.set("max_tgt_len", json::Value::integer(12));
  const std::string path = dir.path("model.attn");
  models::save_task_model(path, models::kTranslateTask, tr->model().config(), data,
                          tr->model().named_parameters());
  auto back = models::Translator::load(path);
  models::GenerateOptions go;
  go.max_new_tokens = 8;
  const auto a = tr->translate({"I like dogs."}, go), b = back->translate({"I like dogs."}, go);
  EXPECT_EQ(a[0].tgt_ids, b[0].tgt_ids);
  EXPECT_EQ(a[0].log_prob, b[0].log_prob);
  const std::string other = dir.path("other.attn");
  models::save_task_model(other, "classify", tr->model().config(), data, tr->model().named_parameters());
  EXPECT_ERROR_CONTAINS(models::Translator::load(other), {"classify", "translate"});
}

TEST(Translator, EvaluateBleuScoresAgainstTheTargets) {
  // evaluate_bleu scores hypotheses against the targets: a random model gives
  // a low score, and the metric itself is checked against sacrebleu in tests/text.
  TempDir dir;
  std::string text;
  for (std::size_t i = 0; i < kEnglish.size(); ++i) text += kEnglish[i] + "\t" + kChinese[i] + "\tA\n";
  const ParallelCorpus c = models::read_parallel_corpus(dir.file("c.txt", text));
  auto tr = micro_translator(3);
  models::GenerateOptions go;
  go.max_new_tokens = 6;
  const auto ev = models::evaluate_bleu(*tr, c.data, {0, 1, 2, 3, 4}, go, 2);
  ASSERT_EQ(ev.hypotheses.size(), 5u);
  EXPECT_EQ(ev.references, kChinese);
  EXPECT_LT(ev.bleu.score, 50.0);
  text::BleuOptions bo;
  bo.tokenizer = text::BleuTokenizer::zh;
  EXPECT_DOUBLE_EQ(text::corpus_bleu(kChinese, {kChinese}, bo).score, 100.0);
}

}  // namespace
}  // namespace attn
