// tasks::train_classifier's data (see classify_train_internal.h): the examples read and deduplicated,
// the second test set, the split and character vocabulary of the from-scratch model, its
// length-bucketed batches and evaluation, and the baselines trained on the same split.
#include <attn/core/autograd.h>
#include <attn/core/error.h>
#include <attn/core/random.h>
#include <attn/data/batch.h>
#include <attn/data/reader.h>
#include <attn/data/split.h>
#include <attn/models/baseline.h>
#include <attn/models/text_classifier.h>

#include <algorithm>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include "tasks/classify_train_internal.h"
#include "tasks/util.h"

namespace attn::tasks::classify_detail {

using detail::Clock;
using detail::seconds_since;

// ---- data --------------------------------------------------------------------------------------

namespace {

data::TableFormat table_format(const ClassifyTrainOptions& s) {
  std::string f = s.format;
  if (f.empty()) {
    const std::string ext = fs::path(s.data).extension().string();
    f = ext == ".tsv" ? "tsv" : ext == ".csv" ? "csv" : ext == ".jsonl" ? "jsonl" : "";
    ATTN_CHECK(!f.empty(), "cannot tell the format of '", s.data,
               "' from its name; give --format tsv|csv|jsonl");
  }
  if (f == "tsv") return data::TableFormat::tsv;
  if (f == "csv") return data::TableFormat::csv;
  ATTN_CHECK(f == "jsonl", "--format must be tsv, csv or jsonl; got '", f, "'");
  return data::TableFormat::jsonl;
}

}  // namespace

LoadedData load_data(ClassifyTrainOptions& s) {
  LoadedData d;
  data::ReadOptions ro;
  ro.normalize.lowercase_ascii = true;
  ro.max_chars = s.max_chars;
  if (!s.data.empty()) {
    data::TableSpec spec;
    spec.format = table_format(s);
    spec.text_column = s.text_column;
    spec.label_column = s.label_column;
    spec.max_classes = 2;
    d.raw = data::read_table(s.data, spec, ro);
    d.sources = {s.data};
    ATTN_CHECK(d.raw.label_names.size() == 2, s.data, ": the label column '", s.label_column,
               "' must hold exactly two classes; found ", d.raw.label_names.size(),
               d.raw.label_names.size() == 1 ? " ('" + d.raw.label_names[0] + "')" : std::string());
  } else {
    if (s.pos.empty()) {
      const std::string dir = data::find_data_dir({"reviews-zh/pos.txt", "reviews-zh/neg.txt"}, "review data",
                                                  "or give --pos FILE --neg FILE, or --data FILE");
      s.pos = (fs::path(dir) / "reviews-zh" / "pos.txt").string();
      s.neg = (fs::path(dir) / "reviews-zh" / "neg.txt").string();
    }
    d.raw = data::read_text_files({{s.neg, 0, "neg"}, {s.pos, 1, "pos"}}, ro);
    d.sources = {s.neg, s.pos};
  }
  d.dataset = data::deduplicate(d.raw, &d.dedup);
  const std::vector<int64_t> counts = d.dataset.class_counts();
  for (std::size_t c = 0; c < counts.size(); ++c)
    ATTN_CHECK(counts[c] >= 10, "class '", d.dataset.label_names[c], "' has ", counts[c],
               " distinct examples after deduplication; expected at least 10 per class");
  return d;
}

// ---- batches ------------------------------------------------------------------------------------

// Length-bucketed batches for one epoch: the rows in a seeded random order are
// cut into pools of 50 batches, each pool is sorted by length and cut into
// batches, and the batches are shuffled; a batch is padded to its longest row.
std::vector<std::vector<int64_t>> bucketed_batches(const std::vector<int64_t>& rows,
                                                   const std::vector<int64_t>& length, int64_t batch_size,
                                                   uint64_t seed, int64_t epoch) {
  std::vector<int64_t> order = rows;
  Rng rng(mix_seed(seed, static_cast<uint64_t>(epoch)));
  rng.shuffle(order);
  std::vector<std::vector<int64_t>> batches;
  const std::size_t pool = static_cast<std::size_t>(batch_size) * 50;
  for (std::size_t p0 = 0; p0 < order.size(); p0 += pool) {
    const auto p1 = std::min(order.size(), p0 + pool);
    std::stable_sort(order.begin() + p0, order.begin() + p1,
                     [&](int64_t a, int64_t b) { return length[a] < length[b]; });
    for (std::size_t b0 = p0; b0 < p1; b0 += batch_size)
      batches.emplace_back(order.begin() + b0, order.begin() + std::min(p1, b0 + batch_size));
  }
  rng.shuffle(batches);
  return batches;
}

EvalResult evaluate(models::EncoderClassifier& model, const data::EncodedDataset& enc,
                    const std::vector<int64_t>& rows, const std::vector<int64_t>& length, int64_t max_len) {
  NoGradGuard ng;
  model.eval();
  std::vector<int64_t> order(rows.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return length[rows[a]] < length[rows[b]]; });
  EvalResult r;
  r.predicted.assign(rows.size(), -1);
  r.truth.resize(rows.size());
  data::SequenceOptions so;
  so.max_len = max_len;
  so.pad_to_max = false;
  double loss_sum = 0;
  int64_t correct = 0;
  for (std::size_t b0 = 0; b0 < order.size(); b0 += 128) {
    std::vector<int64_t> batch_rows;
    for (std::size_t i = b0; i < std::min(order.size(), b0 + 128); ++i) batch_rows.push_back(rows[order[i]]);
    data::Batch b = data::make_batch(enc, batch_rows, so);
    const Tensor lens = b.lengths;
    std::vector<int64_t> lengths(lens.data<int64_t>(), lens.data<int64_t>() + lens.numel());
    models::ModelOutput o = model.forward(b.ids, lengths, b.labels);
    loss_sum += o.loss.to_vector()[0] * static_cast<double>(batch_rows.size());
    const Tensor logits = o.logits.contiguous();
    for (std::size_t i = 0; i < batch_rows.size(); ++i) {
      const auto k = static_cast<std::size_t>(order[b0 + i]);
      int32_t best = 0;
      for (int64_t c = 1; c < logits.size(1); ++c)
        if (logits.at({static_cast<int64_t>(i), c}) > logits.at({static_cast<int64_t>(i), best}))
          best = static_cast<int32_t>(c);
      r.predicted[k] = best;
      r.truth[k] = enc.labels[batch_rows[i]];
      correct += best == r.truth[k];
    }
  }
  r.loss = loss_sum / static_cast<double>(rows.size());
  r.accuracy = static_cast<double>(correct) / static_cast<double>(rows.size());
  return r;
}

namespace {

models::LogisticRegressionOptions lr_options(uint64_t seed) {
  models::LogisticRegressionOptions o;
  o.seed = seed;
  return o;
}

}  // namespace

Baseline train_baseline(const data::Dataset& ds, const data::Split& split,
                        const text::CharTokenizerOptions& to, const data::Dataset* eval_set, uint64_t seed) {
  const auto t_nb = Clock::now();
  auto tokens_of = [&](int64_t i) { return text::char_tokenize(ds.examples[i].text, to); };
  std::vector<std::vector<std::string>> nb_docs;
  std::vector<int32_t> nb_labels;
  for (int64_t i : split.train) {
    nb_docs.push_back(tokens_of(i));
    nb_labels.push_back(ds.examples[i].label);
  }
  const auto C = static_cast<int32_t>(ds.label_names.size());
  Baseline b{models::NaiveBayes::train(nb_docs, nb_labels, C), {}, {}, {}, {}, {}, {}, {}, 0, 0};
  auto score = [&](const auto& model, const data::Dataset& set, const std::vector<int64_t>& rows) {
    std::vector<int32_t> truth, pred;
    for (int64_t i : rows) {
      truth.push_back(set.examples[i].label);
      pred.push_back(model.predict(text::char_tokenize(set.examples[i].text, to)));
    }
    return models::classification_metrics(truth, pred, C);
  };
  std::vector<int64_t> eval_rows;
  if (eval_set)
    for (int64_t i = 0; i < eval_set->size(); ++i) eval_rows.push_back(i);
  b.valid = score(b.nb, ds, split.valid);
  b.test = score(b.nb, ds, split.test);
  if (eval_set) b.eval = score(b.nb, *eval_set, eval_rows);
  b.seconds = seconds_since(t_nb);
  const auto t_lr = Clock::now();
  b.lr = models::LogisticRegression::train(nb_docs, nb_labels, C, lr_options(seed));
  b.lr_valid = score(b.lr, ds, split.valid);
  b.lr_test = score(b.lr, ds, split.test);
  if (eval_set) b.lr_eval = score(b.lr, *eval_set, eval_rows);
  b.lr_seconds = seconds_since(t_lr);
  return b;
}

// The second test set (ClassifyTrainOptions::eval), read with the training data's label names.
std::optional<data::Dataset> load_eval_set(const ClassifyTrainOptions& s,
                                           const std::vector<std::string>& labels) {
  if (s.eval.empty()) return std::nullopt;
  data::ReadOptions ro;
  ro.normalize.lowercase_ascii = true;
  ro.max_chars = s.max_chars;
  data::TableSpec spec;
  ClassifyTrainOptions f = s;
  f.data = s.eval;
  f.format = "";
  spec.format = table_format(f);
  spec.text_column = s.text_column;
  spec.label_column = s.label_column;
  spec.labels = labels;
  data::Dataset d = data::read_table(s.eval, spec, ro);
  ATTN_CHECK(d.size() > 0, s.eval, ": the evaluation set (--eval) holds no examples");
  return d;
}

std::optional<models::Metrics> clean_eval_metrics(models::TextClassifier& clf,
                                                  const std::optional<data::Dataset>& eval_set, int32_t C) {
  if (!eval_set) return std::nullopt;
  std::vector<int32_t> truth, pred;
  const std::vector<models::Classification> cs = clf.classify(eval_set->texts());
  for (std::size_t i = 0; i < cs.size(); ++i) {
    truth.push_back(eval_set->examples[i].label);
    pred.push_back(cs[i].label);
  }
  return models::classification_metrics(truth, pred, C);
}

// ---- the from-scratch model's data ------------------------------------------------------------

Prepared prepare(ClassifyTrainOptions& s, StepProgress& progress) {
  LoadedData d = load_data(s);
  const data::Dataset& ds = d.dataset;
  data::SplitOptions so;
  so.seed = s.seed;
  data::Split split = data::make_split(ds, so);
  data::check_split(split, ds);
  const int64_t overlap = data::count_text_overlap(ds, split.train, split.test) +
                          data::count_text_overlap(ds, split.train, split.valid) +
                          data::count_text_overlap(ds, split.valid, split.test);
  ATTN_CHECK(overlap == 0, "internal: ", overlap, " texts shared between splits after deduplication");
  progress.note("data: " + std::to_string(d.raw.size()) + " examples read (" + d.raw.report.describe() +
                "); " + std::to_string(ds.size()) + " after deduplication (" + d.dedup.describe() + ")");
  progress.note("split: " + split.describe());

  text::CharTokenizerOptions to;
  to.normalize.lowercase_ascii = true;
  std::vector<std::string> train_texts;
  for (int64_t i : split.train) train_texts.push_back(ds.examples[i].text);
  text::VocabOptions vo;
  vo.min_freq = s.min_freq;
  text::TokenCounts counts = text::CharTokenizer::count(train_texts, to);
  text::CharTokenizer tokenizer = [&] {
    try {
      return text::CharTokenizer(text::Vocab::build(counts, vo), to);
    } catch (const Error& e) {
      throw Error(std::string("cannot build the vocabulary from the ") + std::to_string(train_texts.size()) +
                  " training texts with --min-freq " + std::to_string(s.min_freq) + " (" +
                  std::to_string(counts.size()) + " distinct characters): " + e.what());
    }
  }();
  data::EncodedDataset enc = data::encode_dataset(ds, tokenizer);
  std::vector<int64_t> length(static_cast<std::size_t>(enc.size()));
  for (int64_t i = 0; i < enc.size(); ++i)
    length[i] = std::min<int64_t>(static_cast<int64_t>(enc.text[i].size()) + 1, s.max_len);
  auto truncated_in = [&](const std::vector<int64_t>& rows) {
    int64_t n = 0;
    for (int64_t i : rows) n += static_cast<int64_t>(enc.text[i].size()) > s.max_len - 1;
    return n;
  };
  const int64_t trunc_train = truncated_in(split.train), trunc_valid = truncated_in(split.valid),
                trunc_test = truncated_in(split.test);
  const int64_t trunc_total = trunc_train + trunc_valid + trunc_test;
  progress.note("vocabulary: " + std::to_string(tokenizer.vocab().size()) + " tokens (characters seen >= " +
                std::to_string(s.min_freq) + " times in the training split, of " +
                std::to_string(counts.size()) + "); " + std::to_string(trunc_total) + " of " +
                std::to_string(ds.size()) + " texts longer than " + std::to_string(s.max_len - 1) +
                " characters are cut to the first " + std::to_string(s.max_len - 1));

  return Prepared{std::move(d),
                  split,
                  to,
                  static_cast<int64_t>(counts.size()),
                  std::move(tokenizer),
                  std::move(enc),
                  std::move(length),
                  trunc_train,
                  trunc_valid,
                  trunc_test};
}

}  // namespace attn::tasks::classify_detail
