// attn train translate: the paper's EncoderDecoder on Tatoeba English -> Chinese
// (docs/translate.md). Reads and deduplicates the pairs, makes a seeded
// train/valid/test split, trains the tokenizers on the training split, trains
// with label smoothing and the Noam warmup schedule, reports validation loss
// per epoch and held-out BLEU (sacreBLEU's zh tokenisation), and writes
// <out>/model.attn, <out>/report.json and <out>/report.md atomically.
#include <attn/core/autograd.h>
#include <attn/core/error.h>
#include <attn/data/batch.h>
#include <attn/data/random.h>
#include <attn/data/split.h>
#include <attn/io/files.h>
#include <attn/models/task_model.h>
#include <attn/models/translation.h>
#include <attn/train/trainer.h>
#include <attn/train/optim.h>
#include <attn/train/schedule.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "args.h"
#include "commands.h"
#include "translate_internal.h"

namespace attn::cli {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

const std::vector<OptionSpec>& specs() {
  static const std::vector<OptionSpec> s = {
      {"data", "FILE",
       "tab-separated pairs: English, Chinese[, attribution] (default: $ATTN_DATA_DIR or "
       "../shared/data, file tatoeba-cmn/cmn.txt)"},
      {"out", "DIR", "output directory (default runs/translate)"},
      {"minutes", "M", "training time budget in minutes (default 15)"},
      {"steps", "N", "stop after N updates instead (or whichever comes first with --minutes)"},
      {"preset", "NAME", "model size: micro, tiny (default), small, base"},
      {"layers", "N", "encoder and decoder layers (default: the preset's)"},
      {"batch-size", "N", "sentence pairs per update (default 64)"},
      {"warmup", "N", "Noam warmup steps (default 400)"},
      {"lr-scale", "X", "factor on the Noam rate d^-0.5 min(t^-0.5, t w^-1.5) (default 0.5)"},
      {"dropout", "P", "dropout (default 0.1)"},
      {"src-vocab", "N", "English BPE vocabulary size (default 6000)"},
      {"min-freq", "N", "characters rarer than this in the training split become [UNK] (default 2)"},
      {"max-len", "N", "tokens per sentence incl. <s>/</s> (default 48)"},
      {"max-pairs", "N", "use only the first N pairs of the file (quick runs, tests)"},
      {"eval-pairs", "N", "score BLEU on the first N test pairs (default: all)"},
      {"beam", "K", "beam width for the final BLEU (default 1: greedy)"},
      {"alpha", "A", "length penalty alpha for beam search (default 0.6)"},
      {"seed", "S", "split, initialisation, data order and dropout (default 1)"},
      {"quiet", "", "no progress lines"},
      {"help", "", "this text"},
  };
  return s;
}

void usage(FILE* f) {
  std::fprintf(
      f,
      "usage: attn train translate [--data cmn.txt] [--out runs/translate] [--minutes M] [--preset P] "
      "...\n\n"
      "Trains an English -> Chinese Transformer (EncoderDecoder, label smoothing 0.1, Noam warmup) on\n"
      "Tatoeba pairs and reports held-out BLEU (sacreBLEU -tok zh). Writes DIR/model.attn,\n"
      "DIR/report.json and DIR/report.md. Use it with: attn translate --model DIR/model.attn \"...\"\n\n"
      "options:\n%s",
      format_options(specs()).c_str());
}

std::string default_data_path(std::vector<std::string>* looked) {
  std::vector<std::string> candidates;
  if (const char* env = std::getenv("ATTN_DATA_DIR"))
    candidates.push_back(std::string(env) + "/tatoeba-cmn/cmn.txt");
  candidates.push_back("../shared/data/tatoeba-cmn/cmn.txt");
  for (const auto& c : candidates) {
    looked->push_back(c);
    if (fs::exists(c)) return c;
  }
  return "";
}

struct Stopwatch {
  Clock::time_point t0 = Clock::now();
  double seconds() const { return std::chrono::duration<double>(Clock::now() - t0).count(); }
};

std::string clock_text(double s) {
  if (!std::isfinite(s) || s < 0) return "?";
  const long t = std::lround(s);
  char b[32];
  std::snprintf(b, sizeof b, "%ld:%02ld", t / 60, t % 60);
  return b;
}

// Mean target-token loss (with the model's label smoothing) over `rows`.
double mean_loss(models::EncoderDecoder& m, const data::EncodedDataset& enc, const std::vector<int64_t>& rows,
                 const data::PairOptions& po, int64_t batch) {
  NoGradGuard no_grad;
  m.eval();
  double sum = 0, tokens = 0;
  for (std::size_t s = 0; s < rows.size(); s += static_cast<std::size_t>(batch)) {
    const std::size_t e = std::min(rows.size(), s + static_cast<std::size_t>(batch));
    const std::vector<int64_t> r(rows.begin() + static_cast<std::ptrdiff_t>(s),
                                 rows.begin() + static_cast<std::ptrdiff_t>(e));
    const data::PairBatch b = data::make_pair_batch(enc, r, po);
    const TeacherForcing tf = teacher_forcing(b);
    const double loss = m.forward(b.src, tf.src_lengths, tf.tgt_in, tf.targets).loss.to_vector()[0];
    sum += loss * static_cast<double>(tf.target_tokens);
    tokens += static_cast<double>(tf.target_tokens);
  }
  m.train();
  return tokens > 0 ? sum / tokens : 0.0;
}

// One epoch's batches: shuffled (seed, epoch), cut into chunks of 50 batches
// sorted by length (little padding), batch order shuffled again.
std::vector<std::vector<int64_t>> bucketed_batches(const data::EncodedDataset& enc,
                                                   const std::vector<int64_t>& rows, int64_t batch,
                                                   uint64_t seed, int64_t epoch) {
  const std::vector<int64_t> perm = train::epoch_order(static_cast<int64_t>(rows.size()), seed, epoch);
  std::vector<int64_t> order;
  for (int64_t p : perm) order.push_back(rows[static_cast<std::size_t>(p)]);
  const std::size_t chunk = static_cast<std::size_t>(batch) * 50;
  std::vector<std::vector<int64_t>> out;
  for (std::size_t s = 0; s < order.size(); s += chunk) {
    const auto b = order.begin() + static_cast<std::ptrdiff_t>(s);
    const auto e = order.begin() + static_cast<std::ptrdiff_t>(std::min(order.size(), s + chunk));
    std::stable_sort(b, e, [&](int64_t x, int64_t y) {
      return enc.text[x].size() + enc.pair[x].size() < enc.text[y].size() + enc.pair[y].size();
    });
    for (auto it = b; it < e; it += std::min<std::ptrdiff_t>(batch, e - it)) {
      out.emplace_back(it, it + std::min<std::ptrdiff_t>(batch, e - it));
    }
  }
  data::Rng rng(data::mix_seed(seed ^ 0x5bd1e995u, static_cast<uint64_t>(epoch)));
  for (std::size_t i = out.size(); i > 1; --i) std::swap(out[i - 1], out[rng.next() % i]);
  return out;
}

json::Value num(double v) { return json::Value::number(std::isfinite(v) ? v : 0.0); }
json::Value str(const std::string& s) { return json::Value::string(s); }
json::Value integer(int64_t v) { return json::Value::integer(v); }

}  // namespace

int run_train_translate(const std::vector<std::string>& argv) {
  const Args a(argv, specs());
  if (a.has("help")) {
    usage(stdout);
    return 0;
  }
  const std::string out_dir = a.has("out") ? a.str("out") : "runs/translate";
  const double minutes = a.has("minutes") ? parse_number(a.str("minutes"), "--minutes") : 15.0;
  ATTN_CHECK(minutes > 0 && minutes <= 24 * 60, "--minutes must be in (0, 1440]; got ", minutes);
  const int64_t max_steps = a.has("steps") ? a.integer("steps", 1, 100000000) : 0;
  const std::string preset = a.has("preset") ? a.str("preset") : "tiny";
  const int64_t batch = a.has("batch-size") ? a.integer("batch-size", 1, 4096) : 64;
  const int64_t warmup = a.has("warmup") ? a.integer("warmup", 1, 1000000) : 400;
  const double lr_scale = a.has("lr-scale") ? parse_number(a.str("lr-scale"), "--lr-scale") : 0.5;
  ATTN_CHECK(lr_scale > 0 && lr_scale <= 100, "--lr-scale must be in (0, 100]; got ", lr_scale);
  const double dropout = a.has("dropout") ? parse_number(a.str("dropout"), "--dropout") : 0.1;
  ATTN_CHECK(dropout >= 0 && dropout < 1, "--dropout must be in [0, 1); got ", dropout);
  const int64_t max_len = a.has("max-len") ? a.integer("max-len", 4, 512) : 48;
  const int64_t max_pairs = a.has("max-pairs") ? a.integer("max-pairs", 10, 100000000) : 0;
  const int64_t eval_pairs = a.has("eval-pairs") ? a.integer("eval-pairs", 1, 100000000) : 0;
  const int64_t beam = a.has("beam") ? a.integer("beam", 1, 64) : 1;
  const double alpha = a.has("alpha") ? parse_number(a.str("alpha"), "--alpha") : 0.6;
  const uint64_t seed = a.has("seed") ? static_cast<uint64_t>(a.integer("seed", 0, INT64_MAX)) : 1;
  const bool quiet = a.has("quiet");
  models::TranslationTokenizerOptions to;
  if (a.has("src-vocab")) to.src_vocab_size = a.integer("src-vocab", 16, 1000000);
  if (a.has("min-freq")) to.min_char_freq = a.integer("min-freq", 1, 1000000);

  std::string data_path;
  if (a.has("data")) {
    data_path = a.str("data");
  } else {
    std::vector<std::string> looked;
    data_path = default_data_path(&looked);
    if (data_path.empty()) {
      std::string places;
      for (const auto& l : looked) places += "\n  " + l;
      throw Error("train translate: no data file given and none found; looked at:" + places +
                  "\npass --data FILE (Tatoeba cmn.txt: English<TAB>Chinese<TAB>attribution, from "
                  "https://www.manythings.org/anki/) or set ATTN_DATA_DIR");
    }
  }
  const Stopwatch total;
  std::string command = "attn train translate";
  for (const auto& s : argv) command += " " + s;

  // ---- data --------------------------------------------------------------------------------
  models::ParallelCorpus corpus = models::read_parallel_corpus(data_path, max_pairs);
  data::SplitOptions so;
  so.train = 0.9, so.valid = 0.05, so.test = 0.05, so.seed = seed, so.stratify = false;
  const data::Split split = data::make_split(corpus.data, so);
  ATTN_CHECK(!split.train.empty() && !split.valid.empty() && !split.test.empty(),
             "train translate: the split ", split.describe(), " leaves a part empty; use more pairs");
  const data::Dataset& ds = corpus.data;
  std::vector<std::string> train_src, train_tgt;
  for (int64_t i : split.train)
    train_src.push_back(ds.examples[i].text), train_tgt.push_back(ds.examples[i].pair);
  const models::TranslationTokenizers tok = models::TranslationTokenizers::train(train_src, train_tgt, to);
  const data::EncodedDataset enc = data::encode_dataset(ds, tok.src(), &tok.tgt());
  if (!quiet) {
    std::fprintf(stderr, "data: %s: %lld pairs read, %s, %lld kept\nsplit: %s\n", data_path.c_str(),
                 static_cast<long long>(corpus.lines_read), corpus.dedup.describe().c_str(),
                 static_cast<long long>(ds.size()), split.describe().c_str());
    std::fprintf(
        stderr, "tokenizers: English BPE %lld tokens, Chinese characters %lld tokens; [UNK] %.2f%%\n",
        static_cast<long long>(tok.src().vocab().size()), static_cast<long long>(tok.tgt().vocab().size()),
        100.0 * static_cast<double>(enc.unknown_tokens) / std::max<int64_t>(1, enc.total_tokens));
  }

  // ---- model -------------------------------------------------------------------------------
  models::TransformerConfig cfg = models::TransformerConfig::preset(preset);
  if (a.has("layers")) cfg.encoder_layers = cfg.decoder_layers = a.integer("layers", 1, 48);
  cfg.src_vocab = tok.src().vocab().size();
  cfg.tgt_vocab = tok.tgt().vocab().size();
  cfg.share_embeddings = false;  // separate vocabularies (models/translation.h says why)
  cfg.tie_output = true;
  cfg.label_smoothing = 0.1;
  cfg.dropout = dropout;
  cfg.max_len = max_len;
  cfg.pad_id = text::Vocab::kPad;
  cfg.seed = seed;
  cfg.validate("encdec");
  auto model = std::make_unique<models::EncoderDecoder>(cfg);
  model->train();
  train::AdamWOptions ao;
  ao.beta1 = 0.9, ao.beta2 = 0.98, ao.eps = 1e-9, ao.weight_decay = 0.0;  // the paper's Adam settings
  train::AdamW opt(model->named_parameters(), ao);
  const train::NoamSchedule schedule(cfg.d_model, warmup, lr_scale);
  train::TrainerOptions tro;
  tro.clip_norm = 1.0;
  train::Trainer trainer(opt, schedule, tro, seed);
  data::PairOptions po;
  po.max_src_len = max_len;
  po.max_tgt_len = max_len;
  po.pad_to_max = false;
  if (!quiet)
    std::fprintf(
        stderr,
        "model: EncoderDecoder preset %s, %lld+%lld layers, d_model %lld, %lld heads, d_ff %lld, %lld "
        "parameters; batch %lld, Noam warmup %lld x %.3g (peak lr %.2e)\n",
        preset.c_str(), static_cast<long long>(cfg.encoder_layers),
        static_cast<long long>(cfg.decoder_layers), static_cast<long long>(cfg.d_model),
        static_cast<long long>(cfg.heads), static_cast<long long>(cfg.d_ff),
        static_cast<long long>(model->num_parameters()), static_cast<long long>(batch),
        static_cast<long long>(warmup), lr_scale, schedule.lr(warmup));

  // ---- training ----------------------------------------------------------------------------
  const bool tty = isatty(STDERR_FILENO) != 0;
  const Stopwatch train_clock;
  const double budget = minutes * 60.0;
  int64_t step = 0, epoch = 0, tokens_seen = 0;
  double loss_ema = 0, last_print = -1e9;
  json::Value loss_history = json::Value::array(), epochs = json::Value::array();
  std::vector<double> first_losses;
  bool done = false;
  double last_loss = 0;
  while (!done) {
    const auto batches = bucketed_batches(enc, split.train, batch, seed, epoch);
    double epoch_loss = 0;
    int64_t epoch_steps = 0;
    for (const auto& rows : batches) {
      const data::PairBatch b = data::make_pair_batch(enc, rows, po);
      const TeacherForcing tf = teacher_forcing(b);
      const train::StepResult r = trainer.step([&](const train::StepContext&) {
        return model->forward(b.src, tf.src_lengths, tf.tgt_in, tf.targets).loss;
      });
      ++step;
      tokens_seen += tf.source_tokens + tf.target_tokens;
      last_loss = r.loss;
      loss_ema = step == 1 ? r.loss : 0.98 * loss_ema + 0.02 * r.loss;
      epoch_loss += r.loss;
      ++epoch_steps;
      if (step <= 5) first_losses.push_back(r.loss);
      if (step % 10 == 0 || step == 1)
        loss_history.push_back(json::Value::array({integer(step), num(r.loss), num(r.lr)}));
      const double t = train_clock.seconds();
      const bool time_up = t >= budget;
      const bool steps_up = max_steps > 0 && step >= max_steps;
      done = time_up || steps_up;
      if (!quiet && (done || t - last_print >= (tty ? 1.0 : 10.0))) {
        last_print = t;
        const double eta_time = budget - t;
        const double eta_steps = max_steps > 0 ? (max_steps - step) * t / static_cast<double>(step) : 1e300;
        std::fprintf(
            stderr, "%sstep %lld  epoch %lld  loss %.3f (avg %.3f)  lr %.2e  %.0f tok/s  %s  ETA %s%s",
            tty ? "\r" : "", static_cast<long long>(step), static_cast<long long>(epoch + 1), r.loss,
            loss_ema, r.lr, static_cast<double>(tokens_seen) / std::max(t, 1e-9), clock_text(t).c_str(),
            clock_text(std::min(eta_time, eta_steps)).c_str(), tty ? "   " : "\n");
        std::fflush(stderr);
      }
      if (done) break;
    }
    const double vloss = mean_loss(*model, enc, split.valid, po, 128);
    json::Value e = json::Value::object();
    e.set("epoch", integer(epoch + 1));
    e.set("steps", integer(step));
    e.set("complete", json::Value::boolean(!done || epoch_steps == static_cast<int64_t>(batches.size())));
    e.set("train_loss", num(epoch_steps > 0 ? epoch_loss / epoch_steps : 0.0));
    e.set("valid_loss", num(vloss));
    e.set("seconds", num(train_clock.seconds()));
    epochs.push_back(std::move(e));
    if (!quiet)
      std::fprintf(stderr, "%sepoch %lld: train loss %.3f, validation loss %.3f (%lld pairs)%s\n",
                   tty ? "\n" : "", static_cast<long long>(epoch + 1),
                   epoch_steps > 0 ? epoch_loss / epoch_steps : 0.0, vloss,
                   static_cast<long long>(split.valid.size()), done ? " (stopped within the epoch)" : "");
    ++epoch;
  }
  const double train_seconds = train_clock.seconds();

  // ---- held-out BLEU -----------------------------------------------------------------------
  models::Translator translator(std::move(model), tok, max_len, max_len);
  std::vector<int64_t> test_rows = split.test;
  if (eval_pairs > 0 && static_cast<int64_t>(test_rows.size()) > eval_pairs)
    test_rows.resize(static_cast<std::size_t>(eval_pairs));
  models::GenerateOptions go;
  go.search = beam > 1 ? models::SearchKind::beam : models::SearchKind::greedy;
  go.beam = beam;
  go.length_alpha = alpha;
  go.max_new_tokens = max_len - 1;
  if (!quiet)
    std::fprintf(stderr, "test: translating %zu held-out pairs (%s)...\n", test_rows.size(),
                 beam > 1 ? ("beam " + std::to_string(beam)).c_str() : "greedy");
  const models::BleuEvaluation ev = models::evaluate_bleu(translator, ds, test_rows, go, 64);
  std::printf("test BLEU (sacreBLEU -tok zh, %zu pairs, %s): %.2f\n  %s\n", test_rows.size(),
              beam > 1 ? ("beam " + std::to_string(beam)).c_str() : "greedy", ev.bleu.score,
              ev.bleu.describe().c_str());

  // ---- save ----------------------------------------------------------------------------------
  fs::create_directories(out_dir);
  json::Value data_json = tok.to_json();
  data_json.set("max_src_len", integer(max_len));
  data_json.set("max_tgt_len", integer(max_len));
  json::Value corpus_json = json::Value::object();
  corpus_json.set("file", str(data_path));
  corpus_json.set("lines_read", integer(corpus.lines_read));
  corpus_json.set("pairs", integer(ds.size()));
  corpus_json.set("deduplication", str(corpus.dedup.describe()));
  corpus_json.set("license", str("Tatoeba sentence pairs, CC-BY 2.0 FR (attribution per pair in the file)"));
  data_json.set("corpus", corpus_json);
  data_json.set("split_description", str(split.describe()));
  data_json.set("split", split.to_json());
  const std::string model_path = out_dir + "/model.attn";
  models::save_task_model(model_path, models::kTranslateTask, cfg, data_json,
                          translator.model().named_parameters());

  json::Value examples = json::Value::array();
  // Ten pairs spread over the test split (the file is sorted by length: short and long ones).
  const std::size_t n_ex = std::min<std::size_t>(10, test_rows.size());
  for (std::size_t k = 0; k < n_ex; ++k) {
    const std::size_t i = k * test_rows.size() / n_ex;
    const int64_t r = test_rows[i];
    json::Value x = json::Value::object();
    x.set("source", str(ds.examples[r].text));
    x.set("reference", str(ds.examples[r].pair));
    x.set("hypothesis", str(ev.hypotheses[i]));
    x.set("attribution", str(corpus.attribution[static_cast<std::size_t>(r)]));
    examples.push_back(std::move(x));
  }
  json::Value bleu = json::Value::object();
  bleu.set("score", num(ev.bleu.score));
  bleu.set("signature",
           str(std::string("tok:zh|smooth:exp|case:mixed|nrefs:1 (sacreBLEU-compatible, attn)")));
  bleu.set("detail", str(ev.bleu.describe()));
  bleu.set("pairs", integer(static_cast<int64_t>(test_rows.size())));
  bleu.set("search",
           str(beam > 1 ? "beam " + std::to_string(beam) + " alpha " + json::dump(num(alpha)) : "greedy"));
  bleu.set("seconds", num(ev.seconds));
  json::Value rep = json::Value::object();
  rep.set("task", str("translate"));
  rep.set("command", str(command));
  rep.set("model_file", str(model_path));
  rep.set("data", corpus_json);
  rep.set("split", str(split.describe()));
  json::Value tj = json::Value::object();
  tj.set("source", str("English BPE (lower-cased), trained on the training split"));
  tj.set("source_vocab", integer(tok.src().vocab().size()));
  tj.set("target", str("Chinese characters (ASCII letter/digit runs one token)"));
  tj.set("target_vocab", integer(tok.tgt().vocab().size()));
  tj.set("unknown_token_rate",
         num(static_cast<double>(enc.unknown_tokens) / std::max<int64_t>(1, enc.total_tokens)));
  rep.set("tokenizers", tj);
  rep.set("config", cfg.to_json());
  rep.set("parameters", integer(translator.model().num_parameters()));
  json::Value tr = json::Value::object();
  tr.set("steps", integer(step));
  tr.set("epochs", integer(epoch));
  tr.set("batch_size", integer(batch));
  tr.set("schedule", schedule.to_json());
  tr.set("optimizer", str("AdamW beta1 0.9 beta2 0.98 eps 1e-9 weight decay 0, clip 1.0"));
  tr.set("seconds", num(train_seconds));
  tr.set("tokens_per_second", num(static_cast<double>(tokens_seen) / std::max(train_seconds, 1e-9)));
  double first = 0;
  for (double l : first_losses) first += l / static_cast<double>(first_losses.size());
  tr.set("first_loss", num(first));
  tr.set("final_loss", num(last_loss));
  tr.set("loss_history", loss_history);
  tr.set("epoch_log", epochs);
  rep.set("training", tr);
  rep.set("test_bleu", bleu);
  rep.set("examples", examples);
  rep.set("total_seconds", num(total.seconds()));
  std::string hyp_text,
      ref_text;  // for checking with the sacrebleu CLI: sacrebleu refs.txt -i hyps.txt -tok zh
  for (std::size_t i = 0; i < ev.hypotheses.size(); ++i) {
    hyp_text += ev.hypotheses[i] + "\n";
    ref_text += ev.references[i] + "\n";
  }
  io::write_file_atomically(out_dir + "/test_hypotheses.txt", hyp_text);
  io::write_file_atomically(out_dir + "/test_references.txt", ref_text);
  io::write_file_atomically(out_dir + "/report.json", json::dump(rep, 2) + "\n");
  io::write_file_atomically(out_dir + "/report.md", translate_report_markdown(rep));
  std::printf("saved %s, %s/report.json, %s/report.md\n", model_path.c_str(), out_dir.c_str(),
              out_dir.c_str());
  return 0;
}

}  // namespace attn::cli
