// attn::tasks::train_classifier (include/attn/tasks/classify.h): the review
// classifier, from text files to a saved model and a test report next to a
// naive Bayes baseline trained on the same split. This room holds the options, the
// driver and the from-scratch Transformer; the other rooms are listed in
// classify_train_internal.h (data, report pieces, the pretrained encoder, the fine-tune).
#include <attn/core/error.h>
#include <attn/core/parallel.h>
#include <attn/core/random.h>
#include <attn/data/batch.h>
#include <attn/data/split.h>
#include <attn/io/files.h>
#include <attn/io/json.h>
#include <attn/models/text_classifier.h>
#include <attn/tasks/classify.h>
#include <attn/train/comm.h>
#include <attn/train/fit.h>
#include <attn/train/optim.h>
#include <attn/train/schedule.h>
#include <attn/train/trainer.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <system_error>
#include <vector>

#include "tasks/classify_train_internal.h"
#include "tasks/util.h"

namespace attn::tasks {

namespace {

using namespace classify_detail;  // NOLINT(google-build-using-namespace): the rooms of one recipe
using detail::Clock;
using detail::duration;
using detail::fmt;
using detail::pct;
using detail::seconds_since;

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

// The from-scratch Transformer's run, filled phase by phase (train_classifier below, in this order).
struct Scratch {
  Scratch(ClassifyTrainOptions& options, StepProgress& p, train::Communicator& c, Prepared prepared)
      : s(options), progress(p), comm(c), prep(std::move(prepared)) {}
  ClassifyTrainOptions& s;
  StepProgress& progress;
  train::Communicator& comm;
  Prepared prep;
  // ---- baselines ----
  int32_t C = 0;
  std::optional<data::Dataset> eval_set;
  std::optional<Baseline> base;
  // ---- model and training ----
  models::TransformerConfig cfg;
  std::unique_ptr<models::TextClassifier> clf;
  int64_t steps_per_epoch = 0;
  int64_t total = 0, warmup = 0;  // 0 while a time budget's schedule is not fitted yet
  int64_t step = 0, tokens = 0, skipped = 0;
  int64_t step_tokens = 0;  // this rank's tokens of the update
  double first_loss = 0;
  std::vector<HistoryRow> history;
  train::FitResult fr;
  std::string stop_reason;
  // ---- test ----
  models::Metrics test;
  EvalResult va;
  std::optional<models::Metrics> eval_metrics;
  std::string sample_text;

  const data::Dataset& ds() const { return prep.d.dataset; }
  models::EncoderClassifier& model() { return clf->model(); }
};

// Output folder first: a run that cannot save should fail before training.
void check_output_folder(const std::string& out, bool writer) {
  std::error_code ec;
  if (writer) fs::create_directories(out, ec);
  ATTN_CHECK(!writer || (!ec && fs::is_directory(out)), "cannot create the output folder '", out, "'",
             ec ? ": " + ec.message() : std::string());
  if (writer) {
    const std::string probe = (fs::path(out) / ".write-test").string();
    io::write_file_atomically(probe, "ok\n");
    std::remove(probe.c_str());
  }
}

// ---- baseline ----
void scratch_baselines(Scratch& r) {
  const data::Dataset& ds = r.ds();
  r.C = static_cast<int32_t>(ds.label_names.size());
  r.eval_set = load_eval_set(r.s, ds.label_names);
  r.base.emplace(train_baseline(ds, r.prep.split, r.prep.to, r.eval_set ? &*r.eval_set : nullptr, r.s.seed));
  const Baseline& base = *r.base;
  r.progress.note("baseline (naive Bayes, character unigrams + bigrams): valid accuracy " +
                  pct(base.valid.accuracy) + ", trained in " + fmt("%.1f", base.seconds) + " s");
  r.progress.note("baseline (logistic regression, character unigrams + bigrams): valid accuracy " +
                  pct(base.lr_valid.accuracy) + ", trained in " + fmt("%.1f", base.lr_seconds) + " s");
}

// ---- model ----
models::TransformerConfig scratch_config(const ClassifyTrainOptions& s, int64_t vocab_size, int32_t C) {
  models::TransformerConfig cfg;
  cfg.src_vocab = vocab_size;
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
  return cfg;
}

// Data parallel: every rank must have read the same data and built the same model.
void check_ranks(const Scratch& r) {
  const ClassifyTrainOptions& s = r.s;
  uint64_t data_hash = kFnvOffset;
  for (const auto& e : r.ds().examples)
    data_hash = fnv1a64(e.text + '\t' + std::to_string(e.label) + '\n', data_hash);
  std::string vocab_text;
  for (const auto& tkn : r.prep.tokenizer.vocab().tokens()) vocab_text += tkn + '\n';
  train::check_same_on_all_ranks(
      r.comm, {{"the examples read from the data files", data_hash},
               {"the vocabulary", fnv1a64(vocab_text)},
               {"the model configuration", fnv1a64(json::dump(r.cfg.to_json()))},
               {"the training options (--batch-size, --lr, --epochs, --minutes, --seed, --clip)",
                fnv1a64(detail::strf("%lld %.17g %lld %.17g %llu %.17g", static_cast<long long>(s.batch_size),
                                     s.lr, static_cast<long long>(s.epochs), s.minutes,
                                     static_cast<unsigned long long>(s.seed), s.clip))}});
  r.progress.note("data parallel: " + std::to_string(r.comm.size()) + " ranks (" + r.comm.name() +
                  "), about " + std::to_string((s.batch_size + r.comm.size() - 1) / r.comm.size()) +
                  " examples of each batch per rank");
}

// One update done: tokens, skipped updates and, under a time budget, the schedule fitted to the
// pace so far.
void scratch_step(Scratch& r, train::FitStep& fs, int64_t eval_every, int64_t probe_steps) {
  const ClassifyTrainOptions& s = r.s;
  const train::StepResult& res = fs.result;
  r.step = res.step;
  double t = static_cast<double>(r.step_tokens);
  r.comm.allreduce_sum(&t, 1);  // the whole batch's tokens (every rank runs on_step)
  r.tokens += static_cast<int64_t>(t);
  r.step_tokens = 0;
  if (res.skipped || !std::isfinite(res.loss)) {
    ++r.skipped;
    r.progress.note("step " + std::to_string(r.step) + ": non-finite loss or gradient; update skipped");
    ATTN_CHECK(r.skipped <= 20, "training diverged: ", r.skipped,
               " updates skipped for NaN/Inf (try a lower --lr)");
  }
  if (r.step == 1) r.first_loss = res.loss;
  if (s.epochs == 0 && (r.step == probe_steps || (r.total > 0 && r.step % eval_every == 0))) {
    // Fit the schedule to the time budget: steps left at the mean pace so far.
    const double budget = s.minutes * 60.0;
    const double per_step = fs.seconds / static_cast<double>(r.step);
    const int64_t est = r.step + static_cast<int64_t>((budget - fs.seconds) / per_step);
    if (r.total == 0) r.warmup = std::max<int64_t>(probe_steps + 1, est / 20);
    r.total = std::max(r.step + 1, std::min<int64_t>(est, s.max_epochs * r.steps_per_epoch));
    // The warmup comes from the time estimate, the total may be capped by --max-epochs
    // far below it (small data): the schedule needs warmup < total.
    r.warmup = std::min(r.warmup, r.total - 1);
    fs.max_steps = r.total;
  }
  const double eta = r.total > 0 ? fs.seconds / r.step * static_cast<double>(r.total - r.step) : 0;
  r.progress.step(r.step, r.total, fs.epoch, res.loss,
                  static_cast<double>(r.tokens) / std::max(1e-9, fs.seconds), eta);
}

train::FitHooks scratch_hooks(Scratch& r, std::vector<std::vector<int64_t>>& batches,
                              const data::SequenceOptions& seq) {
  const int64_t eval_every = r.s.eval_every > 0 ? r.s.eval_every : r.steps_per_epoch;
  const int64_t probe_steps = 20;
  train::FitHooks hooks;
  hooks.epoch_batches = [&r, &batches](int64_t epoch) {
    batches = bucketed_batches(r.prep.split.train, r.prep.length, r.s.batch_size, r.s.seed, epoch);
    return static_cast<int64_t>(batches.size());
  };
  hooks.loss = [&r, &batches, &seq](int64_t, int64_t bi, const train::StepContext& ctx) -> train::Loss {
    r.model().train();
    // This rank's shard; the loss is the mean over its examples, weighted by their number.
    const std::vector<int64_t> rows =
        train::shard_rows(batches[static_cast<std::size_t>(bi)], ctx.rank, ctx.world);
    if (rows.empty()) return train::Loss{Tensor(), 0.0};
    data::Batch b = data::make_batch(r.prep.enc, rows, seq);
    const Tensor lens = b.lengths;
    std::vector<int64_t> lengths(lens.data<int64_t>(), lens.data<int64_t>() + lens.numel());
    for (int64_t l : lengths) r.step_tokens += l;
    return train::Loss{r.model().forward(b.ids, lengths, b.labels).loss, static_cast<double>(rows.size())};
  };
  hooks.evaluate = [&r] {
    const EvalResult v = evaluate(r.model(), r.prep.enc, r.prep.split.valid, r.prep.length, r.s.max_len);
    return train::EvalScore{v.accuracy, v.loss};
  };
  hooks.on_step = [&r, eval_every, probe_steps](train::FitStep& fs) {
    scratch_step(r, fs, eval_every, probe_steps);
  };
  hooks.on_eval = [&r](const train::FitEval& e) { record_eval(r.history, r.progress, e); };
  return hooks;
}

// ---- model and training ----
void train_scratch(Scratch& r) {
  const ClassifyTrainOptions& s = r.s;
  r.clf = std::make_unique<models::TextClassifier>(r.cfg, r.prep.tokenizer, r.ds().label_names, s.max_len);
  models::EncoderClassifier& model = r.model();
  const NamedParams params = model.named_parameters();
  train::AdamWOptions ao;
  ao.lr = s.lr;
  ao.weight_decay = s.weight_decay;
  ao.no_decay = [](const std::string& n) {
    return train::default_no_decay(n) || n.find("embed") != std::string::npos || n.rfind("pos.", 0) == 0;
  };
  train::AdamW opt(params, ao);
  r.progress.note(
      "model: " + std::to_string(s.layers) + " layers, d_model " + std::to_string(s.d_model) + ", " +
      std::to_string(s.heads) + " heads, d_ff " + std::to_string(s.d_ff) + ", " +
      std::to_string(model.num_parameters()) + " parameters; " +
      (s.epochs > 0 ? std::to_string(s.epochs) + " epochs" : fmt("%.1f", s.minutes) + " minutes"));

  r.steps_per_epoch = (static_cast<int64_t>(r.prep.split.train.size()) + s.batch_size - 1) / s.batch_size;
  r.total = s.epochs > 0 ? s.epochs * r.steps_per_epoch : 0;  // 0: estimated from the first steps
  r.warmup = s.epochs > 0 ? std::max<int64_t>(1, r.total / 20) : 0;
  const BudgetSchedule schedule(s.lr, r.total, r.warmup);
  train::TrainerOptions tro;
  tro.clip_norm = s.clip;
  tro.comm = &r.comm;
  train::Trainer trainer(opt, schedule, tro, s.seed);
  data::SequenceOptions seq;
  seq.max_len = s.max_len;
  seq.pad_to_max = false;
  std::vector<std::vector<int64_t>> batches;
  const train::FitHooks hooks = scratch_hooks(r, batches, seq);
  train::FitOptions fo;
  fo.epochs = s.epochs;
  fo.time_budget_s = s.epochs > 0 ? 0.0 : s.minutes * 60.0;
  fo.eval_every = s.eval_every;
  fo.patience = s.patience;
  fo.keep_best = true;
  r.fr = train::fit(trainer, hooks, fo, params);
  r.progress.done();
}

// ---- test ---- (rank 0)
void test_scratch(Scratch& r) {
  const ClassifyTrainOptions& s = r.s;
  const train::FitResult& fr = r.fr;
  r.stop_reason = fr.reason == train::StopReason::patience ? "early stop: no better validation accuracy in " +
                                                                 std::to_string(s.patience) + " validations"
                  : s.epochs > 0 ? std::string("all epochs done")
                  : r.total >= s.max_epochs * r.steps_per_epoch
                      ? "schedule done (--max-epochs " + std::to_string(s.max_epochs) + ")"
                      : std::string("time budget reached");
  r.progress.note(r.stop_reason + "; kept the weights of step " + std::to_string(fr.best_step) +
                  " (valid accuracy " + pct(fr.best.score) + ")");

  const Prepared& p = r.prep;
  const EvalResult te = evaluate(r.model(), p.enc, p.split.test, p.length, s.max_len);
  r.test = models::classification_metrics(te.truth, te.predicted, r.C);
  r.va = evaluate(r.model(), p.enc, p.split.valid, p.length, s.max_len);
  r.eval_metrics = clean_eval_metrics(*r.clf, r.eval_set, r.C);

  // A few held-out test reviews, short ones, both classes, for `attn classify --file`.
  for (int32_t c = 0; c < r.C; ++c) {
    int64_t taken = 0;
    for (int64_t i : p.split.test)
      if (r.ds().examples[i].label == c && p.length[i] >= 12 && p.length[i] <= 40 && taken < 3) {
        r.sample_text += r.ds().examples[i].text + "\n";
        ++taken;
      }
  }
}

// ---- outputs ----

Value data_json(const Scratch& r) {
  const LoadedData& d = r.prep.d;
  const data::EncodedDataset& enc = r.prep.enc;
  Value sources = Value::array();
  for (const auto& f : d.sources) sources.push_back(Value::string(f));
  return Value::object(
      {{"sources", sources},
       {"records_read", Value::integer(d.raw.report.records)},
       {"examples_read", Value::integer(d.raw.size())},
       {"empty_skipped", Value::integer(d.raw.report.empty_skipped)},
       {"lines_cut_to_max_chars", Value::integer(d.raw.report.truncated)},
       {"max_chars", Value::integer(r.s.max_chars)},
       {"duplicates_removed", Value::integer(d.dedup.duplicates_removed)},
       {"conflicting_texts", Value::integer(d.dedup.conflicting_texts)},
       {"conflicting_removed", Value::integer(d.dedup.conflicting_removed)},
       {"distinct_examples", Value::integer(r.ds().size())},
       {"class_counts", int_array(r.ds().class_counts())},
       {"texts_cut_to_max_len", Value::object({{"train", Value::integer(r.prep.trunc_train)},
                                               {"valid", Value::integer(r.prep.trunc_valid)},
                                               {"test", Value::integer(r.prep.trunc_test)}})},
       {"unknown_token_rate", Value::number(enc.total_tokens > 0 ? static_cast<double>(enc.unknown_tokens) /
                                                                       static_cast<double>(enc.total_tokens)
                                                                 : 0.0)}});
}

Value split_json(const Scratch& r) {
  const data::Split& split = r.prep.split;
  return Value::object(
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
       {"train_class_counts", int_array(data::class_counts(r.ds(), split.train))},
       {"test_class_counts", int_array(data::class_counts(r.ds(), split.test))},
       {"dedup", Value::string(r.prep.d.dedup.describe())}});
}

double tokens_per_second(const Scratch& r) {
  return static_cast<double>(r.tokens) / std::max(1e-9, r.fr.seconds);
}

Value training_json(const Scratch& r) {
  const ClassifyTrainOptions& s = r.s;
  return Value::object(
      {{"steps", Value::integer(r.step)},
       {"epochs_started", Value::integer(r.fr.epoch + 1)},
       {"steps_per_epoch", Value::integer(r.steps_per_epoch)},
       {"batch_size", Value::integer(s.batch_size)},
       {"optimizer", Value::string("AdamW")},
       {"lr", Value::number(s.lr)},
       {"weight_decay", Value::number(s.weight_decay)},
       {"clip", Value::number(s.clip)},
       {"schedule",
        r.total > 0 ? train::WarmupCosineSchedule(s.lr, r.warmup, r.total, s.lr * 0.02).to_json() : Value()},
       {"budget_minutes", s.epochs > 0 ? Value() : Value::number(s.minutes)},
       {"epochs_requested", s.epochs > 0 ? Value::integer(s.epochs) : Value()},
       {"stop_reason", Value::string(r.stop_reason)},
       {"best_step", Value::integer(r.fr.best_step)},
       {"skipped_steps", Value::integer(r.skipped)},
       {"first_step_loss", Value::number(r.first_loss)},
       {"train_seconds", Value::number(r.fr.seconds)},
       {"tokens_per_second", Value::number(tokens_per_second(r))},
       {"threads", Value::integer(num_threads())},
       {"history", history_json(r.history)}});
}

Value report_json(Scratch& r, const Value& data_counts, const Value& split_summary, double total_seconds) {
  const ClassifyTrainOptions& s = r.s;
  const std::vector<std::string>& labels = r.ds().label_names;
  const Baseline& base = *r.base;
  return Value::object(
      {{"task", Value::string("classify")},
       {"command", Value::string(s.command)},
       {"labels", labels_json(labels)},
       {"data", data_counts},
       {"split", split_summary},
       {"tokenizer", Value::object({{"options", models::char_tokenizer_options_json(r.prep.to)},
                                    {"vocab_size", Value::integer(r.prep.tokenizer.vocab().size())},
                                    {"min_freq", Value::integer(s.min_freq)},
                                    {"max_len", Value::integer(s.max_len)}})},
       {"model", Value::object({{"config", r.cfg.to_json()},
                                {"parameters", Value::integer(r.model().num_parameters())}})},
       {"training", training_json(r)},
       {"valid",
        Value::object({{"accuracy", Value::number(r.va.accuracy)}, {"loss", Value::number(r.va.loss)}})},
       {"test", r.test.to_json(labels)},
       {"baseline",
        Value::object(
            {{"name", Value::string("multinomial naive Bayes, character unigrams + bigrams, alpha 1")},
             {"features", Value::integer(base.nb.num_features())},
             {"seconds", Value::number(base.seconds)},
             {"valid_accuracy", Value::number(base.valid.accuracy)},
             {"test", base.test.to_json(labels)}})},
       {"logistic_regression",
        Value::object(
            {{"name", Value::string("logistic regression (softmax, L2 " + fmt("%g", base.lr.options().l2) +
                                    "), binary character unigrams + bigrams, unit-norm rows, SGD " +
                                    std::to_string(base.lr.options().epochs) + " epochs")},
             {"features", Value::integer(base.lr.num_features())},
             {"seconds", Value::number(base.lr_seconds)},
             {"valid_accuracy", Value::number(base.lr_valid.accuracy)},
             {"test", base.lr_test.to_json(labels)}})},
       {"clean_eval", clean_eval_json(s, r.eval_set, r.eval_metrics, base, labels)},
       {"total_seconds", Value::number(total_seconds)},
       {"outputs",
        Value::object({{"model", Value::string((fs::path(s.out) / "model.attn").string())},
                       {"report_md", Value::string((fs::path(s.out) / "report.md").string())},
                       {"split", Value::string((fs::path(s.out) / "split.json").string())},
                       {"test_sample", Value::string((fs::path(s.out) / "test-sample.txt").string())}})}});
}

// report.md: the test results next to the baselines (and on the clean set).
std::string results_md(const Scratch& r) {
  const ClassifyTrainOptions& s = r.s;
  const std::vector<std::string>& labels = r.ds().label_names;
  const Baseline& base = *r.base;
  std::string md = "# Review classifier: test report\n\n";
  md += "Command: `" + s.command + "`\n\n";
  md += "## Test results (" + std::to_string(r.test.count) + " held-out examples)\n\n";
  md += metrics_table_head(labels);
  md += metrics_rows("Transformer encoder", r.test);
  md += metrics_rows("naive Bayes baseline", base.test);
  md += metrics_rows("logistic regression baseline", base.lr_test);
  md += confusion_md("Transformer encoder", r.test, labels);
  md += confusion_md("Naive Bayes baseline", base.test, labels);
  md += confusion_md("Logistic regression baseline", base.lr_test, labels);
  if (r.eval_set) {
    md += "\n## Clean evaluation set (" + std::to_string(r.eval_set->size()) + " examples, `" + s.eval +
          "`)\n\n";
    md += metrics_table_head(labels);
    md += metrics_rows("Transformer encoder", *r.eval_metrics);
    md += metrics_rows("naive Bayes baseline", *base.eval);
    md += metrics_rows("logistic regression baseline", *base.lr_eval);
    md += confusion_md("Transformer encoder", *r.eval_metrics, labels);
  }
  return md;
}

// report.md: the data, the model, the training and its history.
std::string run_md(const Scratch& r, double total_seconds) {
  const ClassifyTrainOptions& s = r.s;
  const Prepared& p = r.prep;
  const double train_seconds = r.fr.seconds;
  std::string md = "\n## Data\n\n";
  for (const auto& f : p.d.sources) md += "- source: `" + f + "`\n";
  md += "- read: " + std::to_string(p.d.raw.size()) + " examples (" + p.d.raw.report.describe() + ")\n";
  md += "- deduplicated: " + std::to_string(r.ds().size()) + " distinct examples (" + p.d.dedup.describe() +
        "); a text seen with both labels is removed entirely\n";
  md += "- split: " + p.split.describe() + "\n";
  md += "- tokenizer: one token per character; vocabulary of " + std::to_string(p.tokenizer.vocab().size()) +
        " from the training split only (min frequency " + std::to_string(s.min_freq) + ")\n";
  md += "- max length " + std::to_string(s.max_len) + " tokens ([CLS] + " + std::to_string(s.max_len - 1) +
        " characters): " + std::to_string(p.trunc_train + p.trunc_valid + p.trunc_test) +
        " texts cut (train " + std::to_string(p.trunc_train) + ", valid " + std::to_string(p.trunc_valid) +
        ", test " + std::to_string(p.trunc_test) + ")\n";
  md += "\n## Model and training\n\n";
  md += "- EncoderClassifier: " + std::to_string(s.layers) + " pre-norm layers, d_model " +
        std::to_string(s.d_model) + ", " + std::to_string(s.heads) + " heads, d_ff " +
        std::to_string(s.d_ff) + ", GELU, learned positions, dropout " + fmt("%.2f", s.dropout) + ", " +
        std::to_string(r.clf->model().num_parameters()) + " parameters\n";
  md += "- AdamW (lr " + fmt("%g", s.lr) + ", weight decay " + fmt("%g", s.weight_decay) + "), warmup " +
        std::to_string(r.warmup) + " steps + cosine to step " + std::to_string(r.total) + ", clipping at " +
        fmt("%g", s.clip) + ", batches of " + std::to_string(s.batch_size) + " bucketed by length\n";
  md += "- " + std::to_string(r.step) + " steps (" +
        fmt("%.2f", static_cast<double>(r.step) / r.steps_per_epoch) + " epochs) in " +
        duration(train_seconds) + " on " + std::to_string(num_threads()) + " threads, " +
        fmt("%.0f", tokens_per_second(r)) + " tokens/s; " + r.stop_reason + "\n";
  md += "- best validation accuracy " + pct(r.fr.best.score) + " at step " + std::to_string(r.fr.best_step) +
        " (those weights are saved); baseline validation accuracy " + pct(r.base->valid.accuracy) + "\n";
  md +=
      "\n| step | epoch | train loss | valid loss | valid accuracy | lr |\n|---:|---:|---:|---:|---:|---:|\n";
  for (const auto& h : r.history)
    md += "| " + std::to_string(h.step) + " | " + std::to_string(h.epoch + 1) + " | " +
          fmt("%.4f", h.train_loss) + " | " + fmt("%.4f", h.valid_loss) + " | " + pct(h.valid_accuracy) +
          " | " + fmt("%.2e", h.lr) + " |\n";
  md += "\nTotal time " + duration(total_seconds) + ". Classify with `attn classify --model " +
        (fs::path(s.out) / "model.attn").string() + " \"...\"`.\n";
  return md;
}

std::string summary(const Scratch& r) {
  const ClassifyTrainOptions& s = r.s;
  const Baseline& base = *r.base;
  char line[512];
  std::snprintf(
      line, sizeof line,
      "test accuracy %s (macro F1 %.4f) vs naive Bayes baseline %s (macro F1 %.4f), on %lld held-out "
      "reviews\n",
      pct(r.test.accuracy).c_str(), r.test.macro_f1, pct(base.test.accuracy).c_str(), base.test.macro_f1,
      static_cast<long long>(r.test.count));
  std::string out = line;
  out += "logistic regression baseline " + pct(base.lr_test.accuracy) + " on the same test split\n";
  if (r.eval_set)
    out += "clean set (" + std::to_string(r.eval_set->size()) + " reviews, " + s.eval + "): model " +
           pct(r.eval_metrics->accuracy) + ", naive Bayes " + pct(base.eval->accuracy) +
           ", logistic regression " + pct(base.lr_eval->accuracy) + "\n";
  out += "trained " + std::to_string(r.step) + " steps in " + duration(r.fr.seconds) + "; model " +
         (fs::path(s.out) / "model.attn").string() + ", report " + (fs::path(s.out) / "report.md").string() +
         "\n";
  return out;
}

// Writes the run folder and returns the result.
ClassifyTrainResult scratch_outputs(Scratch& r, Clock::time_point t_start, CreatedFolders& created) {
  const ClassifyTrainOptions& s = r.s;
  const double total_seconds = seconds_since(t_start);
  const Value data_counts = data_json(r);
  const Value split_summary = split_json(r);
  Value report = report_json(r, data_counts, split_summary, total_seconds);
  std::string md = results_md(r) + run_md(r, total_seconds);
  Value extra = Value::object({{"split", split_summary},
                               {"data", data_counts},
                               {"test_accuracy", Value::number(r.test.accuracy)},
                               {"baseline_test_accuracy", Value::number(r.base->test.accuracy)}});
  write_outputs(s.out, *r.clf, extra, r.prep.split, r.sample_text, report, md);
  created.keep();

  ClassifyTrainResult result;
  result.summary = summary(r);
  fill_result(result, s, std::move(report), std::move(md), r.test, *r.base, r.eval_metrics);
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
  CreatedFolders created(writer ? s.out : std::string());
  check_output_folder(s.out, writer);

  if (!s.encoder.empty()) {
    // The fine-tune runs its epochs; only a --minutes the caller gave stops it earlier (not the
    // preset's budget for the from-scratch model, which on a slow machine cut it short silently).
    s.minutes = options.minutes;
    return finetune_classifier(s, t_start, progress, created);
  }

  Scratch r(s, progress, comm, prepare(s, progress));
  scratch_baselines(r);
  r.cfg = scratch_config(s, r.prep.tokenizer.vocab().size(), r.C);
  if (comm.size() > 1) check_ranks(r);
  train_scratch(r);
  if (!writer) return ClassifyTrainResult{};  // rank 0 tests and writes
  test_scratch(r);
  return scratch_outputs(r, t_start, created);
}

}  // namespace attn::tasks
