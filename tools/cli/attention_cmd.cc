// `attn attention --model minilm "TEXT"`: the exact attention weights of a
// pretrained model on one text (captured from the fused kernel): a per-layer,
// per-head summary in the terminal and, with --export FILE, the JSON export
// that bertviz and `attn view` read (per layer [1, H, N, N] plus tokens).
//
// Each model has its own function that turns a text into view::Export
// (minilm_attention below); the printing and the export are shared.
#include <attn/core/error.h>
#include <attn/core/parallel.h>
#include <attn/io/files.h>
#include <attn/io/model_files.h>
#include <attn/models/bert.h>
#include <attn/models/llama.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "args.h"
#include "commands.h"
#include "encoder_cli.h"
#include <attn/text/table.h>
#include "view_internal.h"

namespace attn::cli {
namespace {

const std::vector<OptionSpec>& attention_options() {
  static const std::vector<OptionSpec> specs = {
      {"model", "NAME",
       "minilm (all-MiniLM-L6-v2; the default), smollm2 (SmolLM2-135M-Instruct, causal), "
       "a BERT model folder or a Llama .gguf file"},
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
         "  attn attention --model smollm2 \"The capital of France is Paris.\" --layer 5\n";
}

// all-MiniLM-L6-v2 (or another BERT folder): one sequence, [CLS] text [SEP].
view::Export minilm_attention(const std::string& model_dir, const std::string& text) {
  const models::SentenceEncoder& enc = encoder::load_encoder(model_dir);
  bool truncated = false;
  models::BertInput in;
  in.ids.push_back(enc.encode(text, &truncated));
  if (truncated)
    std::fprintf(stderr, "attn attention: note: the text is longer than %lld tokens and was truncated\n",
                 static_cast<long long>(enc.max_seq_length()));
  const models::BertOutput out = enc.model().forward(in, {.capture_attention = true});
  view::Export e;
  e.model = model_dir.empty() ? "all-MiniLM-L6-v2" : model_dir;
  e.text = text;
  for (int32_t id : in.ids[0]) e.tokens.push_back(enc.tokenizer().id_to_token(id));
  view::AttentionSet s;
  s.key = "attention";
  s.label = "self-attention";
  s.row_tokens = s.col_tokens = e.tokens;
  for (std::size_t l = 0; l < out.attention.size(); ++l) {
    const Tensor& w = out.attention[l];  // w: [1, H, N, N]
    view::Layer layer;
    layer.heads = w.size(1), layer.rows = w.size(2), layer.cols = w.size(3);
    const std::vector<double> v = w.to_vector();
    layer.w.assign(v.begin(), v.end());
    s.layers.push_back(std::move(layer));
    e.layer_names.push_back("layer " + std::to_string(l));
  }
  e.sets.push_back(std::move(s));
  return e;
}

// SmolLM2 (or another Llama GGUF): the prompt's causal self-attention, tokens as llama.cpp splits them.
view::Export smollm2_attention(const std::string& gguf, const std::string& text) {
  models::LlamaOptions o;
  o.max_context = 512;
  models::LlamaModel m = models::LlamaModel::load(gguf, o);
  const std::vector<int32_t> ids = m.tokenizer().encode(text, false, true);
  ATTN_CHECK(!ids.empty() && static_cast<int64_t>(ids.size()) <= o.max_context, "the text has ", ids.size(),
             " tokens; expected 1 to ", o.max_context);
  const models::LlamaAttention a = m.attention_weights(ids);
  view::Export e;
  e.model = "SmolLM2-135M-Instruct";
  e.text = text;
  e.tokens = a.tokens;
  view::AttentionSet s;
  s.key = "attention";
  s.label = "causal self-attention";
  s.row_tokens = s.col_tokens = e.tokens;
  const auto N = static_cast<int64_t>(ids.size());
  for (std::size_t l = 0; l < a.layers.size(); ++l) {
    view::Layer layer;
    layer.heads = a.heads, layer.rows = N, layer.cols = N;
    layer.w.assign(a.layers[l].begin(), a.layers[l].end());  // [H, N, N]
    s.layers.push_back(std::move(layer));
    e.layer_names.push_back("layer " + std::to_string(l));
  }
  e.sets.push_back(std::move(s));
  return e;
}

std::string clip(const std::string& s, std::size_t n) {
  // Clip by code points (never split a UTF-8 sequence).
  std::size_t cps = 0, i = 0;
  while (i < s.size() && cps < n) {
    const auto c = static_cast<unsigned char>(s[i]);
    i += c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
    ++cps;
  }
  return i >= s.size() ? s : s.substr(0, i) + "…";
}

// For each layer: a table with a row per token and a column per head, each cell the key
// token with the largest weight and that weight.
void print_summary(const view::Export& e, int64_t only_layer, int64_t only_head, int64_t top) {
  const view::AttentionSet& s = e.sets.front();
  const auto N = static_cast<int64_t>(s.row_tokens.size());
  std::printf("%s: %lld tokens, %zu layers x %lld heads (exact weights from the fused kernel)\n",
              e.model.c_str(), static_cast<long long>(N), s.layers.size(),
              static_cast<long long>(s.layers.front().heads));
  for (std::size_t l = 0; l < s.layers.size(); ++l) {
    if (only_layer >= 0 && static_cast<int64_t>(l) != only_layer) continue;
    const view::Layer& layer = s.layers[l];
    if (only_layer >= 0 && only_head >= 0) {
      std::printf("\nlayer %zu, head %lld: each token's top %lld keys\n", l,
                  static_cast<long long>(only_head), static_cast<long long>(top));
      for (int64_t i = 0; i < N; ++i) {
        std::vector<int64_t> idx(static_cast<std::size_t>(N));
        for (int64_t j = 0; j < N; ++j) idx[static_cast<std::size_t>(j)] = j;
        const auto k = static_cast<std::ptrdiff_t>(std::min(top, N));
        std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), [&](int64_t a, int64_t b) {
          return layer.at(only_head, i, a) > layer.at(only_head, i, b);
        });
        std::string line = "  " + clip(s.row_tokens[static_cast<std::size_t>(i)], 14) + " ->";
        for (std::ptrdiff_t r = 0; r < k; ++r) {
          char w[32];
          std::snprintf(w, sizeof w, " %.2f", layer.at(only_head, i, idx[static_cast<std::size_t>(r)]));
          line += std::string(r ? "," : "") + " " +
                  s.col_tokens[static_cast<std::size_t>(idx[static_cast<std::size_t>(r)])] + w;
        }
        std::printf("%s\n", line.c_str());
      }
      continue;
    }
    std::vector<text::Table::Column> cols = {{"token", text::Align::left}};
    for (int64_t h = 0; h < layer.heads; ++h)
      if (only_head < 0 || h == only_head) cols.push_back({"h" + std::to_string(h), text::Align::left});
    text::Table t(cols);
    for (int64_t i = 0; i < N; ++i) {
      std::vector<std::string> row = {clip(s.row_tokens[static_cast<std::size_t>(i)], 10)};
      for (int64_t h = 0; h < layer.heads; ++h) {
        if (only_head >= 0 && h != only_head) continue;
        int64_t best = 0;
        for (int64_t j = 1; j < N; ++j)
          if (layer.at(h, i, j) > layer.at(h, i, best)) best = j;
        char w[16];
        std::snprintf(w, sizeof w, " %.0f", 100 * layer.at(h, i, best));
        row.push_back(clip(s.col_tokens[static_cast<std::size_t>(best)], 6) + w);
      }
      t.row(std::move(row));
    }
    std::printf("\nlayer %zu: where each token attends most (key token, weight in %%)\n%s", l,
                t.render().c_str());
  }
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
  const std::string model = opts.has("model") ? opts.str("model") : "minilm";
  view::Export e;
  const bool gguf = model.size() > 5 && model.compare(model.size() - 5, 5, ".gguf") == 0;
  if (model == "minilm" || model == "all-MiniLM-L6-v2") {
    e = minilm_attention("", sa.positionals[0]);
  } else if (model == "smollm2" || model == "SmolLM2-135M-Instruct") {
    e = smollm2_attention(io::require_smollm2_gguf(), sa.positionals[0]);
  } else if (gguf) {
    e = smollm2_attention(io::require_smollm2_gguf(model), sa.positionals[0]);
  } else {
    // A folder holding a BERT model (config.json, model.safetensors, vocab.txt).
    e = minilm_attention(model, sa.positionals[0]);
  }
  const view::AttentionSet& s = e.sets.front();
  const int64_t layer =
      opts.has("layer") ? opts.integer("layer", 0, static_cast<int64_t>(s.layers.size()) - 1) : -1;
  const int64_t head = opts.has("head") ? opts.integer("head", 0, s.layers.front().heads - 1) : -1;
  const int64_t top = opts.has("top") ? opts.integer("top", 1, 1 << 20) : 3;
  ATTN_CHECK(!opts.has("top") || (layer >= 0 && head >= 0), "--top is used with --layer and --head");
  if (opts.has("export")) {
    // Validate what we write with the reader `attn view` uses.
    const std::string json = view::export_json(e) + "\n";
    (void)view::parse_export(json);
    io::write_file_atomically(opts.str("export"), json);
    std::fprintf(stderr,
                 "wrote %s (%zu layers x %lld heads, %zu tokens); view it: attn view %s -o page.html\n",
                 opts.str("export").c_str(), s.layers.size(), static_cast<long long>(s.layers.front().heads),
                 e.tokens.size(), opts.str("export").c_str());
  }
  print_summary(e, layer, head, top);
  return 0;
}

}  // namespace attn::cli
