// Splits: same seed -> same split, different seed -> different; lists are
// disjoint and cover the data; stratified class proportions; save/load; the
// input hash refuses other data; a golden split from an independent
// implementation; real reviews after deduplication leak no text.
#include <attn/core/error.h>
#include <attn/data/split.h>
#include <gtest/gtest.h>

#include <cmath>

#include "text/text_test_util.h"

namespace attn::data {
namespace {

// n examples; class c for the first counts[0], then counts[1], ... (texts unique).
Dataset synthetic(const std::vector<int64_t>& counts) {
  Dataset ds;
  for (std::size_t c = 0; c < counts.size(); ++c) {
    ds.label_names.push_back("class" + std::to_string(c));
    for (int64_t i = 0; i < counts[c]; ++i) {
      Example e;
      e.text = "text " + std::to_string(ds.examples.size());
      e.label = static_cast<int32_t>(c);
      e.line = static_cast<int64_t>(ds.examples.size()) + 1;
      ds.examples.push_back(e);
    }
  }
  return ds;
}

Dataset unlabelled(int64_t n) {
  Dataset ds;
  for (int64_t i = 0; i < n; ++i) {
    Example e;
    e.text = "t" + std::to_string(i);
    ds.examples.push_back(e);
  }
  return ds;
}

struct SplitCase {
  const char* name;
  std::vector<int64_t> counts;  // per class; one entry with label_names cleared = unlabelled
  bool labelled;
  double train, valid, test;
  uint64_t seed;
};

class SplitProperties : public ::testing::TestWithParam<SplitCase> {};

TEST_P(SplitProperties, PartitionDeterminismAndProportions) {
  const SplitCase& c = GetParam();
  Dataset ds = synthetic(c.counts);
  if (!c.labelled) {
    ds.label_names.clear();
    for (Example& e : ds.examples) e.label = -1;
  }
  SplitOptions o{c.train, c.valid, c.test, c.seed, true};
  const Split s = make_split(ds, o);
  EXPECT_NO_THROW(check_split(s, ds));  // disjoint, sorted, in range, union = all
  EXPECT_EQ(static_cast<int64_t>(s.train.size() + s.valid.size() + s.test.size()), ds.size());
  EXPECT_EQ(s.stratified, c.labelled);
  // Same seed -> identical; different seed -> different.
  EXPECT_TRUE(make_split(ds, o) == s);
  SplitOptions other = o;
  other.seed = c.seed + 1;
  const Split t = make_split(ds, other);
  EXPECT_EQ(t.train.size(), s.train.size());  // counts do not depend on the seed
  if (ds.size() >= 20) {
    EXPECT_NE(t.train, s.train);
  }
  // Proportions: per class when stratified, each within one example of the target.
  const std::vector<int64_t>* lists[3] = {&s.train, &s.valid, &s.test};
  const double fr[3] = {c.train, c.valid, c.test};
  if (c.labelled) {
    for (std::size_t cls = 0; cls < c.counts.size(); ++cls) {
      for (int k = 0; k < 3; ++k) {
        const int64_t got = class_counts(ds, *lists[k])[cls];
        EXPECT_LE(std::fabs(static_cast<double>(got) - fr[k] * static_cast<double>(c.counts[cls])), 1.0)
            << "class " << cls << " list " << k;
      }
    }
  } else {
    for (int k = 0; k < 3; ++k) {
      EXPECT_LE(std::fabs(static_cast<double>(lists[k]->size()) - fr[k] * static_cast<double>(ds.size())),
                1.0);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, SplitProperties,
                         ::testing::Values(SplitCase{"balanced", {500, 500}, true, 0.8, 0.1, 0.1, 1},
                                           SplitCase{"skewed", {900, 100}, true, 0.8, 0.1, 0.1, 2},
                                           SplitCase{"three_class", {37, 151, 12}, true, 0.7, 0.15, 0.15, 3},
                                           SplitCase{"tiny_class", {200, 3}, true, 0.8, 0.1, 0.1, 4},
                                           SplitCase{"no_test", {60, 40}, true, 0.9, 0.1, 0.0, 5},
                                           SplitCase{"unlabelled", {1000}, false, 0.8, 0.1, 0.1, 6},
                                           SplitCase{"odd_sizes", {13, 7}, true, 0.8, 0.1, 0.1, 7}),
                         [](const auto& info) { return std::string(info.param.name); });

// 10 unlabelled examples, seed 2024: the independent Python shuffle gives the
// order [2, 3, 8, 5, 6, 4, 1, 9, 7, 0]; 8 train, 1 valid, 1 test.
TEST(Split, GoldenFromIndependentImplementation) {
  const Split s = make_split(unlabelled(10), {0.8, 0.1, 0.1, 2024, true});
  EXPECT_EQ(s.train, (std::vector<int64_t>{1, 2, 3, 4, 5, 6, 8, 9}));
  EXPECT_EQ(s.valid, (std::vector<int64_t>{7}));
  EXPECT_EQ(s.test, (std::vector<int64_t>{0}));
  EXPECT_FALSE(s.stratified);
}

TEST(Split, SaveLoadAndHashCheck) {
  const Dataset ds = synthetic({120, 80});
  const Split s = make_split(ds, {0.8, 0.1, 0.1, 99, true});
  testing::TempDir dir;
  s.save(dir.path("split.json"));
  const Split back = Split::load(dir.path("split.json"));
  EXPECT_TRUE(back == s);
  EXPECT_NO_THROW(check_split(back, ds));
  EXPECT_NE(s.describe().find("train 160, valid 20, test 20"), std::string::npos) << s.describe();
  // One changed character in one example changes the hash: the split is refused.
  Dataset changed = ds;
  changed.examples[17].text += "!";
  try {
    check_split(back, changed);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("hash"), std::string::npos) << e.what();
  }
  // A changed label does too.
  changed = ds;
  changed.examples[3].label = 1;
  EXPECT_THROW(check_split(back, changed), Error);
  // Tampered lists are caught.
  Split bad = s;
  bad.test.push_back(bad.train.front());
  std::sort(bad.test.begin(), bad.test.end());
  EXPECT_THROW(check_split(bad, ds), Error);
  bad = s;
  bad.valid.pop_back();
  EXPECT_THROW(check_split(bad, ds), Error);
  // Malformed files.
  EXPECT_THROW(Split::load(dir.file("x.json", "{\"format\": \"other\"}")), Error);
  EXPECT_THROW(Split::load(dir.path("missing.json")), Error);
}

TEST(Split, BadFractions) {
  const Dataset ds = synthetic({10});
  EXPECT_THROW(make_split(ds, {0.8, 0.1, 0.2, 1, true}), Error);
  EXPECT_THROW(make_split(ds, {1.1, -0.1, 0.0, 1, true}), Error);
  EXPECT_THROW(make_split(Dataset{}, {}), Error);
}

TEST(SplitRealData, DedupedReviewsHaveNoLeakage) {
  ATTN_REQUIRE_REAL_DATA("reviews-zh/pos.txt");
  const Dataset raw = read_text_files({{testing::real_data_path("reviews-zh/neg.txt"), 0, "neg"},
                                       {testing::real_data_path("reviews-zh/pos.txt"), 1, "pos"}});
  const Split leaky = make_split(raw, {0.8, 0.1, 0.1, 1, true});
  const int64_t leaked = count_text_overlap(raw, leaky.train, leaky.test);
  const Dataset ds = deduplicate(raw);
  const Split s = make_split(ds, {0.8, 0.1, 0.1, 1, true});
  check_split(s, ds);
  EXPECT_EQ(count_text_overlap(ds, s.train, s.test), 0);
  EXPECT_EQ(count_text_overlap(ds, s.train, s.valid), 0);
  EXPECT_GT(leaked, 0);  // without deduplication, test texts also sit in train
  std::printf("%s\nwithout dedup: %lld of %zu test examples have their text in train\n", s.describe().c_str(),
              static_cast<long long>(leaked), leaky.test.size());
}

}  // namespace
}  // namespace attn::data
