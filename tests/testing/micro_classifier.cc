#include "testing/micro_classifier.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "testing/testing.h"

namespace attn::testing {

std::string save_micro_classifier(const MicroModelCase& c, const std::string& prefix) {
  text::CharTokenizer tok = text::CharTokenizer::train(kMicroTexts, {});
  models::TransformerConfig cfg = models::TransformerConfig::preset("micro");
  cfg.src_vocab = tok.vocab().size();
  cfg.num_classes = 2;
  cfg.encoder_layers = 2;
  cfg.heads = 4;
  cfg.kv_heads = c.kv_heads;
  cfg.pre_norm = c.pre_norm;
  cfg.positions = c.positions;
  cfg.activation = nn::Activation::gelu;
  cfg.max_len = 24;
  cfg.seed = 17;
  models::TextClassifier clf(cfg, tok, {"neg", "pos"}, 24);
  uint64_t seed = 900;
  for (auto& [name, p] : clf.model().named_parameters()) {
    if (name.find("bias") == std::string::npos && name.find("norm") == std::string::npos) continue;
    const bool w = name.ends_with("weight");
    p.detach().copy_from(random_uniform(p.shape(), ++seed, w ? 0.7 : -0.2, w ? 1.3 : 0.2));
  }
  const std::string path = (std::filesystem::path(::testing::TempDir()) /
                            (prefix + "_" + std::to_string(::getpid()) + "_" + c.name + ".attn"))
                               .string();
  clf.save(path);
  return path;
}

std::vector<int64_t> micro_ids_of(models::TextClassifier& clf, const std::string& text) {
  const auto c = clf.classify({text}, false).at(0);
  std::vector<int64_t> ids = {text::Vocab::kCls};
  for (std::size_t t = 1; t < c.tokens.size(); ++t) ids.push_back(clf.tokenizer().vocab().id(c.tokens[t]));
  return ids;
}

std::vector<double> json_numbers(const json::Value& a) {
  std::vector<double> v;
  for (const auto& x : a.items()) v.push_back(x.as_double());
  return v;
}

}  // namespace attn::testing
