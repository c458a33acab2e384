// attn::tasks::train_translator (include/attn/tasks/translate.h): the paper's
// EncoderDecoder on Tatoeba English -> Chinese (docs/translate.md).
#include <attn/core/autograd.h>
#include <attn/core/error.h>
#include <attn/core/random.h>
#include <attn/data/batch.h>
#include <attn/data/reader.h>
#include <attn/data/split.h>
#include <attn/io/files.h>
#include <attn/models/task_model.h>
#include <attn/models/translation.h>
#include <attn/tasks/translate.h>
#include <attn/train/comm.h>
#include <attn/train/fit.h>
#include <attn/train/optim.h>
#include <attn/train/schedule.h>
#include <attn/train/trainer.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "tasks/translate_internal.h"
#include "tasks/util.h"

namespace attn::tasks {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

struct Stopwatch {
  Clock::time_point t0 = Clock::now();
  double seconds() const { return std::chrono::duration<double>(Clock::now() - t0).count(); }
};

// m:ss, "?" for a negative or non-finite time.
std::string clock_text(double s) { return s < 0 ? "?" : detail::duration(s); }

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
    const detail::TeacherForcing tf = detail::teacher_forcing(b);
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
  Rng rng(mix_seed(seed ^ 0x5bd1e995u, static_cast<uint64_t>(epoch)));
  for (std::size_t i = out.size(); i > 1; --i) std::swap(out[i - 1], out[rng.next() % i]);
  return out;
}

json::Value num(double v) { return json::Value::number(std::isfinite(v) ? v : 0.0); }
json::Value str(const std::string& s) { return json::Value::string(s); }
json::Value integer(int64_t v) { return json::Value::integer(v); }

void check(const TranslateTrainOptions& o) {
  ATTN_CHECK(o.minutes > 0 && o.minutes <= 24 * 60, "--minutes must be in (0, 1440]; got ", o.minutes);
  ATTN_CHECK(o.lr_scale > 0 && o.lr_scale <= 100, "--lr-scale must be in (0, 100]; got ", o.lr_scale);
  ATTN_CHECK(o.dropout >= 0 && o.dropout < 1, "--dropout must be in [0, 1); got ", o.dropout);
  ATTN_CHECK(o.batch_size >= 1 && o.warmup >= 1 && o.max_len >= 4 && o.beam >= 1 && o.max_steps >= 0,
             "train translate: batch size ", o.batch_size, ", warmup ", o.warmup, ", max_len ", o.max_len,
             ", beam ", o.beam, " out of range");
}

std::string data_file(const TranslateTrainOptions& o) {
  if (!o.data.empty()) return o.data;
  const std::string dir = data::find_data_dir({"tatoeba-cmn/cmn.txt"}, "translation data",
                                              "the Tatoeba pairs are not in that download: pass --data FILE "
                                              "(Tatoeba cmn.txt: English<TAB>Chinese<TAB>attribution, from "
                                              "https://www.manythings.org/anki/) or set ATTN_DATA_DIR");
  return (fs::path(dir) / "tatoeba-cmn" / "cmn.txt").string();
}

}  // namespace

TranslateTrainResult train_translator(const TranslateTrainOptions& o) {
  check(o);
  const std::string data_path = data_file(o);
  const std::string& out_dir = o.out;
  const Stopwatch total;
  const Progress& progress = o.progress;

  // ---- data --------------------------------------------------------------------------------
  models::ParallelCorpus corpus = models::read_parallel_corpus(data_path, o.max_pairs);
  data::SplitOptions so;
  so.train = 0.9, so.valid = 0.05, so.test = 0.05, so.seed = o.seed, so.stratify = false;
  const data::Split split = data::make_split(corpus.data, so);
  ATTN_CHECK(!split.train.empty() && !split.valid.empty() && !split.test.empty(),
             "train translate: the split ", split.describe(), " leaves a part empty; use more pairs");
  const data::Dataset& ds = corpus.data;
  std::vector<std::string> train_src, train_tgt;
  for (int64_t i : split.train)
    train_src.push_back(ds.examples[i].text), train_tgt.push_back(ds.examples[i].pair);
  const models::TranslationTokenizers tok =
      models::TranslationTokenizers::train(train_src, train_tgt, o.tokenizer);
  const data::EncodedDataset enc = data::encode_dataset(ds, tok.src(), &tok.tgt());
  progress(detail::strf("data: %s: %lld pairs read, %s, %lld kept\nsplit: %s\n", data_path.c_str(),
                        static_cast<long long>(corpus.lines_read), corpus.dedup.describe().c_str(),
                        static_cast<long long>(ds.size()), split.describe().c_str()));
  progress(detail::strf(
      "tokenizers: English BPE %lld tokens, Chinese characters %lld tokens; [UNK] %.2f%%\n",
      static_cast<long long>(tok.src().vocab().size()), static_cast<long long>(tok.tgt().vocab().size()),
      100.0 * static_cast<double>(enc.unknown_tokens) / std::max<int64_t>(1, enc.total_tokens)));

  // ---- model -------------------------------------------------------------------------------
  models::TransformerConfig cfg = models::TransformerConfig::preset(o.preset);
  if (o.layers > 0) cfg.encoder_layers = cfg.decoder_layers = o.layers;
  cfg.src_vocab = tok.src().vocab().size();
  cfg.tgt_vocab = tok.tgt().vocab().size();
  cfg.share_embeddings = false;  // separate vocabularies (models/translation.h says why)
  cfg.tie_output = true;
  cfg.label_smoothing = 0.1;
  cfg.dropout = o.dropout;
  cfg.max_len = o.max_len;
  cfg.pad_id = text::Vocab::kPad;
  cfg.seed = o.seed;
  cfg.validate("encdec");
  // Data parallel: every rank must have read the same pairs and built the same vocabularies and
  // model (the trainer then copies rank 0's initial weights to all).
  train::Communicator& comm = o.comm ? *o.comm : train::single_process();
  if (comm.size() > 1) {
    uint64_t data_hash = kFnvOffset;
    for (const auto& e : ds.examples) data_hash = fnv1a64(e.pair, fnv1a64(e.text + '\t', data_hash));
    train::check_same_on_all_ranks(
        comm, {{"the pairs read from the data file " + data_path, data_hash},
               {"the vocabularies", fnv1a64(json::dump(tok.to_json()))},
               {"the model configuration", fnv1a64(json::dump(cfg.to_json()))},
               {"the training options (--batch-size, --warmup, --lr-scale, --seed, --minutes, --max-steps)",
                fnv1a64(detail::strf("%lld %lld %.17g %llu %.17g %lld", static_cast<long long>(o.batch_size),
                                     static_cast<long long>(o.warmup), o.lr_scale,
                                     static_cast<unsigned long long>(o.seed), o.minutes,
                                     static_cast<long long>(o.max_steps)))}});
  }
  auto model = std::make_unique<models::EncoderDecoder>(cfg);
  model->train();
  train::AdamWOptions ao;
  ao.beta1 = 0.9, ao.beta2 = 0.98, ao.eps = 1e-9, ao.weight_decay = 0.0;  // the paper's Adam settings
  train::AdamW opt(model->named_parameters(), ao);
  const train::NoamSchedule schedule(cfg.d_model, o.warmup, o.lr_scale);
  train::TrainerOptions tro;
  tro.clip_norm = 1.0;
  tro.comm = &comm;
  train::Trainer trainer(opt, schedule, tro, o.seed);
  data::PairOptions po;
  po.max_src_len = o.max_len;
  po.max_tgt_len = o.max_len;
  po.pad_to_max = false;
  progress(detail::strf(
      "model: EncoderDecoder preset %s, %lld+%lld layers, d_model %lld, %lld heads, d_ff %lld, %lld "
      "parameters; batch %lld, Noam warmup %lld x %.3g (peak lr %.2e)\n",
      o.preset.c_str(), static_cast<long long>(cfg.encoder_layers),
      static_cast<long long>(cfg.decoder_layers), static_cast<long long>(cfg.d_model),
      static_cast<long long>(cfg.heads), static_cast<long long>(cfg.d_ff),
      static_cast<long long>(model->num_parameters()), static_cast<long long>(o.batch_size),
      static_cast<long long>(o.warmup), o.lr_scale, schedule.lr(o.warmup)));
  if (comm.size() > 1)
    progress(detail::strf("data parallel: %d ranks (%s), about %lld pairs of each batch per rank\n",
                          comm.size(), comm.name().c_str(),
                          static_cast<long long>((o.batch_size + comm.size() - 1) / comm.size())));

  // ---- training: train::fit, validation loss after every epoch -----------------------------
  const bool tty = progress.terminal;
  const double budget = o.minutes * 60.0;
  int64_t tokens_seen = 0, epoch_steps = 0;
  double allreduce_seconds = 0, allreduce_bytes = 0,
         wait_seconds = 0;  // data parallel: the gradient all-reduce
  double loss_ema = 0, last_print = -1e9, epoch_loss = 0, last_loss = 0;
  json::Value loss_history = json::Value::array(), epochs = json::Value::array();
  std::vector<double> first_losses;
  std::vector<std::vector<int64_t>> batches;
  train::FitHooks hooks;
  hooks.epoch_batches = [&](int64_t epoch) {
    batches = bucketed_batches(enc, split.train, o.batch_size, o.seed, epoch);
    epoch_loss = 0;
    epoch_steps = 0;
    return static_cast<int64_t>(batches.size());
  };
  int64_t batch_tokens = 0;
  hooks.loss = [&](int64_t, int64_t bi, const train::StepContext& ctx) -> train::Loss {
    // This rank's shard of the batch (all of it in one process); the loss is the mean over its
    // target tokens, weighted by their number (trainer.h): the batch mean one process computes.
    const std::vector<int64_t> rows =
        train::shard_rows(batches[static_cast<std::size_t>(bi)], ctx.rank, ctx.world);
    batch_tokens = 0;
    if (rows.empty()) return train::Loss{Tensor(), 0.0};
    const data::PairBatch b = data::make_pair_batch(enc, rows, po);
    const detail::TeacherForcing tf = detail::teacher_forcing(b);
    batch_tokens = tf.source_tokens + tf.target_tokens;
    return train::Loss{model->forward(b.src, tf.src_lengths, tf.tgt_in, tf.targets).loss,
                       static_cast<double>(tf.target_tokens)};
  };
  hooks.on_step = [&](train::FitStep& fs) {
    const train::StepResult& r = fs.result;
    const int64_t step = r.step;
    if (comm.size() > 1) {  // the tokens of the whole batch (every rank runs on_step)
      double t = static_cast<double>(batch_tokens);
      comm.allreduce_sum(&t, 1);
      batch_tokens = static_cast<int64_t>(t);
    }
    tokens_seen += batch_tokens;
    allreduce_seconds += r.comm_seconds;
    wait_seconds += r.comm_wait_seconds;
    allreduce_bytes = static_cast<double>(r.comm_bytes);
    last_loss = r.loss;
    loss_ema = step == 1 ? r.loss : 0.98 * loss_ema + 0.02 * r.loss;
    epoch_loss += r.loss;
    ++epoch_steps;
    if (step <= 5) first_losses.push_back(r.loss);
    if (step % 10 == 0 || step == 1)
      loss_history.push_back(json::Value::array({integer(step), num(r.loss), num(r.lr)}));
    const double t = fs.seconds;
    const bool done = t >= budget || (o.max_steps > 0 && step >= o.max_steps);
    if (progress && (done || t - last_print >= (tty ? 1.0 : 10.0))) {
      last_print = t;
      const double eta_time = budget - t;
      const double eta_steps = o.max_steps > 0 ? (o.max_steps - step) * t / static_cast<double>(step) : 1e300;
      const std::string reduce =
          comm.size() > 1
              ? detail::strf("  all-reduce %.1f ms/step (%.2f MB), wait %.1f ms/step",
                             1e3 * allreduce_seconds / static_cast<double>(step), allreduce_bytes / 1e6,
                             1e3 * wait_seconds / static_cast<double>(step))
              : std::string();
      progress(detail::strf(
          "%sstep %lld  epoch %lld  loss %.3f (avg %.3f)  lr %.2e  %.0f tok/s%s  %s  ETA %s%s",
          tty ? "\r" : "", static_cast<long long>(step), static_cast<long long>(fs.epoch + 1), r.loss,
          loss_ema, r.lr, static_cast<double>(tokens_seen) / std::max(t, 1e-9), reduce.c_str(),
          clock_text(t).c_str(), clock_text(std::min(eta_time, eta_steps)).c_str(), tty ? "   " : "\n"));
    }
  };
  // The validation loss is logged, not used to stop or to pick weights.
  hooks.evaluate = [&] {
    const double vloss = mean_loss(*model, enc, split.valid, po, 128);
    return train::EvalScore{-vloss, vloss};
  };
  hooks.on_eval = [&](const train::FitEval& ev) {
    const double vloss = ev.score.loss;
    const bool done = ev.final;
    json::Value e = json::Value::object();
    e.set("epoch", integer(ev.epoch + 1));
    e.set("steps", integer(ev.step));
    e.set("complete", json::Value::boolean(ev.epoch_complete));
    e.set("train_loss", num(epoch_steps > 0 ? epoch_loss / epoch_steps : 0.0));
    e.set("valid_loss", num(vloss));
    e.set("seconds", num(ev.seconds));
    epochs.push_back(std::move(e));
    progress(detail::strf(
        "%sepoch %lld: train loss %.3f, validation loss %.3f (%lld pairs)%s\n", tty ? "\n" : "",
        static_cast<long long>(ev.epoch + 1), epoch_steps > 0 ? epoch_loss / epoch_steps : 0.0, vloss,
        static_cast<long long>(split.valid.size()), done ? " (stopped within the epoch)" : ""));
  };
  train::FitOptions fo;
  fo.time_budget_s = budget;
  fo.max_steps = o.max_steps;
  const train::FitResult fr = train::fit(trainer, hooks, fo);
  const int64_t step = fr.steps;
  const int64_t epoch_count = fr.epoch + 1;
  const double train_seconds = fr.seconds;
  if (comm.rank() != 0) return TranslateTrainResult{};  // rank 0 scores and writes

  // ---- held-out BLEU -----------------------------------------------------------------------
  models::Translator translator(std::move(model), tok, o.max_len, o.max_len);
  std::vector<int64_t> test_rows = split.test;
  if (o.eval_pairs > 0 && static_cast<int64_t>(test_rows.size()) > o.eval_pairs)
    test_rows.resize(static_cast<std::size_t>(o.eval_pairs));
  models::GenerateOptions go;
  go.search = o.beam > 1 ? models::SearchKind::beam : models::SearchKind::greedy;
  go.beam = o.beam;
  go.length_alpha = o.alpha;
  go.max_new_tokens = o.max_len - 1;
  const std::string search = o.beam > 1 ? "beam " + std::to_string(o.beam) : "greedy";
  progress(detail::strf("test: translating %zu held-out pairs (%s)...\n", test_rows.size(), search.c_str()));
  const models::BleuEvaluation ev = models::evaluate_bleu(translator, ds, test_rows, go, 64);
  const std::string bleu_line =
      detail::strf("test BLEU (sacreBLEU -tok zh, %zu pairs, %s): %.2f\n  %s\n", test_rows.size(),
                   search.c_str(), ev.bleu.score, ev.bleu.describe().c_str());

  // ---- save ----------------------------------------------------------------------------------
  if (const fs::path parent = fs::path(out_dir).lexically_normal().parent_path(); !parent.empty())
    fs::create_directories(parent);
  // All files go into a staging folder swapped in with one rename (io::StagedFolder).
  io::StagedFolder stage(out_dir, "");
  json::Value data_json = tok.to_json();
  data_json.set("max_src_len", integer(o.max_len));
  data_json.set("max_tgt_len", integer(o.max_len));
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
  models::save_task_model(stage.path("model.attn"), models::kTranslateTask, cfg, data_json,
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
  bleu.set("search", str(o.beam > 1 ? "beam " + std::to_string(o.beam) + " alpha " + json::dump(num(o.alpha))
                                    : "greedy"));
  bleu.set("seconds", num(ev.seconds));
  json::Value rep = json::Value::object();
  rep.set("task", str("translate"));
  rep.set("command", str(o.command));
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
  tr.set("epochs", integer(epoch_count));
  tr.set("batch_size", integer(o.batch_size));
  tr.set("schedule", schedule.to_json());
  tr.set("optimizer", str("AdamW beta1 0.9 beta2 0.98 eps 1e-9 weight decay 0, clip 1.0"));
  tr.set("seconds", num(train_seconds));
  tr.set("tokens_per_second", num(static_cast<double>(tokens_seen) / std::max(train_seconds, 1e-9)));
  if (comm.size() > 1) {
    json::Value dp = json::Value::object();
    dp.set("ranks", integer(comm.size()));
    dp.set("communicator", str(comm.name()));
    dp.set("allreduce_bytes_per_step", num(allreduce_bytes));
    dp.set("allreduce_seconds_per_step",
           num(allreduce_seconds / static_cast<double>(std::max<int64_t>(1, step))));
    dp.set("wait_seconds_per_step", num(wait_seconds / static_cast<double>(std::max<int64_t>(1, step))));
    tr.set("data_parallel", dp);
  }
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
  io::write_file_atomically(stage.path("test_hypotheses.txt"), hyp_text);
  io::write_file_atomically(stage.path("test_references.txt"), ref_text);
  io::write_file_atomically(stage.path("report.json"), json::dump(rep, 2) + "\n");
  TranslateTrainResult result;
  result.report_md = detail::translate_report_markdown(rep);
  io::write_file_atomically(stage.path("report.md"), result.report_md);
  stage.commit();
  result.summary =
      bleu_line + "saved " + model_path + ", " + out_dir + "/report.json, " + out_dir + "/report.md\n";
  result.bleu = ev.bleu.score;
  result.model_path = model_path;
  result.report = std::move(rep);
  return result;
}

}  // namespace attn::tasks
