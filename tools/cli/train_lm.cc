// attn train lm: a decoder-only character language model on any UTF-8 text
// file, saved as one task model file (task "lm"). See docs/generation.md.
#include <attn/core/autograd.h>
#include <attn/core/error.h>
#include <attn/core/parallel.h>
#include <attn/data/random.h>
#include <attn/models/task_model.h>
#include <attn/models/transformer.h>
#include <attn/text/vocab.h>
#include <attn/train/trainer.h>
#include <attn/train/optim.h>
#include <attn/train/schedule.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "args.h"
#include "commands.h"
#include "lm_text.h"

namespace attn::cli {
namespace {

const std::vector<OptionSpec>& train_lm_options() {
  static const std::vector<OptionSpec> specs = {
      {"data", "FILE", "UTF-8 text to train on (required), e.g. /usr/share/games/fortunes/tang300"},
      {"format", "F",
       "auto (default), plain (entries = paragraphs) or fortune (ANSI colours and\n'%' lines removed)"},
      {"out", "FILE", "the model file to write (default lm.attn)"},
      {"steps", "N", "optimizer steps (default 1000 unless --minutes is given)"},
      {"minutes", "M", "train for M minutes (with --steps: whichever ends first)"},
      {"preset", "P", "tiny (default: 2 layers, d_model 128) or small (2 layers, d_model 256)"},
      {"seq-len", "L", "tokens per training window, also the model's max_len (default 128)"},
      {"batch", "B", "windows per step (default 16)"},
      {"lr", "X", "peak learning rate (default 0.002; warmup, then cosine to 10%)"},
      {"dropout", "P", "dropout (default 0.1)"},
      {"min-freq", "N", "characters seen fewer times become [UNK] (default 2)"},
      {"val-fraction", "F", "the last fraction of the token stream held out (default 0.05)"},
      {"eval-windows", "N", "held-out windows evaluated (default 64)"},
      {"log-every", "N", "progress line every N steps (default 20)"},
      {"seed", "S", "initialisation, data order and dropout (default 1)"},
      {"help", "", "this text"},
  };
  return specs;
}

std::string help_text() {
  return "usage: attn train lm --data FILE [--out lm.attn] [--steps N | --minutes M] [--preset "
         "tiny|small]\n\n"
         "Trains a decoder-only Transformer on the characters of a UTF-8 text file (a\n"
         "character vocabulary built from the text, newlines kept as a token, every\n"
         "entry/paragraph starting with </s>) and saves it as one file for\n"
         "'attn generate --model FILE'. Prints progress (loss, tokens/s, ETA) and the\n"
         "held-out loss and perplexity before and after training.\n\n"
         "Options:\n" +
         format_options(train_lm_options()) +
         "\nExample:\n"
         "  attn train lm --data /usr/share/games/fortunes/tang300 --minutes 10 --out tang.attn\n";
}

double num(const Args& a, const std::string& name, double def, double lo, double hi) {
  if (!a.has(name)) return def;
  const double v = parse_number(a.str(name), "--" + name);
  ATTN_CHECK(v >= lo && v <= hi, "--", name, " must be in [", lo, ", ", hi, "]; got ", v);
  return v;
}

std::string eta(double seconds) {
  const int64_t s = static_cast<int64_t>(std::max(0.0, seconds) + 0.5);
  char buf[32];
  std::snprintf(buf, sizeof buf, "%lld:%02lld", static_cast<long long>(s / 60),
                static_cast<long long>(s % 60));
  return buf;
}

// Mean next-token loss over up to `windows` non-overlapping windows of `stream`.
double held_out_loss(models::DecoderLM& model, const std::vector<int64_t>& stream, int64_t L,
                     int64_t windows) {
  const int64_t n = std::min<int64_t>(windows, (static_cast<int64_t>(stream.size()) - 1) / L);
  if (n <= 0) return std::nan("");
  const bool was = model.is_training();
  model.eval();
  NoGradGuard ng;
  double total = 0;
  const int64_t chunk = 16;
  for (int64_t w0 = 0; w0 < n; w0 += chunk) {
    const int64_t B = std::min(chunk, n - w0);
    std::vector<int64_t> x, y;
    for (int64_t w = w0; w < w0 + B; ++w) {
      x.insert(x.end(), stream.begin() + w * L, stream.begin() + w * L + L);
      y.insert(y.end(), stream.begin() + w * L + 1, stream.begin() + w * L + L + 1);
    }
    Tensor loss = model.forward(Tensor::from(x, {B, L}), Tensor::from(y, {B, L})).loss;
    total += loss.at({}) * static_cast<double>(B);
  }
  model.train(was);
  return total / static_cast<double>(n);
}

}  // namespace

int run_train_lm(const std::vector<std::string>& args) {
  const Args a(args, train_lm_options());
  if (a.has("help")) {
    std::fputs(help_text().c_str(), stdout);
    return 0;
  }
  ATTN_CHECK(a.has("data"), "--data FILE is required (a UTF-8 text file)");
  const std::string path = a.str("data");
  const std::string out = a.has("out") ? a.str("out") : "lm.attn";
  const std::string preset = a.has("preset") ? a.str("preset") : "tiny";
  ATTN_CHECK(preset == "tiny" || preset == "small", "--preset must be tiny or small; got '", preset, "'");
  const double minutes = num(a, "minutes", 0, 0, 1e6);
  const int64_t steps = a.has("steps") ? a.integer("steps", 1, 100000000) : (minutes > 0 ? 0 : 1000);
  const int64_t L = a.has("seq-len") ? a.integer("seq-len", 8, 4096) : 128;
  const int64_t B = a.has("batch") ? a.integer("batch", 1, 4096) : 16;
  const double lr = num(a, "lr", 2e-3, 1e-8, 10);
  const double dropout = num(a, "dropout", 0.1, 0, 0.9);
  const int64_t min_freq = a.has("min-freq") ? a.integer("min-freq", 1, 1000000) : 2;
  const double val_fraction = num(a, "val-fraction", 0.05, 0.001, 0.5);
  const int64_t eval_windows = a.has("eval-windows") ? a.integer("eval-windows", 1, 100000) : 64;
  const int64_t log_every = a.has("log-every") ? a.integer("log-every", 1, 100000000) : 20;
  const uint64_t seed = a.has("seed") ? static_cast<uint64_t>(a.integer("seed", 0, INT64_MAX)) : 1;

  const LmText t = read_lm_text(path, a.has("format") ? a.str("format") : "auto");
  std::vector<std::string> all_lines;
  int64_t n_lines = 0;
  for (const auto& e : t.entries)
    for (const auto& l : e) all_lines.push_back(l), ++n_lines;
  text::TokenCounts counts = text::CharTokenizer::count(all_lines, lm_tokenizer_options());
  counts[kNewlineToken] += n_lines;
  text::VocabOptions vo;
  vo.min_freq = min_freq;
  const text::Vocab vocab = text::Vocab::build(counts, vo);
  const text::CharTokenizer tok(vocab, lm_tokenizer_options());
  std::vector<int64_t> stream;
  for (const auto& e : t.entries) {
    const std::vector<int64_t> ids = lm_encode(tok, e, true);
    stream.insert(stream.end(), ids.begin(), ids.end());
  }
  stream.push_back(text::Vocab::kEos);
  const int64_t n_val = std::max<int64_t>(L + 1, static_cast<int64_t>(val_fraction * stream.size()));
  ATTN_CHECK(static_cast<int64_t>(stream.size()) >= n_val + L + 1, "text file '", path,
             "' is too short: ", stream.size(), " tokens; need at least ", n_val + L + 1, " for --seq-len ",
             L, " and a held-out part");
  const std::vector<int64_t> train_ids(stream.begin(), stream.end() - n_val);
  const std::vector<int64_t> val_ids(stream.end() - n_val, stream.end());
  std::fprintf(
      stderr,
      "%s: %lld lines, %zu entries (%s format), %zu tokens (%zu train, %zu held out), vocabulary %lld\n",
      path.c_str(), static_cast<long long>(t.lines), t.entries.size(), t.format.c_str(), stream.size(),
      train_ids.size(), val_ids.size(), static_cast<long long>(vocab.size()));

  models::TransformerConfig cfg = models::TransformerConfig::preset(preset);
  cfg.src_vocab = 0;
  cfg.tgt_vocab = vocab.size();
  cfg.max_len = L;
  cfg.pre_norm = true;
  cfg.dropout = dropout;
  cfg.share_embeddings = false;
  cfg.seed = seed;
  cfg.label_smoothing = 0.0;
  models::DecoderLM model(cfg);
  model.train();
  const NamedParams params = model.named_parameters();
  train::AdamWOptions ao;
  ao.lr = lr;
  ao.weight_decay = 0.01;
  ao.no_decay = train::default_no_decay;
  train::AdamW opt(params, ao);
  const int64_t sched_total =
      steps > 0 ? steps : (int64_t{1} << 40);  // --minutes alone: constant after warmup
  const int64_t warmup = std::min<int64_t>(100, std::max<int64_t>(1, sched_total / 10));
  train::WarmupCosineSchedule sched(lr, warmup, sched_total, lr * 0.1);
  train::TrainerOptions to;
  to.clip_norm = 1.0;
  train::Trainer trainer(opt, sched, to, seed);

  const double before = held_out_loss(model, val_ids, L, eval_windows);
  std::fprintf(stderr, "held-out before training: loss %.4f, perplexity %.2f\n", before, std::exp(before));
  const auto t0 = std::chrono::steady_clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
  const int64_t max_start = static_cast<int64_t>(train_ids.size()) - L - 1;
  double last_loss = std::nan("");
  int64_t done = 0;
  const bool tty = isatty(fileno(stderr));
  while ((steps == 0 || done < steps) && (minutes <= 0 || elapsed() < minutes * 60)) {
    const train::StepResult r = trainer.step([&](const train::StepContext& ctx) {
      data::Rng rng(train::step_seed(seed, ctx.step, ctx.micro));
      std::vector<int64_t> x, y;
      for (int64_t b = 0; b < B; ++b) {
        const int64_t s = static_cast<int64_t>(rng.below(static_cast<uint64_t>(max_start + 1)));
        x.insert(x.end(), train_ids.begin() + s, train_ids.begin() + s + L);
        y.insert(y.end(), train_ids.begin() + s + 1, train_ids.begin() + s + L + 1);
      }
      return model.forward(Tensor::from(x, {B, L}), Tensor::from(y, {B, L})).loss;
    });
    ++done;
    last_loss = r.loss;
    if (done % log_every == 0 || done == steps) {
      const double secs = elapsed(), tps = static_cast<double>(done * B * L) / secs;
      double left = 0;
      if (steps > 0) left = secs / static_cast<double>(done) * static_cast<double>(steps - done);
      if (minutes > 0) left = steps > 0 ? std::min(left, minutes * 60 - secs) : minutes * 60 - secs;
      char of[32] = "";
      if (steps > 0) std::snprintf(of, sizeof of, "/%lld", static_cast<long long>(steps));
      std::fprintf(stderr, "step %lld%s  loss %.4f  lr %.2e  %.0f tokens/s  ETA %s%s",
                   static_cast<long long>(done), of, r.loss, r.lr, tps, eta(left).c_str(),
                   tty ? "   \r" : "\n");
      std::fflush(stderr);
    }
  }
  if (tty) std::fputc('\n', stderr);
  const double after = held_out_loss(model, val_ids, L, eval_windows);
  std::fprintf(stderr, "held-out after %lld steps: loss %.4f, perplexity %.2f (train loss %.4f, %.0f s)\n",
               static_cast<long long>(done), after, std::exp(after), last_loss, elapsed());

  json::Value data = json::Value::object();
  json::Value toks = json::Value::array();
  for (std::size_t i = text::Vocab::kNumSpecial; i < vocab.tokens().size(); ++i)
    toks.push_back(json::Value::string(vocab.tokens()[i]));
  data.set("tokenizer", json::Value::string("char"));
  data.set("vocab", toks);
  data.set("newline_token", json::Value::string(kNewlineToken));
  data.set("keep_spaces", json::Value::boolean(true));
  data.set("source", json::Value::string(path));
  data.set("format", json::Value::string(t.format));
  data.set("max_len", json::Value::integer(L));
  data.set("steps", json::Value::integer(done));
  data.set("train_tokens", json::Value::integer(static_cast<int64_t>(train_ids.size())));
  data.set("held_out_tokens", json::Value::integer(static_cast<int64_t>(val_ids.size())));
  data.set("split", json::Value::string("the last tokens of the stream are held out"));
  if (std::isfinite(after)) {
    data.set("held_out_loss", json::Value::number(after));
    data.set("held_out_perplexity", json::Value::number(std::exp(after)));
  }
  model.eval();
  models::save_task_model(out, "lm", cfg, data, params);
  std::fprintf(stderr, "wrote %s\n", out.c_str());
  return 0;
}

}  // namespace attn::cli
