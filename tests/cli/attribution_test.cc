// Tests of `attn classify --explain` and `attn explain --model` as commands:
// the binary's text, JSON and viewer export (the export is built by the CLI,
// classify_explain.cc), and the errors of their flags (exit status 1). The
// report's numbers are tested on the library in tests/teach/attribution_test.cc.
#include <attn/core/autograd.h>
#include <attn/io/json.h>
#include <attn/models/attribution.h>
#include <attn/models/text_classifier.h>
#include <attn/ops/basic.h>
#include <attn/ops/nn_functional.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

#include "testing/cli_runner.h"
#include "testing/micro_classifier.h"
#include "testing/testing.h"

namespace attn {
namespace {

namespace fs = std::filesystem;
using attn::testing::CliRun;
using attn::testing::run_attn;
using models::TextClassifier;
using models::TransformerConfig;

using ModelCase = testing::MicroModelCase;
const std::vector<std::string>& kTexts = testing::kMicroTexts;
const std::string kSentence = "质量很好，物流也快";

fs::path temp_path(const std::string& name) {
  return fs::path(::testing::TempDir()) / ("attn_attrib_" + std::to_string(::getpid()) + "_" + name);
}

void expect_near(const std::vector<double>& a, const std::vector<double>& b, double tol,
                 const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (std::size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], tol) << what << " [" << i << "]";
}

class ClassifyExplainCli : public ::testing::TestWithParam<ModelCase> {};

TEST_P(ClassifyExplainCli, TextJsonAndExportForTheViewer) {
  const std::string path = testing::save_micro_classifier(GetParam(), "attn_attrib");
  const fs::path exp = temp_path(GetParam().name + "_export.json"),
                 page = temp_path(GetParam().name + ".html");
  const CliRun r = run_attn("classify --model '" + path + "' --explain --export '" + exp.string() + "' '" +
                            kSentence + "'");
  ASSERT_EQ(r.status, 0) << r.err;
  for (const char* s : {"Attention next to attribution", "attention of [CLS]", "input×grad", "Spearman",
                        "completeness error", "Attention is not explanation", "attn view"})
    EXPECT_NE(r.out.find(s), std::string::npos) << s << " in\n" << r.out;
  // The first ranked row is the character with the largest |IG|.
  auto clf = TextClassifier::load(path);
  const std::vector<int64_t> ids = testing::micro_ids_of(*clf, kSentence);
  models::AttributionOptions o;
  o.keep = {0};  // the report's baseline keeps [CLS] (teach::AttributionReportOptions::keep_special)
  const models::Attribution a = models::attribute(clf->model(), ids, o);
  const auto best = std::max_element(a.integrated_gradients.begin(), a.integrated_gradients.end(),
                                     [](double x, double y) { return std::fabs(x) < std::fabs(y); }) -
                    a.integrated_gradients.begin();
  const auto tokens = clf->classify({kSentence}, false).at(0).tokens;
  std::istringstream lines(r.out);
  std::string line;
  while (std::getline(lines, line) && line.find("----  --") == std::string::npos) {
  }
  ASSERT_TRUE(std::getline(lines, line));
  std::istringstream first(line);
  std::string rank, pos, tok;
  first >> rank >> pos >> tok;
  EXPECT_EQ(rank, "1");
  EXPECT_EQ(pos, std::to_string(best));
  EXPECT_EQ(tok, tokens[best]);
  // The export: every layer's [1, H, L, L] attention, its row 0 is [CLS]'s, and the attribution.
  const json::Value e = json::parse(testing::read_text(exp));
  const std::size_t L = ids.size();
  ASSERT_EQ(e.at("tokens").size(), L);
  ASSERT_EQ(e.at("attention").size(), a.cls_attention.size());
  for (std::size_t l = 0; l < a.cls_attention.size(); ++l) {
    const json::Value& heads = e.at("attention").at(l).at(std::size_t{0});
    std::vector<double> row0(L, 0.0);
    for (const auto& h : heads.items()) {
      ASSERT_EQ(h.size(), L);
      const auto r0 = testing::json_numbers(h.at(std::size_t{0}));
      for (std::size_t j = 0; j < L; ++j) row0[j] += r0[j] / static_cast<double>(heads.size());
    }
    expect_near(row0, a.cls_attention[l], 1e-6, "export row 0, layer " + std::to_string(l));
  }
  const json::Value& at = e.at("attribution");
  EXPECT_EQ(at.at("target").as_string(), a.target == 1 ? "pos" : "neg");
  expect_near(testing::json_numbers(at.at("methods").at("ig")), a.integrated_gradients, 1e-6, "export ig");
  expect_near(testing::json_numbers(at.at("methods").at("input_x_grad")), a.input_x_grad, 1e-6,
              "export input_x_grad");
  // attn view accepts it.
  const CliRun v = run_attn("view '" + exp.string() + "' -o '" + page.string() + "'");
  EXPECT_EQ(v.status, 0) << v.err;
  EXPECT_TRUE(fs::exists(page));
  // --json: classify's result with the report under "explain".
  const CliRun j = run_attn("classify --model '" + path + "' --explain --steps 16 --target pos --json '" +
                            kSentence + "'");
  ASSERT_EQ(j.status, 0) << j.err;
  const json::Value doc = json::parse(j.out);
  const json::Value& ex = doc.at("results").at(std::size_t{0}).at("explain");
  EXPECT_EQ(ex.at("target").as_string(), "pos");
  EXPECT_EQ(ex.at("tokens").size(), ids.size());
  EXPECT_EQ(ex.at("attribution").at("steps").as_int64(), 16);
}

INSTANTIATE_TEST_SUITE_P(Models, ClassifyExplainCli,
                         ::testing::Values(ModelCase{"prenorm_learned", true, models::Positions::learned, 0},
                                           ModelCase{"postnorm_sinusoidal", false,
                                                     models::Positions::sinusoidal, 0},
                                           ModelCase{"prenorm_rope_gqa", true, models::Positions::rope, 2}),
                         [](const auto& info) { return info.param.name; });

TEST(ClassifyExplainErrors, BadOptionsAreRefused) {
  const std::string path =
      testing::save_micro_classifier({"errors", true, models::Positions::learned, 0}, "attn_attrib");
  struct Bad {
    std::string args;
    std::vector<std::string> expected;
  };
  const std::vector<Bad> cases = {
      {"classify --model '" + path + "' --steps 8 好", {"--steps only applies with --explain"}},
      {"classify --model '" + path + "' --explain --target maybe 好", {"--target", "neg, pos", "maybe"}},
      {"classify --model '" + path + "' --explain --baseline mean 好", {"pad", "zeros", "mean"}},
      {"classify --model '" + path + "' --explain --steps 0 好", {"--steps"}},
      {"classify --model '" + path + "' --explain --export x.json 好 差", {"--export", "one text", "got 2"}},
      {"explain --model '" + path + "' 好 --layer 2", {"--layer"}},
      {"explain --model '" + path + "' 好 --head 4", {"--head"}},
      {"explain --model '" + path + "' 好 --word 猫", {"--word", "猫"}},
      {"explain --model '" + path + "' 好 --word 9", {"--word", "[0, 1]", "9"}},
      {"explain --model '" + path + "'", {"--model needs one sentence"}},
      {"explain 好", {"unexpected argument", "--model"}},
      {"explain --layer 1", {"--layer", "--model"}},
      {"explain --model /no/such/file.attn 好", {"not found"}},
  };
  for (const auto& c : cases) {
    const CliRun r = run_attn(c.args);
    EXPECT_EQ(r.status, 1) << c.args << "\n" << r.out;
    for (const auto& e : c.expected) EXPECT_NE(r.err.find(e), std::string::npos) << c.args << ": " << r.err;
  }
}

}  // namespace
}  // namespace attn
