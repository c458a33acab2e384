// attn train classify: the review classifier, from text files to a saved model
// and a test report next to a naive Bayes baseline trained on the same split.
//
//   read (strict UTF-8, normalise, count cut lines) -> deduplicate -> stratified
//   split (seeded, saved with hashes) -> char vocabulary from the training split
//   -> EncoderClassifier, AdamW + warmup-cosine, clipping, length-bucketed batches,
//   validation with early stopping (best weights kept) -> test metrics
//   -> <out>/model.attn, report.md, report.json, split.json, test-sample.txt.
//
// Every output is written through a temporary file and a rename, after training
// succeeded: an error leaves no half-written model or report behind.
#include <attn/core/autograd.h>
#include <attn/core/error.h>
#include <attn/core/parallel.h>
#include <attn/data/batch.h>
#include <attn/core/random.h>
#include <attn/data/reader.h>
#include <attn/data/split.h>
#include <attn/io/files.h>
#include <attn/models/baseline.h>
#include <attn/models/text_classifier.h>
#include <attn/train/optim.h>
#include <attn/train/schedule.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <numeric>
#include <string>
#include <vector>

#include "args.h"
#include "classify_internal.h"
#include "commands.h"

namespace attn::cli {

namespace {

namespace fs = std::filesystem;
using json::Value;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

std::string pct(double v) { return fmt("%.2f%%", 100.0 * v); }

std::string duration(double s) {
  const auto t = static_cast<int64_t>(std::lround(std::max(0.0, s)));
  char buf[32];
  std::snprintf(buf, sizeof buf, "%lld:%02lld", static_cast<long long>(t / 60),
                static_cast<long long>(t % 60));
  return buf;
}

const std::vector<OptionSpec>& train_classify_options() {
  static const std::vector<OptionSpec> specs = {
      {"pos", "FILE", "positive examples, one per line (with --neg; default: the reviews)"},
      {"neg", "FILE", "negative examples, one per line"},
      {"data", "FILE", "a table instead: TSV, CSV or JSONL with a text and a label column (two classes)"},
      {"format", "F", "tsv, csv or jsonl (default: from the file name)"},
      {"text-column", "C", "column (header name) or JSON member of the text (default text)"},
      {"label-column", "L", "column or JSON member of the label (default label)"},
      {"out", "DIR", "output folder (default runs/classify)"},
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
      {"threads", "N", "worker threads (default: all cores)"},
      {"quiet", "", "no progress output"},
      {"help", "", "this text"},
  };
  return specs;
}

struct Settings {
  std::string pos, neg, data, format, text_column = "text", label_column = "label";
  std::string out = "runs/classify";
  double minutes = 8.0;
  int64_t epochs = 0;  // > 0: epoch mode
  int64_t max_epochs = 6;
  uint64_t seed = 1;
  int64_t max_len = 100, max_chars = 4096, min_freq = 2;
  int64_t layers = 2, d_model = 128, heads = 4, d_ff = 0;
  double dropout = 0.1, lr = 1e-3, weight_decay = 0.01, clip = 1.0;
  int64_t batch_size = 32, patience = 3, eval_every = 0;
  bool quiet = false;
};

double parse_positive(const Args& a, const std::string& name, double hi) {
  const double v = parse_number(a.str(name), "--" + name);
  ATTN_CHECK(v > 0 && v <= hi, "--", name, " must be in (0, ", hi, "]; got ", a.str(name));
  return v;
}

Settings parse_settings(const Args& a) {
  Settings s;
  if (a.has("preset")) {
    const std::string p = a.str("preset");
    ATTN_CHECK(p == "quick" || p == "full", "--preset must be quick or full; got '", p, "'");
    s.minutes = p == "quick" ? 3.5 : 8.0;
    s.max_epochs = p == "quick" ? 4 : 6;
  }
  if (a.has("pos") || a.has("neg")) {
    ATTN_CHECK(a.has("pos") && a.has("neg"), "--pos and --neg go together; got only ",
               a.has("pos") ? "--pos" : "--neg");
    ATTN_CHECK(!a.has("data"), "give either --pos/--neg or --data, not both");
    s.pos = a.str("pos");
    s.neg = a.str("neg");
  }
  if (a.has("data")) s.data = a.str("data");
  for (const char* o : {"format", "text-column", "label-column"})
    ATTN_CHECK(!a.has(o) || a.has("data"), "--", o, " is only used with --data FILE");
  if (a.has("format")) s.format = a.str("format");
  if (a.has("text-column")) s.text_column = a.str("text-column");
  if (a.has("label-column")) s.label_column = a.str("label-column");
  if (a.has("out")) s.out = a.str("out");
  ATTN_CHECK(!(a.has("minutes") && a.has("epochs")), "give --minutes or --epochs, not both");
  if (a.has("minutes")) s.minutes = parse_positive(a, "minutes", 24 * 60);
  if (a.has("epochs")) s.epochs = a.integer("epochs", 1, 10000);
  ATTN_CHECK(!(a.has("max-epochs") && a.has("epochs")),
             "--max-epochs goes with a time budget, not with --epochs");
  if (a.has("max-epochs")) s.max_epochs = a.integer("max-epochs", 1, 10000);
  if (a.has("seed")) s.seed = static_cast<uint64_t>(a.integer("seed", 0, INT64_MAX));
  if (a.has("max-len")) s.max_len = a.integer("max-len", 2, 4096);
  if (a.has("max-chars")) s.max_chars = a.integer("max-chars", 1, 1 << 24);
  if (a.has("min-freq")) s.min_freq = a.integer("min-freq", 1, 1 << 30);
  if (a.has("layers")) s.layers = a.integer("layers", 1, 64);
  if (a.has("d-model")) s.d_model = a.integer("d-model", 8, 4096);
  if (a.has("heads")) s.heads = a.integer("heads", 1, 64);
  s.d_ff = a.has("d-ff") ? a.integer("d-ff", 1, 1 << 16) : 4 * s.d_model;
  if (a.has("dropout")) {
    s.dropout = parse_number(a.str("dropout"), "--dropout");
    ATTN_CHECK(s.dropout >= 0 && s.dropout < 1, "--dropout must be in [0, 1); got ", a.str("dropout"));
  }
  if (a.has("lr")) s.lr = parse_positive(a, "lr", 1.0);
  if (a.has("weight-decay")) {
    s.weight_decay = parse_number(a.str("weight-decay"), "--weight-decay");
    ATTN_CHECK(s.weight_decay >= 0 && s.weight_decay < 1, "--weight-decay must be in [0, 1); got ",
               a.str("weight-decay"));
  }
  if (a.has("clip")) s.clip = parse_positive(a, "clip", 1e6);
  if (a.has("batch-size")) s.batch_size = a.integer("batch-size", 1, 4096);
  if (a.has("patience")) s.patience = a.integer("patience", 1, 1000);
  if (a.has("eval-every")) s.eval_every = a.integer("eval-every", 1, 1 << 30);
  if (a.has("threads")) set_num_threads(static_cast<int>(a.integer("threads", 1, 256)));
  s.quiet = a.has("quiet");
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

data::TableFormat table_format(const Settings& s) {
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

LoadedData load_data(Settings& s) {
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
      const std::string dir = classify::find_reviews_dir();
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

// ---- progress -----------------------------------------------------------------------------------

// "step 12/340", or "step 12" while the total is not known yet (0: a time budget's
// schedule is fitted after the first steps).
std::string step_str(int64_t step, int64_t total) {
  return "step " + std::to_string(step) + (total > 0 ? "/" + std::to_string(total) : std::string());
}

class Progress {
 public:
  explicit Progress(bool quiet) : quiet_(quiet), tty_(::isatty(2) != 0) {}
  // One training step done.
  void step(int64_t step, int64_t total, int64_t epoch, double loss, double tokens_per_s, double eta_s) {
    if (quiet_) return;
    ema_ = step == 1 ? loss : 0.95 * ema_ + 0.05 * loss;
    const double frac = total > 0 ? std::min(1.0, static_cast<double>(step) / total) : 0.0;
    char line[256];
    if (tty_) {
      const int width = 24, filled = static_cast<int>(frac * width);
      std::string bar = "[" + std::string(filled, '#') + std::string(width - filled, '.') + "]";
      std::snprintf(line, sizeof line, "\r%s %3.0f%% %s epoch %lld loss %.4f %.0f tok/s ETA %s ", bar.c_str(),
                    100 * frac, step_str(step, total).c_str(), static_cast<long long>(epoch + 1), ema_,
                    tokens_per_s, total > 0 ? duration(eta_s).c_str() : "?");
      std::fputs(line, stderr);
      open_ = true;
    } else if (step == 1 || step % 50 == 0 || step == total) {
      std::snprintf(line, sizeof line, "%s epoch %lld loss %.4f %.0f tok/s ETA %s\n",
                    step_str(step, total).c_str(), static_cast<long long>(epoch + 1), ema_, tokens_per_s,
                    total > 0 ? duration(eta_s).c_str() : "?");
      std::fputs(line, stderr);
    }
  }
  // A line of its own (validation results, notes).
  void note(const std::string& s) {
    if (quiet_) return;
    if (open_) std::fputs("\n", stderr);
    open_ = false;
    std::fprintf(stderr, "%s\n", s.c_str());
  }
  void done() {
    if (open_ && !quiet_) std::fputs("\n", stderr);
    open_ = false;
  }

 private:
  bool quiet_, tty_, open_ = false;
  double ema_ = 0;
};

std::string command_line(const std::vector<std::string>& args) {
  std::string s = "attn train classify";
  for (const auto& a : args) {
    const bool plain = !a.empty() && a.find_first_of(" \t\"'\\$`*?") == std::string::npos;
    s += " " + (plain ? a : "'" + a + "'");
  }
  return s;
}

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
        "and a naive Bayes baseline on the same split. Writes DIR/model.attn (for 'attn classify'),\n"
        "DIR/report.md, DIR/report.json, DIR/split.json and DIR/test-sample.txt.\n\n%s",
        format_options(train_classify_options()).c_str());
    return 0;
  }
  Settings s = parse_settings(a);
  const auto t_start = Clock::now();
  Progress progress(s.quiet);

  // Output folder first: a run that cannot save should fail before training.
  std::error_code ec;
  CreatedFolders created(s.out);
  fs::create_directories(s.out, ec);
  ATTN_CHECK(!ec && fs::is_directory(s.out), "cannot create the output folder '", s.out, "'",
             ec ? ": " + ec.message() : std::string());
  {
    const std::string probe = (fs::path(s.out) / ".write-test").string();
    io::write_file_atomically(probe, "ok\n");
    std::remove(probe.c_str());
  }

  // ---- data ----
  LoadedData d = load_data(s);
  const data::Dataset& ds = d.dataset;
  data::SplitOptions so;
  so.seed = s.seed;
  const data::Split split = data::make_split(ds, so);
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
  const data::EncodedDataset enc = data::encode_dataset(ds, tokenizer);
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

  // ---- baseline ----
  const auto t_nb = Clock::now();
  auto tokens_of = [&](int64_t i) { return text::char_tokenize(ds.examples[i].text, to); };
  std::vector<std::vector<std::string>> nb_docs;
  std::vector<int32_t> nb_labels;
  for (int64_t i : split.train) {
    nb_docs.push_back(tokens_of(i));
    nb_labels.push_back(ds.examples[i].label);
  }
  const auto C = static_cast<int32_t>(ds.label_names.size());
  const models::NaiveBayes nb = models::NaiveBayes::train(nb_docs, nb_labels, C);
  auto nb_eval = [&](const std::vector<int64_t>& rows) {
    std::vector<int32_t> truth, pred;
    for (int64_t i : rows) {
      truth.push_back(ds.examples[i].label);
      pred.push_back(nb.predict(tokens_of(i)));
    }
    return models::classification_metrics(truth, pred, C);
  };
  const models::Metrics nb_valid = nb_eval(split.valid), nb_test = nb_eval(split.test);
  const double nb_seconds = seconds_since(t_nb);
  progress.note("baseline (naive Bayes, character unigrams + bigrams): valid accuracy " +
                pct(nb_valid.accuracy) + ", trained in " + fmt("%.1f", nb_seconds) + " s");

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

  struct HistoryRow {
    int64_t step, epoch;
    double train_loss, valid_loss, valid_accuracy, lr, seconds;
  };
  std::vector<HistoryRow> history;
  std::vector<Tensor> best;
  double best_acc = -1, best_loss = 0;
  int64_t best_step = 0, since_best = 0, step = 0, epoch = 0, tokens = 0, skipped = 0;
  double window_loss = 0, first_loss = 0;
  int64_t window_n = 0;
  std::string stop_reason;
  data::SequenceOptions seq;
  seq.max_len = s.max_len;
  seq.pad_to_max = false;
  const auto t_train = Clock::now();
  double train_seconds = 0;

  auto lr_at = [&](int64_t t) {
    if (total == 0) return s.lr * std::min(1.0, static_cast<double>(t) / 100.0);  // provisional warmup
    return train::WarmupCosineSchedule(s.lr, warmup, total, s.lr * 0.02).lr(t);
  };
  bool stop = false;
  while (!stop) {
    const auto batches = bucketed_batches(split.train, length, s.batch_size, s.seed, epoch);
    for (std::size_t bi = 0; bi < batches.size() && !stop; ++bi) {
      model.train();
      ++step;
      data::Batch b = data::make_batch(enc, batches[bi], seq);
      const Tensor lens = b.lengths;
      std::vector<int64_t> lengths(lens.data<int64_t>(), lens.data<int64_t>() + lens.numel());
      for (int64_t l : lengths) tokens += l;
      opt.set_lr(lr_at(step));
      opt.zero_grad();
      models::ModelOutput o = model.forward(b.ids, lengths, b.labels);
      const double loss = o.loss.to_vector()[0];
      o.loss.backward();
      const double norm = train::clip_grad_norm(params, s.clip);
      if (!std::isfinite(norm) || !std::isfinite(loss)) {
        ++skipped;
        progress.note("step " + std::to_string(step) + ": non-finite loss or gradient; update skipped");
        ATTN_CHECK(skipped <= 20, "training diverged: ", skipped,
                   " updates skipped for NaN/Inf (try a lower --lr)");
      } else {
        opt.step();
      }
      if (step == 1) first_loss = loss;
      window_loss += loss;
      ++window_n;
      train_seconds = seconds_since(t_train);
      if (s.epochs == 0 && (step == probe_steps || (total > 0 && step % eval_every == 0))) {
        // Fit the schedule to the time budget: steps left at the mean pace so far.
        const double per_step = train_seconds / static_cast<double>(step);
        const int64_t est = step + static_cast<int64_t>((budget - train_seconds) / per_step);
        if (total == 0) warmup = std::max<int64_t>(probe_steps + 1, est / 20);
        total = std::max(step + 1, std::min<int64_t>(est, s.max_epochs * steps_per_epoch));
        // The warmup comes from the time estimate, the total may be capped by --max-epochs
        // far below it (small data): the schedule needs warmup < total.
        warmup = std::min(warmup, total - 1);
      }
      const double eta = total > 0 ? train_seconds / step * static_cast<double>(total - step) : 0;
      progress.step(step, total, epoch, loss, static_cast<double>(tokens) / std::max(1e-9, train_seconds),
                    eta);
      const bool end = (total > 0 && step >= total) || (s.epochs == 0 && train_seconds >= budget);
      if (step % eval_every == 0 || end) {
        const EvalResult v = evaluate(model, enc, split.valid, length, s.max_len);
        train_seconds = seconds_since(t_train);
        history.push_back({step, epoch, window_loss / window_n, v.loss, v.accuracy, opt.lr(), train_seconds});
        window_loss = 0;
        window_n = 0;
        const bool better = v.accuracy > best_acc || (v.accuracy == best_acc && v.loss < best_loss);
        progress.note("step " + std::to_string(step) + " epoch " + std::to_string(epoch + 1) +
                      ": train loss " + fmt("%.4f", history.back().train_loss) + ", valid loss " +
                      fmt("%.4f", v.loss) + ", valid accuracy " + pct(v.accuracy) +
                      (better ? " (best)" : ""));
        if (better) {
          best_acc = v.accuracy;
          best_loss = v.loss;
          best_step = step;
          since_best = 0;
          best.clear();
          for (const auto& [n, p] : params) best.push_back(p.detach().clone());
        } else if (++since_best >= s.patience) {
          stop = true;
          stop_reason =
              "early stop: no better validation accuracy in " + std::to_string(s.patience) + " validations";
        }
        if (end && !stop) {
          stop = true;
          stop_reason = s.epochs > 0 ? "all epochs done"
                        : total >= s.max_epochs * steps_per_epoch
                            ? "schedule done (--max-epochs " + std::to_string(s.max_epochs) + ")"
                            : "time budget reached";
        }
      }
    }
    if (!stop) ++epoch;
  }
  progress.done();
  train_seconds = seconds_since(t_train);
  {
    NoGradGuard ng;
    for (std::size_t i = 0; i < params.size(); ++i) params[i].second.detach().copy_from(best[i]);
  }
  progress.note(stop_reason + "; kept the weights of step " + std::to_string(best_step) +
                " (valid accuracy " + pct(best_acc) + ")");

  // ---- test ----
  const EvalResult te = evaluate(model, enc, split.test, length, s.max_len);
  const models::Metrics test = models::classification_metrics(te.truth, te.predicted, C);
  const EvalResult va = evaluate(model, enc, split.valid, length, s.max_len);

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
       {"command", Value::string(command_line(args))},
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
       {"total_seconds", Value::number(total_seconds)},
       {"outputs",
        Value::object({{"model", Value::string((fs::path(s.out) / "model.attn").string())},
                       {"report_md", Value::string((fs::path(s.out) / "report.md").string())},
                       {"split", Value::string((fs::path(s.out) / "split.json").string())},
                       {"test_sample", Value::string((fs::path(s.out) / "test-sample.txt").string())}})}});

  std::string md = "# Review classifier: test report\n\n";
  md += "Command: `" + command_line(args) + "`\n\n";
  md += "## Test results (" + std::to_string(test.count) + " held-out examples)\n\n";
  md += "| model | accuracy | macro F1";
  for (const auto& l : ds.label_names) md += " | " + l + " P / R / F1";
  md += " |\n|---|---:|---:";
  for (std::size_t i = 0; i < ds.label_names.size(); ++i) md += "|---:";
  md += "|\n";
  md += metrics_rows("Transformer encoder", test);
  md += metrics_rows("naive Bayes baseline", nb_test);
  md += confusion_md("Transformer encoder", test, ds.label_names);
  md += confusion_md("Naive Bayes baseline", nb_test, ds.label_names);
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
  // Everything is first written under a staging name (each file atomically), then
  // renamed into place; on an error the staged files are removed, so the folder
  // never holds a model without its report or the other way round.
  const std::string stage = ".new." + std::to_string(::getpid());
  const std::vector<std::string> names = {"model.attn", "split.json", "test-sample.txt", "report.json",
                                          "report.md"};
  auto staged = [&](const std::string& name) { return (fs::path(s.out) / (name + stage)).string(); };
  try {
    clf.save(staged("model.attn"), extra);
    split.save(staged("split.json"));
    io::write_file_atomically(staged("test-sample.txt"), sample_text);
    io::write_file_atomically(staged("report.json"), json::dump(report, 2) + "\n");
    io::write_file_atomically(staged("report.md"), md);
    for (const auto& n : names) {
      fs::rename(staged(n), fs::path(s.out) / n, ec);
      ATTN_CHECK(!ec, "cannot rename '", staged(n), "' to '", (fs::path(s.out) / n).string(),
                 "': ", ec.message());
    }
  } catch (...) {
    for (const auto& n : names) fs::remove(staged(n), ec);
    throw;
  }
  created.keep();

  std::printf(
      "test accuracy %s (macro F1 %.4f) vs naive Bayes baseline %s (macro F1 %.4f), on %lld held-out "
      "reviews\n",
      pct(test.accuracy).c_str(), test.macro_f1, pct(nb_test.accuracy).c_str(), nb_test.macro_f1,
      static_cast<long long>(test.count));
  std::printf("trained %lld steps in %s; model %s, report %s\n", static_cast<long long>(step),
              duration(train_seconds).c_str(), (fs::path(s.out) / "model.attn").c_str(),
              (fs::path(s.out) / "report.md").c_str());
  return 0;
}

}  // namespace attn::cli
