// attn train classify: flags -> tasks::ClassifyTrainOptions -> tasks::train_classifier
// (include/attn/tasks/classify.h) -> the two summary lines.
#include <attn/core/error.h>
#include <attn/core/parallel.h>
#include <attn/tasks/classify.h>
#include <attn/train/comm.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "args.h"
#include "commands.h"

namespace attn::cli {

namespace {

const std::vector<OptionSpec>& train_classify_options() {
  static const std::vector<OptionSpec> specs = {
      {"pos", "FILE", "positive examples, one per line (with --neg; default: the reviews)"},
      {"neg", "FILE", "negative examples, one per line"},
      {"data", "FILE", "a table instead: TSV, CSV or JSONL with a text and a label column (two classes)"},
      {"format", "F", "tsv, csv or jsonl (default: from the file name)"},
      {"text-column", "C", "column (header name) or JSON member of the text (default text)"},
      {"label-column", "L", "column or JSON member of the label (default label)"},
      {"out", "DIR", "output folder (default runs/classify)"},
      {"eval", "FILE",
       "a second labelled test set (TSV/CSV/JSONL, same columns and labels), e.g. eval/reviews-zh-clean.tsv"},
      {"preset", "NAME",
       "quick (3.5 minutes, at most 4 epochs) or full (8 minutes, at most 6 epochs; the default)"},
      {"minutes", "M", "training time budget in minutes (the schedule is fitted to it)"},
      {"epochs", "E", "train for E epochs instead of a time budget"},
      {"max-epochs", "E", "with a time budget: at most E epochs (default: 4 quick, 6 full)"},
      {"seed", "S", "seed of the split, the initialisation, dropout and batch order (default 1)"},
      {"max-len", "N", "tokens per example including [CLS] (default 100; longer texts are cut and counted)"},
      {"max-chars", "N",
       "characters kept per line when reading (default 4096; longer lines cut and counted)"},
      {"min-freq", "N", "characters seen fewer times in the training split become [UNK] (default 2)"},
      {"layers", "N", "encoder layers (default 2)"},
      {"d-model", "N", "model width (default 128)"},
      {"heads", "N", "attention heads (default 4)"},
      {"d-ff", "N", "feed-forward width (default 4 x d-model)"},
      {"dropout", "P", "dropout (default 0.1)"},
      {"lr", "X", "peak learning rate (default 1e-3)"},
      {"weight-decay", "X", "AdamW weight decay (default 0.01; none on biases, norms)"},
      {"batch-size", "N", "examples per batch (default 32)"},
      {"clip", "X", "global gradient-norm clipping (default 1.0)"},
      {"patience", "N", "stop after N validations without a better accuracy (default 3)"},
      {"eval-every", "N", "validate every N steps (default: every epoch)"},
      {"encoder", "NAME",
       "fine-tune a pretrained encoder instead: e5 (multilingual-e5-small) or minilm; with it --max-len "
       "(default 64),\n"
       "--lr (default 1e-4) and --epochs (default 3) apply to the fine-tune"},
      {"encoder-file", "PATH", "with --encoder: the model file or folder (default: the installed package's)"},
      {"freeze-layers", "K", "with --encoder: freeze the lowest K layers (default: all but the top 2)"},
      {"train-embeddings", "", "with --encoder: train the embeddings too (nothing frozen, no cache; slow)"},
      {"max-train", "N", "with --encoder: fine-tune on N training examples (seeded pick; default all)"},
      {"max-valid", "N", "with --encoder: validate on N examples (seeded pick; default all)"},
      {"cache-dir", "DIR",
       "with --encoder: keep the frozen layers' outputs in DIR between runs (keyed by the model file,\n"
       "--freeze-layers, --max-len and the data; a stale or corrupt file is reported and rebuilt)"},
      {"prefix", "P",
       "with --encoder e5: query, passage or none (default): put \"query: \" or \"passage: \" before every "
       "text, as e5 was trained\n(saved with the model)"},
      {"label-smoothing", "X", "with --encoder: label smoothing of the loss, in [0, 1) (default 0)"},
      {"layer-lr-decay", "X",
       "with --encoder: layer i of n trains at lr x X^(n - i), the head at lr; in (0, 1] (default 1)"},
      {"average-from", "F",
       "with --encoder: average the trained weights over the steps from F x total on and keep the\n"
       "average if it validates at least as well, F in [0, 1) (default 0: off)"},
      {"frozen-path", "P",
       "with --encoder: bert (default): the frozen layers run once through the inference path (the embed\n"
       "commands' model); nn: through the nn modules in eval mode (the reference, slower)"},
      {"frozen-vector", "",
       "with --encoder: the head also reads the pretrained encoder's own pooled vector (a frozen copy of\n"
       "the trained layers, computed once per example; saved with the model)"},
      {"pool", "P",
       "with --encoder: the head reads the mean of the tokens or [CLS] (mean|cls; default: the "
       "model's own, mean for e5)"},
      {"threads", "N", "worker threads (default: all cores)"},
      {"quiet", "", "no progress output"},
      {"help", "", "this text"},
  };
  return specs;
}

double parse_positive(const Args& a, const std::string& name, double hi) {
  const double v = parse_number(a.str(name), "--" + name);
  ATTN_CHECK(v > 0 && v <= hi, "--", name, " must be in (0, ", hi, "]; got ", a.str(name));
  return v;
}

double parse_fraction(const Args& a, const std::string& name) {
  const double v = parse_number(a.str(name), "--" + name);
  ATTN_CHECK(v >= 0 && v < 1, "--", name, " must be in [0, 1); got ", a.str(name));
  return v;
}

// The command line as the report shows it (arguments with shell characters quoted).
std::string command_line(const std::vector<std::string>& args) {
  std::string s = "attn train classify";
  for (const auto& a : args) {
    const bool plain = !a.empty() && a.find_first_of(" \t\"'\\$`*?") == std::string::npos;
    s += " " + (plain ? a : "'" + a + "'");
  }
  return s;
}

void read_data_flags(const Args& a, tasks::ClassifyTrainOptions& s) {
  if (a.has("pos")) s.pos = a.str("pos");
  if (a.has("neg")) s.neg = a.str("neg");
  if (a.has("data")) s.data = a.str("data");
  for (const char* o : {"format", "text-column", "label-column"})
    ATTN_CHECK(!a.has(o) || a.has("data"), "--", o, " is only used with --data FILE");
  if (a.has("format")) s.format = a.str("format");
  if (a.has("text-column")) s.text_column = a.str("text-column");
  if (a.has("label-column")) s.label_column = a.str("label-column");
  if (a.has("out")) s.out = a.str("out");
  if (a.has("eval")) s.eval = a.str("eval");
}

tasks::ClassifyTrainOptions parse_options(const Args& a) {
  tasks::ClassifyTrainOptions s;
  read_data_flags(a, s);
  if (a.has("preset")) s.preset = a.str("preset");
  if (a.has("minutes")) s.minutes = parse_positive(a, "minutes", 24 * 60);
  if (a.has("epochs")) s.epochs = a.integer("epochs", 1, 10000);
  if (a.has("max-epochs")) s.max_epochs = a.integer("max-epochs", 1, 10000);
  if (a.has("seed")) s.seed = static_cast<uint64_t>(a.integer("seed", 0, INT64_MAX));
  if (a.has("max-len")) s.max_len = a.integer("max-len", 2, 4096);
  if (a.has("max-chars")) s.max_chars = a.integer("max-chars", 1, 1 << 24);
  if (a.has("min-freq")) s.min_freq = a.integer("min-freq", 1, 1 << 30);
  if (a.has("layers")) s.layers = a.integer("layers", 1, 64);
  if (a.has("d-model")) s.d_model = a.integer("d-model", 8, 4096);
  if (a.has("heads")) s.heads = a.integer("heads", 1, 64);
  if (a.has("d-ff")) s.d_ff = a.integer("d-ff", 1, 1 << 16);
  if (a.has("dropout")) s.dropout = parse_fraction(a, "dropout");
  if (a.has("lr")) s.lr = parse_positive(a, "lr", 1.0);
  if (a.has("weight-decay")) s.weight_decay = parse_fraction(a, "weight-decay");
  if (a.has("clip")) s.clip = parse_positive(a, "clip", 1e6);
  if (a.has("batch-size")) s.batch_size = a.integer("batch-size", 1, 4096);
  if (a.has("patience")) s.patience = a.integer("patience", 1, 1000);
  if (a.has("eval-every")) s.eval_every = a.integer("eval-every", 1, 1 << 30);
  if (a.has("encoder")) {
    s.encoder = a.str("encoder");
    if (a.has("max-len")) s.encoder_max_len = s.max_len, s.max_len = 100;
    if (a.has("lr")) s.encoder_lr = s.lr, s.lr = 1e-3;
    if (a.has("epochs")) s.encoder_epochs = s.epochs, s.epochs = 0;
    if (a.has("encoder-file")) s.encoder_file = a.str("encoder-file");
    if (a.has("freeze-layers")) s.freeze_layers = a.integer("freeze-layers", 0, 64);
    s.freeze_embeddings = !a.has("train-embeddings");
    if (a.has("max-train")) s.max_train = a.integer("max-train", 1, INT64_MAX);
    if (a.has("max-valid")) s.max_valid = a.integer("max-valid", 1, INT64_MAX);
    if (a.has("cache-dir")) {
      s.cache_dir = a.str("cache-dir");
      ATTN_CHECK(!s.cache_dir.empty(), "--cache-dir needs a folder name");
      ATTN_CHECK(s.freeze_embeddings,
                 "--cache-dir caches the frozen part; with --train-embeddings nothing is frozen");
    }
    if (a.has("prefix")) {
      s.prefix = a.str("prefix");
      ATTN_CHECK(s.prefix == "query" || s.prefix == "passage" || s.prefix == "none",
                 "--prefix must be query, passage or none; got '", s.prefix, "'");
    }
    if (a.has("label-smoothing")) s.label_smoothing = parse_fraction(a, "label-smoothing");
    s.frozen_vector = a.has("frozen-vector");
    if (a.has("frozen-path")) {
      s.frozen_path = a.str("frozen-path");
      ATTN_CHECK(s.frozen_path == "bert" || s.frozen_path == "nn", "--frozen-path must be bert or nn; got '",
                 s.frozen_path, "'");
    }
    if (a.has("average-from")) s.swa_from = parse_fraction(a, "average-from");
    if (a.has("layer-lr-decay")) {
      s.layer_lr_decay = parse_number(a.str("layer-lr-decay"), "--layer-lr-decay");
      ATTN_CHECK(s.layer_lr_decay > 0 && s.layer_lr_decay <= 1, "--layer-lr-decay must be in (0, 1]; got ",
                 a.str("layer-lr-decay"));
    }
    if (a.has("pool")) {
      s.pool = a.str("pool");
      ATTN_CHECK(s.pool == "mean" || s.pool == "cls", "--pool must be mean or cls; got '", s.pool, "'");
    }
  } else {
    for (const char* o : {"encoder-file", "freeze-layers", "train-embeddings", "max-train", "max-valid",
                          "cache-dir", "label-smoothing", "pool", "prefix", "frozen-vector", "layer-lr-decay",
                          "average-from", "frozen-path"})
      ATTN_CHECK(!a.has(o), "--", o, " goes with --encoder NAME");
  }
  if (a.has("threads")) set_num_threads(static_cast<int>(a.integer("threads", 1, 256)));
  return s;
}

}  // namespace

int run_train_classify(const std::vector<std::string>& args) {
  const Args a(args, train_classify_options());
  if (a.has("help")) {
    std::printf(
        "usage: attn train classify [--pos FILE --neg FILE | --data FILE [--format tsv|csv|jsonl]\n"
        "                           [--text-column C] [--label-column L]] [--out DIR]\n"
        "                           [--preset quick|full | --minutes M | --epochs E] [--seed S] ...\n\n"
        "Trains a Transformer encoder to classify texts (by default the Chinese product reviews,\n"
        "from $ATTN_DATA_DIR or ../shared/data or <repo>/data: scripts/fetch-reviews.sh gets them),\n"
        "and naive Bayes and logistic-regression baselines on the same split. Writes DIR/model.attn (for "
        "'attn classify'),\n"
        "DIR/report.md, DIR/report.json, DIR/split.json and DIR/test-sample.txt.\n\n%s",
        format_options(train_classify_options()).c_str());
    return 0;
  }
  tasks::ClassifyTrainOptions s = parse_options(a);
  s.command = command_line(args);
  if (!a.has("quiet")) {
    s.progress.write = [](const std::string& text) { std::fputs(text.c_str(), stderr); };
    s.progress.terminal = ::isatty(2) != 0;
  }
  s.comm = train_communicator();  // mpirun -np N: rank 0 alone prints
  if (s.comm && s.comm->rank() > 0) s.progress = {};
  const tasks::ClassifyTrainResult r = tasks::train_classifier(s);
  std::fputs(r.summary.c_str(), stdout);
  return 0;
}

}  // namespace attn::cli
