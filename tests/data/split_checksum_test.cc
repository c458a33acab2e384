// Issue 18, item 1 (the run folder's split file): a split carries a checksum over all of its fields;
// one changed index, seed or fraction is an error naming the checksum; version-1 splits still read.
#include <attn/core/error.h>
#include <attn/data/split.h>
#include <gtest/gtest.h>

#include <string>

namespace attn::data {
namespace {

Dataset small(int64_t n) {
  Dataset ds;
  for (int64_t i = 0; i < n; ++i) {
    Example e;
    e.text = "t";
    e.text += std::to_string(i);
    ds.examples.push_back(e);
  }
  return ds;
}

void expect_corrupt(const json::Value& v) {
  try {
    Split::from_json(v);
    ADD_FAILURE() << "no error for " << json::dump(v);
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("checksum"), std::string::npos) << e.what();
  }
}

TEST(SplitChecksum, ChangedFieldIsAnErrorAndVersionOneStillReads) {
  const Split s = make_split(small(40), {});
  const json::Value good = s.to_json();
  EXPECT_TRUE(Split::from_json(good) == s);
  json::Value moved = good;
  json::Value train = good.at("train");
  json::Value test = good.at("test");
  // swap the first train and test index: same counts, other split
  json::Value t2 = json::Value::array(), e2 = json::Value::array();
  for (std::size_t i = 0; i < train.size(); ++i) t2.push_back(i == 0 ? test.at(0) : train.at(i));
  for (std::size_t i = 0; i < test.size(); ++i) e2.push_back(i == 0 ? train.at(0) : test.at(i));
  moved.set("train", t2);
  moved.set("test", e2);
  expect_corrupt(moved);
  json::Value seed = good;
  seed.set("seed", json::Value::string("0x0000000000000002"));
  expect_corrupt(seed);
  json::Value v1 = good;
  v1.set("version", json::Value::integer(1));
  json::Value v1_clean = json::Value::object();
  for (const auto& [k, val] : v1.members())
    if (k != "checksum") v1_clean.set(k, val);
  EXPECT_TRUE(Split::from_json(v1_clean) == s);
}

}  // namespace
}  // namespace attn::data
