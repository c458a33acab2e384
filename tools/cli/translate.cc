// attn translate: English -> Chinese with a model from `attn train translate`,
// and the cross-attention alignment: for each generated character, the source
// (sub)words its decoder query attended to most (last decoder layer, averaged
// over heads, exact weights captured while decoding). --layers adds every
// decoder layer (teacher-forced recomputation); --export writes the encoder /
// decoder / cross-attention triple for `attn view`. See docs/translate.md.
#include <attn/core/error.h>
#include <attn/io/files.h>
#include <attn/models/translation.h>

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <numeric>
#include <string>
#include <vector>

#include "args.h"
#include "commands.h"
#include "json.h"
#include <attn/text/table.h>
#include "translate_internal.h"
#include "view_internal.h"

namespace attn::cli {
namespace {

const std::vector<OptionSpec>& specs() {
  static const std::vector<OptionSpec> s = {
      {"model", "FILE", "a model from 'attn train translate' (default runs/translate/model.attn)"},
      {"beam", "K", "beam width (default 4; 1 = greedy)"},
      {"alpha", "A", "length penalty alpha, ((5+n)/6)^alpha (default 0.6)"},
      {"max-new", "N", "most characters to generate (default: the model's max length - 1)"},
      {"top", "K", "source tokens listed per character (default 2)"},
      {"layers", "", "also show the strongest source token of every decoder layer (teacher-forced)"},
      {"export", "FILE", "write the encoder/decoder/cross attention of the (last) sentence for 'attn view'"},
      {"json", "", "print JSON instead of tables"},
      {"help", "", "this text"},
  };
  return s;
}

void usage(FILE* f) {
  std::fprintf(
      f,
      "usage: attn translate [--model runs/translate/model.attn] \"English sentence\" [more ...] "
      "[--beam 4 --alpha 0.6] [--json] [--layers] [--export FILE]\n\n"
      "Translates each sentence (or each line of stdin when the sentence is '-') and shows, for every\n"
      "generated character, the source tokens it attended to most: cross-attention of the last\n"
      "decoder layer, averaged over heads (exact weights captured while decoding). Source tokens\n"
      "are English BPE subwords; '\xE2\x96\x81' marks the start of a word.\n\n"
      "options:\n%s",
      format_options(specs()).c_str());
}

// Splits argv into option words (for Args) and positional sentences.
void split_positional(const std::vector<std::string>& argv, std::vector<std::string>* opts,
                      std::vector<std::string>* sentences) {
  for (std::size_t i = 0; i < argv.size(); ++i) {
    const std::string& a = argv[i];
    if (a.size() > 2 && a.compare(0, 2, "--") == 0) {
      opts->push_back(a);
      if (a.find('=') != std::string::npos) continue;
      const std::string name = a.substr(2);
      for (const auto& s : specs())
        if (s.name == name && !s.metavar.empty() && i + 1 < argv.size()) opts->push_back(argv[++i]);
    } else {
      sentences->push_back(a);
    }
  }
}

std::string fmt(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.3f", v);
  return b;
}

// Indices of the k largest entries of `row`, largest first (ties: lower index).
std::vector<int64_t> top_k(const std::vector<float>& row, int64_t k) {
  std::vector<int64_t> idx(row.size());
  std::iota(idx.begin(), idx.end(), 0);
  k = std::min<int64_t>(k, static_cast<int64_t>(row.size()));
  std::partial_sort(idx.begin(), idx.begin() + k, idx.end(),
                    [&](int64_t a, int64_t b) { return row[a] > row[b] || (row[a] == row[b] && a < b); });
  idx.resize(static_cast<std::size_t>(k));
  return idx;
}

// Head average of one [1, H, rows, cols] captured layer: [rows][cols].
std::vector<std::vector<float>> head_mean(const Tensor& w) {
  const Tensor c = w.contiguous();
  const int64_t H = c.size(1), R = c.size(2), C = c.size(3);
  const float* p = c.data<float>();
  std::vector<std::vector<float>> out(static_cast<std::size_t>(R),
                                      std::vector<float>(static_cast<std::size_t>(C)));
  for (int64_t i = 0; i < R; ++i)
    for (int64_t j = 0; j < C; ++j) {
      double s = 0;
      for (int64_t h = 0; h < H; ++h) s += p[(h * R + i) * C + j];
      out[i][j] = static_cast<float>(s / static_cast<double>(H));
    }
  return out;
}

view::Layer to_layer(const Tensor& w) {  // w: [1, H, rows, cols]
  const Tensor c = w.contiguous();
  view::Layer l;
  l.heads = c.size(1), l.rows = c.size(2), l.cols = c.size(3);
  const float* p = c.data<float>();
  l.w.assign(p, p + l.heads * l.rows * l.cols);
  return l;
}

// The generated tokens as rows: each character, then "</s>" when the model stopped.
std::vector<std::string> row_labels(const models::Translation& t) {
  std::vector<std::string> r = t.tgt_tokens;
  if (t.stopped) r.push_back("</s>");
  return r;
}

}  // namespace

int run_translate(const std::vector<std::string>& argv) {
  std::vector<std::string> opt_words, sentences;
  split_positional(argv, &opt_words, &sentences);
  const Args a(opt_words, specs());
  if (a.has("help")) {
    usage(stdout);
    return 0;
  }
  if (sentences.size() == 1 && sentences[0] == "-") {
    sentences.clear();
    for (std::string line; std::getline(std::cin, line);)
      if (line.find_first_not_of(" \t\r") != std::string::npos) sentences.push_back(line);
  }
  ATTN_CHECK(!sentences.empty(), "translate: expected an English sentence to translate (or '-' for stdin)");
  const std::string model_path = a.has("model") ? a.str("model") : "runs/translate/model.attn";
  const int64_t beam = a.has("beam") ? a.integer("beam", 1, 64) : 4;
  const double alpha = a.has("alpha") ? parse_number(a.str("alpha"), "--alpha") : 0.6;
  const int64_t top = a.has("top") ? a.integer("top", 1, 100) : 2;
  const bool as_json = a.has("json"), layers = a.has("layers");

  auto tr = models::Translator::load(model_path);
  models::GenerateOptions go;
  go.search = beam > 1 ? models::SearchKind::beam : models::SearchKind::greedy;
  go.beam = beam;
  go.length_alpha = alpha;
  go.max_new_tokens = a.has("max-new") ? a.integer("max-new", 1, 100000) : tr->max_tgt_len() - 1;
  const std::vector<models::Translation> out = tr->translate(sentences, go, /*with_alignment=*/true);
  char alpha_text[32];
  std::snprintf(alpha_text, sizeof alpha_text, "%g", alpha);
  const std::string search = beam > 1 ? "beam " + std::to_string(beam) + ", alpha " + alpha_text : "greedy";

  std::vector<Json> objs;
  models::AttentionCapture last_capture;
  for (const models::Translation& t : out) {
    const std::vector<std::string> rows = row_labels(t);
    ATTN_CHECK(t.alignment.size() == rows.size(), "translate: captured ", t.alignment.size(),
               " cross-attention rows for ", rows.size(), " generated tokens");
    models::AttentionCapture cap;
    if (layers || a.has("export")) cap = tr->capture(t.src_ids, t.tgt_ids);
    std::vector<std::vector<std::vector<float>>> per_layer;  // [layer][row][src]
    for (const Tensor& w : cap.cross) per_layer.push_back(head_mean(w));
    if (as_json) {
      Json j = Json::object();
      j.set("source", t.source);
      j.set("translation", t.text);
      j.set("search", search);
      j.set("log_prob", t.log_prob);
      j.set("score", t.score);
      j.set("stopped", t.stopped);
      j.set("source_tokens", Json::strings(t.src_tokens));
      j.set("target_tokens", Json::strings(rows));
      j.set("alignment_layer", static_cast<int64_t>(tr->model().config().decoder_layers - 1));
      Json al = Json::array();
      for (std::size_t i = 0; i < rows.size(); ++i) {
        Json r = Json::object();
        r.set("token", rows[i]);
        Json tops = Json::array();
        for (int64_t k : top_k(t.alignment[i], top)) {
          Json x = Json::object();
          x.set("index", k);
          x.set("source_token", t.src_tokens[static_cast<std::size_t>(k)]);
          x.set("weight", static_cast<double>(t.alignment[i][static_cast<std::size_t>(k)]));
          tops.push(std::move(x));
        }
        r.set("top", std::move(tops));
        std::vector<double> wrow(t.alignment[i].begin(), t.alignment[i].end());
        r.set("weights", Json::numbers(wrow));
        if (layers) {
          Json ls = Json::array();
          for (const auto& pl : per_layer) {
            const int64_t k = top_k(pl[i], 1)[0];
            Json x = Json::object();
            x.set("index", k);
            x.set("source_token", t.src_tokens[static_cast<std::size_t>(k)]);
            x.set("weight", static_cast<double>(pl[i][static_cast<std::size_t>(k)]));
            ls.push(std::move(x));
          }
          r.set("layers", std::move(ls));
        }
        al.push(std::move(r));
      }
      j.set("alignment", std::move(al));
      objs.push_back(std::move(j));
    } else {
      std::printf("English: %s\n中文:    %s\n(%s, log p %.3f%s)\n\n", t.source.c_str(), t.text.c_str(),
                  search.c_str(), t.log_prob, t.stopped ? "" : ", stopped at the length limit");
      std::printf("cross-attention of the last decoder layer (%lld), averaged over %lld heads:\n",
                  static_cast<long long>(tr->model().config().decoder_layers - 1),
                  static_cast<long long>(tr->model().config().heads));
      std::vector<text::Table::Column> cols = {{"#", text::Align::right}, {"char", text::Align::left}};
      for (int64_t k = 0; k < top; ++k) {
        cols.push_back({k == 0 ? "attended most" : "next", text::Align::left});
        cols.push_back({"weight", text::Align::right});
      }
      for (std::size_t l = 0; l < per_layer.size(); ++l) {
        cols.push_back({"layer " + std::to_string(l), text::Align::left});
        cols.push_back({"weight", text::Align::right});
      }
      text::Table table(cols);
      for (std::size_t i = 0; i < rows.size(); ++i) {
        std::vector<std::string> cells = {std::to_string(i), rows[i]};
        const auto tk = top_k(t.alignment[i], top);
        for (int64_t k = 0; k < top; ++k) {
          if (k < static_cast<int64_t>(tk.size())) {
            cells.push_back(t.src_tokens[static_cast<std::size_t>(tk[k])]);
            cells.push_back(fmt(t.alignment[i][static_cast<std::size_t>(tk[k])]));
          } else {
            cells.push_back(""), cells.push_back("");
          }
        }
        for (const auto& pl : per_layer) {
          const int64_t k = top_k(pl[i], 1)[0];
          cells.push_back(t.src_tokens[static_cast<std::size_t>(k)]);
          cells.push_back(fmt(pl[i][static_cast<std::size_t>(k)]));
        }
        table.row(std::move(cells));
      }
      std::printf("%s\n", table.render().c_str());
    }
    last_capture = std::move(cap);
  }
  if (as_json) {
    Json all = Json::array();
    for (auto& j : objs) all.push(j);
    std::printf("%s\n", (objs.size() == 1 ? objs[0] : all).dump(2).c_str());
  }

  if (a.has("export")) {
    const models::Translation& t = out.back();
    view::Export e;
    e.encoder_decoder = true;
    e.model = "attn translate: " + model_path;
    e.text = t.source + " -> " + t.text;
    e.encoder_tokens = t.src_tokens;
    e.decoder_tokens = {"<s>"};
    e.decoder_tokens.insert(e.decoder_tokens.end(), t.tgt_tokens.begin(), t.tgt_tokens.end());
    view::AttentionSet enc{
        "encoder_attention", "encoder self-attention", e.encoder_tokens, e.encoder_tokens, {}};
    view::AttentionSet dec{
        "decoder_attention", "decoder self-attention", e.decoder_tokens, e.decoder_tokens, {}};
    view::AttentionSet cross{"cross_attention", "cross-attention", e.decoder_tokens, e.encoder_tokens, {}};
    for (const Tensor& w : last_capture.encoder) enc.layers.push_back(to_layer(w));
    for (const Tensor& w : last_capture.decoder) dec.layers.push_back(to_layer(w));
    for (const Tensor& w : last_capture.cross) cross.layers.push_back(to_layer(w));
    e.sets = {std::move(enc), std::move(dec), std::move(cross)};
    const std::string text = view::export_json(e);
    view::parse_export(text);  // the same validation `attn view` applies
    io::write_file_atomically(a.str("export"), text + "\n");
    std::fprintf(stderr, "wrote %s (open it with: attn view %s -o page.html)\n", a.str("export").c_str(),
                 a.str("export").c_str());
  }
  return 0;
}

}  // namespace attn::cli
