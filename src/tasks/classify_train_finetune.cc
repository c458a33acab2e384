// tasks::train_classifier with ClassifyTrainOptions::encoder: fine-tuning a pretrained encoder (see
// classify_train_internal.h). The frozen part (the embeddings and the lowest k layers) is computed
// once per example, optionally read from and saved to a --cache-dir; the layers above and the head
// are trained on those hidden states; the report sets the result next to the baselines.
#include <attn/core/autograd.h>
#include <attn/core/error.h>
#include <attn/core/parallel.h>
#include <attn/core/precision.h>
#include <attn/core/random.h>
#include <attn/data/reader.h>
#include <attn/data/split.h>
#include <attn/models/bert.h>
#include <attn/models/bert_classifier.h>
#include <attn/models/text_classifier.h>
#include <attn/ops/nn_functional.h>
#include <attn/tasks/classify.h>
#include <attn/text/utf8.h>
#include <attn/train/fit.h>
#include <attn/train/optim.h>
#include <attn/train/schedule.h>
#include <attn/train/trainer.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tasks/classify_cache.h"
#include "tasks/classify_train_internal.h"
#include "tasks/util.h"

namespace attn::tasks::classify_detail {

namespace {

using detail::Clock;
using detail::duration;
using detail::fmt;
using detail::pct;
using detail::seconds_since;

// A fine-tune's state, filled phase by phase (finetune_classifier below, in this order).
struct Run {
  Run(ClassifyTrainOptions& options, StepProgress& p) : s(options), progress(p) {}
  ClassifyTrainOptions& s;
  StepProgress& progress;
  // ---- data and baselines ----
  LoadedData d;
  data::Split split;
  int32_t C = 0;
  std::optional<data::Dataset> eval_set;
  std::optional<Baseline> base;
  // ---- the encoder ----
  std::string prefix;  // the text prefix ("query: "), empty for none
  PretrainedEncoder pe;
  int64_t max_len = 0, n_layers = 0, k = 0;  // k: frozen layers
  models::TransformerConfig cfg;
  std::unique_ptr<models::TextClassifier> clf;
  NamedParams trainable;
  int64_t n_trainable = 0;
  // ---- pieces ----
  std::vector<PieceExample> ex;
  std::vector<int32_t> labels_of;
  int64_t truncated = 0, unknown = 0, pieces = 0;
  std::vector<int64_t> train_rows, valid_rows, test_rows;
  // ---- the frozen part ----
  std::vector<Tensor> train_cache, valid_cache, test_cache, train_fv, valid_fv, test_fv;
  int64_t prefix_tokens = 0, cache_hits = 0;  // cache_hits: rows read from --cache-dir
  std::string cache_file;
  double prefix_seconds = 0, frozen_vector_seconds = 0;
  std::vector<int32_t> valid_y, test_y;
  // ---- training ----
  int64_t steps_per_epoch = 0, total = 0, warmup = 0;
  int64_t step = 0, tokens = 0, skipped = 0;
  double first_loss = 0;
  std::vector<HistoryRow> history;
  bool bf16_products = false;
  Value schedule_json;
  train::FitResult fr;
  double train_seconds = 0;
  std::string stop_reason;
  // ---- after training ----
  double valid_accuracy = 0, valid_loss = 0, short_accuracy = 0;
  std::size_t short_count = 0;
  Value swa_json;
  models::Metrics test;
  std::optional<models::Metrics> eval_metrics;
  double test_seconds = 0;
  std::string sample_text;

  const data::Dataset& ds() const { return d.dataset; }
  models::EncoderClassifier& model() { return clf->model(); }
};

void check_finetune_options(const ClassifyTrainOptions& s) {
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
}

// ---- data and baselines (as for the Transformer) ----
void load_and_baselines(Run& r) {
  ClassifyTrainOptions& s = r.s;
  r.d = load_data(s);
  const data::Dataset& ds = r.ds();
  data::SplitOptions so;
  so.seed = s.seed;
  r.split = data::make_split(ds, so);
  data::check_split(r.split, ds);
  r.progress.note("data: " + std::to_string(r.d.raw.size()) + " examples read; " + std::to_string(ds.size()) +
                  " after deduplication (" + r.d.dedup.describe() + ")");
  r.progress.note("split: " + r.split.describe());
  r.C = static_cast<int32_t>(ds.label_names.size());
  r.eval_set = load_eval_set(s, ds.label_names);
  text::CharTokenizerOptions to;
  to.normalize.lowercase_ascii = true;
  r.base.emplace(train_baseline(ds, r.split, to, r.eval_set ? &*r.eval_set : nullptr, s.seed));
  const Baseline& base = *r.base;
  r.progress.note("baselines on the same split: naive Bayes valid " + pct(base.valid.accuracy) +
                  ", logistic regression valid " + pct(base.lr_valid.accuracy) + " (" +
                  fmt("%.1f", base.seconds + base.lr_seconds) + " s)");
}

// ---- the pretrained encoder as nn modules ----
void open_model(Run& r) {
  const ClassifyTrainOptions& s = r.s;
  const auto t_load = Clock::now();
  r.prefix = s.prefix.empty() || s.prefix == "none" ? std::string() : s.prefix + ": ";
  r.pe = open_encoder(s.encoder, s.encoder_file, r.prefix);
  const PretrainedEncoder& pe = r.pe;
  r.max_len = std::min(s.encoder_max_len, pe.config.max_position_embeddings - pe.position_offset);
  r.cfg = models::bert_classifier_config(pe.config, r.C, r.max_len, pe.position_offset, s.dropout, s.seed,
                                         s.pool.empty() ? pe.mean_pool : s.pool == "mean");
  const int64_t n_layers = r.n_layers = r.cfg.encoder_layers;
  const int64_t k = r.k = !s.freeze_embeddings  ? 0
                          : s.freeze_layers < 0 ? std::max<int64_t>(0, n_layers - 2)
                                                : s.freeze_layers;
  ATTN_CHECK(k <= n_layers, "--freeze-layers must be at most the encoder's ", n_layers, " layers; got ", k);
  ATTN_CHECK(s.freeze_embeddings || s.freeze_layers <= 0,
             "--freeze-layers needs frozen embeddings (the frozen part is computed once from them)");
  ATTN_CHECK(!s.frozen_vector || (s.freeze_embeddings && k < n_layers),
             "--frozen-vector needs trained layers above frozen ones: --freeze-layers below the encoder's ",
             n_layers, " layers and frozen embeddings; got --freeze-layers ", k,
             s.freeze_embeddings ? "" : " with --train-embeddings");
  if (s.frozen_vector) r.cfg.frozen_top = n_layers - k;  // a frozen copy of the trained layers
  r.clf = std::make_unique<models::TextClassifier>(r.cfg, pe.tokenizer, r.ds().label_names, r.max_len);
  // Frozen embeddings stay as the base model has them: the saved file leaves them out.
  r.clf->set_embeddings_from_base(s.freeze_embeddings && pe.tokenizer->has_embeddings());
  models::EncoderClassifier& model = r.model();
  models::load_bert_weights(model, pe.config, pe.weights, pe.position_offset);
  r.trainable = models::freeze_bert_classifier(model, s.freeze_embeddings, k);
  for (const auto& np : r.trainable) r.n_trainable += np.second.numel();
  r.progress.note("encoder: " + pe.name + " (" + pe.source + "), " + std::to_string(n_layers) +
                  " layers, hidden " + std::to_string(r.cfg.d_model) + "; " +
                  std::to_string(model.num_parameters()) + " parameters, " + std::to_string(r.n_trainable) +
                  " trained (" +
                  (s.freeze_embeddings ? frozen_part_name(k) + " frozen" : std::string("nothing frozen")) +
                  "); loaded in " + fmt("%.1f", seconds_since(t_load)) + " s");
}

// ---- pieces ----
void encode_pieces(Run& r) {
  const ClassifyTrainOptions& s = r.s;
  const data::Dataset& ds = r.ds();
  r.ex.resize(static_cast<std::size_t>(ds.size()));
  r.labels_of.resize(static_cast<std::size_t>(ds.size()));
  for (int64_t i = 0; i < ds.size(); ++i) {
    models::Classification c;
    r.ex[i].ids = r.clf->input_ids(ds.examples[i].text, c);
    r.ex[i].truncated = c.truncated;
    r.truncated += c.truncated;
    for (bool u : c.unknown) r.unknown += u;
    r.pieces += static_cast<int64_t>(r.ex[i].ids.size());
    r.labels_of[i] = ds.examples[i].label;
  }
  r.train_rows = pick_rows(r.split.train, s.max_train, mix_seed(s.seed, 11));
  r.valid_rows = pick_rows(r.split.valid, s.max_valid, mix_seed(s.seed, 12));
  r.test_rows = r.split.test;
  r.progress.note("pieces: " + std::to_string(r.truncated) + " of " + std::to_string(ds.size()) +
                  " texts longer than " + std::to_string(r.max_len - 2) +
                  " pieces are cut (truncation reported); " +
                  fmt("%.2f", 100.0 * static_cast<double>(r.unknown) / std::max<int64_t>(1, r.pieces)) +
                  "% of pieces are unknown; fine-tuning on " + std::to_string(r.train_rows.size()) + " of " +
                  std::to_string(r.split.train.size()) + " training examples, validating on " +
                  std::to_string(r.valid_rows.size()));
}

using FrozenPart = std::function<std::vector<Tensor>(const std::vector<int64_t>& rows)>;

// The frozen part of the train, valid and test rows through --cache-dir: the rows the cache file
// lacks are computed and the file is saved again.
void frozen_part_cached(Run& r, const FrozenPart& frozen_part) {
  const ClassifyTrainOptions& s = r.s;
  detail::FrozenCacheKey key;
  key.encoder = s.encoder + (r.prefix.empty() ? std::string() : "-" + s.prefix);  // the file name
  detail::hash_model_file(r.pe.source, key.model_bytes, key.model_hash);
  key.frozen_layers = r.k;
  key.max_len = r.max_len;
  key.hidden = r.cfg.d_model;
  key.rows = r.ds().size();
  std::vector<std::vector<int32_t>> all_ids;
  std::vector<int64_t> lens;
  for (const auto& e : r.ex) all_ids.push_back(e.ids), lens.push_back(static_cast<int64_t>(e.ids.size()));
  key.data_hash = detail::hash_id_lists(all_ids);
  r.cache_file = detail::frozen_cache_path(s.cache_dir, key);
  std::vector<Tensor> all;
  const std::string why = detail::load_frozen_cache(r.cache_file, key, lens, all);
  if (!why.empty() && why != "no file yet")
    r.progress.note("frozen-part cache " + r.cache_file + " not used (" + why + "); computing it again");
  std::vector<bool> needed(all.size(), false);
  for (const auto* rows : {&r.train_rows, &r.valid_rows, &r.test_rows})
    for (int64_t row : *rows) needed[static_cast<std::size_t>(row)] = true;
  std::vector<int64_t> missing;
  for (std::size_t row = 0; row < all.size(); ++row) {
    if (!needed[row]) continue;
    if (all[row].defined())
      ++r.cache_hits;
    else
      missing.push_back(static_cast<int64_t>(row));
  }
  if (!missing.empty()) {
    std::vector<Tensor> computed = frozen_part(missing);
    for (std::size_t i = 0; i < missing.size(); ++i) all[static_cast<std::size_t>(missing[i])] = computed[i];
    detail::save_frozen_cache(r.cache_file, key, all);
  }
  auto gather = [&](const std::vector<int64_t>& rows) {
    std::vector<Tensor> v;
    for (int64_t row : rows) v.push_back(all[static_cast<std::size_t>(row)]);
    return v;
  };
  r.train_cache = gather(r.train_rows);
  r.valid_cache = gather(r.valid_rows);
  r.test_cache = gather(r.test_rows);
  r.progress.note("frozen-part cache " + r.cache_file + ": " + std::to_string(r.cache_hits) +
                  " examples read, " + std::to_string(missing.size()) + " computed" +
                  (missing.empty() ? "" : " and saved"));
}

// ---- the frozen part, once ----
void compute_frozen_part(Run& r) {
  const ClassifyTrainOptions& s = r.s;
  const auto t_prefix = Clock::now();
  // Through the inference path (the embed commands' BertModel on the same weights; built on first use
  // and dropped after) or, with --frozen-path nn, through the nn modules in eval mode.
  std::optional<models::BertModel> inference;
  const FrozenPart frozen_part = [&](const std::vector<int64_t>& rows) {
    if (s.frozen_path == "nn") return frozen_prefix(r.model(), r.ex, rows, r.k, r.prefix_tokens);
    if (!inference) inference.emplace(r.pe.inference());
    std::vector<std::vector<int32_t>> ids;
    ids.reserve(rows.size());
    for (int64_t row : rows) ids.push_back(r.ex[static_cast<std::size_t>(row)].ids);
    return detail::frozen_rows(*inference, ids, r.k, r.prefix_tokens);
  };
  if (s.cache_dir.empty()) {
    r.train_cache = frozen_part(r.train_rows);
    r.valid_cache = frozen_part(r.valid_rows);
    r.test_cache = frozen_part(r.test_rows);
  } else {
    frozen_part_cached(r, frozen_part);
  }
  inference.reset();
  r.prefix_seconds = seconds_since(t_prefix);
  const std::size_t n_rows = r.train_rows.size() + r.valid_rows.size() + r.test_rows.size();
  r.progress.note("frozen part (embeddings + " + std::to_string(r.k) + " layers, " +
                  (s.frozen_path == "nn" ? "nn modules" : "inference path") + ") computed once for " +
                  std::to_string(n_rows - r.cache_hits) + " examples, " + std::to_string(r.prefix_tokens) +
                  " tokens, in " + duration(r.prefix_seconds) + " (" +
                  fmt("%.0f", static_cast<double>(r.prefix_tokens) / std::max(1e-9, r.prefix_seconds)) +
                  " tokens/s)");
  const auto t_fv = Clock::now();
  r.train_fv = frozen_vectors(r.model(), r.train_cache, r.k);
  r.valid_fv = frozen_vectors(r.model(), r.valid_cache, r.k);
  r.test_fv = frozen_vectors(r.model(), r.test_cache, r.k);
  r.frozen_vector_seconds = seconds_since(t_fv);
  if (r.cfg.frozen_top > 0)
    r.progress.note("frozen vector (a frozen copy of layers " + std::to_string(r.k) + "-" +
                    std::to_string(r.n_layers - 1) + ", pooled) computed once for " + std::to_string(n_rows) +
                    " examples in " + duration(r.frozen_vector_seconds));
  auto labels_for = [&](const std::vector<int64_t>& rows) {
    std::vector<int32_t> y;
    for (int64_t i : rows) y.push_back(r.labels_of[i]);
    return y;
  };
  r.valid_y = labels_for(r.valid_rows);
  r.test_y = labels_for(r.test_rows);
}

// Weight averaging (--average-from F): the mean of the trained weights after every step from
// F · total on.
struct WeightAverage {
  int64_t start = 0;  // 0: no averaging
  std::vector<std::vector<double>> sum;
  int64_t count = 0;

  void add(const NamedParams& trainable) {
    if (sum.empty())
      for (auto& np : trainable) sum.emplace_back(static_cast<std::size_t>(np.second.numel()), 0.0);
    for (std::size_t i = 0; i < trainable.size(); ++i) {
      const float* w = trainable[i].second.data<float>();
      for (std::size_t j = 0; j < sum[i].size(); ++j) sum[i][j] += w[j];
    }
    ++count;
  }
};

// The training hooks: batches bucketed by length over the cached hidden states of the training rows.
train::FitHooks finetune_hooks(Run& r, std::vector<std::vector<int64_t>>& batches,
                               const std::vector<int64_t>& train_idx, const std::vector<int64_t>& train_len,
                               WeightAverage& swa) {
  train::FitHooks hooks;
  hooks.epoch_batches = [&r, &batches, &train_idx, &train_len](int64_t epoch) {
    batches = bucketed_batches(train_idx, train_len, r.s.batch_size, r.s.seed, epoch);
    return static_cast<int64_t>(batches.size());
  };
  hooks.loss = [&r, &batches](int64_t, int64_t bi, const train::StepContext&) {
    models::EncoderClassifier& model = r.model();
    model.train();
    const std::vector<int64_t>& idx = batches[static_cast<std::size_t>(bi)];
    std::vector<int64_t> lengths, y;
    for (int64_t i : idx) y.push_back(r.labels_of[r.train_rows[i]]);
    const Tensor h = stack_hidden(r.train_cache, idx, lengths);
    for (int64_t l : lengths) r.tokens += l;
    const Tensor labels = Tensor::from(y, {static_cast<int64_t>(idx.size())});
    const Tensor fv = gather_vectors(r.train_fv, idx);
    if (r.s.label_smoothing <= 0) return model.forward_from(h, r.k, lengths, labels, fv).loss;
    CrossEntropyOptions ce;
    ce.label_smoothing = r.s.label_smoothing;
    return cross_entropy(model.forward_from(h, r.k, lengths, Tensor(), fv).logits, labels, ce);
  };
  hooks.evaluate = [&r] {
    const EvalResult v = evaluate_cached(r.model(), r.valid_cache, r.valid_y, r.k, r.valid_fv);
    return train::EvalScore{v.accuracy, v.loss};
  };
  hooks.on_step = [&r, &swa](train::FitStep& fs) {
    r.step = fs.result.step;
    if (fs.result.skipped || !std::isfinite(fs.result.loss)) ++r.skipped;
    ATTN_CHECK(r.skipped <= 20, "fine-tuning diverged: ", r.skipped,
               " updates skipped for NaN/Inf (try a lower --lr)");
    if (r.step == 1) r.first_loss = fs.result.loss;
    if (swa.start > 0 && r.step >= swa.start) swa.add(r.trainable);
    r.progress.step(r.step, r.total, fs.epoch, fs.result.loss,
                    static_cast<double>(r.tokens) / std::max(1e-9, fs.seconds),
                    fs.seconds / static_cast<double>(r.step) * static_cast<double>(r.total - r.step));
  };
  hooks.on_eval = [&r](const train::FitEval& e) { record_eval(r.history, r.progress, e); };
  return hooks;
}

// ---- training the layers above ----
void train_layers(Run& r, WeightAverage& swa) {
  const ClassifyTrainOptions& s = r.s;
  std::vector<int64_t> train_len(r.train_cache.size());
  std::vector<int64_t> train_idx(r.train_cache.size());
  for (std::size_t i = 0; i < r.train_cache.size(); ++i)
    train_len[i] = r.train_cache[i].size(0), train_idx[i] = static_cast<int64_t>(i);
  r.steps_per_epoch = (static_cast<int64_t>(train_idx.size()) + s.batch_size - 1) / s.batch_size;
  r.total = s.encoder_epochs * r.steps_per_epoch;
  r.warmup = std::max<int64_t>(1, r.total / 10);
  const train::WarmupCosineSchedule schedule(s.encoder_lr, r.warmup, r.total, s.encoder_lr * 0.02);
  r.schedule_json = schedule.to_json();
  train::AdamWOptions ao;
  ao.lr = s.encoder_lr;
  ao.weight_decay = s.weight_decay;
  const std::unique_ptr<train::Optimizer> opt =
      finetune_optimizer(r.trainable, ao, r.n_layers, s.layer_lr_decay);
  train::TrainerOptions tro;
  tro.clip_norm = s.clip;
  train::Trainer trainer(*opt, schedule, tro, s.seed);
  std::vector<std::vector<int64_t>> batches;
  const MatmulPrecision prec_before = matmul_precision();
  if (s.bf16) set_matmul_precision(MatmulPrecision::bf16);
  // The products' precision while training: s.bf16, or the process-wide setting (`attn train
  // --precision bf16` sets that for the whole run, the evaluations included).
  r.bf16_products = matmul_precision() == MatmulPrecision::bf16;
  swa.start =
      s.swa_from > 0
          ? std::max<int64_t>(1, static_cast<int64_t>(std::ceil(s.swa_from * static_cast<double>(r.total))))
          : 0;
  const train::FitHooks hooks = finetune_hooks(r, batches, train_idx, train_len, swa);
  train::FitOptions fo;
  fo.epochs = s.encoder_epochs;
  fo.time_budget_s = s.minutes > 0 ? s.minutes * 60.0 : 0.0;
  fo.eval_every = s.eval_every;
  fo.patience = s.patience;
  fo.keep_best = true;
  try {
    r.fr = train::fit(trainer, hooks, fo, r.trainable);
  } catch (...) {
    set_matmul_precision(prec_before);
    throw;
  }
  set_matmul_precision(prec_before);
  r.progress.done();
  r.train_seconds = r.fr.seconds;
  r.stop_reason =
      r.fr.reason == train::StopReason::patience
          ? "early stop: no better validation accuracy in " + std::to_string(s.patience) + " validations"
      : fo.time_budget_s > 0 && r.step < r.total ? std::string("time budget reached")
                                                 : std::string("all epochs done");
  r.progress.note(r.stop_reason + "; kept the weights of step " + std::to_string(r.fr.best_step) +
                  " (valid accuracy " + pct(r.fr.best.score) + ")");
}

// The validation rows of at most kShortValidChars characters (their cached hidden states, frozen
// vectors and labels).
struct ShortSlice {
  std::vector<Tensor> cache, fv;
  std::vector<int32_t> y;
  double accuracy(Run& r) const {
    return cache.empty() ? 0.0 : evaluate_cached(r.model(), cache, y, r.k, fv).accuracy;
  }
};

ShortSlice short_slice(const Run& r) {
  ShortSlice sh;
  for (std::size_t i = 0; i < r.valid_rows.size(); ++i)
    if (static_cast<int64_t>(text::decode_utf8(r.ds().examples[r.valid_rows[i]].text).size()) <=
        kShortValidChars) {
      sh.cache.push_back(r.valid_cache[i]);
      if (!r.valid_fv.empty()) sh.fv.push_back(r.valid_fv[i]);
      sh.y.push_back(r.valid_y[i]);
    }
  return sh;
}

// The averaged weights replace the kept ones when their validation accuracy is at least as good.
void apply_average(Run& r, const WeightAverage& swa, const ShortSlice& sh) {
  const double kept_short = sh.accuracy(r);
  std::vector<std::vector<float>> kept;
  for (auto& np : r.trainable) {
    float* w = np.second.data<float>();
    kept.emplace_back(w, w + np.second.numel());
  }
  for (std::size_t i = 0; i < r.trainable.size(); ++i) {
    float* w = r.trainable[i].second.data<float>();
    for (std::size_t j = 0; j < swa.sum[i].size(); ++j)
      w[j] = static_cast<float>(swa.sum[i][j] / static_cast<double>(swa.count));
  }
  const EvalResult av = evaluate_cached(r.model(), r.valid_cache, r.valid_y, r.k, r.valid_fv);
  const double av_short = sh.accuracy(r);
  const bool use = av.accuracy >= r.fr.best.score;
  if (use) {
    r.valid_accuracy = av.accuracy;
    r.valid_loss = av.loss;
  } else {
    for (std::size_t i = 0; i < r.trainable.size(); ++i)
      std::copy(kept[i].begin(), kept[i].end(), r.trainable[i].second.data<float>());
  }
  r.progress.note("weights averaged over steps " + std::to_string(swa.start) + "-" + std::to_string(r.step) +
                  " (" + std::to_string(swa.count) + "): valid accuracy " + pct(av.accuracy) + " against " +
                  pct(r.fr.best.score) + "; " + (use ? "the average is kept" : "the kept weights stay"));
  r.swa_json =
      Value::object({{"from_step", Value::integer(swa.start)},
                     {"steps", Value::integer(swa.count)},
                     {"valid_accuracy", Value::number(av.accuracy)},
                     {"valid_short_accuracy", sh.cache.empty() ? Value() : Value::number(av_short)},
                     {"kept_valid_accuracy", Value::number(r.fr.best.score)},
                     {"kept_valid_short_accuracy", sh.cache.empty() ? Value() : Value::number(kept_short)},
                     {"used", Value::boolean(use)}});
}

// ---- the short validation slice (kShortValidChars), of the kept weights and of the average;
// the test split and the clean set; the sample ----
void evaluate_finetuned(Run& r, const WeightAverage& swa) {
  const ShortSlice sh = short_slice(r);
  r.valid_accuracy = r.fr.best.score;
  r.valid_loss = r.fr.best.loss;
  if (swa.count > 0) apply_average(r, swa, sh);
  r.short_count = sh.cache.size();
  r.short_accuracy = sh.accuracy(r);
  r.progress.note("short validation slice (at most " + std::to_string(kShortValidChars) +
                  " characters): " + std::to_string(sh.cache.size()) + " of " +
                  std::to_string(r.valid_rows.size()) + " validation reviews, accuracy " +
                  (sh.cache.empty() ? std::string("-") : pct(r.short_accuracy)));

  // ---- test, clean set ----
  const auto t_test = Clock::now();
  const EvalResult te = evaluate_cached(r.model(), r.test_cache, r.test_y, r.k, r.test_fv);
  r.test = models::classification_metrics(te.truth, te.predicted, r.C);
  r.eval_metrics = clean_eval_metrics(*r.clf, r.eval_set, r.C);
  r.test_seconds = seconds_since(t_test);

  // Held-out test reviews for `attn classify --file`: short ones, both classes.
  const data::Dataset& ds = r.ds();
  for (int32_t c = 0; c < r.C; ++c) {
    int64_t taken = 0;
    for (int64_t i : r.split.test) {
      const auto n = static_cast<int64_t>(r.ex[i].ids.size());
      if (ds.examples[i].label == c && n >= 10 && n <= 30 && taken < 3) {
        r.sample_text += ds.examples[i].text + "\n";
        ++taken;
      }
    }
  }
}

// ---- outputs ----

Value split_json(const Run& r) {
  const data::Split& split = r.split;
  return Value::object({{"description", Value::string(split.describe())},
                        {"seed", Value::string(hex64(split.seed))},
                        {"input_hash", Value::string(hex64(split.input_hash))},
                        {"counts", Value::object({{"train", Value::integer(split.train.size())},
                                                  {"valid", Value::integer(split.valid.size())},
                                                  {"test", Value::integer(split.test.size())}})},
                        {"fine_tune_rows", Value::object({{"train", Value::integer(r.train_rows.size())},
                                                          {"valid", Value::integer(r.valid_rows.size())},
                                                          {"test", Value::integer(r.test_rows.size())}})},
                        {"dedup", Value::string(r.d.dedup.describe())}});
}

Value encoder_json(const Run& r) {
  const ClassifyTrainOptions& s = r.s;
  return Value::object(
      {{"name", Value::string(r.pe.name)},
       {"source", Value::string(r.pe.source)},
       {"layers", Value::integer(r.n_layers)},
       {"frozen_embeddings", Value::boolean(s.freeze_embeddings)},
       {"frozen_layers", Value::integer(r.k)},
       {"trained_parameters", Value::integer(r.n_trainable)},
       {"max_len", Value::integer(r.max_len)},
       {"texts_truncated", Value::integer(r.truncated)},
       {"unknown_piece_rate", Value::number(static_cast<double>(r.unknown) / std::max<int64_t>(1, r.pieces))},
       {"prefix_tokens", Value::integer(r.prefix_tokens)},
       {"cache_file", r.cache_file.empty() ? Value() : Value::string(r.cache_file)},
       {"cache_hits", Value::integer(r.cache_hits)},
       {"pool", Value::string(r.cfg.mean_pool ? "mean" : "cls")},
       {"prefix", Value::string(r.prefix)},
       {"prefix_seconds", Value::number(r.prefix_seconds)},
       {"frozen_path", Value::string(s.frozen_path)},
       {"frozen_vector", Value::boolean(r.cfg.frozen_top > 0)},
       {"frozen_vector_seconds", Value::number(r.frozen_vector_seconds)}});
}

double tokens_per_second(const Run& r) {
  return static_cast<double>(r.tokens) / std::max(1e-9, r.train_seconds);
}

Value training_json(const Run& r) {
  const ClassifyTrainOptions& s = r.s;
  return Value::object({{"steps", Value::integer(r.step)},
                        {"steps_per_epoch", Value::integer(r.steps_per_epoch)},
                        {"batch_size", Value::integer(s.batch_size)},
                        {"optimizer", Value::string("AdamW")},
                        {"lr", Value::number(s.encoder_lr)},
                        {"weight_decay", Value::number(s.weight_decay)},
                        {"label_smoothing", Value::number(s.label_smoothing)},
                        {"layer_lr_decay", Value::number(s.layer_lr_decay)},
                        {"weight_average", r.swa_json},
                        {"schedule", r.schedule_json},
                        {"bf16", Value::boolean(r.bf16_products)},
                        {"stop_reason", Value::string(r.stop_reason)},
                        {"best_step", Value::integer(r.fr.best_step)},
                        {"skipped_steps", Value::integer(r.skipped)},
                        {"first_step_loss", Value::number(r.first_loss)},
                        {"train_seconds", Value::number(r.train_seconds)},
                        {"tokens_per_second", Value::number(tokens_per_second(r))},
                        {"threads", Value::integer(num_threads())},
                        {"history", history_json(r.history)}});
}

Value report_json(Run& r, const Value& split_summary, const Value& encoder, double total_seconds) {
  const ClassifyTrainOptions& s = r.s;
  const std::vector<std::string>& labels = r.ds().label_names;
  const Baseline& base = *r.base;
  return Value::object(
      {{"task", Value::string("classify")},
       {"command", Value::string(s.command)},
       {"labels", labels_json(labels)},
       {"split", split_summary},
       {"encoder", encoder},
       {"model", Value::object({{"config", r.cfg.to_json()},
                                {"parameters", Value::integer(r.model().num_parameters())}})},
       {"training", training_json(r)},
       {"valid", Value::object(
                     {{"accuracy", Value::number(r.valid_accuracy)}, {"loss", Value::number(r.valid_loss)}})},
       {"valid_short",
        Value::object({{"max_chars", Value::integer(kShortValidChars)},
                       {"count", Value::integer(static_cast<int64_t>(r.short_count))},
                       {"accuracy", r.short_count == 0 ? Value() : Value::number(r.short_accuracy)}})},
       {"test", r.test.to_json(labels)},
       {"baseline",
        Value::object({{"name", Value::string("multinomial naive Bayes, character unigrams + bigrams")},
                       {"test", base.test.to_json(labels)}})},
       {"logistic_regression",
        Value::object({{"name", Value::string("logistic regression, character 1-2-grams")},
                       {"test", base.lr_test.to_json(labels)}})},
       {"clean_eval", clean_eval_json(s, r.eval_set, r.eval_metrics, base, labels)},
       {"total_seconds", Value::number(total_seconds)}});
}

std::string report_md(const Run& r, double total_seconds) {
  const ClassifyTrainOptions& s = r.s;
  const data::Dataset& ds = r.ds();
  const Baseline& base = *r.base;
  const std::string& name = r.pe.name;
  std::string md = "# Review classifier (fine-tuned " + name + "): test report\n\n";
  md += "Command: `" + s.command + "`\n\n";
  md += "## Test results (" + std::to_string(r.test.count) + " held-out examples)\n\n";
  md += metrics_table_head(ds.label_names);
  md += metrics_rows("fine-tuned " + name, r.test);
  md += metrics_rows("naive Bayes baseline", base.test);
  md += metrics_rows("logistic regression baseline", base.lr_test);
  md += confusion_md("Fine-tuned " + name, r.test, ds.label_names);
  md += confusion_md("Logistic regression baseline", base.lr_test, ds.label_names);
  if (r.eval_set) {
    md += "\n## Clean evaluation set (" + std::to_string(r.eval_set->size()) + " examples, `" + s.eval +
          "`)\n\n";
    md += "| model | accuracy | macro F1 |\n|---|---:|---:|\n";
    md += "| fine-tuned " + name + " | " + pct(r.eval_metrics->accuracy) + " | " +
          fmt("%.4f", r.eval_metrics->macro_f1) + " |\n";
    md += "| naive Bayes baseline | " + pct(base.eval->accuracy) + " | " + fmt("%.4f", base.eval->macro_f1) +
          " |\n";
    md += "| logistic regression baseline | " + pct(base.lr_eval->accuracy) + " | " +
          fmt("%.4f", base.lr_eval->macro_f1) + " |\n";
    md += confusion_md("Fine-tuned " + name, *r.eval_metrics, ds.label_names);
  }
  md += "\n## Encoder and training\n\n";
  md += "- " + name + " from `" + r.pe.source + "`: " + std::to_string(r.n_layers) +
        " post-norm layers, hidden " + std::to_string(r.cfg.d_model) + ", " + std::to_string(r.cfg.heads) +
        " heads; a " + (r.cfg.mean_pool ? std::string("mean-pooled") : std::string("[CLS]")) +
        " head (Linear) on top" +
        (r.cfg.frozen_top > 0 ? ", reading also the pooled vector of a frozen copy of the trained layers"
                              : "") +
        "\n";
  md += "- frozen: " + (s.freeze_embeddings ? frozen_part_name(r.k) : std::string("nothing")) +
        ", computed once per example (" + std::to_string(r.prefix_tokens) + " tokens in " +
        duration(r.prefix_seconds) + "); trained: " + std::to_string(r.n_trainable) + " parameters\n";
  md += "- max length " + std::to_string(r.max_len) + " pieces: " + std::to_string(r.truncated) + " of " +
        std::to_string(ds.size()) + " texts cut\n";
  md += "- fine-tuned on " + std::to_string(r.train_rows.size()) + " of " +
        std::to_string(r.split.train.size()) + " training examples, validated on " +
        std::to_string(r.valid_rows.size()) + "; the test split is whole\n";
  md += "- AdamW (lr " + fmt("%g", s.encoder_lr) + "), warmup " + std::to_string(r.warmup) +
        " + cosine over " + std::to_string(r.total) + " steps, batches of " + std::to_string(s.batch_size) +
        (r.bf16_products ? ", bf16 products" : "") + "\n";
  md += "- " + std::to_string(r.step) + " steps in " + duration(r.train_seconds) + " on " +
        std::to_string(num_threads()) + " threads, " + fmt("%.0f", tokens_per_second(r)) +
        " tokens/s through the trained layers; " + r.stop_reason + "\n";
  md += "- best validation accuracy " + pct(r.fr.best.score) + " at step " + std::to_string(r.fr.best_step) +
        "\n";
  md += "\nTotal time " + duration(total_seconds) + ".\n";
  return md;
}

std::string summary(const Run& r) {
  const ClassifyTrainOptions& s = r.s;
  const Baseline& base = *r.base;
  std::string out = "fine-tuned " + r.pe.name + ": test accuracy " + pct(r.test.accuracy) + " (macro F1 " +
                    fmt("%.4f", r.test.macro_f1) + ") on " + std::to_string(r.test.count) +
                    " held-out reviews; naive Bayes " + pct(base.test.accuracy) + ", logistic regression " +
                    pct(base.lr_test.accuracy) + "\n";
  if (r.eval_set)
    out += "clean set (" + std::to_string(r.eval_set->size()) + " reviews, " + s.eval + "): fine-tuned " +
           pct(r.eval_metrics->accuracy) + ", naive Bayes " + pct(base.eval->accuracy) +
           ", logistic regression " + pct(base.lr_eval->accuracy) + "\n";
  out += "fine-tuned " + std::to_string(r.step) + " steps in " + duration(r.train_seconds) + " (" +
         fmt("%.0f", tokens_per_second(r)) + " tokens/s), frozen part " + duration(r.prefix_seconds) +
         ", test " + duration(r.test_seconds) + "; model " + (fs::path(s.out) / "model.attn").string() + "\n";
  return out;
}

}  // namespace

ClassifyTrainResult finetune_classifier(ClassifyTrainOptions& s,
                                        const std::chrono::steady_clock::time_point t_start,
                                        StepProgress& progress, CreatedFolders& created) {
  check_finetune_options(s);
  Run r(s, progress);
  load_and_baselines(r);
  open_model(r);
  encode_pieces(r);
  compute_frozen_part(r);
  WeightAverage swa;
  train_layers(r, swa);
  evaluate_finetuned(r, swa);

  // ---- outputs ----
  const double total_seconds = seconds_since(t_start);
  const Value split_summary = split_json(r);
  const Value encoder = encoder_json(r);
  Value report = report_json(r, split_summary, encoder, total_seconds);
  std::string md = report_md(r, total_seconds);
  Value extra = Value::object({{"split", split_summary},
                               {"encoder", encoder},
                               {"test_accuracy", Value::number(r.test.accuracy)},
                               {"baseline_test_accuracy", Value::number(r.base->test.accuracy)}});
  write_outputs(s.out, *r.clf, extra, r.split, r.sample_text, report, md);
  created.keep();

  ClassifyTrainResult result;
  result.summary = summary(r);
  fill_result(result, s, std::move(report), std::move(md), r.test, *r.base, r.eval_metrics);
  return result;
}

}  // namespace attn::tasks::classify_detail
