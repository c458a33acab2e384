// `attn tutorial` with trained models: section 4 shows a translator's real
// cross-attention and section 5 a classifier's attention next to its
// attribution. Both models are trained here in about a second on small
// generated corpora (they are tiny and barely trained: the test checks the
// walk, not the models), in both languages with the same numbers.
#include <attn/io/json.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "testing/cli_runner.h"
#include "testing/lang_checks.h"

namespace {

namespace fs = std::filesystem;
using attn::json::Value;
using attn::testing::CliRun;
using attn::testing::run_attn;

std::string q(const fs::path& p) {
  std::string s = "'";
  s += p.string();
  return s += "'";
}

// English <TAB> Chinese <TAB> attribution: 4 subjects x 4 verbs x 5 objects.
void write_pairs(const fs::path& p) {
  const std::vector<std::pair<std::string, std::string>> subj = {
      {"I", "我"}, {"You", "你"}, {"We", "我们"}, {"They", "他们"}};
  const std::vector<std::pair<std::string, std::string>> verb = {
      {"bring", "带"}, {"want", "想要"}, {"see", "看见"}, {"buy", "买"}};
  const std::vector<std::pair<std::string, std::string>> obj = {
      {"umbrellas", "伞"}, {"books", "书"}, {"tea", "茶"}, {"water", "水"}, {"rice", "米饭"}};
  std::ofstream f(p, std::ios::binary);
  int n = 0;
  for (const auto& s : subj)
    for (const auto& v : verb)
      for (const auto& o : obj)
        f << s.first << " " << v.first << " " << o.first << ".\t" << s.second << v.second << o.second
          << "。\tCC-BY 2.0 (France) Attribution: generated #" << ++n << "\n";
}

// Reviews whose label is decided by one character (好 / 差) among filler characters.
void write_reviews(const fs::path& dir) {
  const std::vector<std::string> filler = {"质", "量", "物", "流", "包", "装", "价", "格", "也", "很"};
  uint64_t state = 11;
  auto next = [&] {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<std::size_t>(state >> 33);
  };
  for (const auto& [name, cue] : {std::pair<const char*, const char*>{"pos.txt", "好"}, {"neg.txt", "差"}}) {
    std::ofstream f(dir / name, std::ios::binary);
    for (int n = 0; n < 150; ++n) {
      std::string s;
      for (int i = 0; i < 12; ++i) s += i == 3 ? std::string(cue) : filler[next() % filler.size()];
      f << s << n % 10 << "\n";
    }
  }
}

class TutorialModels : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = fs::path(::testing::TempDir()) / ("attn_tutorial_models_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    write_pairs(dir_ / "pairs.txt");
    write_reviews(dir_);
    translate_ =
        run_attn("train translate --data " + q(dir_ / "pairs.txt") + " --out " + q(dir_ / "tr") +
                 " --preset micro --steps 20 --batch-size 16 --warmup 30 --max-len 16 --src-vocab 80 "
                 "--min-freq 1 --seed 3 --quiet");
    classify_ = run_attn("train classify --pos " + q(dir_ / "pos.txt") + " --neg " + q(dir_ / "neg.txt") +
                         " --out " + q(dir_ / "cl") +
                         " --epochs 1 --layers 1 --d-model 32 --heads 2 --batch-size 16 --seed 3 --quiet");
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }
  static fs::path dir_;
  static CliRun translate_, classify_;
};
fs::path TutorialModels::dir_;
CliRun TutorialModels::translate_, TutorialModels::classify_;

TEST_F(TutorialModels, SectionFourShowsTheTranslatorsCrossAttention) {
  ASSERT_EQ(translate_.status, 0) << translate_.err;
  const std::string args = "tutorial --section 4 --translation-model " + q(dir_ / "tr" / "model.attn");
  const CliRun en = run_attn(args + " --lang en"), zh = run_attn(args + " --lang zh");
  ASSERT_EQ(en.status, 0) << en.err;
  ASSERT_EQ(zh.status, 0) << zh.err;
  EXPECT_NE(en.out.find("Real cross-attention from the trained translator"), std::string::npos) << en.out;
  EXPECT_NE(zh.out.find("真实的交叉注意力"), std::string::npos) << zh.out;
  EXPECT_NE(en.out.find("cross-attention of the last decoder layer"), std::string::npos) << en.out;
  EXPECT_EQ(en.out.find("No trained translation model"), std::string::npos);
  EXPECT_EQ(attn::testing::sorted_numbers_in(en.out), attn::testing::sorted_numbers_in(zh.out));
  Value je = attn::json::parse(run_attn(args + " --lang en --json").out);
  Value jz = attn::json::parse(run_attn(args + " --lang zh --json").out);
  const Value& d = je.at("sections").at(0).at("data");
  EXPECT_FALSE(d.at("translation_model").is_null());
  EXPECT_FALSE(d.at("translation").is_null());
  je.set("lang", Value());
  jz.set("lang", Value());
  EXPECT_EQ(attn::json::dump(je), attn::json::dump(jz));
}

TEST_F(TutorialModels, SectionFiveSetsAttentionBesideAttribution) {
  ASSERT_EQ(classify_.status, 0) << classify_.err;
  const std::string args = "tutorial --section 5 --no-timing --classifier " + q(dir_ / "cl" / "model.attn");
  const CliRun en = run_attn(args + " --lang en"), zh = run_attn(args + " --lang zh");
  ASSERT_EQ(en.status, 0) << en.err;
  ASSERT_EQ(zh.status, 0) << zh.err;
  EXPECT_NE(en.out.find("Spearman rank correlation"), std::string::npos) << en.out;
  EXPECT_NE(zh.out.find("斯皮尔曼秩相关"), std::string::npos) << zh.out;
  EXPECT_EQ(attn::testing::sorted_numbers_in(en.out), attn::testing::sorted_numbers_in(zh.out));
  const Value j = attn::json::parse(run_attn(args + " --json").out);
  const Value& a = j.at("sections").at(0).at("data").at("attribution");
  ASSERT_FALSE(a.is_null());
  const auto& att = a.at("attention_last").items();
  ASSERT_EQ(att.size(), a.at("tokens").size());
  ASSERT_EQ(a.at("integrated_gradients").size(), a.at("tokens").size());
  double sum = 0;
  for (const auto& x : att) sum += x.as_double();
  EXPECT_NEAR(sum, 1.0, 1e-3);  // [CLS]'s attention over every token, mean over heads
  for (const char* rho : {"rho_last_ig", "rho_mean_ig"}) {
    EXPECT_GE(a.at(rho).as_double(), -1.0);
    EXPECT_LE(a.at(rho).as_double(), 1.0);
  }
}

}  // namespace
