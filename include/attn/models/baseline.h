// Baselines for text classification (naive Bayes, logistic regression), and the
// metrics every classifier report uses.
//
// NaiveBayes: multinomial naive Bayes over bag-of-token features (unigrams and,
// optionally, bigrams of adjacent tokens), with additive (Laplace/Lidstone)
// smoothing:
//
//   score(c | doc) = log P(c) + sum_f count(f, doc) · log((n(c, f) + alpha) / (N(c) + alpha · |F|))
//
// where P(c) is the class frequency in training, n(c, f) the count of feature f
// in training documents of class c, N(c) = sum_f n(c, f), and F the features seen
// in training. Features never seen in training are ignored. Scores are computed
// in double; ties go to the lower class id.
//
// classification_metrics: accuracy, per-class precision / recall / F1 (0 when
// undefined, as scikit-learn's zero_division=0), macro F1 and the confusion
// matrix [true class][predicted class].
#pragma once

#include <attn/io/json.h>

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace attn::models {

struct NaiveBayesOptions {
  double alpha = 1.0;   // additive smoothing (> 0)
  bool bigrams = true;  // adjacent token pairs as features, besides single tokens
};

// Features of one document: every token, then (with bigrams) every adjacent
// pair joined by U+0001 (a character no token contains).
std::vector<std::string> ngram_features(const std::vector<std::string>& tokens, bool bigrams);

class NaiveBayes {
 public:
  // docs: tokens per document; labels: class id in [0, num_classes) per document.
  // Throws attn::Error on size mismatch, labels out of range, no documents or alpha <= 0.
  static NaiveBayes train(const std::vector<std::vector<std::string>>& docs,
                          const std::vector<int32_t>& labels, int32_t num_classes,
                          const NaiveBayesOptions& options = {});

  // Unnormalised log posterior per class (see the formula above).
  std::vector<double> log_scores(const std::vector<std::string>& tokens) const;
  // Posterior probabilities (softmax of log_scores).
  std::vector<double> probabilities(const std::vector<std::string>& tokens) const;
  int32_t predict(const std::vector<std::string>& tokens) const;

  int32_t num_classes() const { return num_classes_; }
  int64_t num_features() const { return static_cast<int64_t>(index_.size()); }
  const NaiveBayesOptions& options() const { return options_; }

 private:
  NaiveBayesOptions options_;
  int32_t num_classes_ = 0;
  std::vector<double> log_prior_;                   // [classes]
  std::unordered_map<std::string, int64_t> index_;  // feature -> row of log_prob_
  std::vector<double> log_prob_;                    // [features, classes]
};

// LogisticRegression: multinomial (softmax) logistic regression over the same
// n-gram features (binary presence, each document's vector scaled to unit L2
// norm), with an L2 penalty on the weights (not on the biases):
//
//   minimise  (1/N) sum_d -log softmax(W x_d + b)[y_d]  +  (l2 / 2) |W|²
//
// trained by stochastic gradient descent over the documents in a seeded random
// order per epoch, step size lr / (1 + epoch). The weights are kept as a scale
// times a vector (the penalty shrinks the scale), so a step costs only the
// document's features. Single-threaded and seeded: the same data, options and
// seed give the same weights, bit for bit. Features seen in fewer than
// min_count training documents are dropped; unseen features are ignored.
struct LogisticRegressionOptions {
  bool bigrams = true;
  double l2 = 1e-5;       // >= 0
  double lr = 0.5;        // > 0
  int64_t epochs = 8;     // >= 1
  int64_t min_count = 1;  // >= 1
  uint64_t seed = 1;
};

class LogisticRegression {
 public:
  // docs, labels, num_classes as NaiveBayes::train; throws attn::Error on bad input.
  static LogisticRegression train(const std::vector<std::vector<std::string>>& docs,
                                  const std::vector<int32_t>& labels, int32_t num_classes,
                                  const LogisticRegressionOptions& options = {});

  // W x + b per class (x: the document's normalised feature vector).
  std::vector<double> logits(const std::vector<std::string>& tokens) const;
  std::vector<double> probabilities(const std::vector<std::string>& tokens) const;
  int32_t predict(const std::vector<std::string>& tokens) const;  // ties: the lower class id
  // The objective above on (docs, labels), for tests and reports.
  double objective(const std::vector<std::vector<std::string>>& docs,
                   const std::vector<int32_t>& labels) const;

  int32_t num_classes() const { return num_classes_; }
  int64_t num_features() const { return static_cast<int64_t>(index_.size()); }
  const LogisticRegressionOptions& options() const { return options_; }
  // Weight of feature `f` for class c (0 for an unknown feature); bias of class c.
  double weight(const std::string& f, int32_t c) const;
  double bias(int32_t c) const { return bias_.at(static_cast<std::size_t>(c)); }

 private:
  // Sorted feature rows of one document (unknown features dropped, duplicates merged).
  std::vector<int64_t> rows_of(const std::vector<std::string>& tokens) const;
  LogisticRegressionOptions options_;
  int32_t num_classes_ = 0;
  std::unordered_map<std::string, int64_t> index_;
  std::vector<double> weight_;  // [features, classes], already multiplied by the scale
  std::vector<double> bias_;    // [classes]
};

struct ClassMetrics {
  double precision = 0, recall = 0, f1 = 0;
  int64_t support = 0;  // true examples of the class
};

struct Metrics {
  int64_t count = 0;
  double accuracy = 0;
  double macro_f1 = 0;
  std::vector<ClassMetrics> per_class;
  std::vector<std::vector<int64_t>> confusion;  // [true][predicted]

  // {"count", "accuracy", "macro_f1", "per_class": [{"label", "precision", ...}], "confusion"}.
  json::Value to_json(const std::vector<std::string>& label_names) const;
};

// truth, predicted: class ids in [0, num_classes), same length (> 0).
Metrics classification_metrics(const std::vector<int32_t>& truth, const std::vector<int32_t>& predicted,
                               int32_t num_classes);

}  // namespace attn::models
