// attn::tasks::train_lm and generate_lm (include/attn/tasks/lm.h): a decoder-only
// character language model on any UTF-8 text, saved as one task model file.
#include <attn/core/autograd.h>
#include <attn/core/error.h>
#include <attn/core/random.h>
#include <attn/models/generate.h>
#include <attn/models/task_model.h>
#include <attn/models/transformer.h>
#include <attn/tasks/lm.h>
#include <attn/text/vocab.h>
#include <attn/train/comm.h>
#include <attn/train/fit.h>
#include <attn/train/optim.h>
#include <attn/train/schedule.h>
#include <attn/train/trainer.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "tasks/util.h"

namespace attn::tasks {
namespace {

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

void check(const LmTrainOptions& o) {
  ATTN_CHECK(!o.data.empty(), "--data FILE is required (a UTF-8 text file)");
  ATTN_CHECK(o.preset == "tiny" || o.preset == "small", "--preset must be tiny or small; got '", o.preset,
             "'");
  ATTN_CHECK(o.steps >= 0 && o.minutes >= 0 && o.seq_len >= 2 && o.batch >= 1 && o.lr > 0 &&
                 o.min_freq >= 1 && o.val_fraction > 0 && o.val_fraction < 1 && o.eval_windows >= 1 &&
                 o.log_every >= 1,
             "train lm: an option is out of range (steps ", o.steps, ", minutes ", o.minutes, ", seq_len ",
             o.seq_len, ", batch ", o.batch, ", lr ", o.lr, ")");
}

// The model file's data: the vocabulary and how the text was read and split.
json::Value model_data(const LmTrainOptions& o, const LmText& t, const text::Vocab& vocab, int64_t steps,
                       std::size_t train_tokens, std::size_t held_out_tokens, double after) {
  json::Value data = json::Value::object();
  json::Value toks = json::Value::array();
  for (std::size_t i = text::Vocab::kNumSpecial; i < vocab.tokens().size(); ++i)
    toks.push_back(json::Value::string(vocab.tokens()[i]));
  data.set("tokenizer", json::Value::string("char"));
  data.set("vocab", toks);
  data.set("newline_token", json::Value::string(kNewlineToken));
  data.set("keep_spaces", json::Value::boolean(true));
  data.set("source", json::Value::string(o.data));
  data.set("format", json::Value::string(t.format));
  data.set("max_len", json::Value::integer(o.seq_len));
  data.set("steps", json::Value::integer(steps));
  data.set("train_tokens", json::Value::integer(static_cast<int64_t>(train_tokens)));
  data.set("held_out_tokens", json::Value::integer(static_cast<int64_t>(held_out_tokens)));
  data.set("split", json::Value::string("the last tokens of the stream are held out"));
  if (std::isfinite(after)) {
    data.set("held_out_loss", json::Value::number(after));
    data.set("held_out_perplexity", json::Value::number(std::exp(after)));
  }
  return data;
}

}  // namespace

LmTrainResult train_lm(const LmTrainOptions& o) {
  check(o);
  const Progress& progress = o.progress;
  const int64_t steps = o.steps > 0 ? o.steps : (o.minutes > 0 ? 0 : 1000);
  const int64_t L = o.seq_len, B = o.batch;
  const LmText t = read_lm_text(o.data, o.format);
  std::vector<std::string> all_lines;
  int64_t n_lines = 0;
  for (const auto& e : t.entries)
    for (const auto& l : e) all_lines.push_back(l), ++n_lines;
  text::TokenCounts counts = text::CharTokenizer::count(all_lines, lm_tokenizer_options());
  counts[kNewlineToken] += n_lines;
  text::VocabOptions vo;
  vo.min_freq = o.min_freq;
  const text::Vocab vocab = text::Vocab::build(counts, vo);
  const text::CharTokenizer tok(vocab, lm_tokenizer_options());
  std::vector<int64_t> stream;
  for (const auto& e : t.entries) {
    const std::vector<int64_t> ids = lm_encode(tok, e, true);
    stream.insert(stream.end(), ids.begin(), ids.end());
  }
  stream.push_back(text::Vocab::kEos);
  const int64_t n_val = std::max<int64_t>(L + 1, static_cast<int64_t>(o.val_fraction * stream.size()));
  ATTN_CHECK(static_cast<int64_t>(stream.size()) >= n_val + L + 1, "text file '", o.data,
             "' is too short: ", stream.size(), " tokens; need at least ", n_val + L + 1, " for --seq-len ",
             L, " and a held-out part");
  const std::vector<int64_t> train_ids(stream.begin(), stream.end() - n_val);
  const std::vector<int64_t> val_ids(stream.end() - n_val, stream.end());
  progress(detail::strf(
      "%s: %lld lines, %zu entries (%s format), %zu tokens (%zu train, %zu held out), vocabulary %lld\n",
      o.data.c_str(), static_cast<long long>(t.lines), t.entries.size(), t.format.c_str(), stream.size(),
      train_ids.size(), val_ids.size(), static_cast<long long>(vocab.size())));

  models::TransformerConfig cfg = models::TransformerConfig::preset(o.preset);
  cfg.src_vocab = 0;
  cfg.tgt_vocab = vocab.size();
  cfg.max_len = L;
  cfg.pre_norm = true;
  cfg.dropout = o.dropout;
  cfg.share_embeddings = false;
  cfg.seed = o.seed;
  cfg.label_smoothing = 0.0;
  // Data parallel: every rank must have read the same text and built the same vocabulary and model.
  train::Communicator& comm = o.comm ? *o.comm : train::single_process();
  if (comm.size() > 1) {
    uint64_t text_hash = kFnvOffset;
    for (int64_t id : stream) text_hash = fnv1a64(std::to_string(id) + ",", text_hash);
    std::string vocab_text;
    for (const auto& tkn : vocab.tokens()) vocab_text += tkn + '\n';
    train::check_same_on_all_ranks(
        comm,
        {{"the text of the data file " + o.data, text_hash},
         {"the vocabulary", fnv1a64(vocab_text)},
         {"the model configuration", fnv1a64(json::dump(cfg.to_json()))},
         {"the training options (--steps, --minutes, --batch, --lr, --seed)",
          fnv1a64(detail::strf("%lld %.17g %lld %.17g %llu", static_cast<long long>(steps), o.minutes,
                               static_cast<long long>(B), o.lr, static_cast<unsigned long long>(o.seed)))}});
    progress(detail::strf("data parallel: %d ranks (%s), about %lld windows of each batch per rank\n",
                          comm.size(), comm.name().c_str(),
                          static_cast<long long>((B + comm.size() - 1) / comm.size())));
  }
  models::DecoderLM model(cfg);
  model.train();
  const NamedParams params = model.named_parameters();
  train::AdamWOptions ao;
  ao.lr = o.lr;
  ao.weight_decay = 0.01;
  ao.no_decay = train::default_no_decay;
  train::AdamW opt(params, ao);
  const int64_t sched_total =
      steps > 0 ? steps : (int64_t{1} << 40);  // --minutes alone: constant after warmup
  const int64_t warmup = std::min<int64_t>(100, std::max<int64_t>(1, sched_total / 10));
  train::WarmupCosineSchedule sched(o.lr, warmup, sched_total, o.lr * 0.1);
  train::TrainerOptions to;
  to.clip_norm = 1.0;
  to.comm = &comm;
  train::Trainer trainer(opt, sched, to, o.seed);

  // What a checkpoint must match to be resumed: the model, the vocabulary and the text.
  json::Value ckpt_config = json::Value::object();
  ckpt_config.set("task", json::Value::string("lm"));
  ckpt_config.set("config", cfg.to_json());
  {
    std::string vocab_text;
    for (const auto& tkn : vocab.tokens()) vocab_text += tkn + '\n';
    uint64_t text_hash = kFnvOffset;
    for (int64_t id : stream) text_hash = fnv1a64(std::to_string(id) + ",", text_hash);
    ckpt_config.set("vocab_hash", json::Value::string(detail::strf(
                                      "%016llx", static_cast<unsigned long long>(fnv1a64(vocab_text)))));
    ckpt_config.set("text_hash",
                    json::Value::string(detail::strf("%016llx", static_cast<unsigned long long>(text_hash))));
  }
  if (!o.resume.empty()) {
    const json::Value saved = trainer.load(o.resume);
    for (const char* key : {"task", "config", "vocab_hash", "text_hash"}) {
      const json::Value* v = saved.is_object() ? saved.find(key) : nullptr;
      ATTN_CHECK(v && json::dump(*v) == json::dump(*ckpt_config.find(key)), "--resume ", o.resume,
                 ": the checkpoint was written for another ", key, " (expected ",
                 json::dump(*ckpt_config.find(key)), ", the file has ",
                 v ? json::dump(*v) : std::string("none"), "): resume with the same --data and options");
    }
    progress(detail::strf("resumed %s at step %lld\n", o.resume.c_str(),
                          static_cast<long long>(trainer.state().step)));
  }
  LmTrainResult res;
  res.loss_before = held_out_loss(model, val_ids, L, o.eval_windows);
  progress(detail::strf("held-out before training: loss %.4f, perplexity %.2f\n", res.loss_before,
                        std::exp(res.loss_before)));
  const int64_t max_start = static_cast<int64_t>(train_ids.size()) - L - 1;
  const bool tty = progress.terminal;
  res.train_loss = std::nan("");
  // One endless epoch of random windows: the window starts of step t come from (seed, t).
  train::FitHooks hooks;
  hooks.epoch_batches = [](int64_t) { return int64_t{0}; };
  // Data parallel: every rank draws the same B starts and keeps windows rank, rank + N, ...
  hooks.loss = [&](int64_t, int64_t, const train::StepContext& ctx) -> train::Loss {
    Rng rng(train::step_seed(o.seed, ctx.step, ctx.micro));
    std::vector<int64_t> x, y;
    int64_t rows = 0;
    for (int64_t b = 0; b < B; ++b) {
      const int64_t s = static_cast<int64_t>(rng.below(static_cast<uint64_t>(max_start + 1)));
      if (b % ctx.world != ctx.rank) continue;
      x.insert(x.end(), train_ids.begin() + s, train_ids.begin() + s + L);
      y.insert(y.end(), train_ids.begin() + s + 1, train_ids.begin() + s + L + 1);
      ++rows;
    }
    if (rows == 0) return train::Loss{Tensor(), 0.0};
    return train::Loss{model.forward(Tensor::from(x, {rows, L}), Tensor::from(y, {rows, L})).loss,
                       static_cast<double>(rows * L)};
  };
  hooks.on_step = [&](train::FitStep& fs) {
    const train::StepResult& r = fs.result;
    const int64_t done = r.step;
    res.train_loss = r.loss;
    if (done % o.log_every == 0 || done == steps) {
      const double secs = fs.seconds, tps = static_cast<double>(done * B * L) / secs;
      double left = 0;
      if (steps > 0) left = secs / static_cast<double>(done) * static_cast<double>(steps - done);
      if (o.minutes > 0) left = steps > 0 ? std::min(left, o.minutes * 60 - secs) : o.minutes * 60 - secs;
      char of[32] = "";
      if (steps > 0) std::snprintf(of, sizeof of, "/%lld", static_cast<long long>(steps));
      progress(detail::strf("step %lld%s  loss %.4f  lr %.2e  %.0f tokens/s  ETA %s%s",
                            static_cast<long long>(done), of, r.loss, r.lr, tps,
                            detail::duration(left).c_str(), tty ? "   \r" : "\n"));
    }
  };
  if (!o.checkpoint.empty() && o.checkpoint_every > 0)
    hooks.checkpoint = [&](const train::FitStep&) { trainer.save(o.checkpoint, ckpt_config); };
  train::FitOptions fo;
  fo.checkpoint_every = o.checkpoint.empty() ? 0 : o.checkpoint_every;
  fo.max_steps = steps;
  fo.time_budget_s = o.minutes * 60;
  const train::FitResult fr = train::fit(trainer, hooks, fo);
  res.steps = fr.steps;
  res.seconds = fr.seconds;
  if (tty) progress("\n");
  if (comm.rank() != 0) return res;  // rank 0 evaluates and writes the model
  res.loss_after = held_out_loss(model, val_ids, L, o.eval_windows);
  progress(detail::strf("held-out after %lld steps: loss %.4f, perplexity %.2f (train loss %.4f, %.0f s)\n",
                        static_cast<long long>(res.steps), res.loss_after, std::exp(res.loss_after),
                        res.train_loss, res.seconds));
  model.eval();
  models::save_task_model(
      o.out, "lm", cfg, model_data(o, t, vocab, res.steps, train_ids.size(), val_ids.size(), res.loss_after),
      params);
  progress("wrote " + o.out + "\n");
  res.out = o.out;
  return res;
}

namespace {

std::vector<std::string> split_lines(const std::string& s) {
  std::vector<std::string> lines(1);
  for (char c : s) {
    if (c == '\n')
      lines.emplace_back();
    else
      lines.back() += c;
  }
  return lines;
}

}  // namespace

LmGenerated generate_lm(const LmGenerateOptions& o) {
  ATTN_CHECK(!o.model.empty(), "--model FILE is required (a model file written by 'attn train lm')");
  const models::GenerateOptions& g = o.generate;
  if (g.search == models::SearchKind::sample) {
    ATTN_CHECK(g.temperature > 0, "--temperature must be > 0 (use --greedy for the most likely text); got ",
               g.temperature);
    ATTN_CHECK(g.top_p > 0 && g.top_p <= 1, "--top-p must be in (0, 1]; got ", g.top_p);
  }
  const models::TaskModelFile file = models::TaskModelFile::open(o.model, "lm");  // opened and mapped once
  const models::TaskModelHeader& h = file.header();
  const text::CharTokenizer tok = lm_tokenizer(h.data);
  models::DecoderLM model(h.config);
  file.load_weights(model.named_parameters());
  model.eval();
  LmGenerated out;
  const std::vector<int64_t> ids = lm_encode(tok, split_lines(o.prompt), false);
  for (int64_t id : ids) out.unknown_prompt_chars += id == text::Vocab::kUnk;
  ATTN_CHECK(static_cast<int64_t>(ids.size()) < h.config.max_len, "the prompt has ", ids.size() - 1,
             " characters; this model reads at most ", h.config.max_len - 2, " (max_len ", h.config.max_len,
             " including the start token)");
  models::TokenCallback stream;
  if (o.stream && g.search != models::SearchKind::beam)
    stream = [&](int64_t, int64_t id) { o.stream(lm_piece(tok, id)); };
  out.generated = models::generate(model, {ids}, g, stream).at(0);
  for (int64_t id : out.generated.ids) out.text += lm_piece(tok, id);
  return out;
}

}  // namespace attn::tasks
