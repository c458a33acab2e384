// Batching: shapes, [CLS]/[SEP], padding, truncation counts, labels, pairs
// with <s> </s>, seeded epoch order; and the real reviews at L = 100.
#include <attn/core/error.h>
#include <attn/data/batch.h>
#include <attn/data/split.h>
#include <attn/text/bpe.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "text/text_test_util.h"

namespace attn::data {
namespace {

using text::Vocab;

// Three labelled examples with 1, 3 and 6 characters (each its own token).
struct Fixture {
  Dataset ds;
  text::CharTokenizer tok{text::Vocab::from_tokens({"a", "b", "c", "d", "e", "f"})};
  EncodedDataset enc;
  Fixture() {
    ds.label_names = {"neg", "pos"};
    ds.examples = {{"a", "", 0, 0, 1}, {"abc", "", 1, 0, 2}, {"abcdef", "", 1, 0, 3}};
    enc = encode_dataset(ds, tok);
  }
};

std::vector<int64_t> row(const Tensor& t, int64_t i) {
  std::vector<int64_t> out;
  for (int64_t j = 0; j < t.size(1); ++j) out.push_back(static_cast<int64_t>(t.at({i, j})));
  return out;
}

struct SeqCase {
  const char* name;
  SequenceOptions options;
  int64_t L;
  std::vector<std::vector<int64_t>> ids;  // expected rows
  std::vector<int64_t> lengths;
  int64_t truncated;
};

class MakeBatch : public ::testing::TestWithParam<SeqCase> {};

TEST_P(MakeBatch, ShapesPaddingAndTruncation) {
  const SeqCase& c = GetParam();
  Fixture f;
  const std::vector<int64_t> rows = {0, 1, 2};
  const Batch b = make_batch(f.enc, rows, c.options);
  ASSERT_EQ(b.ids.dtype(), DType::i64);
  ASSERT_EQ(b.ids.shape(), (Shape{3, c.L}));
  ASSERT_EQ(b.lengths.shape(), (Shape{3}));
  ASSERT_EQ(b.labels.shape(), (Shape{3}));
  for (int64_t i = 0; i < 3; ++i) {
    EXPECT_EQ(row(b.ids, i), c.ids[i]) << "row " << i;
    EXPECT_EQ(b.lengths.at({i}), c.lengths[i]);
  }
  EXPECT_EQ(b.labels.to_vector(), (std::vector<double>{0, 1, 1}));
  EXPECT_EQ(b.truncated, c.truncated);
}

// Ids: a=6 b=7 c=8 d=9 e=10 f=11; [PAD]=0 [CLS]=2 [SEP]=3.
INSTANTIATE_TEST_SUITE_P(
    Cases, MakeBatch,
    ::testing::Values(
        SeqCase{"cls_pad_to_8",
                {8, true, false, true},
                8,
                {{2, 6, 0, 0, 0, 0, 0, 0}, {2, 6, 7, 8, 0, 0, 0, 0}, {2, 6, 7, 8, 9, 10, 11, 0}},
                {2, 4, 7},
                0},
        SeqCase{"cls_truncate_at_4",
                {4, true, false, true},
                4,
                {{2, 6, 0, 0}, {2, 6, 7, 8}, {2, 6, 7, 8}},
                {2, 4, 4},
                1},
        SeqCase{"cls_sep_truncate_at_4",
                {4, true, true, true},
                4,
                {{2, 6, 3, 0}, {2, 6, 7, 3}, {2, 6, 7, 3}},
                {3, 4, 4},
                2},
        SeqCase{
            "no_specials_at_3", {3, false, false, true}, 3, {{6, 0, 0}, {6, 7, 8}, {6, 7, 8}}, {1, 3, 3}, 1},
        SeqCase{"pad_to_longest",
                {100, true, false, false},
                7,
                {{2, 6, 0, 0, 0, 0, 0}, {2, 6, 7, 8, 0, 0, 0}, {2, 6, 7, 8, 9, 10, 11}},
                {2, 4, 7},
                0}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(MakeBatchErrors, BadRowsAndLengths) {
  Fixture f;
  const std::vector<int64_t> bad = {0, 3};
  EXPECT_THROW(make_batch(f.enc, bad), Error);
  EXPECT_THROW(make_batch(f.enc, std::vector<int64_t>{}), Error);
  const std::vector<int64_t> ok = {0};
  EXPECT_THROW(make_batch(f.enc, ok, {1, true, false, true}), Error);  // no room after [CLS]
  EXPECT_THROW(make_pair_batch(f.enc, ok), Error);                     // not paired
}

TEST(MakeBatch, UnlabelledHasNoLabels) {
  Fixture f;
  for (Example& e : f.ds.examples) e.label = -1;
  const EncodedDataset enc = encode_dataset(f.ds, f.tok);
  const std::vector<int64_t> rows = {2, 0};
  const Batch b = make_batch(enc, rows);
  EXPECT_FALSE(b.labels.defined());
  EXPECT_EQ(b.ids.shape(), (Shape{2, 100}));
  EXPECT_EQ(b.ids.at({0, 6}), 11);  // row order follows `rows`
}

TEST(MakePairBatch, BosEosPaddingAndTruncation) {
  Dataset ds;
  ds.examples = {{"ab", "abc", -1, 0, 1}, {"abcdef", "a", -1, 0, 2}};
  const text::CharTokenizer tok(Vocab::from_tokens({"a", "b", "c", "d", "e", "f"}));
  EXPECT_THROW(encode_dataset(ds, tok), Error);  // pairs need a second tokenizer
  const EncodedDataset enc = encode_dataset(ds, tok, &tok);
  const std::vector<int64_t> rows = {0, 1};
  const PairBatch b = make_pair_batch(enc, rows, {5, 4, true});
  ASSERT_EQ(b.src.shape(), (Shape{2, 5}));
  ASSERT_EQ(b.tgt.shape(), (Shape{2, 4}));
  // src: tokens </s>(5); tgt: <s>(4) tokens </s>(5).
  EXPECT_EQ(row(b.src, 0), (std::vector<int64_t>{6, 7, 5, 0, 0}));
  EXPECT_EQ(row(b.src, 1), (std::vector<int64_t>{6, 7, 8, 9, 5}));
  EXPECT_EQ(row(b.tgt, 0), (std::vector<int64_t>{4, 6, 7, 5}));
  EXPECT_EQ(row(b.tgt, 1), (std::vector<int64_t>{4, 6, 5, 0}));
  EXPECT_EQ(b.src_lengths.to_vector(), (std::vector<double>{3, 5}));
  EXPECT_EQ(b.tgt_lengths.to_vector(), (std::vector<double>{4, 3}));
  EXPECT_EQ(b.src_truncated, 1);
  EXPECT_EQ(b.tgt_truncated, 1);
  const PairBatch tight = make_pair_batch(enc, rows, {64, 64, false});
  EXPECT_EQ(tight.src.shape(), (Shape{2, 7}));
  EXPECT_EQ(tight.tgt.shape(), (Shape{2, 5}));
  EXPECT_EQ(tight.src_truncated + tight.tgt_truncated, 0);
}

TEST(EpochBatches, SeededOrderCoversEveryRowOnce) {
  std::vector<int64_t> rows(103);
  std::iota(rows.begin(), rows.end(), 1000);
  const auto e0 = epoch_batches(rows, 10, 7, 0);
  ASSERT_EQ(e0.size(), 11u);
  EXPECT_EQ(e0.back().size(), 3u);
  std::vector<int64_t> all;
  for (const auto& b : e0) all.insert(all.end(), b.begin(), b.end());
  EXPECT_NE(all, rows);  // shuffled
  std::sort(all.begin(), all.end());
  EXPECT_EQ(all, rows);                          // every row once
  EXPECT_EQ(epoch_batches(rows, 10, 7, 0), e0);  // same seed and epoch
  EXPECT_NE(epoch_batches(rows, 10, 7, 1), e0);  // next epoch
  EXPECT_NE(epoch_batches(rows, 10, 8, 0), e0);  // other seed
  EXPECT_EQ(epoch_batches(rows, 10, 7, 0, true).size(), 10u);
  EXPECT_THROW(epoch_batches(rows, 0, 7, 0), Error);
}

TEST(BatchRealData, ReviewsAtLength100) {
  ATTN_REQUIRE_REAL_DATA("reviews-zh/pos.txt");
  const Dataset ds =
      deduplicate(read_text_files({{testing::real_data_path("reviews-zh/neg.txt"), 0, "neg"},
                                   {testing::real_data_path("reviews-zh/pos.txt"), 1, "pos"}}));
  const Split s = make_split(ds, {0.8, 0.1, 0.1, 1, true});
  std::vector<std::string> train_texts;
  for (const int64_t i : s.train) train_texts.push_back(ds.examples[i].text);
  const text::CharTokenizer tok = text::CharTokenizer::train(train_texts, {}, {2, 8000});
  EXPECT_LE(tok.vocab().size(), 8000);
  const EncodedDataset enc = encode_dataset(ds, tok);
  // Truncation count over the test set equals the number of texts with more
  // than 99 tokens; row lengths and padding agree with the token lists.
  const SequenceOptions o{100, true, false, true};
  const Batch b = make_batch(enc, s.test, o);
  ASSERT_EQ(b.ids.shape(), (Shape{static_cast<int64_t>(s.test.size()), 100}));
  int64_t expected_cut = 0;
  for (std::size_t i = 0; i < s.test.size(); ++i) {
    const int64_t n = static_cast<int64_t>(enc.text[s.test[i]].size());
    expected_cut += n > 99;
    const int64_t len = std::min<int64_t>(n + 1, 100);
    ASSERT_EQ(b.lengths.at({static_cast<int64_t>(i)}), len);
    ASSERT_EQ(b.ids.at({static_cast<int64_t>(i), 0}), Vocab::kCls);
    if (len < 100) {
      ASSERT_EQ(b.ids.at({static_cast<int64_t>(i), len}), Vocab::kPad);
    }
    ASSERT_NE(b.ids.at({static_cast<int64_t>(i), len - 1}), Vocab::kPad);
  }
  EXPECT_EQ(b.truncated, expected_cut);
  EXPECT_GT(expected_cut, 0);
  std::printf("reviews test split: %zu rows, %lld cut at L=100; vocab %lld; [UNK] %.3f%% of all tokens\n",
              s.test.size(), static_cast<long long>(b.truncated), static_cast<long long>(tok.vocab().size()),
              100.0 * static_cast<double>(enc.unknown_tokens) / static_cast<double>(enc.total_tokens));
}

}  // namespace
}  // namespace attn::data
