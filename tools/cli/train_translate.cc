// attn train translate: flags -> tasks::TranslateTrainOptions ->
// tasks::train_translator (include/attn/tasks/translate.h) -> the BLEU line.
// See docs/translate.md.
#include <attn/core/error.h>
#include <attn/tasks/translate.h>
#include <attn/train/comm.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "args.h"
#include "commands.h"

namespace attn::cli {
namespace {

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

tasks::TranslateTrainOptions parse_options(const Args& a) {
  tasks::TranslateTrainOptions o;
  if (a.has("data")) o.data = a.str("data");
  if (a.has("out")) o.out = a.str("out");
  if (a.has("minutes")) o.minutes = parse_number(a.str("minutes"), "--minutes");
  if (a.has("steps")) o.max_steps = a.integer("steps", 1, 100000000);
  if (a.has("preset")) o.preset = a.str("preset");
  if (a.has("layers")) o.layers = a.integer("layers", 1, 48);
  if (a.has("batch-size")) o.batch_size = a.integer("batch-size", 1, 4096);
  if (a.has("warmup")) o.warmup = a.integer("warmup", 1, 1000000);
  if (a.has("lr-scale")) o.lr_scale = parse_number(a.str("lr-scale"), "--lr-scale");
  if (a.has("dropout")) o.dropout = parse_number(a.str("dropout"), "--dropout");
  if (a.has("max-len")) o.max_len = a.integer("max-len", 4, 512);
  if (a.has("max-pairs")) o.max_pairs = a.integer("max-pairs", 10, 100000000);
  if (a.has("eval-pairs")) o.eval_pairs = a.integer("eval-pairs", 1, 100000000);
  if (a.has("beam")) o.beam = a.integer("beam", 1, 64);
  if (a.has("alpha")) o.alpha = parse_number(a.str("alpha"), "--alpha");
  if (a.has("seed")) o.seed = static_cast<uint64_t>(a.integer("seed", 0, INT64_MAX));
  if (a.has("src-vocab")) o.tokenizer.src_vocab_size = a.integer("src-vocab", 16, 1000000);
  if (a.has("min-freq")) o.tokenizer.min_char_freq = a.integer("min-freq", 1, 1000000);
  return o;
}

}  // namespace

int run_train_translate(const std::vector<std::string>& argv) {
  const Args a(argv, specs());
  if (a.has("help")) {
    usage(stdout);
    return 0;
  }
  tasks::TranslateTrainOptions o = parse_options(a);
  o.command = "attn train translate";
  for (const auto& s : argv) o.command += " " + s;
  if (!a.has("quiet")) {
    o.progress.write = [](const std::string& text) {
      std::fputs(text.c_str(), stderr);
      std::fflush(stderr);
    };
    o.progress.terminal = isatty(STDERR_FILENO) != 0;
  }
  o.comm = train_communicator();  // mpirun -np N: rank 0 alone prints
  if (o.comm && o.comm->rank() > 0) o.progress = {};
  const tasks::TranslateTrainResult r = tasks::train_translator(o);
  std::fputs(r.summary.c_str(), stdout);
  return 0;
}

}  // namespace attn::cli
