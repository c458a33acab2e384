// attn train lm: flags -> tasks::LmTrainOptions -> tasks::train_lm
// (include/attn/tasks/lm.h): a decoder-only character language model on any
// UTF-8 text file, saved as one task model file (task "lm"). See docs/generation.md.
#include <attn/core/error.h>
#include <attn/tasks/lm.h>
#include <attn/train/comm.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "args.h"
#include "commands.h"

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
      {"checkpoint", "FILE",
       "write a checkpoint (weights, optimizer, step) to FILE every\n--checkpoint-every steps"},
      {"checkpoint-every", "N", "steps between checkpoints (default 100 with --checkpoint)"},
      {"resume", "FILE",
       "continue the run saved in checkpoint FILE (same --data and options;\nany number of mpirun ranks)"},
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

tasks::LmTrainOptions parse_options(const Args& a) {
  tasks::LmTrainOptions o;
  ATTN_CHECK(a.has("data"), "--data FILE is required (a UTF-8 text file)");
  o.data = a.str("data");
  if (a.has("out")) o.out = a.str("out");
  if (a.has("preset")) o.preset = a.str("preset");
  ATTN_CHECK(o.preset == "tiny" || o.preset == "small", "--preset must be tiny or small; got '", o.preset,
             "'");
  o.minutes = num(a, "minutes", 0, 0, 1e6);
  if (a.has("steps")) o.steps = a.integer("steps", 1, 100000000);
  if (a.has("seq-len")) o.seq_len = a.integer("seq-len", 8, 4096);
  if (a.has("batch")) o.batch = a.integer("batch", 1, 4096);
  o.lr = num(a, "lr", 2e-3, 1e-8, 10);
  o.dropout = num(a, "dropout", 0.1, 0, 0.9);
  if (a.has("min-freq")) o.min_freq = a.integer("min-freq", 1, 1000000);
  o.val_fraction = num(a, "val-fraction", 0.05, 0.001, 0.5);
  if (a.has("eval-windows")) o.eval_windows = a.integer("eval-windows", 1, 100000);
  if (a.has("log-every")) o.log_every = a.integer("log-every", 1, 100000000);
  if (a.has("seed")) o.seed = static_cast<uint64_t>(a.integer("seed", 0, INT64_MAX));
  if (a.has("format")) o.format = a.str("format");
  if (a.has("checkpoint")) {
    o.checkpoint = a.str("checkpoint");
    o.checkpoint_every = a.has("checkpoint-every") ? a.integer("checkpoint-every", 1, 100000000) : 100;
  }
  ATTN_CHECK(!a.has("checkpoint-every") || a.has("checkpoint"), "--checkpoint-every needs --checkpoint FILE");
  if (a.has("resume")) o.resume = a.str("resume");
  return o;
}

}  // namespace

int run_train_lm(const std::vector<std::string>& args) {
  const Args a(args, train_lm_options());
  if (a.has("help")) {
    std::fputs(help_text().c_str(), stdout);
    return 0;
  }
  tasks::LmTrainOptions o = parse_options(a);
  o.progress.write = [](const std::string& text) {
    std::fputs(text.c_str(), stderr);
    std::fflush(stderr);
  };
  o.progress.terminal = isatty(fileno(stderr)) != 0;
  o.comm = train_communicator();  // mpirun -np N: rank 0 alone prints
  if (o.comm && o.comm->rank() > 0) o.progress = {};
  tasks::train_lm(o);
  return 0;
}

}  // namespace attn::cli
