// Issue 18, item 2 (outputs): a NaN weight that reaches an output is an error before the output is
// returned: the classifier's probabilities (it printed "p = nan" with exit 0) and the generation
// logits (greedy and beam search). The weights are poisoned in memory, past the load-time check.
#include <attn/core/error.h>
#include <attn/models/generate.h>
#include <attn/models/text_classifier.h>
#include <attn/models/transformer.h>
#include <attn/text/tokenizer.h>

#include <cmath>
#include <string>
#include <vector>

#include "testing/testing.h"

namespace attn {
namespace {

void poison_first_bias(const NamedParams& ps, const std::string& module) {
  for (const auto& [name, p] : ps)
    if (name.find(module) != std::string::npos && p.shape().size() == 1) {
      Tensor t = p;
      t.data<float>()[0] = NAN;
      return;
    }
  FAIL() << "no 1-D parameter of " << module;
}

TEST(NonFiniteOutput, ClassifierProbabilityIsAnError) {
  const std::vector<std::string> texts = {"很好", "太差了"};
  text::CharTokenizer tok = text::CharTokenizer::train(texts, {});
  models::TransformerConfig c = models::TransformerConfig::preset("micro");
  c.src_vocab = tok.vocab().size();
  c.num_classes = 2;
  c.max_len = 16;
  models::TextClassifier clf(c, tok, {"neg", "pos"}, 12);
  EXPECT_NO_THROW(clf.classify(texts));
  poison_first_bias(clf.model().named_parameters(), "classifier");
  EXPECT_ERROR_CONTAINS(clf.classify(texts), {"probability of class 0", "text 1", "nan", "finite"});
}

TEST(NonFiniteOutput, GenerationLogitsAreAnError) {
  models::TransformerConfig c = models::TransformerConfig::preset("micro");
  models::DecoderLM lm(c);
  poison_first_bias(lm.named_parameters(), "decoder");
  for (const auto search : {models::SearchKind::greedy, models::SearchKind::beam}) {
    models::GenerateOptions o;
    o.max_new_tokens = 4;
    o.search = search;
    EXPECT_ERROR_CONTAINS(models::generate(lm, {{1, 7, 9}}, o),
                          {"generate: the logits of row 0 at step 0", "nan"});
  }
}

}  // namespace
}  // namespace attn
