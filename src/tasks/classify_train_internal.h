// Shared by the rooms of tasks::train_classifier (include/attn/tasks/classify.h); private to src/tasks.
//   classify_train.cc          the options, the driver and the from-scratch Transformer
//   classify_train_data.cc     data, the split and vocabulary, batches, evaluation, the baselines
//   classify_train_report.cc   progress lines, report pieces (JSON, markdown), the output folder
//   classify_train_encoder.cc  a pretrained encoder: opening it, its frozen part, its optimizer
//   classify_train_finetune.cc fine-tuning a pretrained encoder (ClassifyTrainOptions::encoder)
#pragma once

#include <attn/core/params.h>
#include <attn/core/tensor.h>
#include <attn/data/batch.h>
#include <attn/data/reader.h>
#include <attn/data/split.h>
#include <attn/io/json.h>
#include <attn/models/baseline.h>
#include <attn/models/bert.h>
#include <attn/models/bert_classifier.h>
#include <attn/models/text_classifier.h>
#include <attn/tasks/classify.h>
#include <attn/text/tokenizer.h>
#include <attn/train/fit.h>
#include <attn/train/optim.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace attn::tasks::classify_detail {

namespace fs = std::filesystem;
using json::Value;

// What a fine-tune with the embeddings frozen keeps frozen, for the log and the report: the embeddings and
// the lowest k layers ("layers 0-(k-1)"), or the embeddings alone when k is 0.
std::string frozen_part_name(int64_t k);

// ---- data (classify_train_data.cc) ----------------------------------------------------------------

struct LoadedData {
  data::Dataset raw;      // as read
  data::Dataset dataset;  // deduplicated
  data::DedupReport dedup;
  std::vector<std::string> sources;
};

// Reads --data or --pos/--neg (or the review data found on the data path) and deduplicates;
// fills s.pos and s.neg when neither was given.
LoadedData load_data(ClassifyTrainOptions& s);

// The second test set (ClassifyTrainOptions::eval), read with the training data's label names.
std::optional<data::Dataset> load_eval_set(const ClassifyTrainOptions& s,
                                           const std::vector<std::string>& labels);

// Length-bucketed batches for one epoch: the rows in a seeded random order are
// cut into pools of 50 batches, each pool is sorted by length and cut into
// batches, and the batches are shuffled; a batch is padded to its longest row.
std::vector<std::vector<int64_t>> bucketed_batches(const std::vector<int64_t>& rows,
                                                   const std::vector<int64_t>& length, int64_t batch_size,
                                                   uint64_t seed, int64_t epoch);

struct EvalResult {
  double loss = 0;
  std::vector<int32_t> predicted;  // per row, in the order of `rows`
  std::vector<int32_t> truth;
  double accuracy = 0;
};

EvalResult evaluate(models::EncoderClassifier& model, const data::EncodedDataset& enc,
                    const std::vector<int64_t>& rows, const std::vector<int64_t>& length, int64_t max_len);

// The baselines on the same split: naive Bayes and logistic regression over
// character unigrams + bigrams of the whole text (not cut to max_len).
struct Baseline {
  models::NaiveBayes nb;
  models::LogisticRegression lr;
  models::Metrics valid, test, lr_valid, lr_test;
  std::optional<models::Metrics> eval, lr_eval;  // on the second test set, when given
  double seconds = 0, lr_seconds = 0;
};

Baseline train_baseline(const data::Dataset& ds, const data::Split& split,
                        const text::CharTokenizerOptions& to, const data::Dataset* eval_set, uint64_t seed);

// The model's metrics on the second test set (through TextClassifier::classify); none without one.
std::optional<models::Metrics> clean_eval_metrics(models::TextClassifier& clf,
                                                  const std::optional<data::Dataset>& eval_set, int32_t C);

// ---- progress and report pieces (classify_train_report.cc) ----------------------------------------

class StepProgress {
 public:
  explicit StepProgress(const Progress& sink) : sink_(sink) {}
  // One training step done.
  void step(int64_t step, int64_t total, int64_t epoch, double loss, double tokens_per_s, double eta_s);
  // A line of its own (validation results, notes).
  void note(const std::string& s);
  void done();

 private:
  const Progress& sink_;
  bool open_ = false;
  double ema_ = 0;
};

// One validation during training, for the report.
struct HistoryRow {
  int64_t step, epoch;
  double train_loss, valid_loss, valid_accuracy, lr, seconds;
};

// Records a validation in `history` and prints its line.
void record_eval(std::vector<HistoryRow>& history, StepProgress& progress, const train::FitEval& e);

Value int_array(const std::vector<int64_t>& v);
Value labels_json(const std::vector<std::string>& names);
Value history_json(const std::vector<HistoryRow>& history);
std::string hex64(uint64_t v);
// report.json "clean_eval": the second test set's metrics (null without one).
Value clean_eval_json(const ClassifyTrainOptions& s, const std::optional<data::Dataset>& eval_set,
                      const std::optional<models::Metrics>& model, const Baseline& base,
                      const std::vector<std::string>& labels);

// The head of a markdown table of metrics rows: model, accuracy, macro F1, P / R / F1 per label.
std::string metrics_table_head(const std::vector<std::string>& labels);
// Markdown table of one set of metrics.
std::string metrics_rows(const std::string& name, const models::Metrics& m);
std::string confusion_md(const std::string& name, const models::Metrics& m,
                         const std::vector<std::string>& labels);

// The folders that creating `path` will make (the missing ones, outermost first).
// Unless keep() is called, the destructor removes those of them that are still
// empty, innermost first: a failed run leaves no empty --out folder behind, but
// never touches a folder that existed before or that holds anything.
class CreatedFolders {
 public:
  explicit CreatedFolders(const std::string& path);
  CreatedFolders(const CreatedFolders&) = delete;
  CreatedFolders& operator=(const CreatedFolders&) = delete;
  ~CreatedFolders();
  void keep() { kept_ = true; }

 private:
  std::vector<fs::path> missing_;
  bool kept_ = false;
};

// The five files are written into a staging folder next to the run folder and swapped in with one
// rename (io::StagedFolder): the folder never holds a model without its report or the other way
// round, even when the run is killed; what a killed run left there is removed by the next one.
void write_outputs(const std::string& out, const models::TextClassifier& clf, const Value& extra,
                   const data::Split& split, const std::string& sample_text, const Value& report,
                   const std::string& md);

// The fields of a ClassifyTrainResult that both recipes fill alike: the report, the accuracies
// and the model's path (the summary is each recipe's own).
void fill_result(ClassifyTrainResult& result, const ClassifyTrainOptions& s, Value report, std::string md,
                 const models::Metrics& test, const Baseline& base,
                 const std::optional<models::Metrics>& eval_metrics);

// ---- the from-scratch model's data (classify_train_data.cc) ----------------------------------------

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

Prepared prepare(ClassifyTrainOptions& s, StepProgress& progress);

// ---- a pretrained encoder (classify_train_encoder.cc) ---------------------------------------------

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

PretrainedEncoder open_encoder(const std::string& name, const std::string& file, const std::string& prefix);

// One example as the encoder reads it.
struct PieceExample {
  std::vector<int32_t> ids;
  bool truncated = false;
};

// Hidden states of `rows` after the frozen part (embeddings + layers [0, k)), one [len, C]
// tensor per row, computed once in eval mode in length-sorted batches.
std::vector<Tensor> frozen_prefix(models::EncoderClassifier& model, const std::vector<PieceExample>& ex,
                                  const std::vector<int64_t>& rows, int64_t k, int64_t& tokens);

// A batch of cached hidden states, padded with zeros: [B, L, C] and the lengths.
Tensor stack_hidden(const std::vector<Tensor>& cache, const std::vector<int64_t>& idx,
                    std::vector<int64_t>& lengths);

// The rows `idx` of per-example vectors ([C] each) as one [B, C] matrix; undefined when `vecs` is empty.
Tensor gather_vectors(const std::vector<Tensor>& vecs, const std::vector<int64_t>& idx);

// The frozen copy's pooled vector (EncoderClassifier::frozen_vector) of every cached row, [C] each,
// computed once in length-sorted batches; empty when the model has no frozen copy.
std::vector<Tensor> frozen_vectors(models::EncoderClassifier& model, const std::vector<Tensor>& cache,
                                   int64_t k);

// Accuracy, loss and predictions of the trained part over cached rows (eval mode).
EvalResult evaluate_cached(models::EncoderClassifier& model, const std::vector<Tensor>& cache,
                           const std::vector<int32_t>& labels, int64_t k,
                           const std::vector<Tensor>& frozen = {});

// The short validation slice: the validation rows of at most this many characters (code points of
// the text as read), selected by length only. The validation split has the test split's distribution
// (many sentences cut from long reviews); short whole reviews behave differently, so every fine-tune
// reports its accuracy on this slice as well (report.json "valid_short").
constexpr int64_t kShortValidChars = 30;

// AdamW over `params`; with decay < 1 layer-wise learning-rate decay (ClassifyTrainOptions::
// layer_lr_decay): encoder layer i of n takes lr · decay^(n - i) and everything else trained (the
// head) takes lr, so the layers nearest the pretrained input move least.
std::unique_ptr<train::Optimizer> finetune_optimizer(const NamedParams& params, const train::AdamWOptions& o,
                                                     int64_t n_layers, double decay);

// A seeded pick of at most n rows (n <= 0: all), in a random order.
std::vector<int64_t> pick_rows(const std::vector<int64_t>& rows, int64_t n, uint64_t seed);

// ---- the fine-tune (classify_train_finetune.cc) -----------------------------------------------------

ClassifyTrainResult finetune_classifier(ClassifyTrainOptions& s,
                                        std::chrono::steady_clock::time_point t_start, StepProgress& progress,
                                        CreatedFolders& created);

}  // namespace attn::tasks::classify_detail
