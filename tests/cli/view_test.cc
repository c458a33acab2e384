// Smoke test of `attn view` (the built binary, ATTN_CLI_PATH): the flags, the
// page and the export written atomically, the demos fed with explain's worked
// example, and errors reported as "attn view: error: ..." with nothing written.
// The library's behaviour (validation, heatmap, page, demos) is tested in tests/viz.
#include <attn/io/json.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "testing/cli_runner.h"
#include "testing/testing.h"

namespace {

namespace fs = std::filesystem;
using attn::testing::CliRun;
using attn::testing::run_attn;

fs::path temp_path(const std::string& name) {
  return fs::path(::testing::TempDir()) / ("attn_view_" + std::to_string(::getpid()) + "_" + name);
}

TEST(ViewCli, Smoke) {
  // The page: written atomically (no temporary file left next to it), the data embedded.
  const fs::path page = temp_path("demo.html");
  CliRun r = run_attn("view --demo -o '" + page.string() + "'");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("wrote " + page.string()), std::string::npos) << r.out;
  const std::string html = attn::testing::read_text(page.string());
  EXPECT_NE(html.find("id=\"attn-data\">"), std::string::npos);
  EXPECT_NE(html.find("今天"), std::string::npos);
  for (const auto& e : fs::directory_iterator(page.parent_path()))
    EXPECT_EQ(e.path().filename().string().find(page.filename().string() + ".tmp"), std::string::npos);

  // --demo is computed from `attn explain`'s example: heads 0 and 1 of layer 0 are
  // explain --multi-head's two heads (its query position is counted from 1).
  const fs::path demo = temp_path("demo.json");
  r = run_attn("view --demo --terminal --layer 1 --head 2 --save-export '" + demo.string() + "'");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out.rfind("self-attention, layer 1 of 0..1, head 2 of 0..3: 7 queries (rows) x 7 keys", 0), 0u)
      << r.out;
  const attn::json::Value e = attn::json::parse(attn::testing::read_text(demo.string()));
  const CliRun x = run_attn("explain --multi-head --json");
  ASSERT_EQ(x.status, 0) << x.err;
  const attn::json::Value ex = attn::json::parse(x.out);
  const std::size_t q = static_cast<std::size_t>(ex.at("query").at("position").as_int64());  // from 0
  const auto& layer0 = e.at("attention").at(std::size_t{0}).at(std::size_t{0});              // [H, N, N]
  EXPECT_EQ(layer0.size(), 4u);
  for (std::size_t h = 0; h < 2; ++h) {
    const auto& want = ex.at("head_weights").at(h);
    const auto& got = layer0.at(h).at(q);
    ASSERT_EQ(want.size(), got.size());
    for (std::size_t j = 0; j < want.size(); ++j)
      EXPECT_NEAR(got.at(j).as_double(), want.at(j).as_double(), 2e-6) << "head " << h << " key " << j;
  }
  // The saved export is a valid export (read back by `attn view`), here the translation demo's.
  const fs::path tr = temp_path("demo_translation.json");
  r = run_attn("view --demo-translation --terminal --set cross_attention --save-export '" + tr.string() +
               "'");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out.rfind("cross-attention, layer 0 of 0..1", 0), 0u) << r.out;
  r = run_attn("view '" + tr.string() + "' --terminal --set decoder_attention --layer 1 --head 3");
  EXPECT_EQ(r.status, 0) << r.err;

  // An invalid export: status 1, the reader's message, nothing printed or written.
  const fs::path bad = temp_path("bad.json"), bad_page = temp_path("bad.html");
  std::ofstream(bad) << "{\"tokens\":[\"a\",\"b\"],\"attention\":[[[[[0.5,0.4],[0.5,0.5]]]]]}";
  fs::remove(bad_page);
  r = run_attn("view '" + bad.string() + "' -o '" + bad_page.string() + "'");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find(
                "attn view: error: export: attention layer 0, head 0, row 0 (query 'a'): weights sum to 0.9"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.out, "");
  EXPECT_FALSE(fs::exists(bad_page)) << "no page may be written for an invalid export";
  r = run_attn("view '" + attn::testing::source_path("tests/io/data/bad/view_valid.export.json") +
               "' --terminal --layer 5");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("attn view: error: --layer: expected a layer in 0..0"), std::string::npos) << r.err;
  EXPECT_EQ(r.out, "");

  // A page in a missing folder: nothing is created.
  const fs::path missing = temp_path("no_such_dir") / "page.html";
  r = run_attn("view --demo -o '" + missing.string() + "'");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("cannot create the temporary file"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(missing.string()), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(missing.parent_path()));

  // Flags: exactly one source, and a page or the terminal.
  r = run_attn("view -o x.html");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("expected exactly one source"), std::string::npos) << r.err;
  r = run_attn("view --demo --demo-translation -o x.html");
  EXPECT_EQ(r.status, 1);
  r = run_attn("view --demo");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("expected -o FILE"), std::string::npos) << r.err;
  r = run_attn("view --demo -o x.html --layer 1");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("--layer is only used with --terminal"), std::string::npos) << r.err;
  r = run_attn("view --help");
  EXPECT_EQ(r.status, 0);
  EXPECT_NE(r.out.find("usage: attn view"), std::string::npos);
  for (const fs::path& p : {page, demo, tr, bad}) fs::remove(p);
}

}  // namespace

// ---- issue 17 (zh-view): --lang, --sentence, Chinese help ----------------------------------
namespace {

TEST(ViewCli, LangSentenceAndChineseHelp) {
  const fs::path page = temp_path("zh.html");
  CliRun r = run_attn("view --demo --lang zh --sentence 今天下雨，我没带伞 -o '" + page.string() + "'");
  ASSERT_EQ(r.status, 0) << r.err;
  // The split is said: by words with jieba's dictionary when it is installed, else by character.
  EXPECT_TRUE(r.out.find("按词切分（jieba 词典）") != std::string::npos ||
              r.out.find("按字切分：今 天 下 雨") != std::string::npos)
      << r.out;
  const std::string html = attn::testing::read_text(page.string());
  EXPECT_NE(html.find("id=\"attn-lang\">\"zh\"</script>"), std::string::npos);
  EXPECT_NE(html.find("今天下雨，我没带伞"), std::string::npos);
  r = run_attn("view --help --lang zh");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("页面的初始语言"), std::string::npos) << r.out;
  r = run_attn("view --demo --lang fr -o '" + page.string() + "'");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("fr"), std::string::npos) << r.err;
  r = run_attn("view --demo-translation --sentence 今天 -o '" + page.string() + "'");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("--sentence goes with --demo"), std::string::npos) << r.err;
}

}  // namespace
