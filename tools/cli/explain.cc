// `attn explain`: the tutorial's worked example of self-attention, computed
// step by step by plain arithmetic and checked against the engine.
//
// Modes (at most one): the default walkthrough, --scores, --multi-head,
// --cost, --mask. Each fills a Report (text for people, JSON for programs);
// the mode files are listed in explain_internal.h.
#include <attn/core/error.h>

#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include "args.h"
#include "commands.h"
#include "explain_internal.h"

namespace attn::cli {
namespace {

const std::vector<OptionSpec>& explain_options() {
  static const std::vector<OptionSpec> specs = {
      {"query", "WORD|POS",
       "the query word of the walkthrough / --multi-head: a word of the sentence\n"
       "or its position counted from 1 (default: 没, the 5th word)"},
      {"sentence", "\"W1 W2 ...\"",
       "use another sentence, tokens separated by spaces; its embeddings come\n"
       "from a deterministic seeded generator (see --seed and docs/explain.md)"},
      {"seed", "S", "seed of the embedding generator for --sentence (default 2017)"},
      {"scores", "S1,S2,...",
       "explain softmax of these scores: exp, sum, divide, which wins\n"
       "(e.g. --scores 0.2,2.5,0.8,0.3,0.4,2.0)"},
      {"tokens", "A,B,...", "with --scores: names of the positions (one per score)"},
      {"multi-head", "",
       "split Q, K, V into heads: each head's weights for the query word side by\n"
       "side, the concatenation and the W_O projection, with shapes"},
      {"heads", "H",
       "with --multi-head: number of heads, dividing d_model = 8 (default 2);\nwith --cost: number of heads, "
       "dividing --d"},
      {"cost", "",
       "shapes, FLOPs and memory of every step for the sizes --n, --d, --heads\n"
       "[--batch] [--causal]; naive O(N²) memory against the fused kernel; the\n"
       "backend attn chooses and why"},
      {"n", "N", "with --cost: sequence length N (>= 1)"},
      {"d", "D", "with --cost: model width d_model (>= 1); d_k = D / heads"},
      {"batch", "B", "with --cost: batch size (default 1)"},
      {"causal", "", "with --cost: causal attention; with --mask window: look back only"},
      {"mask", "KIND",
       "causal | padding | window: which positions each query may see, as a\n"
       "grid over the sentence, computed by the engine"},
      {"length", "L", "with --mask padding: the number of real tokens (0..N); the rest is padding"},
      {"window", "W", "with --mask window: each query sees keys at most W positions away"},
      {"model", "FILE",
       "a trained classifier (attn train classify): the walkthrough with its real\n"
       "Q, K, V for the sentence given as an argument (or --sentence, as is)"},
      {"layer", "L", "with --model: the encoder layer, from 0 (default: the last)"},
      {"head", "H", "with --model: the head, from 0 (default 0)"},
      {"word", "W",
       "with --model: the query: a token of the sentence or its position counted\nfrom 1 with [CLS] = 1 "
       "(default [CLS], what the classifier reads)"},
      {"dims", "N", "with --model: dimensions shown in the Q/K/V table (default 4)"},
      {"json", "", "print the same content as one JSON object (for programs)"},
      {"help", "", "this text"},
  };
  return specs;
}

std::string help_text() {
  return "usage: attn explain [options]\n"
         "       attn explain --model FILE \"sentence\" [--layer L] [--head H] [--word W] [--json]\n\n"
         "Walks through Attention(Q, K, V) = softmax(Q·Kᵀ / √d_k) · V on the sentence\n"
         "今天 下雨 ， 我 没 带 伞 (\"it rained today, I didn't bring an umbrella\"): for the query\n"
         "word 没 it prints the embeddings and projections, the scores q·k_j, the division by √d_k,\n"
         "exp, the normalised weights, the weighted sum of the values, and a ranking of the words;\n"
         "then runs the attn engine on the same numbers and confirms that it agrees. The inputs are\n"
         "illustrative (hand-chosen, not learned); everything after them is computed.\n\n"
         "Modes (at most one; none = the walkthrough):\n"
         "  --scores, --multi-head, --cost, --mask, --model (a trained classifier's real Q, K, V)\n\n"
         "Options:\n" +
         format_options(explain_options()) +
         "\nExamples:\n"
         "  attn explain\n"
         "  attn explain --query 带\n"
         "  attn explain --sentence \"the cat sat on the mat\" --query cat\n"
         "  attn explain --scores 0.2,2.5,0.8,0.3,0.4,2.0 --tokens a,b,c,d,e,f\n"
         "  attn explain --multi-head --heads 4\n"
         "  attn explain --cost --n 4096 --d 1024 --heads 16 --batch 8 --causal\n"
         "  attn explain --mask causal\n"
         "  attn explain --mask padding --length 5\n"
         "  attn explain --mask window --window 1\n"
         "  attn explain --json | python3 -m json.tool\n"
         "  attn explain --model runs/classify/model.attn \"质量很好\" --layer 1 --head 2 --word 好\n\n"
         "Positions are counted from 1. Errors (unknown option, malformed number, query word not\n"
         "in the sentence, sizes <= 0, heads not dividing d_model) exit with status 1.\n"
         "More: docs/explain.md\n";
}

// Which options each mode accepts (besides --json and --help).
struct Mode {
  const char* flag;  // the option that selects it; "" for the walkthrough
  const char* name;
  std::vector<std::string> accepts;
};

const std::vector<Mode>& modes() {
  static const std::vector<Mode> list = {
      {"", "the walkthrough", {"query", "sentence", "seed"}},
      {"scores", "--scores", {"tokens"}},
      {"multi-head", "--multi-head", {"heads", "query", "sentence", "seed"}},
      {"cost", "--cost", {"n", "d", "heads", "batch", "causal"}},
      {"mask", "--mask", {"length", "window", "causal", "sentence", "seed"}},
      {"model", "--model", {"layer", "head", "word", "dims", "sentence"}},
  };
  return list;
}

}  // namespace

int run_explain(const std::vector<std::string>& raw) {
  using namespace explain;
  // With --model the sentence may be a positional argument: taken out before the strict parser.
  std::vector<std::string> argv, positional;
  for (std::size_t i = 0; i < raw.size(); ++i) {
    const std::string& a = raw[i];
    if (a.rfind("--", 0) == 0) {
      argv.push_back(a);
      if (a.find('=') == std::string::npos)
        for (const auto& o : explain_options())
          if ("--" + o.name == a && !o.metavar.empty() && i + 1 < raw.size()) argv.push_back(raw[++i]);
    } else {
      positional.push_back(a);
    }
  }
  const Args args(argv, explain_options());
  ATTN_CHECK(positional.empty() || args.has("model"), "unexpected argument '",
             positional.empty() ? "" : positional[0],
             "'; a sentence as an argument goes with --model FILE (else use --sentence \"W1 W2 ...\")");
  if (args.has("help")) {
    std::fputs(help_text().c_str(), stdout);
    return 0;
  }

  // Pick the mode and reject options that do not belong to it.
  const Mode* mode = &modes()[0];
  for (const auto& m : modes())
    if (*m.flag && args.has(m.flag)) {
      ATTN_CHECK(mode == &modes()[0], "choose one mode; got both ", mode->name, " and ", m.name);
      mode = &m;
    }
  for (const auto& name : args.given()) {
    if (name == "json" || name == mode->flag) continue;
    bool ok = false;
    for (const auto& a : mode->accepts) ok = ok || a == name;
    if (ok) continue;
    std::string where;
    for (const auto& m : modes())
      for (const auto& a : m.accepts)
        if (a == name) where += std::string(where.empty() ? "" : " or ") + m.name;
    ATTN_CHECK(false, "option --", name, " does not apply to ", mode->name, "; it goes with ", where);
  }

  auto example = [&] {
    if (!args.has("sentence")) return default_example();
    const auto words = args.words("sentence", ' ');
    ATTN_CHECK(words.size() <= 64, "--sentence: expected at most 64 tokens; got ", words.size());
    const uint64_t seed =
        args.has("seed") ? static_cast<uint64_t>(args.integer("seed", 0, std::numeric_limits<int64_t>::max()))
                         : kDefaultSeed;
    return sentence_example(words, seed);
  };
  ATTN_CHECK(!args.has("seed") || (args.has("sentence") && !args.has("model")),
             "--seed only applies with --sentence (the default sentence's embeddings are hand-chosen)");
  auto query = [&](const Example& ex) -> int64_t {
    if (args.has("query")) return resolve_query(ex, args.str("query"));
    for (int64_t i = 0; i < ex.n(); ++i)
      if (ex.words[i] == "没") return i;
    return 0;  // another sentence without 没: its first word
  };

  Report report;
  const std::string flag = mode->flag;
  if (flag.empty()) {
    const Example ex = example();
    walkthrough(ex, query(ex), report);
  } else if (flag == "scores") {
    const auto scores = args.numbers("scores");
    ATTN_CHECK(scores.size() <= 1000, "--scores: expected at most 1000 numbers; got ", scores.size());
    std::vector<std::string> tokens;
    if (args.has("tokens")) {
      tokens = args.words("tokens", ',');
      ATTN_CHECK(tokens.size() == scores.size(), "--tokens: expected ", scores.size(),
                 " names (one per score); got ", tokens.size(), " in '", args.str("tokens"), "'");
    }
    softmax_of_scores(scores, tokens, report);
  } else if (flag == "multi-head") {
    const Example ex = example();
    const int64_t heads = args.has("heads") ? args.integer("heads", 1, ex.d_model()) : 2;
    multi_head(ex, query(ex), heads, report);
  } else if (flag == "cost") {
    CostParams p;
    for (const char* need : {"n", "d", "heads"})
      ATTN_CHECK(args.has(need), "--cost needs --n N --d D --heads H; --", need, " was not given");
    p.n = args.integer("n", 1, 1'000'000'000);
    p.d = args.integer("d", 1, 1'000'000);
    p.heads = args.integer("heads", 1, p.d);
    p.batch = args.has("batch") ? args.integer("batch", 1, 1'000'000) : 1;
    p.causal = args.has("causal");
    cost(p, report);
  } else if (flag == "model") {
    ATTN_CHECK(positional.size() + args.has("sentence") == 1,
               "--model needs one sentence (an argument or --sentence TEXT); got ",
               positional.size() + args.has("sentence"));
    model_mode(args.str("model"), args.has("sentence") ? args.str("sentence") : positional[0], args, report);
  } else if (flag == "mask") {
    const Example ex = example();
    MaskParams p;
    p.kind = args.str("mask");
    ATTN_CHECK(p.kind == "causal" || p.kind == "padding" || p.kind == "window",
               "--mask: expected causal, padding or window; got '", p.kind, "'");
    const bool want_length = p.kind == "padding", want_window = p.kind == "window";
    ATTN_CHECK(args.has("length") == want_length,
               want_length
                   ? "--mask padding needs --length L (real tokens, 0.." + std::to_string(ex.n()) + ")"
                   : "--length only applies to --mask padding; got --mask " + p.kind);
    ATTN_CHECK(args.has("window") == want_window,
               want_window ? "--mask window needs --window W (>= 0)"
                           : "--window only applies to --mask window; got --mask " + p.kind);
    ATTN_CHECK(
        !args.has("causal") || want_window,
        "--causal with --mask only applies to --mask window (--mask causal is causal already); got --mask ",
        p.kind);
    if (want_length) p.length = args.integer("length", 0, ex.n());
    if (want_window) p.window = args.integer("window", 0, 1'000'000);
    p.causal = args.has("causal");
    mask(ex, p, report);
  }

  if (args.has("json")) {
    std::fputs((report.json.dump(2) + "\n").c_str(), stdout);
  } else {
    std::fputs(report.text.c_str(), stdout);
  }
  return 0;
}

}  // namespace attn::cli
