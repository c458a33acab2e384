#include <attn/core/error.h>
#include <attn/core/random.h>
#include <attn/models/baseline.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace attn::models {

std::vector<std::string> ngram_features(const std::vector<std::string>& tokens, bool bigrams) {
  std::vector<std::string> out(tokens.begin(), tokens.end());
  if (bigrams)
    for (std::size_t i = 0; i + 1 < tokens.size(); ++i) out.push_back(tokens[i] + '\x01' + tokens[i + 1]);
  return out;
}

NaiveBayes NaiveBayes::train(const std::vector<std::vector<std::string>>& docs,
                             const std::vector<int32_t>& labels, int32_t num_classes,
                             const NaiveBayesOptions& options) {
  ATTN_CHECK(!docs.empty(), "NaiveBayes: no training documents");
  ATTN_CHECK(docs.size() == labels.size(), "NaiveBayes: ", docs.size(), " documents but ", labels.size(),
             " labels");
  ATTN_CHECK(num_classes >= 2, "NaiveBayes: expected at least 2 classes; got ", num_classes);
  ATTN_CHECK(options.alpha > 0 && std::isfinite(options.alpha), "NaiveBayes: alpha must be > 0; got ",
             options.alpha);
  NaiveBayes nb;
  nb.options_ = options;
  nb.num_classes_ = num_classes;
  const auto C = static_cast<std::size_t>(num_classes);
  std::vector<int64_t> doc_count(C, 0);
  std::vector<double> counts;  // [features, classes]
  std::vector<double> total(C, 0.0);
  for (std::size_t d = 0; d < docs.size(); ++d) {
    const int32_t y = labels[d];
    ATTN_CHECK(y >= 0 && y < num_classes, "NaiveBayes: label of document ", d, " must be in [0, ",
               num_classes, "); got ", y);
    ++doc_count[y];
    for (const auto& f : ngram_features(docs[d], options.bigrams)) {
      auto [it, added] = nb.index_.try_emplace(f, static_cast<int64_t>(nb.index_.size()));
      if (added) counts.resize(counts.size() + C, 0.0);
      counts[static_cast<std::size_t>(it->second) * C + y] += 1.0;
      total[y] += 1.0;
    }
  }
  const double n_features = static_cast<double>(nb.index_.size());
  nb.log_prior_.resize(C);
  for (std::size_t c = 0; c < C; ++c)
    nb.log_prior_[c] = doc_count[c] > 0 ? std::log(static_cast<double>(doc_count[c]) / docs.size())
                                        : -std::numeric_limits<double>::infinity();
  nb.log_prob_.resize(counts.size());
  for (std::size_t i = 0; i < counts.size(); ++i) {
    const std::size_t c = i % C;
    nb.log_prob_[i] = std::log((counts[i] + options.alpha) / (total[c] + options.alpha * n_features));
  }
  return nb;
}

std::vector<double> NaiveBayes::log_scores(const std::vector<std::string>& tokens) const {
  ATTN_CHECK(num_classes_ > 0, "NaiveBayes: not trained");
  const auto C = static_cast<std::size_t>(num_classes_);
  std::vector<double> s = log_prior_;
  for (const auto& f : ngram_features(tokens, options_.bigrams)) {
    const auto it = index_.find(f);
    if (it == index_.end()) continue;
    const double* row = &log_prob_[static_cast<std::size_t>(it->second) * C];
    for (std::size_t c = 0; c < C; ++c) s[c] += row[c];
  }
  return s;
}

std::vector<double> NaiveBayes::probabilities(const std::vector<std::string>& tokens) const {
  std::vector<double> s = log_scores(tokens);
  const double m = *std::max_element(s.begin(), s.end());
  double sum = 0;
  for (double& v : s) sum += (v = std::exp(v - m));
  for (double& v : s) v /= sum;
  return s;
}

int32_t NaiveBayes::predict(const std::vector<std::string>& tokens) const {
  const std::vector<double> s = log_scores(tokens);
  return static_cast<int32_t>(std::max_element(s.begin(), s.end()) - s.begin());
}

// ---- logistic regression ---------------------------------------------------------------------

namespace {

void softmax_in_place(std::vector<double>& s) {
  const double m = *std::max_element(s.begin(), s.end());
  double sum = 0;
  for (double& v : s) sum += (v = std::exp(v - m));
  for (double& v : s) v /= sum;
}

}  // namespace

std::vector<int64_t> LogisticRegression::rows_of(const std::vector<std::string>& tokens) const {
  std::vector<int64_t> rows;
  for (const auto& f : ngram_features(tokens, options_.bigrams)) {
    const auto it = index_.find(f);
    if (it != index_.end()) rows.push_back(it->second);
  }
  std::sort(rows.begin(), rows.end());
  rows.erase(std::unique(rows.begin(), rows.end()), rows.end());
  return rows;
}

LogisticRegression LogisticRegression::train(const std::vector<std::vector<std::string>>& docs,
                                             const std::vector<int32_t>& labels, int32_t num_classes,
                                             const LogisticRegressionOptions& options) {
  ATTN_CHECK(!docs.empty(), "LogisticRegression: no training documents");
  ATTN_CHECK(docs.size() == labels.size(), "LogisticRegression: ", docs.size(), " documents but ",
             labels.size(), " labels");
  ATTN_CHECK(num_classes >= 2, "LogisticRegression: expected at least 2 classes; got ", num_classes);
  ATTN_CHECK(options.l2 >= 0 && std::isfinite(options.l2), "LogisticRegression: l2 must be >= 0; got ",
             options.l2);
  ATTN_CHECK(options.lr > 0 && std::isfinite(options.lr), "LogisticRegression: lr must be > 0; got ",
             options.lr);
  ATTN_CHECK(options.epochs >= 1 && options.min_count >= 1,
             "LogisticRegression: epochs and min_count must be >= 1; got ", options.epochs, " and ",
             options.min_count);
  LogisticRegression lr;
  lr.options_ = options;
  lr.num_classes_ = num_classes;
  const auto C = static_cast<std::size_t>(num_classes);
  // Document frequency of each feature, in order of first appearance (deterministic ids).
  {
    std::unordered_map<std::string, int64_t> df;
    std::vector<std::string> order;
    for (std::size_t d = 0; d < docs.size(); ++d) {
      ATTN_CHECK(labels[d] >= 0 && labels[d] < num_classes, "LogisticRegression: label of document ", d,
                 " must be in [0, ", num_classes, "); got ", labels[d]);
      std::vector<std::string> f = ngram_features(docs[d], options.bigrams);
      std::sort(f.begin(), f.end());
      f.erase(std::unique(f.begin(), f.end()), f.end());
      for (auto& x : f) {
        auto [it, added] = df.try_emplace(x, 0);
        if (added) order.push_back(x);
        ++it->second;
      }
    }
    for (const auto& x : order)
      if (df[x] >= options.min_count) lr.index_.emplace(x, static_cast<int64_t>(lr.index_.size()));
  }
  std::vector<std::vector<int64_t>> rows(docs.size());
  for (std::size_t d = 0; d < docs.size(); ++d) rows[d] = lr.rows_of(docs[d]);

  // w = scale * v; the penalty's shrink multiplies the scale, a step touches only the document's rows.
  std::vector<double> v(lr.index_.size() * C, 0.0);
  lr.bias_.assign(C, 0.0);
  double scale = 1.0;
  std::vector<std::size_t> order(docs.size());
  std::iota(order.begin(), order.end(), 0);
  std::vector<double> p(C);
  for (int64_t epoch = 0; epoch < options.epochs; ++epoch) {
    Rng rng(mix_seed(options.seed, static_cast<uint64_t>(epoch)));
    rng.shuffle(order);
    const double eta = options.lr / (1.0 + static_cast<double>(epoch));
    for (std::size_t d : order) {
      const std::vector<int64_t>& r = rows[d];
      const double x = r.empty() ? 0.0 : 1.0 / std::sqrt(static_cast<double>(r.size()));
      for (std::size_t c = 0; c < C; ++c) {
        double z = lr.bias_[c];
        for (int64_t f : r) z += scale * v[static_cast<std::size_t>(f) * C + c] * x;
        p[c] = z;
      }
      softmax_in_place(p);
      p[static_cast<std::size_t>(labels[d])] -= 1.0;  // dLoss/dz
      scale *= 1.0 - eta * options.l2;
      for (std::size_t c = 0; c < C; ++c) {
        lr.bias_[c] -= eta * p[c];
        const double g = eta * p[c] * x / scale;
        for (int64_t f : r) v[static_cast<std::size_t>(f) * C + c] -= g;
      }
      if (scale < 1e-9) {
        for (double& w : v) w *= scale;
        scale = 1.0;
      }
    }
  }
  for (double& w : v) w *= scale;
  lr.weight_ = std::move(v);
  return lr;
}

std::vector<double> LogisticRegression::logits(const std::vector<std::string>& tokens) const {
  ATTN_CHECK(num_classes_ > 0, "LogisticRegression: not trained");
  const auto C = static_cast<std::size_t>(num_classes_);
  const std::vector<int64_t> r = rows_of(tokens);
  const double x = r.empty() ? 0.0 : 1.0 / std::sqrt(static_cast<double>(r.size()));
  std::vector<double> z = bias_;
  for (int64_t f : r)
    for (std::size_t c = 0; c < C; ++c) z[c] += weight_[static_cast<std::size_t>(f) * C + c] * x;
  return z;
}

std::vector<double> LogisticRegression::probabilities(const std::vector<std::string>& tokens) const {
  std::vector<double> z = logits(tokens);
  softmax_in_place(z);
  return z;
}

int32_t LogisticRegression::predict(const std::vector<std::string>& tokens) const {
  const std::vector<double> z = logits(tokens);
  return static_cast<int32_t>(std::max_element(z.begin(), z.end()) - z.begin());
}

double LogisticRegression::objective(const std::vector<std::vector<std::string>>& docs,
                                     const std::vector<int32_t>& labels) const {
  ATTN_CHECK(!docs.empty() && docs.size() == labels.size(), "LogisticRegression::objective: ", docs.size(),
             " documents and ", labels.size(), " labels");
  double loss = 0;
  for (std::size_t d = 0; d < docs.size(); ++d) {
    ATTN_CHECK(labels[d] >= 0 && labels[d] < num_classes_, "LogisticRegression::objective: label ", labels[d],
               " of document ", d, " outside [0, ", num_classes_, ")");
    std::vector<double> z = logits(docs[d]);
    const double m = *std::max_element(z.begin(), z.end());
    double sum = 0;
    for (double v : z) sum += std::exp(v - m);
    loss += m + std::log(sum) - z[static_cast<std::size_t>(labels[d])];
  }
  double w2 = 0;
  for (double w : weight_) w2 += w * w;
  return loss / static_cast<double>(docs.size()) + 0.5 * options_.l2 * w2;
}

double LogisticRegression::weight(const std::string& f, int32_t c) const {
  ATTN_CHECK(c >= 0 && c < num_classes_, "LogisticRegression::weight: class ", c, " outside [0, ",
             num_classes_, ")");
  const auto it = index_.find(f);
  return it == index_.end()
             ? 0.0
             : weight_[static_cast<std::size_t>(it->second) * static_cast<std::size_t>(num_classes_) +
                       static_cast<std::size_t>(c)];
}

Metrics classification_metrics(const std::vector<int32_t>& truth, const std::vector<int32_t>& predicted,
                               int32_t num_classes) {
  ATTN_CHECK(!truth.empty(), "metrics: no examples");
  ATTN_CHECK(truth.size() == predicted.size(), "metrics: ", truth.size(), " true labels but ",
             predicted.size(), " predictions");
  ATTN_CHECK(num_classes >= 1, "metrics: expected at least one class; got ", num_classes);
  const auto C = static_cast<std::size_t>(num_classes);
  Metrics m;
  m.count = static_cast<int64_t>(truth.size());
  m.confusion.assign(C, std::vector<int64_t>(C, 0));
  int64_t correct = 0;
  for (std::size_t i = 0; i < truth.size(); ++i) {
    ATTN_CHECK(truth[i] >= 0 && truth[i] < num_classes && predicted[i] >= 0 && predicted[i] < num_classes,
               "metrics: example ", i, " has class ids (true ", truth[i], ", predicted ", predicted[i],
               ") outside [0, ", num_classes, ")");
    ++m.confusion[truth[i]][predicted[i]];
    correct += truth[i] == predicted[i];
  }
  m.accuracy = static_cast<double>(correct) / m.count;
  m.per_class.resize(C);
  for (std::size_t c = 0; c < C; ++c) {
    int64_t tp = m.confusion[c][c], support = 0, predicted_c = 0;
    for (std::size_t k = 0; k < C; ++k) {
      support += m.confusion[c][k];
      predicted_c += m.confusion[k][c];
    }
    ClassMetrics& r = m.per_class[c];
    r.support = support;
    r.precision = predicted_c > 0 ? static_cast<double>(tp) / predicted_c : 0.0;
    r.recall = support > 0 ? static_cast<double>(tp) / support : 0.0;
    r.f1 = r.precision + r.recall > 0 ? 2 * r.precision * r.recall / (r.precision + r.recall) : 0.0;
    m.macro_f1 += r.f1 / static_cast<double>(C);
  }
  return m;
}

json::Value Metrics::to_json(const std::vector<std::string>& label_names) const {
  using json::Value;
  Value classes = Value::array();
  Value confusion_rows = Value::array();
  for (std::size_t c = 0; c < per_class.size(); ++c) {
    const std::string name = c < label_names.size() ? label_names[c] : std::to_string(c);
    classes.push_back(Value::object({{"label", Value::string(name)},
                                     {"precision", Value::number(per_class[c].precision)},
                                     {"recall", Value::number(per_class[c].recall)},
                                     {"f1", Value::number(per_class[c].f1)},
                                     {"support", Value::integer(per_class[c].support)}}));
    Value row = Value::array();
    for (int64_t v : confusion[c]) row.push_back(Value::integer(v));
    confusion_rows.push_back(row);
  }
  return Value::object({{"count", Value::integer(count)},
                        {"accuracy", Value::number(accuracy)},
                        {"macro_f1", Value::number(macro_f1)},
                        {"per_class", classes},
                        {"confusion", confusion_rows}});
}

}  // namespace attn::models
