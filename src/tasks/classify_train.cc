// attn::tasks::train_classifier (include/attn/tasks/classify.h): the review
// classifier, from text files to a saved model and a test report next to a
// naive Bayes baseline trained on the same split.
#include <attn/core/autograd.h>
#include <attn/core/error.h>
#include <attn/core/parallel.h>
#include <attn/core/precision.h>
#include <attn/core/random.h>
#include <attn/data/batch.h>
#include <attn/data/reader.h>
#include <attn/data/split.h>
#include <attn/io/e5_container.h>
#include <attn/io/files.h>
#include <attn/io/model_files.h>
#include <attn/io/safetensors.h>
#include <attn/models/baseline.h>
#include <attn/models/bert.h>
#include <attn/models/bert_classifier.h>
#include <attn/models/text_classifier.h>
#include <attn/ops/basic.h>
#include <attn/ops/nn_functional.h>
#include <attn/tasks/classify.h>
#include <attn/text/utf8.h>
#include <attn/train/comm.h>
#include <attn/train/fit.h>
#include <attn/train/optim.h>
#include <attn/train/schedule.h>
#include <attn/train/trainer.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <map>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include "tasks/classify_cache.h"
#include "tasks/util.h"

namespace attn::tasks {

namespace {

namespace fs = std::filesystem;
using detail::Clock;
using detail::duration;
using detail::fmt;
using detail::pct;
using detail::seconds_since;
using json::Value;

// What a fine-tune with the embeddings frozen keeps frozen, for the log and the report: the embeddings and
// the lowest k layers ("layers 0-(k-1)"), or the embeddings alone when k is 0.
std::string frozen_part_name(int64_t k) {
  return k > 0 ? "embeddings and layers 0-" + std::to_string(k - 1) : std::string("embeddings");
}

// The options with the preset's defaults filled in, checked.
ClassifyTrainOptions resolve(const ClassifyTrainOptions& o) {
  ClassifyTrainOptions s = o;
  ATTN_CHECK(s.preset == "quick" || s.preset == "full", "--preset must be quick or full; got '", s.preset,
             "'");
  ATTN_CHECK(!(o.minutes > 0 && o.epochs > 0), "give --minutes or --epochs, not both");
  ATTN_CHECK(!(o.max_epochs > 0 && o.epochs > 0), "--max-epochs goes with a time budget, not with --epochs");
  if (s.minutes <= 0) s.minutes = s.preset == "quick" ? 3.5 : 8.0;
  if (s.max_epochs <= 0) s.max_epochs = s.preset == "quick" ? 4 : 6;
  if (!s.pos.empty() || !s.neg.empty()) {
    ATTN_CHECK(!s.pos.empty() && !s.neg.empty(), "--pos and --neg go together; got only ",
               !s.pos.empty() ? "--pos" : "--neg");
    ATTN_CHECK(s.data.empty(), "give either --pos/--neg or --data, not both");
  }
  if (s.d_ff <= 0) s.d_ff = 4 * s.d_model;
  ATTN_CHECK(s.epochs >= 0 && s.batch_size >= 1 && s.patience >= 1 && s.eval_every >= 0 && s.max_len >= 2 &&
                 s.max_chars >= 1 && s.min_freq >= 1 && s.layers >= 1 && s.heads >= 1 && s.lr > 0 &&
                 s.clip > 0,
             "train classify: an option is out of range (batch size ", s.batch_size, ", patience ",
             s.patience, ", max_len ", s.max_len, ", layers ", s.layers, ", heads ", s.heads, ", lr ", s.lr,
             ", clip ", s.clip, ")");
  ATTN_CHECK(s.d_model % s.heads == 0, "--d-model (", s.d_model, ") must be a multiple of --heads (", s.heads,
             ")");
  return s;
}

// ---- data --------------------------------------------------------------------------------------

struct LoadedData {
  data::Dataset raw;      // as read
  data::Dataset dataset;  // deduplicated
  data::DedupReport dedup;
  std::vector<std::string> sources;
};

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

struct EvalResult {
  double loss = 0;
  std::vector<int32_t> predicted;  // per row, in the order of `rows`
  std::vector<int32_t> truth;
  double accuracy = 0;
};

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

// The learning rate of a run: warmup + cosine to 2% over `total` steps; while the
// total is not known yet (a time budget, before the pace is measured) a
// provisional linear warmup over 100 steps. Reads total and warmup live.
class BudgetSchedule final : public train::Schedule {
 public:
  BudgetSchedule(double lr, const int64_t& total, const int64_t& warmup)
      : lr_(lr), total_(total), warmup_(warmup) {}
  double lr(int64_t t) const override {
    if (total_ == 0) return lr_ * std::min(1.0, static_cast<double>(t) / 100.0);
    return train::WarmupCosineSchedule(lr_, warmup_, total_, lr_ * 0.02).lr(t);
  }
  json::Value to_json() const override {
    if (total_ == 0)
      return Value::object({{"kind", Value::string("provisional_warmup")}, {"lr", Value::number(lr_)}});
    return train::WarmupCosineSchedule(lr_, warmup_, total_, lr_ * 0.02).to_json();
  }

 private:
  double lr_;
  const int64_t& total_;
  const int64_t& warmup_;
};

// The baselines on the same split: naive Bayes and logistic regression over
// character unigrams + bigrams of the whole text (not cut to max_len).
struct Baseline {
  models::NaiveBayes nb;
  models::LogisticRegression lr;
  models::Metrics valid, test, lr_valid, lr_test;
  std::optional<models::Metrics> eval, lr_eval;  // on the second test set, when given
  double seconds = 0, lr_seconds = 0;
};

models::LogisticRegressionOptions lr_options(uint64_t seed) {
  models::LogisticRegressionOptions o;
  o.seed = seed;
  return o;
}

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

// ---- progress -----------------------------------------------------------------------------------

// "step 12/340", or "step 12" while the total is not known yet (0: a time budget's
// schedule is fitted after the first steps).
std::string step_str(int64_t step, int64_t total) {
  return "step " + std::to_string(step) + (total > 0 ? "/" + std::to_string(total) : std::string());
}

class StepProgress {
 public:
  explicit StepProgress(const Progress& sink) : sink_(sink) {}
  // One training step done.
  void step(int64_t step, int64_t total, int64_t epoch, double loss, double tokens_per_s, double eta_s) {
    if (!sink_) return;
    ema_ = step == 1 ? loss : 0.95 * ema_ + 0.05 * loss;
    const double frac = total > 0 ? std::min(1.0, static_cast<double>(step) / total) : 0.0;
    char line[256];
    if (sink_.terminal) {
      const int width = 24, filled = static_cast<int>(frac * width);
      std::string bar = "[" + std::string(filled, '#') + std::string(width - filled, '.') + "]";
      std::snprintf(line, sizeof line, "\r%s %3.0f%% %s epoch %lld loss %.4f %.0f tok/s ETA %s ", bar.c_str(),
                    100 * frac, step_str(step, total).c_str(), static_cast<long long>(epoch + 1), ema_,
                    tokens_per_s, total > 0 ? duration(eta_s).c_str() : "?");
      sink_(line);
      open_ = true;
    } else if (step == 1 || step % 50 == 0 || step == total) {
      std::snprintf(line, sizeof line, "%s epoch %lld loss %.4f %.0f tok/s ETA %s\n",
                    step_str(step, total).c_str(), static_cast<long long>(epoch + 1), ema_, tokens_per_s,
                    total > 0 ? duration(eta_s).c_str() : "?");
      sink_(line);
    }
  }
  // A line of its own (validation results, notes).
  void note(const std::string& s) {
    if (!sink_) return;
    if (open_) sink_("\n");
    open_ = false;
    sink_(s + "\n");
  }
  void done() {
    if (open_ && sink_) sink_("\n");
    open_ = false;
  }

 private:
  const Progress& sink_;
  bool open_ = false;
  double ema_ = 0;
};

Value int_array(const std::vector<int64_t>& v) {
  Value a = Value::array();
  for (int64_t x : v) a.push_back(Value::integer(x));
  return a;
}

std::string hex64(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%016llx", static_cast<unsigned long long>(v));
  return buf;
}

// Markdown table of one set of metrics.
std::string metrics_rows(const std::string& name, const models::Metrics& m) {
  std::string s = "| " + name + " | " + pct(m.accuracy) + " | " + fmt("%.4f", m.macro_f1);
  for (const auto& c : m.per_class)
    s += " | " + fmt("%.4f", c.precision) + " / " + fmt("%.4f", c.recall) + " / " + fmt("%.4f", c.f1);
  return s + " |\n";
}

std::string confusion_md(const std::string& name, const models::Metrics& m,
                         const std::vector<std::string>& labels) {
  std::string s = "\n";
  s += name;
  s += " (rows: true label, columns: predicted)\n\n| |";
  for (const auto& l : labels) s += " " + l + " |";
  s += "\n|---|";
  for (std::size_t i = 0; i < labels.size(); ++i) s += "---:|";
  s += "\n";
  for (std::size_t r = 0; r < labels.size(); ++r) {
    s += "| " + labels[r] + " |";
    for (int64_t v : m.confusion[r]) {
      s += ' ';
      s += std::to_string(v);
      s += " |";
    }
    s += "\n";
  }
  return s;
}

// The folders that creating `path` will make (the missing ones, outermost first).
// Unless keep() is called, the destructor removes those of them that are still
// empty, innermost first: a failed run leaves no empty --out folder behind, but
// never touches a folder that existed before or that holds anything.
class CreatedFolders {
 public:
  explicit CreatedFolders(const std::string& path) {
    std::error_code ec;
    fs::path start = fs::path(path).lexically_normal();
    if (!start.has_filename()) start = start.parent_path();  // "a/b/" -> "a/b"
    for (fs::path p = start; !p.empty() && !fs::exists(p, ec); p = p.parent_path()) {
      missing_.insert(missing_.begin(), p);
      if (p == p.parent_path() || !p.has_relative_path()) break;
    }
  }
  CreatedFolders(const CreatedFolders&) = delete;
  CreatedFolders& operator=(const CreatedFolders&) = delete;
  ~CreatedFolders() {
    if (kept_) return;
    std::error_code ec;
    for (auto it = missing_.rbegin(); it != missing_.rend(); ++it) {
      if (!fs::is_directory(*it, ec) || !fs::is_empty(*it, ec) || ec) return;
      fs::remove(*it, ec);
    }
  }
  void keep() { kept_ = true; }

 private:
  std::vector<fs::path> missing_;
  bool kept_ = false;
};

// Everything before training: the data read and deduplicated, its split, the
// character vocabulary of the training split and the encoded texts.
struct Prepared {
  LoadedData d;
  data::Split split;
  text::CharTokenizerOptions to;
  int64_t distinct_chars = 0;  // in the training split, before min_freq
  text::CharTokenizer tokenizer;
  data::EncodedDataset enc;
  std::vector<int64_t> length;  // tokens per example incl. [CLS], at most max_len
  int64_t trunc_train = 0, trunc_valid = 0, trunc_test = 0;
};

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

// The five files are written into a staging folder next to the run folder and swapped in with one
// rename (io::StagedFolder): the folder never holds a model without its report or the other way
// round, even when the run is killed; what a killed run left there is removed by the next one.
void write_outputs(const std::string& out, const models::TextClassifier& clf, const Value& extra,
                   const data::Split& split, const std::string& sample_text, const Value& report,
                   const std::string& md) {
  io::StagedFolder stage(out, "");
  clf.save(stage.path("model.attn"), extra);
  split.save(stage.path("split.json"));
  io::write_file_atomically(stage.path("test-sample.txt"), sample_text);
  io::write_file_atomically(stage.path("report.json"), json::dump(report, 2) + "\n");
  io::write_file_atomically(stage.path("report.md"), md);
  stage.commit();
}

// ---- fine-tuning a pretrained encoder (ClassifyTrainOptions::encoder) -------------------------

struct PretrainedEncoder {
  std::string name, source;
  models::BertConfig config;
  int64_t position_offset = 0;
  models::TensorLookup weights;
  std::shared_ptr<const models::PieceTokenizer> tokenizer;
  // The same weights as the inference model (the embed commands' BertModel) for the frozen part.
  std::function<models::BertModel()> inference;
  bool mean_pool = false;  // the head reads the mean over tokens (as the model was trained), else [CLS]
};

PretrainedEncoder open_encoder(const std::string& name, const std::string& file, const std::string& prefix) {
  PretrainedEncoder e;
  if (name == "minilm") {
    ATTN_CHECK(prefix.empty(), "--prefix is for --encoder e5 (all-MiniLM-L6-v2 reads no prefix)");
    const io::MiniLmFiles f = io::require_minilm(file);
    e.name = "all-MiniLM-L6-v2";
    e.source = f.weights;
    e.config = models::BertConfig::from_file(f.config);
    e.weights = models::safetensors_lookup(io::SafeTensorsFile::open(f.weights));
    e.tokenizer = models::wordpiece_piece_tokenizer(f.dir);
    e.inference = [config = e.config, path = f.weights] { return models::BertModel(config, path); };
    return e;
  }
  if (name == "e5") {
    const io::E5Container c = io::E5Container::open(io::require_e5(file));
    const io::E5HfConfig h = c.hf_config();
    e.name = "multilingual-e5-small";
    e.source = c.path();
    e.config = models::BertConfig::from_e5(h);
    e.position_offset = e.config.position_offset;
    e.weights = [c](const std::string& n) { return c.load_hf(n); };
    e.tokenizer = models::e5_piece_tokenizer(c.path(), prefix);
    e.inference = [c] { return models::BertModel::from_e5(c); };
    e.mean_pool = true;  // multilingual-e5 is trained with mean pooling (sentence-transformers' Pooling)
    return e;
  }
  throw Error("--encoder must be e5 (multilingual-e5-small) or minilm (all-MiniLM-L6-v2); got '" + name +
              "'");
}

// One example as the encoder reads it.
struct PieceExample {
  std::vector<int32_t> ids;
  bool truncated = false;
};

// Hidden states of `rows` after the frozen part (embeddings + layers [0, k)), one [len, C]
// tensor per row, computed once in eval mode in length-sorted batches.
std::vector<Tensor> frozen_prefix(models::EncoderClassifier& model, const std::vector<PieceExample>& ex,
                                  const std::vector<int64_t>& rows, int64_t k, int64_t& tokens) {
  NoGradGuard ng;
  model.eval();
  std::vector<std::size_t> order(rows.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return ex[rows[a]].ids.size() < ex[rows[b]].ids.size();
  });
  std::vector<Tensor> out(rows.size());
  const int64_t pad = model.config().pad_id;
  for (std::size_t b0 = 0; b0 < order.size(); b0 += 32) {
    const std::size_t b1 = std::min(order.size(), b0 + 32);
    int64_t L = 0;
    for (std::size_t i = b0; i < b1; ++i)
      L = std::max<int64_t>(L, static_cast<int64_t>(ex[rows[order[i]]].ids.size()));
    const auto B = static_cast<int64_t>(b1 - b0);
    std::vector<int64_t> flat(static_cast<std::size_t>(B * L), pad), lengths;
    for (std::size_t i = b0; i < b1; ++i) {
      const auto& ids = ex[rows[order[i]]].ids;
      std::copy(ids.begin(), ids.end(), flat.begin() + static_cast<int64_t>(i - b0) * L);
      lengths.push_back(static_cast<int64_t>(ids.size()));
      tokens += static_cast<int64_t>(ids.size());
    }
    const Tensor h = model.hidden_after(Tensor::from(flat, {B, L}), lengths, k);  // [B, L, C]
    for (std::size_t i = b0; i < b1; ++i)
      out[order[i]] = slice(h.select(0, static_cast<int64_t>(i - b0)), 0, 0, lengths[i - b0]).contiguous();
  }
  return out;
}

// A batch of cached hidden states, padded with zeros: [B, L, C] and the lengths.
Tensor stack_hidden(const std::vector<Tensor>& cache, const std::vector<int64_t>& idx,
                    std::vector<int64_t>& lengths) {
  int64_t L = 0;
  for (int64_t i : idx) L = std::max(L, cache[i].size(0));
  const int64_t C = cache[idx[0]].size(1), B = static_cast<int64_t>(idx.size());
  Tensor x = Tensor::zeros({B, L, C});
  float* dst = x.data<float>();
  lengths.clear();
  for (int64_t b = 0; b < B; ++b) {
    const Tensor& t = cache[idx[b]];
    std::copy(t.data<float>(), t.data<float>() + t.numel(), dst + b * L * C);
    lengths.push_back(t.size(0));
  }
  return x;
}

// Accuracy, loss and predictions of the trained part over cached rows (eval mode).
// The rows `idx` of per-example vectors ([C] each) as one [B, C] matrix; undefined when `vecs` is empty.
Tensor gather_vectors(const std::vector<Tensor>& vecs, const std::vector<int64_t>& idx) {
  if (vecs.empty()) return Tensor();
  const int64_t C = vecs[idx[0]].numel(), B = static_cast<int64_t>(idx.size());
  Tensor x = Tensor::zeros({B, C});
  for (int64_t b = 0; b < B; ++b)
    std::copy(vecs[idx[b]].data<float>(), vecs[idx[b]].data<float>() + C, x.data<float>() + b * C);
  return x;
}

// The frozen copy's pooled vector (EncoderClassifier::frozen_vector) of every cached row, [C] each,
// computed once in length-sorted batches; empty when the model has no frozen copy.
std::vector<Tensor> frozen_vectors(models::EncoderClassifier& model, const std::vector<Tensor>& cache,
                                   int64_t k) {
  if (model.config().frozen_top <= 0) return {};
  ATTN_CHECK(k == model.frozen_branch_input(), "--frozen-vector: the cache holds layer ", k,
             "'s input, the frozen copy reads layer ", model.frozen_branch_input(), "'s");
  NoGradGuard ng;
  std::vector<int64_t> order(cache.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return cache[a].size(0) < cache[b].size(0); });
  std::vector<Tensor> out(cache.size());
  for (std::size_t b0 = 0; b0 < order.size(); b0 += 32) {
    const std::vector<int64_t> idx(order.begin() + b0, order.begin() + std::min(order.size(), b0 + 32));
    std::vector<int64_t> lengths;
    const Tensor v = model.frozen_vector(stack_hidden(cache, idx, lengths), lengths).contiguous();  // [B, C]
    for (std::size_t i = 0; i < idx.size(); ++i)
      out[idx[i]] = v.select(0, static_cast<int64_t>(i)).contiguous();
  }
  return out;
}

EvalResult evaluate_cached(models::EncoderClassifier& model, const std::vector<Tensor>& cache,
                           const std::vector<int32_t>& labels, int64_t k,
                           const std::vector<Tensor>& frozen = {}) {
  NoGradGuard ng;
  model.eval();
  EvalResult r;
  r.predicted.assign(cache.size(), -1);
  r.truth = labels;
  std::vector<int64_t> order(cache.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return cache[a].size(0) < cache[b].size(0); });
  double loss_sum = 0;
  int64_t correct = 0;
  for (std::size_t b0 = 0; b0 < order.size(); b0 += 64) {
    const std::vector<int64_t> idx(order.begin() + b0, order.begin() + std::min(order.size(), b0 + 64));
    std::vector<int64_t> lengths, y;
    for (int64_t i : idx) y.push_back(labels[i]);
    const Tensor h = stack_hidden(cache, idx, lengths);
    const models::ModelOutput o = model.forward_from(
        h, k, lengths, Tensor::from(y, {static_cast<int64_t>(idx.size())}), gather_vectors(frozen, idx));
    loss_sum += o.loss.to_vector()[0] * static_cast<double>(idx.size());
    const Tensor logits = o.logits.contiguous();
    for (std::size_t i = 0; i < idx.size(); ++i) {
      int32_t best = 0;
      for (int64_t c = 1; c < logits.size(1); ++c)
        if (logits.at({static_cast<int64_t>(i), c}) > logits.at({static_cast<int64_t>(i), best}))
          best = static_cast<int32_t>(c);
      r.predicted[idx[i]] = best;
      correct += best == labels[idx[i]];
    }
  }
  r.loss = loss_sum / static_cast<double>(cache.size());
  r.accuracy = static_cast<double>(correct) / static_cast<double>(cache.size());
  return r;
}

// The short validation slice: the validation rows of at most this many characters (code points of
// the text as read), selected by length only. The validation split has the test split's distribution
// (many sentences cut from long reviews); short whole reviews behave differently, so every fine-tune
// reports its accuracy on this slice as well (report.json "valid_short").
constexpr int64_t kShortValidChars = 30;

// Layer-wise learning-rate decay (ClassifyTrainOptions::layer_lr_decay): AdamW where encoder layer i
// of n takes lr · decay^(n - i) and everything else trained (the head) takes lr, so the layers nearest
// the pretrained input move least. One AdamW per rate; the trainer sets the base lr each step.
class LayerwiseAdamW final : public train::Optimizer {
 public:
  LayerwiseAdamW(const NamedParams& params, const train::AdamWOptions& o, int64_t n_layers, double decay)
      : Optimizer(params) {
    std::map<int64_t, NamedParams> groups;  // layer index; n_layers: not in a layer (the head)
    for (const auto& np : params) {
      int64_t layer = n_layers;
      const std::string pre = "encoder.layers.";
      if (np.first.rfind(pre, 0) == 0) layer = std::stoll(np.first.substr(pre.size()));
      groups[layer].push_back(np);
    }
    for (auto& [layer, ps] : groups) {
      scales_.push_back(std::pow(decay, static_cast<double>(n_layers - layer)));
      parts_.push_back(std::make_unique<train::AdamW>(ps, o));
    }
    lr_ = o.lr;
  }
  void step() override {
    for (std::size_t i = 0; i < parts_.size(); ++i) {
      parts_[i]->set_lr(lr_ * scales_[i]);
      parts_[i]->step();
    }
    ++steps_;
  }
  std::string kind() const override { return "adamw"; }
  NamedParams state_tensors() const override {
    NamedParams all;
    for (const auto& p : parts_)
      for (auto& t : p->state_tensors()) all.push_back(t);
    return all;
  }
  // The rates' multipliers, lowest layer first (the head last).
  const std::vector<double>& scales() const { return scales_; }

 private:
  std::vector<double> scales_;
  std::vector<std::unique_ptr<train::AdamW>> parts_;
};

// A seeded pick of at most n rows (n <= 0: all), in a random order.
std::vector<int64_t> pick_rows(const std::vector<int64_t>& rows, int64_t n, uint64_t seed) {
  std::vector<int64_t> r = rows;
  Rng rng(seed);
  rng.shuffle(r);
  if (n > 0 && static_cast<int64_t>(r.size()) > n) r.resize(static_cast<std::size_t>(n));
  return r;
}

ClassifyTrainResult finetune_classifier(ClassifyTrainOptions& s,
                                        const std::chrono::steady_clock::time_point t_start,
                                        StepProgress& progress, CreatedFolders& created) {
  ATTN_CHECK(s.encoder_max_len >= 3 && s.encoder_lr > 0 && s.encoder_epochs >= 1,
             "train classify --encoder: max_len must be >= 3, lr > 0, epochs >= 1; got ", s.encoder_max_len,
             ", ", s.encoder_lr, ", ", s.encoder_epochs);
  ATTN_CHECK(s.layer_lr_decay > 0 && s.layer_lr_decay <= 1,
             "train classify --encoder: --layer-lr-decay must be in (0, 1]; got ", s.layer_lr_decay);
  ATTN_CHECK(s.swa_from >= 0 && s.swa_from < 1,
             "train classify --encoder: --average-from must be in [0, 1); got ", s.swa_from);
  ATTN_CHECK(s.label_smoothing >= 0 && s.label_smoothing < 1,
             "train classify --encoder: label smoothing must be in [0, 1); got ", s.label_smoothing);
  ATTN_CHECK(s.prefix.empty() || s.prefix == "none" || s.prefix == "query" || s.prefix == "passage",
             "train classify --encoder: --prefix must be query, passage or none; got '", s.prefix, "'");
  ATTN_CHECK(s.frozen_path == "bert" || s.frozen_path == "nn",
             "train classify --encoder: --frozen-path must be bert or nn; got '", s.frozen_path, "'");
  ATTN_CHECK(s.pool.empty() || s.pool == "mean" || s.pool == "cls",
             "train classify --encoder: --pool must be mean or cls; got '", s.pool, "'");
  // ---- data and baselines (as for the Transformer) ----
  LoadedData d = load_data(s);
  const data::Dataset& ds = d.dataset;
  data::SplitOptions so;
  so.seed = s.seed;
  const data::Split split = data::make_split(ds, so);
  data::check_split(split, ds);
  progress.note("data: " + std::to_string(d.raw.size()) + " examples read; " + std::to_string(ds.size()) +
                " after deduplication (" + d.dedup.describe() + ")");
  progress.note("split: " + split.describe());
  const auto C = static_cast<int32_t>(ds.label_names.size());
  const std::optional<data::Dataset> eval_set = load_eval_set(s, ds.label_names);
  text::CharTokenizerOptions to;
  to.normalize.lowercase_ascii = true;
  const Baseline base = train_baseline(ds, split, to, eval_set ? &*eval_set : nullptr, s.seed);
  progress.note("baselines on the same split: naive Bayes valid " + pct(base.valid.accuracy) +
                ", logistic regression valid " + pct(base.lr_valid.accuracy) + " (" +
                fmt("%.1f", base.seconds + base.lr_seconds) + " s)");

  // ---- the pretrained encoder as nn modules ----
  const auto t_load = Clock::now();
  const std::string prefix = s.prefix.empty() || s.prefix == "none" ? std::string() : s.prefix + ": ";
  const PretrainedEncoder pe = open_encoder(s.encoder, s.encoder_file, prefix);
  const int64_t max_len = std::min(s.encoder_max_len, pe.config.max_position_embeddings - pe.position_offset);
  models::TransformerConfig cfg =
      models::bert_classifier_config(pe.config, C, max_len, pe.position_offset, s.dropout, s.seed,
                                     s.pool.empty() ? pe.mean_pool : s.pool == "mean");
  const int64_t n_layers = cfg.encoder_layers;
  const int64_t k = !s.freeze_embeddings  ? 0
                    : s.freeze_layers < 0 ? std::max<int64_t>(0, n_layers - 2)
                                          : s.freeze_layers;
  ATTN_CHECK(k <= n_layers, "--freeze-layers must be at most the encoder's ", n_layers, " layers; got ", k);
  ATTN_CHECK(s.freeze_embeddings || s.freeze_layers <= 0,
             "--freeze-layers needs frozen embeddings (the frozen part is computed once from them)");
  ATTN_CHECK(!s.frozen_vector || (s.freeze_embeddings && k < n_layers),
             "--frozen-vector needs trained layers above frozen ones: --freeze-layers below the encoder's ",
             n_layers, " layers and frozen embeddings; got --freeze-layers ", k,
             s.freeze_embeddings ? "" : " with --train-embeddings");
  if (s.frozen_vector) cfg.frozen_top = n_layers - k;  // a frozen copy of the trained layers
  models::TextClassifier clf(cfg, pe.tokenizer, ds.label_names, max_len);
  // Frozen embeddings stay as the base model has them: the saved file leaves them out.
  clf.set_embeddings_from_base(s.freeze_embeddings && pe.tokenizer->has_embeddings());
  models::EncoderClassifier& model = clf.model();
  models::load_bert_weights(model, pe.config, pe.weights, pe.position_offset);
  NamedParams trainable = models::freeze_bert_classifier(model, s.freeze_embeddings, k);
  int64_t n_trainable = 0;
  for (const auto& np : trainable) n_trainable += np.second.numel();
  progress.note("encoder: " + pe.name + " (" + pe.source + "), " + std::to_string(n_layers) +
                " layers, hidden " + std::to_string(cfg.d_model) + "; " +
                std::to_string(model.num_parameters()) + " parameters, " + std::to_string(n_trainable) +
                " trained (" +
                (s.freeze_embeddings ? frozen_part_name(k) + " frozen" : std::string("nothing frozen")) +
                "); loaded in " + fmt("%.1f", seconds_since(t_load)) + " s");

  // ---- pieces ----
  std::vector<PieceExample> ex(static_cast<std::size_t>(ds.size()));
  std::vector<int32_t> labels_of(static_cast<std::size_t>(ds.size()));
  int64_t truncated = 0, unknown = 0, pieces = 0;
  for (int64_t i = 0; i < ds.size(); ++i) {
    models::Classification c;
    ex[i].ids = clf.input_ids(ds.examples[i].text, c);
    ex[i].truncated = c.truncated;
    truncated += c.truncated;
    for (bool u : c.unknown) unknown += u;
    pieces += static_cast<int64_t>(ex[i].ids.size());
    labels_of[i] = ds.examples[i].label;
  }
  const std::vector<int64_t> train_rows = pick_rows(split.train, s.max_train, mix_seed(s.seed, 11));
  const std::vector<int64_t> valid_rows = pick_rows(split.valid, s.max_valid, mix_seed(s.seed, 12));
  const std::vector<int64_t>& test_rows = split.test;
  progress.note("pieces: " + std::to_string(truncated) + " of " + std::to_string(ds.size()) +
                " texts longer than " + std::to_string(max_len - 2) +
                " pieces are cut (truncation reported); " +
                fmt("%.2f", 100.0 * static_cast<double>(unknown) / std::max<int64_t>(1, pieces)) +
                "% of pieces are unknown; fine-tuning on " + std::to_string(train_rows.size()) + " of " +
                std::to_string(split.train.size()) + " training examples, validating on " +
                std::to_string(valid_rows.size()));

  // ---- the frozen part, once ----
  const auto t_prefix = Clock::now();
  int64_t prefix_tokens = 0;
  // Through the inference path (the embed commands' BertModel on the same weights; built on first use
  // and dropped after) or, with --frozen-path nn, through the nn modules in eval mode.
  std::optional<models::BertModel> inference;
  auto frozen_part = [&](const std::vector<int64_t>& rows) {
    if (s.frozen_path == "nn") return frozen_prefix(model, ex, rows, k, prefix_tokens);
    if (!inference) inference.emplace(pe.inference());
    std::vector<std::vector<int32_t>> ids;
    ids.reserve(rows.size());
    for (int64_t r : rows) ids.push_back(ex[static_cast<std::size_t>(r)].ids);
    return detail::frozen_rows(*inference, ids, k, prefix_tokens);
  };
  std::vector<Tensor> train_cache, valid_cache, test_cache;
  int64_t cache_hits = 0;  // rows read from --cache-dir
  std::string cache_file;
  if (s.cache_dir.empty()) {
    train_cache = frozen_part(train_rows);
    valid_cache = frozen_part(valid_rows);
    test_cache = frozen_part(test_rows);
  } else {
    detail::FrozenCacheKey key;
    key.encoder = s.encoder + (prefix.empty() ? std::string() : "-" + s.prefix);  // the file name
    detail::hash_model_file(pe.source, key.model_bytes, key.model_hash);
    key.frozen_layers = k;
    key.max_len = max_len;
    key.hidden = cfg.d_model;
    key.rows = ds.size();
    std::vector<std::vector<int32_t>> all_ids;
    std::vector<int64_t> lens;
    for (const auto& e : ex) all_ids.push_back(e.ids), lens.push_back(static_cast<int64_t>(e.ids.size()));
    key.data_hash = detail::hash_id_lists(all_ids);
    cache_file = detail::frozen_cache_path(s.cache_dir, key);
    std::vector<Tensor> all;
    const std::string why = detail::load_frozen_cache(cache_file, key, lens, all);
    if (!why.empty() && why != "no file yet")
      progress.note("frozen-part cache " + cache_file + " not used (" + why + "); computing it again");
    std::vector<bool> needed(all.size(), false);
    for (const auto* rows : {&train_rows, &valid_rows, &test_rows})
      for (int64_t r : *rows) needed[static_cast<std::size_t>(r)] = true;
    std::vector<int64_t> missing;
    for (std::size_t r = 0; r < all.size(); ++r) {
      if (!needed[r]) continue;
      if (all[r].defined())
        ++cache_hits;
      else
        missing.push_back(static_cast<int64_t>(r));
    }
    if (!missing.empty()) {
      std::vector<Tensor> computed = frozen_part(missing);
      for (std::size_t i = 0; i < missing.size(); ++i)
        all[static_cast<std::size_t>(missing[i])] = computed[i];
      detail::save_frozen_cache(cache_file, key, all);
    }
    auto gather = [&](const std::vector<int64_t>& rows) {
      std::vector<Tensor> v;
      for (int64_t r : rows) v.push_back(all[static_cast<std::size_t>(r)]);
      return v;
    };
    train_cache = gather(train_rows);
    valid_cache = gather(valid_rows);
    test_cache = gather(test_rows);
    progress.note("frozen-part cache " + cache_file + ": " + std::to_string(cache_hits) + " examples read, " +
                  std::to_string(missing.size()) + " computed" + (missing.empty() ? "" : " and saved"));
  }
  inference.reset();
  const double prefix_seconds = seconds_since(t_prefix);
  progress.note("frozen part (embeddings + " + std::to_string(k) + " layers, " +
                (s.frozen_path == "nn" ? "nn modules" : "inference path") + ") computed once for " +
                std::to_string(train_rows.size() + valid_rows.size() + test_rows.size() - cache_hits) +
                " examples, " + std::to_string(prefix_tokens) + " tokens, in " + duration(prefix_seconds) +
                " (" + fmt("%.0f", static_cast<double>(prefix_tokens) / std::max(1e-9, prefix_seconds)) +
                " tokens/s)");
  const auto t_fv = Clock::now();
  const std::vector<Tensor> train_fv = frozen_vectors(model, train_cache, k),
                            valid_fv = frozen_vectors(model, valid_cache, k),
                            test_fv = frozen_vectors(model, test_cache, k);
  const double frozen_vector_seconds = seconds_since(t_fv);
  if (cfg.frozen_top > 0)
    progress.note("frozen vector (a frozen copy of layers " + std::to_string(k) + "-" +
                  std::to_string(n_layers - 1) + ", pooled) computed once for " +
                  std::to_string(train_rows.size() + valid_rows.size() + test_rows.size()) + " examples in " +
                  duration(frozen_vector_seconds));
  auto labels_for = [&](const std::vector<int64_t>& rows) {
    std::vector<int32_t> y;
    for (int64_t i : rows) y.push_back(labels_of[i]);
    return y;
  };
  const std::vector<int32_t> valid_y = labels_for(valid_rows), test_y = labels_for(test_rows);

  // ---- training the layers above ----
  std::vector<int64_t> train_len(train_cache.size());
  std::vector<int64_t> train_idx(train_cache.size());
  for (std::size_t i = 0; i < train_cache.size(); ++i)
    train_len[i] = train_cache[i].size(0), train_idx[i] = static_cast<int64_t>(i);
  const int64_t steps_per_epoch = (static_cast<int64_t>(train_idx.size()) + s.batch_size - 1) / s.batch_size;
  const int64_t total = s.encoder_epochs * steps_per_epoch;
  const int64_t warmup = std::max<int64_t>(1, total / 10);
  const train::WarmupCosineSchedule schedule(s.encoder_lr, warmup, total, s.encoder_lr * 0.02);
  train::AdamWOptions ao;
  ao.lr = s.encoder_lr;
  ao.weight_decay = s.weight_decay;
  std::unique_ptr<train::Optimizer> opt_ptr;
  if (s.layer_lr_decay < 1.0)
    opt_ptr = std::make_unique<LayerwiseAdamW>(trainable, ao, n_layers, s.layer_lr_decay);
  else
    opt_ptr = std::make_unique<train::AdamW>(trainable, ao);
  train::Optimizer& opt = *opt_ptr;
  train::TrainerOptions tro;
  tro.clip_norm = s.clip;
  train::Trainer trainer(opt, schedule, tro, s.seed);
  std::vector<std::vector<int64_t>> batches;
  int64_t step = 0, tokens = 0, skipped = 0;
  double first_loss = 0;
  struct HistoryRow {
    int64_t step, epoch;
    double train_loss, valid_loss, valid_accuracy, lr, seconds;
  };
  std::vector<HistoryRow> history;
  const MatmulPrecision prec_before = matmul_precision();
  if (s.bf16) set_matmul_precision(MatmulPrecision::bf16);
  // The products' precision while training: s.bf16, or the process-wide setting (`attn train
  // --precision bf16` sets that for the whole run, the evaluations included).
  const bool bf16_products = matmul_precision() == MatmulPrecision::bf16;
  train::FitHooks hooks;
  hooks.epoch_batches = [&](int64_t epoch) {
    batches = bucketed_batches(train_idx, train_len, s.batch_size, s.seed, epoch);
    return static_cast<int64_t>(batches.size());
  };
  hooks.loss = [&](int64_t, int64_t bi, const train::StepContext&) {
    model.train();
    const std::vector<int64_t>& idx = batches[static_cast<std::size_t>(bi)];
    std::vector<int64_t> lengths, y;
    for (int64_t i : idx) y.push_back(labels_of[train_rows[i]]);
    const Tensor h = stack_hidden(train_cache, idx, lengths);
    for (int64_t l : lengths) tokens += l;
    const Tensor labels = Tensor::from(y, {static_cast<int64_t>(idx.size())});
    const Tensor fv = gather_vectors(train_fv, idx);
    if (s.label_smoothing <= 0) return model.forward_from(h, k, lengths, labels, fv).loss;
    CrossEntropyOptions ce;
    ce.label_smoothing = s.label_smoothing;
    return cross_entropy(model.forward_from(h, k, lengths, Tensor(), fv).logits, labels, ce);
  };
  hooks.evaluate = [&] {
    const EvalResult v = evaluate_cached(model, valid_cache, valid_y, k, valid_fv);
    return train::EvalScore{v.accuracy, v.loss};
  };
  // Weight averaging (--swa-from F): the mean of the trained weights after every step from F · total on.
  const int64_t swa_start =
      s.swa_from > 0
          ? std::max<int64_t>(1, static_cast<int64_t>(std::ceil(s.swa_from * static_cast<double>(total))))
          : 0;
  std::vector<std::vector<double>> swa_sum;
  int64_t swa_count = 0;
  hooks.on_step = [&](train::FitStep& fs) {
    step = fs.result.step;
    if (fs.result.skipped || !std::isfinite(fs.result.loss)) ++skipped;
    ATTN_CHECK(skipped <= 20, "fine-tuning diverged: ", skipped,
               " updates skipped for NaN/Inf (try a lower --lr)");
    if (step == 1) first_loss = fs.result.loss;
    if (swa_start > 0 && step >= swa_start) {
      if (swa_sum.empty())
        for (auto& np : trainable) swa_sum.emplace_back(static_cast<std::size_t>(np.second.numel()), 0.0);
      for (std::size_t i = 0; i < trainable.size(); ++i) {
        const float* w = trainable[i].second.data<float>();
        for (std::size_t j = 0; j < swa_sum[i].size(); ++j) swa_sum[i][j] += w[j];
      }
      ++swa_count;
    }
    progress.step(step, total, fs.epoch, fs.result.loss,
                  static_cast<double>(tokens) / std::max(1e-9, fs.seconds),
                  fs.seconds / static_cast<double>(step) * static_cast<double>(total - step));
  };
  hooks.on_eval = [&](const train::FitEval& e) {
    history.push_back({e.step, e.epoch, e.train_loss, e.score.loss, e.score.score, e.lr, e.seconds});
    progress.note("step " + std::to_string(e.step) + " epoch " + std::to_string(e.epoch + 1) +
                  ": train loss " + fmt("%.4f", e.train_loss) + ", valid loss " + fmt("%.4f", e.score.loss) +
                  ", valid accuracy " + pct(e.score.score) + (e.best ? " (best)" : ""));
  };
  train::FitOptions fo;
  fo.epochs = s.encoder_epochs;
  fo.time_budget_s = s.minutes > 0 ? s.minutes * 60.0 : 0.0;
  fo.eval_every = s.eval_every;
  fo.patience = s.patience;
  fo.keep_best = true;
  train::FitResult fr;
  try {
    fr = train::fit(trainer, hooks, fo, trainable);
  } catch (...) {
    set_matmul_precision(prec_before);
    throw;
  }
  set_matmul_precision(prec_before);
  progress.done();
  const double train_seconds = fr.seconds;
  const std::string stop_reason =
      fr.reason == train::StopReason::patience
          ? "early stop: no better validation accuracy in " + std::to_string(s.patience) + " validations"
      : fo.time_budget_s > 0 && step < total ? std::string("time budget reached")
                                             : std::string("all epochs done");
  progress.note(stop_reason + "; kept the weights of step " + std::to_string(fr.best_step) +
                " (valid accuracy " + pct(fr.best.score) + ")");
  // ---- the short validation slice (kShortValidChars), of the kept weights and of the average ----
  std::vector<Tensor> short_cache, short_fv;
  std::vector<int32_t> short_y;
  for (std::size_t i = 0; i < valid_rows.size(); ++i)
    if (static_cast<int64_t>(text::decode_utf8(ds.examples[valid_rows[i]].text).size()) <= kShortValidChars) {
      short_cache.push_back(valid_cache[i]);
      if (!valid_fv.empty()) short_fv.push_back(valid_fv[i]);
      short_y.push_back(valid_y[i]);
    }
  double valid_accuracy = fr.best.score, valid_loss = fr.best.loss;
  Value swa_json;
  if (swa_count > 0) {
    // The averaged weights replace the kept ones when their validation accuracy is at least as good.
    const double kept_short =
        short_cache.empty() ? 0.0 : evaluate_cached(model, short_cache, short_y, k, short_fv).accuracy;
    std::vector<std::vector<float>> kept;
    for (auto& np : trainable) {
      float* w = np.second.data<float>();
      kept.emplace_back(w, w + np.second.numel());
    }
    for (std::size_t i = 0; i < trainable.size(); ++i) {
      float* w = trainable[i].second.data<float>();
      for (std::size_t j = 0; j < swa_sum[i].size(); ++j)
        w[j] = static_cast<float>(swa_sum[i][j] / static_cast<double>(swa_count));
    }
    const EvalResult av = evaluate_cached(model, valid_cache, valid_y, k, valid_fv);
    const double av_short =
        short_cache.empty() ? 0.0 : evaluate_cached(model, short_cache, short_y, k, short_fv).accuracy;
    const bool use = av.accuracy >= fr.best.score;
    if (use) {
      valid_accuracy = av.accuracy;
      valid_loss = av.loss;
    } else {
      for (std::size_t i = 0; i < trainable.size(); ++i)
        std::copy(kept[i].begin(), kept[i].end(), trainable[i].second.data<float>());
    }
    progress.note("weights averaged over steps " + std::to_string(swa_start) + "-" + std::to_string(step) +
                  " (" + std::to_string(swa_count) + "): valid accuracy " + pct(av.accuracy) + " against " +
                  pct(fr.best.score) + "; " + (use ? "the average is kept" : "the kept weights stay"));
    swa_json = Value::object(
        {{"from_step", Value::integer(swa_start)},
         {"steps", Value::integer(swa_count)},
         {"valid_accuracy", Value::number(av.accuracy)},
         {"valid_short_accuracy", short_cache.empty() ? Value() : Value::number(av_short)},
         {"kept_valid_accuracy", Value::number(fr.best.score)},
         {"kept_valid_short_accuracy", short_cache.empty() ? Value() : Value::number(kept_short)},
         {"used", Value::boolean(use)}});
  }

  const double short_accuracy =
      short_cache.empty() ? 0.0 : evaluate_cached(model, short_cache, short_y, k, short_fv).accuracy;
  progress.note("short validation slice (at most " + std::to_string(kShortValidChars) +
                " characters): " + std::to_string(short_cache.size()) + " of " +
                std::to_string(valid_rows.size()) + " validation reviews, accuracy " +
                (short_cache.empty() ? std::string("-") : pct(short_accuracy)));

  // ---- test, clean set ----
  const auto t_test = Clock::now();
  const EvalResult te = evaluate_cached(model, test_cache, test_y, k, test_fv);
  const models::Metrics test = models::classification_metrics(te.truth, te.predicted, C);
  std::optional<models::Metrics> eval_metrics;
  if (eval_set) {
    std::vector<int32_t> truth, pred;
    const std::vector<models::Classification> cs = clf.classify(eval_set->texts());
    for (std::size_t i = 0; i < cs.size(); ++i) {
      truth.push_back(eval_set->examples[i].label);
      pred.push_back(cs[i].label);
    }
    eval_metrics = models::classification_metrics(truth, pred, C);
  }
  const double test_seconds = seconds_since(t_test);

  // Held-out test reviews for `attn classify --file`: short ones, both classes.
  std::string sample_text;
  for (int32_t c = 0; c < C; ++c) {
    int64_t taken = 0;
    for (int64_t i : split.test) {
      const auto n = static_cast<int64_t>(ex[i].ids.size());
      if (ds.examples[i].label == c && n >= 10 && n <= 30 && taken < 3) {
        sample_text += ds.examples[i].text + "\n";
        ++taken;
      }
    }
  }

  // ---- outputs ----
  const double total_seconds = seconds_since(t_start);
  const double tok_s = static_cast<double>(tokens) / std::max(1e-9, train_seconds);
  Value split_summary =
      Value::object({{"description", Value::string(split.describe())},
                     {"seed", Value::string(hex64(split.seed))},
                     {"input_hash", Value::string(hex64(split.input_hash))},
                     {"counts", Value::object({{"train", Value::integer(split.train.size())},
                                               {"valid", Value::integer(split.valid.size())},
                                               {"test", Value::integer(split.test.size())}})},
                     {"fine_tune_rows", Value::object({{"train", Value::integer(train_rows.size())},
                                                       {"valid", Value::integer(valid_rows.size())},
                                                       {"test", Value::integer(test_rows.size())}})},
                     {"dedup", Value::string(d.dedup.describe())}});
  Value hist = Value::array();
  for (const auto& h : history)
    hist.push_back(Value::object({{"step", Value::integer(h.step)},
                                  {"epoch", Value::integer(h.epoch + 1)},
                                  {"train_loss", Value::number(h.train_loss)},
                                  {"valid_loss", Value::number(h.valid_loss)},
                                  {"valid_accuracy", Value::number(h.valid_accuracy)},
                                  {"lr", Value::number(h.lr)},
                                  {"seconds", Value::number(h.seconds)}}));
  Value encoder = Value::object(
      {{"name", Value::string(pe.name)},
       {"source", Value::string(pe.source)},
       {"layers", Value::integer(n_layers)},
       {"frozen_embeddings", Value::boolean(s.freeze_embeddings)},
       {"frozen_layers", Value::integer(k)},
       {"trained_parameters", Value::integer(n_trainable)},
       {"max_len", Value::integer(max_len)},
       {"texts_truncated", Value::integer(truncated)},
       {"unknown_piece_rate", Value::number(static_cast<double>(unknown) / std::max<int64_t>(1, pieces))},
       {"prefix_tokens", Value::integer(prefix_tokens)},
       {"cache_file", cache_file.empty() ? Value() : Value::string(cache_file)},
       {"cache_hits", Value::integer(cache_hits)},
       {"pool", Value::string(cfg.mean_pool ? "mean" : "cls")},
       {"prefix", Value::string(prefix)},
       {"prefix_seconds", Value::number(prefix_seconds)},
       {"frozen_path", Value::string(s.frozen_path)},
       {"frozen_vector", Value::boolean(cfg.frozen_top > 0)},
       {"frozen_vector_seconds", Value::number(frozen_vector_seconds)}});
  Value training = Value::object({{"steps", Value::integer(step)},
                                  {"steps_per_epoch", Value::integer(steps_per_epoch)},
                                  {"batch_size", Value::integer(s.batch_size)},
                                  {"optimizer", Value::string("AdamW")},
                                  {"lr", Value::number(s.encoder_lr)},
                                  {"weight_decay", Value::number(s.weight_decay)},
                                  {"label_smoothing", Value::number(s.label_smoothing)},
                                  {"layer_lr_decay", Value::number(s.layer_lr_decay)},
                                  {"weight_average", swa_json},
                                  {"schedule", schedule.to_json()},
                                  {"bf16", Value::boolean(bf16_products)},
                                  {"stop_reason", Value::string(stop_reason)},
                                  {"best_step", Value::integer(fr.best_step)},
                                  {"skipped_steps", Value::integer(skipped)},
                                  {"first_step_loss", Value::number(first_loss)},
                                  {"train_seconds", Value::number(train_seconds)},
                                  {"tokens_per_second", Value::number(tok_s)},
                                  {"threads", Value::integer(num_threads())},
                                  {"history", hist}});
  Value report = Value::object(
      {{"task", Value::string("classify")},
       {"command", Value::string(s.command)},
       {"labels",
        [&] {
          Value l = Value::array();
          for (const auto& n : ds.label_names) l.push_back(Value::string(n));
          return l;
        }()},
       {"split", split_summary},
       {"encoder", encoder},
       {"model",
        Value::object({{"config", cfg.to_json()}, {"parameters", Value::integer(model.num_parameters())}})},
       {"training", training},
       {"valid",
        Value::object({{"accuracy", Value::number(valid_accuracy)}, {"loss", Value::number(valid_loss)}})},
       {"valid_short",
        Value::object({{"max_chars", Value::integer(kShortValidChars)},
                       {"count", Value::integer(static_cast<int64_t>(short_cache.size()))},
                       {"accuracy", short_cache.empty() ? Value() : Value::number(short_accuracy)}})},
       {"test", test.to_json(ds.label_names)},
       {"baseline",
        Value::object({{"name", Value::string("multinomial naive Bayes, character unigrams + bigrams")},
                       {"test", base.test.to_json(ds.label_names)}})},
       {"logistic_regression",
        Value::object({{"name", Value::string("logistic regression, character 1-2-grams")},
                       {"test", base.lr_test.to_json(ds.label_names)}})},
       {"clean_eval", eval_set
                          ? Value::object({{"file", Value::string(s.eval)},
                                           {"count", Value::integer(eval_set->size())},
                                           {"model", eval_metrics->to_json(ds.label_names)},
                                           {"baseline", base.eval->to_json(ds.label_names)},
                                           {"logistic_regression", base.lr_eval->to_json(ds.label_names)}})
                          : Value()},
       {"total_seconds", Value::number(total_seconds)}});

  std::string md = "# Review classifier (fine-tuned " + pe.name + "): test report\n\n";
  md += "Command: `" + s.command + "`\n\n";
  md += "## Test results (" + std::to_string(test.count) + " held-out examples)\n\n";
  md += "| model | accuracy | macro F1";
  for (const auto& l : ds.label_names) md += " | " + l + " P / R / F1";
  md += " |\n|---|---:|---:";
  for (std::size_t i = 0; i < ds.label_names.size(); ++i) md += "|---:";
  md += "|\n";
  md += metrics_rows("fine-tuned " + pe.name, test);
  md += metrics_rows("naive Bayes baseline", base.test);
  md += metrics_rows("logistic regression baseline", base.lr_test);
  md += confusion_md("Fine-tuned " + pe.name, test, ds.label_names);
  md += confusion_md("Logistic regression baseline", base.lr_test, ds.label_names);
  if (eval_set) {
    md +=
        "\n## Clean evaluation set (" + std::to_string(eval_set->size()) + " examples, `" + s.eval + "`)\n\n";
    md += "| model | accuracy | macro F1 |\n|---|---:|---:|\n";
    md += "| fine-tuned " + pe.name + " | " + pct(eval_metrics->accuracy) + " | " +
          fmt("%.4f", eval_metrics->macro_f1) + " |\n";
    md += "| naive Bayes baseline | " + pct(base.eval->accuracy) + " | " + fmt("%.4f", base.eval->macro_f1) +
          " |\n";
    md += "| logistic regression baseline | " + pct(base.lr_eval->accuracy) + " | " +
          fmt("%.4f", base.lr_eval->macro_f1) + " |\n";
    md += confusion_md("Fine-tuned " + pe.name, *eval_metrics, ds.label_names);
  }
  md += "\n## Encoder and training\n\n";
  md +=
      "- " + pe.name + " from `" + pe.source + "`: " + std::to_string(n_layers) +
      " post-norm layers, hidden " + std::to_string(cfg.d_model) + ", " + std::to_string(cfg.heads) +
      " heads; a " + (cfg.mean_pool ? std::string("mean-pooled") : std::string("[CLS]")) +
      " head (Linear) on top" +
      (cfg.frozen_top > 0 ? ", reading also the pooled vector of a frozen copy of the trained layers" : "") +
      "\n";
  md += "- frozen: " + (s.freeze_embeddings ? frozen_part_name(k) : std::string("nothing")) +
        ", computed once per example (" + std::to_string(prefix_tokens) + " tokens in " +
        duration(prefix_seconds) + "); trained: " + std::to_string(n_trainable) + " parameters\n";
  md += "- max length " + std::to_string(max_len) + " pieces: " + std::to_string(truncated) + " of " +
        std::to_string(ds.size()) + " texts cut\n";
  md += "- fine-tuned on " + std::to_string(train_rows.size()) + " of " + std::to_string(split.train.size()) +
        " training examples, validated on " + std::to_string(valid_rows.size()) +
        "; the test split is whole\n";
  md += "- AdamW (lr " + fmt("%g", s.encoder_lr) + "), warmup " + std::to_string(warmup) + " + cosine over " +
        std::to_string(total) + " steps, batches of " + std::to_string(s.batch_size) +
        (bf16_products ? ", bf16 products" : "") + "\n";
  md += "- " + std::to_string(step) + " steps in " + duration(train_seconds) + " on " +
        std::to_string(num_threads()) + " threads, " + fmt("%.0f", tok_s) +
        " tokens/s through the trained layers; " + stop_reason + "\n";
  md +=
      "- best validation accuracy " + pct(fr.best.score) + " at step " + std::to_string(fr.best_step) + "\n";
  md += "\nTotal time " + duration(total_seconds) + ".\n";

  Value extra = Value::object({{"split", split_summary},
                               {"encoder", encoder},
                               {"test_accuracy", Value::number(test.accuracy)},
                               {"baseline_test_accuracy", Value::number(base.test.accuracy)}});
  write_outputs(s.out, clf, extra, split, sample_text, report, md);
  created.keep();

  ClassifyTrainResult result;
  result.summary = "fine-tuned " + pe.name + ": test accuracy " + pct(test.accuracy) + " (macro F1 " +
                   fmt("%.4f", test.macro_f1) + ") on " + std::to_string(test.count) +
                   " held-out reviews; naive Bayes " + pct(base.test.accuracy) + ", logistic regression " +
                   pct(base.lr_test.accuracy) + "\n";
  if (eval_set)
    result.summary += "clean set (" + std::to_string(eval_set->size()) + " reviews, " + s.eval +
                      "): fine-tuned " + pct(eval_metrics->accuracy) + ", naive Bayes " +
                      pct(base.eval->accuracy) + ", logistic regression " + pct(base.lr_eval->accuracy) +
                      "\n";
  result.summary += "fine-tuned " + std::to_string(step) + " steps in " + duration(train_seconds) + " (" +
                    fmt("%.0f", tok_s) + " tokens/s), frozen part " + duration(prefix_seconds) + ", test " +
                    duration(test_seconds) + "; model " + (fs::path(s.out) / "model.attn").string() + "\n";
  result.report = std::move(report);
  result.report_md = std::move(md);
  result.test_accuracy = test.accuracy;
  result.baseline_test_accuracy = base.test.accuracy;
  result.lr_test_accuracy = base.lr_test.accuracy;
  if (eval_set) {
    result.eval_accuracy = eval_metrics->accuracy;
    result.baseline_eval_accuracy = base.eval->accuracy;
    result.lr_eval_accuracy = base.lr_eval->accuracy;
  }
  result.test_count = test.count;
  result.model_path = (fs::path(s.out) / "model.attn").string();
  return result;
}

}  // namespace

ClassifyTrainResult train_classifier(const ClassifyTrainOptions& options) {
  ClassifyTrainOptions s = resolve(options);
  const auto t_start = Clock::now();
  StepProgress progress(s.progress);

  // Data parallel: rank 0 alone writes (and probes) the output folder.
  train::Communicator& comm = s.comm ? *s.comm : train::single_process();
  const bool writer = comm.rank() == 0;
  // Output folder first: a run that cannot save should fail before training.
  std::error_code ec;
  CreatedFolders created(writer ? s.out : std::string());
  if (writer) fs::create_directories(s.out, ec);
  ATTN_CHECK(!writer || (!ec && fs::is_directory(s.out)), "cannot create the output folder '", s.out, "'",
             ec ? ": " + ec.message() : std::string());
  if (writer) {
    const std::string probe = (fs::path(s.out) / ".write-test").string();
    io::write_file_atomically(probe, "ok\n");
    std::remove(probe.c_str());
  }

  if (!s.encoder.empty()) {
    // The fine-tune runs its epochs; only a --minutes the caller gave stops it earlier (not the
    // preset's budget for the from-scratch model, which on a slow machine cut it short silently).
    s.minutes = options.minutes;
    return finetune_classifier(s, t_start, progress, created);
  }

  // ---- data ----
  const Prepared prep = prepare(s, progress);
  const LoadedData& d = prep.d;
  const data::Dataset& ds = d.dataset;
  const data::Split& split = prep.split;
  const text::CharTokenizerOptions& to = prep.to;
  const text::CharTokenizer& tokenizer = prep.tokenizer;
  const data::EncodedDataset& enc = prep.enc;
  const std::vector<int64_t>& length = prep.length;
  const int64_t trunc_train = prep.trunc_train, trunc_valid = prep.trunc_valid, trunc_test = prep.trunc_test;
  const int64_t trunc_total = trunc_train + trunc_valid + trunc_test;

  // ---- baseline ----
  const auto C = static_cast<int32_t>(ds.label_names.size());
  const std::optional<data::Dataset> eval_set = load_eval_set(s, ds.label_names);
  const Baseline base = train_baseline(ds, split, to, eval_set ? &*eval_set : nullptr, s.seed);
  const models::NaiveBayes& nb = base.nb;
  const models::Metrics &nb_valid = base.valid, &nb_test = base.test;
  const double nb_seconds = base.seconds;
  progress.note("baseline (naive Bayes, character unigrams + bigrams): valid accuracy " +
                pct(nb_valid.accuracy) + ", trained in " + fmt("%.1f", nb_seconds) + " s");
  progress.note("baseline (logistic regression, character unigrams + bigrams): valid accuracy " +
                pct(base.lr_valid.accuracy) + ", trained in " + fmt("%.1f", base.lr_seconds) + " s");

  // ---- model ----
  models::TransformerConfig cfg;
  cfg.src_vocab = tokenizer.vocab().size();
  cfg.num_classes = C;
  cfg.d_model = s.d_model;
  cfg.heads = s.heads;
  cfg.d_ff = s.d_ff;
  cfg.encoder_layers = s.layers;
  cfg.decoder_layers = 0;
  cfg.dropout = s.dropout;
  cfg.max_len = s.max_len;
  cfg.pre_norm = true;
  cfg.activation = nn::Activation::gelu;
  cfg.positions = models::Positions::learned;
  cfg.scale_embeddings = false;
  cfg.tie_output = false;
  cfg.share_embeddings = false;
  cfg.seed = s.seed;
  if (comm.size() > 1) {  // every rank must have read the same data and built the same model
    uint64_t data_hash = kFnvOffset;
    for (const auto& e : ds.examples)
      data_hash = fnv1a64(e.text + '\t' + std::to_string(e.label) + '\n', data_hash);
    std::string vocab_text;
    for (const auto& tkn : tokenizer.vocab().tokens()) vocab_text += tkn + '\n';
    train::check_same_on_all_ranks(
        comm, {{"the examples read from the data files", data_hash},
               {"the vocabulary", fnv1a64(vocab_text)},
               {"the model configuration", fnv1a64(json::dump(cfg.to_json()))},
               {"the training options (--batch-size, --lr, --epochs, --minutes, --seed, --clip)",
                fnv1a64(detail::strf("%lld %.17g %lld %.17g %llu %.17g", static_cast<long long>(s.batch_size),
                                     s.lr, static_cast<long long>(s.epochs), s.minutes,
                                     static_cast<unsigned long long>(s.seed), s.clip))}});
    progress.note("data parallel: " + std::to_string(comm.size()) + " ranks (" + comm.name() + "), about " +
                  std::to_string((s.batch_size + comm.size() - 1) / comm.size()) +
                  " examples of each batch per rank");
  }
  models::TextClassifier clf(cfg, tokenizer, ds.label_names, s.max_len);
  models::EncoderClassifier& model = clf.model();
  const NamedParams params = model.named_parameters();
  train::AdamWOptions ao;
  ao.lr = s.lr;
  ao.weight_decay = s.weight_decay;
  ao.no_decay = [](const std::string& n) {
    return train::default_no_decay(n) || n.find("embed") != std::string::npos || n.rfind("pos.", 0) == 0;
  };
  train::AdamW opt(params, ao);
  progress.note("model: " + std::to_string(s.layers) + " layers, d_model " + std::to_string(s.d_model) +
                ", " + std::to_string(s.heads) + " heads, d_ff " + std::to_string(s.d_ff) + ", " +
                std::to_string(model.num_parameters()) + " parameters; " +
                (s.epochs > 0 ? std::to_string(s.epochs) + " epochs" : fmt("%.1f", s.minutes) + " minutes"));

  const int64_t steps_per_epoch =
      (static_cast<int64_t>(split.train.size()) + s.batch_size - 1) / s.batch_size;
  const int64_t eval_every = s.eval_every > 0 ? s.eval_every : steps_per_epoch;
  const double budget = s.minutes * 60.0;
  int64_t total = s.epochs > 0 ? s.epochs * steps_per_epoch : 0;  // 0: estimated from the first steps
  int64_t warmup = s.epochs > 0 ? std::max<int64_t>(1, total / 20) : 0;
  const int64_t probe_steps = 20;
  const BudgetSchedule schedule(s.lr, total, warmup);
  train::TrainerOptions tro;
  tro.clip_norm = s.clip;
  tro.comm = &comm;
  train::Trainer trainer(opt, schedule, tro, s.seed);

  struct HistoryRow {
    int64_t step, epoch;
    double train_loss, valid_loss, valid_accuracy, lr, seconds;
  };
  std::vector<HistoryRow> history;
  int64_t step = 0, tokens = 0, skipped = 0;
  double first_loss = 0;
  data::SequenceOptions seq;
  seq.max_len = s.max_len;
  seq.pad_to_max = false;

  std::vector<std::vector<int64_t>> batches;
  train::FitHooks hooks;
  hooks.epoch_batches = [&](int64_t epoch) {
    batches = bucketed_batches(split.train, length, s.batch_size, s.seed, epoch);
    return static_cast<int64_t>(batches.size());
  };
  int64_t step_tokens = 0;  // this rank's tokens of the update
  hooks.loss = [&](int64_t, int64_t bi, const train::StepContext& ctx) -> train::Loss {
    model.train();
    // This rank's shard; the loss is the mean over its examples, weighted by their number.
    const std::vector<int64_t> rows =
        train::shard_rows(batches[static_cast<std::size_t>(bi)], ctx.rank, ctx.world);
    if (rows.empty()) return train::Loss{Tensor(), 0.0};
    data::Batch b = data::make_batch(enc, rows, seq);
    const Tensor lens = b.lengths;
    std::vector<int64_t> lengths(lens.data<int64_t>(), lens.data<int64_t>() + lens.numel());
    for (int64_t l : lengths) step_tokens += l;
    return train::Loss{model.forward(b.ids, lengths, b.labels).loss, static_cast<double>(rows.size())};
  };
  hooks.evaluate = [&] {
    const EvalResult v = evaluate(model, enc, split.valid, length, s.max_len);
    return train::EvalScore{v.accuracy, v.loss};
  };
  hooks.on_step = [&](train::FitStep& fs) {
    const train::StepResult& r = fs.result;
    step = r.step;
    double t = static_cast<double>(step_tokens);
    comm.allreduce_sum(&t, 1);  // the whole batch's tokens (every rank runs on_step)
    tokens += static_cast<int64_t>(t);
    step_tokens = 0;
    if (r.skipped || !std::isfinite(r.loss)) {
      ++skipped;
      progress.note("step " + std::to_string(step) + ": non-finite loss or gradient; update skipped");
      ATTN_CHECK(skipped <= 20, "training diverged: ", skipped,
                 " updates skipped for NaN/Inf (try a lower --lr)");
    }
    if (step == 1) first_loss = r.loss;
    if (s.epochs == 0 && (step == probe_steps || (total > 0 && step % eval_every == 0))) {
      // Fit the schedule to the time budget: steps left at the mean pace so far.
      const double per_step = fs.seconds / static_cast<double>(step);
      const int64_t est = step + static_cast<int64_t>((budget - fs.seconds) / per_step);
      if (total == 0) warmup = std::max<int64_t>(probe_steps + 1, est / 20);
      total = std::max(step + 1, std::min<int64_t>(est, s.max_epochs * steps_per_epoch));
      // The warmup comes from the time estimate, the total may be capped by --max-epochs
      // far below it (small data): the schedule needs warmup < total.
      warmup = std::min(warmup, total - 1);
      fs.max_steps = total;
    }
    const double eta = total > 0 ? fs.seconds / step * static_cast<double>(total - step) : 0;
    progress.step(step, total, fs.epoch, r.loss, static_cast<double>(tokens) / std::max(1e-9, fs.seconds),
                  eta);
  };
  hooks.on_eval = [&](const train::FitEval& e) {
    history.push_back({e.step, e.epoch, e.train_loss, e.score.loss, e.score.score, e.lr, e.seconds});
    progress.note("step " + std::to_string(e.step) + " epoch " + std::to_string(e.epoch + 1) +
                  ": train loss " + fmt("%.4f", e.train_loss) + ", valid loss " + fmt("%.4f", e.score.loss) +
                  ", valid accuracy " + pct(e.score.score) + (e.best ? " (best)" : ""));
  };
  train::FitOptions fo;
  fo.epochs = s.epochs;
  fo.time_budget_s = s.epochs > 0 ? 0.0 : budget;
  fo.eval_every = s.eval_every;
  fo.patience = s.patience;
  fo.keep_best = true;
  const train::FitResult fr = train::fit(trainer, hooks, fo, params);
  progress.done();
  if (!writer) return ClassifyTrainResult{};  // rank 0 tests and writes
  const double train_seconds = fr.seconds;
  const int64_t epoch = fr.epoch;
  const int64_t best_step = fr.best_step;
  const double best_acc = fr.best.score;
  const std::string stop_reason =
      fr.reason == train::StopReason::patience
          ? "early stop: no better validation accuracy in " + std::to_string(s.patience) + " validations"
      : s.epochs > 0 ? std::string("all epochs done")
      : total >= s.max_epochs * steps_per_epoch
          ? "schedule done (--max-epochs " + std::to_string(s.max_epochs) + ")"
          : std::string("time budget reached");
  progress.note(stop_reason + "; kept the weights of step " + std::to_string(best_step) +
                " (valid accuracy " + pct(best_acc) + ")");

  // ---- test ----
  const EvalResult te = evaluate(model, enc, split.test, length, s.max_len);
  const models::Metrics test = models::classification_metrics(te.truth, te.predicted, C);
  const EvalResult va = evaluate(model, enc, split.valid, length, s.max_len);
  std::optional<models::Metrics> eval_metrics;
  if (eval_set) {
    std::vector<int32_t> truth, pred;
    const std::vector<models::Classification> cs = clf.classify(eval_set->texts());
    for (std::size_t i = 0; i < cs.size(); ++i) {
      truth.push_back(eval_set->examples[i].label);
      pred.push_back(cs[i].label);
    }
    eval_metrics = models::classification_metrics(truth, pred, C);
  }

  // A few held-out test reviews, short ones, both classes, for `attn classify --file`.
  std::vector<std::string> sample;
  {
    std::vector<int64_t> picks;
    for (int32_t c = 0; c < C; ++c) {
      int64_t taken = 0;
      for (int64_t i : split.test)
        if (ds.examples[i].label == c && length[i] >= 12 && length[i] <= 40 && taken < 3) {
          picks.push_back(i);
          ++taken;
        }
    }
    for (int64_t i : picks) sample.push_back(ds.examples[i].text);
  }

  // ---- outputs ----
  const double total_seconds = seconds_since(t_start);
  Value data_counts = Value::object(
      {{"sources",
        [&] {
          Value a2 = Value::array();
          for (const auto& f : d.sources) a2.push_back(Value::string(f));
          return a2;
        }()},
       {"records_read", Value::integer(d.raw.report.records)},
       {"examples_read", Value::integer(d.raw.size())},
       {"empty_skipped", Value::integer(d.raw.report.empty_skipped)},
       {"lines_cut_to_max_chars", Value::integer(d.raw.report.truncated)},
       {"max_chars", Value::integer(s.max_chars)},
       {"duplicates_removed", Value::integer(d.dedup.duplicates_removed)},
       {"conflicting_texts", Value::integer(d.dedup.conflicting_texts)},
       {"conflicting_removed", Value::integer(d.dedup.conflicting_removed)},
       {"distinct_examples", Value::integer(ds.size())},
       {"class_counts", int_array(ds.class_counts())},
       {"texts_cut_to_max_len", Value::object({{"train", Value::integer(trunc_train)},
                                               {"valid", Value::integer(trunc_valid)},
                                               {"test", Value::integer(trunc_test)}})},
       {"unknown_token_rate", Value::number(enc.total_tokens > 0 ? static_cast<double>(enc.unknown_tokens) /
                                                                       static_cast<double>(enc.total_tokens)
                                                                 : 0.0)}});
  Value split_summary = Value::object(
      {{"description", Value::string(split.describe())},
       {"method", Value::string(split.method)},
       {"seed", Value::string(hex64(split.seed))},
       {"fractions", Value::array({Value::number(split.fractions[0]), Value::number(split.fractions[1]),
                                   Value::number(split.fractions[2])})},
       {"num_examples", Value::integer(split.num_examples)},
       {"input_hash", Value::string(hex64(split.input_hash))},
       {"counts", Value::object({{"train", Value::integer(split.train.size())},
                                 {"valid", Value::integer(split.valid.size())},
                                 {"test", Value::integer(split.test.size())}})},
       {"train_class_counts", int_array(data::class_counts(ds, split.train))},
       {"test_class_counts", int_array(data::class_counts(ds, split.test))},
       {"dedup", Value::string(d.dedup.describe())}});
  Value hist = Value::array();
  for (const auto& h : history)
    hist.push_back(Value::object({{"step", Value::integer(h.step)},
                                  {"epoch", Value::integer(h.epoch + 1)},
                                  {"train_loss", Value::number(h.train_loss)},
                                  {"valid_loss", Value::number(h.valid_loss)},
                                  {"valid_accuracy", Value::number(h.valid_accuracy)},
                                  {"lr", Value::number(h.lr)},
                                  {"seconds", Value::number(h.seconds)}}));
  Value training = Value::object(
      {{"steps", Value::integer(step)},
       {"epochs_started", Value::integer(epoch + 1)},
       {"steps_per_epoch", Value::integer(steps_per_epoch)},
       {"batch_size", Value::integer(s.batch_size)},
       {"optimizer", Value::string("AdamW")},
       {"lr", Value::number(s.lr)},
       {"weight_decay", Value::number(s.weight_decay)},
       {"clip", Value::number(s.clip)},
       {"schedule",
        total > 0 ? train::WarmupCosineSchedule(s.lr, warmup, total, s.lr * 0.02).to_json() : Value()},
       {"budget_minutes", s.epochs > 0 ? Value() : Value::number(s.minutes)},
       {"epochs_requested", s.epochs > 0 ? Value::integer(s.epochs) : Value()},
       {"stop_reason", Value::string(stop_reason)},
       {"best_step", Value::integer(best_step)},
       {"skipped_steps", Value::integer(skipped)},
       {"first_step_loss", Value::number(first_loss)},
       {"train_seconds", Value::number(train_seconds)},
       {"tokens_per_second", Value::number(static_cast<double>(tokens) / std::max(1e-9, train_seconds))},
       {"threads", Value::integer(num_threads())},
       {"history", hist}});
  Value report = Value::object(
      {{"task", Value::string("classify")},
       {"command", Value::string(s.command)},
       {"labels",
        [&] {
          Value l = Value::array();
          for (const auto& n : ds.label_names) l.push_back(Value::string(n));
          return l;
        }()},
       {"data", data_counts},
       {"split", split_summary},
       {"tokenizer", Value::object({{"options", models::char_tokenizer_options_json(to)},
                                    {"vocab_size", Value::integer(tokenizer.vocab().size())},
                                    {"min_freq", Value::integer(s.min_freq)},
                                    {"max_len", Value::integer(s.max_len)}})},
       {"model",
        Value::object({{"config", cfg.to_json()}, {"parameters", Value::integer(model.num_parameters())}})},
       {"training", training},
       {"valid", Value::object({{"accuracy", Value::number(va.accuracy)}, {"loss", Value::number(va.loss)}})},
       {"test", test.to_json(ds.label_names)},
       {"baseline",
        Value::object(
            {{"name", Value::string("multinomial naive Bayes, character unigrams + bigrams, alpha 1")},
             {"features", Value::integer(nb.num_features())},
             {"seconds", Value::number(nb_seconds)},
             {"valid_accuracy", Value::number(nb_valid.accuracy)},
             {"test", nb_test.to_json(ds.label_names)}})},
       {"logistic_regression",
        Value::object(
            {{"name", Value::string("logistic regression (softmax, L2 " + fmt("%g", base.lr.options().l2) +
                                    "), binary character unigrams + bigrams, unit-norm rows, SGD " +
                                    std::to_string(base.lr.options().epochs) + " epochs")},
             {"features", Value::integer(base.lr.num_features())},
             {"seconds", Value::number(base.lr_seconds)},
             {"valid_accuracy", Value::number(base.lr_valid.accuracy)},
             {"test", base.lr_test.to_json(ds.label_names)}})},
       {"clean_eval", eval_set
                          ? Value::object({{"file", Value::string(s.eval)},
                                           {"count", Value::integer(eval_set->size())},
                                           {"model", eval_metrics->to_json(ds.label_names)},
                                           {"baseline", base.eval->to_json(ds.label_names)},
                                           {"logistic_regression", base.lr_eval->to_json(ds.label_names)}})
                          : Value()},
       {"total_seconds", Value::number(total_seconds)},
       {"outputs",
        Value::object({{"model", Value::string((fs::path(s.out) / "model.attn").string())},
                       {"report_md", Value::string((fs::path(s.out) / "report.md").string())},
                       {"split", Value::string((fs::path(s.out) / "split.json").string())},
                       {"test_sample", Value::string((fs::path(s.out) / "test-sample.txt").string())}})}});

  std::string md = "# Review classifier: test report\n\n";
  md += "Command: `" + s.command + "`\n\n";
  md += "## Test results (" + std::to_string(test.count) + " held-out examples)\n\n";
  md += "| model | accuracy | macro F1";
  for (const auto& l : ds.label_names) md += " | " + l + " P / R / F1";
  md += " |\n|---|---:|---:";
  for (std::size_t i = 0; i < ds.label_names.size(); ++i) md += "|---:";
  md += "|\n";
  md += metrics_rows("Transformer encoder", test);
  md += metrics_rows("naive Bayes baseline", nb_test);
  md += metrics_rows("logistic regression baseline", base.lr_test);
  md += confusion_md("Transformer encoder", test, ds.label_names);
  md += confusion_md("Naive Bayes baseline", nb_test, ds.label_names);
  md += confusion_md("Logistic regression baseline", base.lr_test, ds.label_names);
  if (eval_set) {
    md +=
        "\n## Clean evaluation set (" + std::to_string(eval_set->size()) + " examples, `" + s.eval + "`)\n\n";
    md += "| model | accuracy | macro F1";
    for (const auto& l : ds.label_names) md += " | " + l + " P / R / F1";
    md += " |\n|---|---:|---:";
    for (std::size_t i = 0; i < ds.label_names.size(); ++i) md += "|---:";
    md += "|\n";
    md += metrics_rows("Transformer encoder", *eval_metrics);
    md += metrics_rows("naive Bayes baseline", *base.eval);
    md += metrics_rows("logistic regression baseline", *base.lr_eval);
    md += confusion_md("Transformer encoder", *eval_metrics, ds.label_names);
  }
  md += "\n## Data\n\n";
  for (const auto& f : d.sources) md += "- source: `" + f + "`\n";
  md += "- read: " + std::to_string(d.raw.size()) + " examples (" + d.raw.report.describe() + ")\n";
  md += "- deduplicated: " + std::to_string(ds.size()) + " distinct examples (" + d.dedup.describe() +
        "); a text seen with both labels is removed entirely\n";
  md += "- split: " + split.describe() + "\n";
  md += "- tokenizer: one token per character; vocabulary of " + std::to_string(tokenizer.vocab().size()) +
        " from the training split only (min frequency " + std::to_string(s.min_freq) + ")\n";
  md += "- max length " + std::to_string(s.max_len) + " tokens ([CLS] + " + std::to_string(s.max_len - 1) +
        " characters): " + std::to_string(trunc_total) + " texts cut (train " + std::to_string(trunc_train) +
        ", valid " + std::to_string(trunc_valid) + ", test " + std::to_string(trunc_test) + ")\n";
  md += "\n## Model and training\n\n";
  md += "- EncoderClassifier: " + std::to_string(s.layers) + " pre-norm layers, d_model " +
        std::to_string(s.d_model) + ", " + std::to_string(s.heads) + " heads, d_ff " +
        std::to_string(s.d_ff) + ", GELU, learned positions, dropout " + fmt("%.2f", s.dropout) + ", " +
        std::to_string(model.num_parameters()) + " parameters\n";
  md += "- AdamW (lr " + fmt("%g", s.lr) + ", weight decay " + fmt("%g", s.weight_decay) + "), warmup " +
        std::to_string(warmup) + " steps + cosine to step " + std::to_string(total) + ", clipping at " +
        fmt("%g", s.clip) + ", batches of " + std::to_string(s.batch_size) + " bucketed by length\n";
  md += "- " + std::to_string(step) + " steps (" + fmt("%.2f", static_cast<double>(step) / steps_per_epoch) +
        " epochs) in " + duration(train_seconds) + " on " + std::to_string(num_threads()) + " threads, " +
        fmt("%.0f", static_cast<double>(tokens) / std::max(1e-9, train_seconds)) + " tokens/s; " +
        stop_reason + "\n";
  md += "- best validation accuracy " + pct(best_acc) + " at step " + std::to_string(best_step) +
        " (those weights are saved); baseline validation accuracy " + pct(nb_valid.accuracy) + "\n";
  md +=
      "\n| step | epoch | train loss | valid loss | valid accuracy | lr |\n|---:|---:|---:|---:|---:|---:|\n";
  for (const auto& h : history)
    md += "| " + std::to_string(h.step) + " | " + std::to_string(h.epoch + 1) + " | " +
          fmt("%.4f", h.train_loss) + " | " + fmt("%.4f", h.valid_loss) + " | " + pct(h.valid_accuracy) +
          " | " + fmt("%.2e", h.lr) + " |\n";
  md += "\nTotal time " + duration(total_seconds) + ". Classify with `attn classify --model " +
        (fs::path(s.out) / "model.attn").string() + " \"...\"`.\n";

  std::string sample_text;
  for (const auto& t : sample) sample_text += t + "\n";
  Value extra = Value::object({{"split", split_summary},
                               {"data", data_counts},
                               {"test_accuracy", Value::number(test.accuracy)},
                               {"baseline_test_accuracy", Value::number(nb_test.accuracy)}});
  write_outputs(s.out, clf, extra, split, sample_text, report, md);
  created.keep();

  ClassifyTrainResult result;
  char line[512];
  std::snprintf(
      line, sizeof line,
      "test accuracy %s (macro F1 %.4f) vs naive Bayes baseline %s (macro F1 %.4f), on %lld held-out "
      "reviews\n",
      pct(test.accuracy).c_str(), test.macro_f1, pct(nb_test.accuracy).c_str(), nb_test.macro_f1,
      static_cast<long long>(test.count));
  result.summary = line;
  result.summary +=
      "logistic regression baseline " + pct(base.lr_test.accuracy) + " on the same test split\n";
  if (eval_set)
    result.summary += "clean set (" + std::to_string(eval_set->size()) + " reviews, " + s.eval + "): model " +
                      pct(eval_metrics->accuracy) + ", naive Bayes " + pct(base.eval->accuracy) +
                      ", logistic regression " + pct(base.lr_eval->accuracy) + "\n";
  result.summary += "trained " + std::to_string(step) + " steps in " + duration(train_seconds) + "; model " +
                    (fs::path(s.out) / "model.attn").string() + ", report " +
                    (fs::path(s.out) / "report.md").string() + "\n";
  result.report = std::move(report);
  result.report_md = std::move(md);
  result.test_accuracy = test.accuracy;
  result.baseline_test_accuracy = nb_test.accuracy;
  result.lr_test_accuracy = base.lr_test.accuracy;
  if (eval_set) {
    result.eval_accuracy = eval_metrics->accuracy;
    result.baseline_eval_accuracy = base.eval->accuracy;
    result.lr_eval_accuracy = base.lr_eval->accuracy;
  }
  result.test_count = test.count;
  result.model_path = (fs::path(s.out) / "model.attn").string();
  return result;
}

}  // namespace attn::tasks
