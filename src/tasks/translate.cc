// attn::tasks::translate_sentences (include/attn/tasks/translate.h): translations
// and their cross-attention alignment, as text tables and as JSON.
#include <attn/core/error.h>
#include <attn/models/translation.h>
#include <attn/tasks/translate.h>
#include <attn/text/table.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <string>
#include <vector>

namespace attn::tasks {
namespace {

using json::Value;

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

// The generated tokens as rows: each character, then "</s>" when the model stopped.
std::vector<std::string> row_labels(const models::Translation& t) {
  std::vector<std::string> r = t.tgt_tokens;
  if (t.stopped) r.push_back("</s>");
  return r;
}

Value number_or_null(double v) { return std::isfinite(v) ? Value::number(v) : Value(); }

Value strings(const std::vector<std::string>& v) {
  Value a = Value::array();
  for (const auto& s : v) a.push_back(Value::string(s));
  return a;
}

// The source token `k` of `t` with its weight in `row`.
Value source_entry(const models::Translation& t, const std::vector<float>& row, int64_t k) {
  return Value::object({{"index", Value::integer(k)},
                        {"source_token", Value::string(t.src_tokens[static_cast<std::size_t>(k)])},
                        {"weight", Value::number(static_cast<double>(row[static_cast<std::size_t>(k)]))}});
}

Value translation_json(const models::Translation& t, const std::vector<std::string>& rows,
                       const std::vector<std::vector<std::vector<float>>>& per_layer,
                       const std::string& search, int64_t alignment_layer, const TranslateOptions& o) {
  Value j = Value::object();
  j.set("source", Value::string(t.source));
  j.set("translation", Value::string(t.text));
  j.set("search", Value::string(search));
  j.set("log_prob", number_or_null(t.log_prob));
  j.set("score", number_or_null(t.score));
  j.set("stopped", Value::boolean(t.stopped));
  j.set("source_tokens", strings(t.src_tokens));
  j.set("target_tokens", strings(rows));
  j.set("alignment_layer", Value::integer(alignment_layer));
  Value al = Value::array();
  for (std::size_t i = 0; i < rows.size(); ++i) {
    Value r = Value::object();
    r.set("token", Value::string(rows[i]));
    Value tops = Value::array();
    for (int64_t k : top_k(t.alignment[i], o.top)) tops.push_back(source_entry(t, t.alignment[i], k));
    r.set("top", std::move(tops));
    Value w = Value::array();
    for (float x : t.alignment[i]) w.push_back(Value::number(static_cast<double>(x)));
    r.set("weights", std::move(w));
    if (o.layers) {
      Value ls = Value::array();
      for (const auto& pl : per_layer) ls.push_back(source_entry(t, pl[i], top_k(pl[i], 1)[0]));
      r.set("layers", std::move(ls));
    }
    al.push_back(std::move(r));
  }
  j.set("alignment", std::move(al));
  return j;
}

std::string translation_text(const models::Translation& t, const std::vector<std::string>& rows,
                             const std::vector<std::vector<std::vector<float>>>& per_layer,
                             const std::string& search, const models::TransformerConfig& cfg,
                             const TranslateOptions& o) {
  char head[4096];
  std::snprintf(head, sizeof head, "English: %s\n中文:    %s\n(%s, log p %.3f%s)\n\n", t.source.c_str(),
                t.text.c_str(), search.c_str(), t.log_prob, t.stopped ? "" : ", stopped at the length limit");
  std::string s = head;
  std::snprintf(head, sizeof head,
                "cross-attention of the last decoder layer (%lld), averaged over %lld heads:\n",
                static_cast<long long>(cfg.decoder_layers - 1), static_cast<long long>(cfg.heads));
  s += head;
  std::vector<text::Table::Column> cols = {{"#", text::Align::right}, {"char", text::Align::left}};
  for (int64_t k = 0; k < o.top; ++k) {
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
    const auto tk = top_k(t.alignment[i], o.top);
    for (int64_t k = 0; k < o.top; ++k) {
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
  return s + table.render() + "\n";
}

}  // namespace

TranslateResult translate_sentences(const TranslateOptions& o) {
  ATTN_CHECK(!o.sentences.empty(), "translate: expected an English sentence to translate (or '-' for stdin)");
  ATTN_CHECK(o.beam >= 1, "--beam must be >= 1; got ", o.beam);
  ATTN_CHECK(o.top >= 1, "--top must be >= 1; got ", o.top);
  TranslateResult res;
  res.translator = models::Translator::load(o.model);
  models::Translator& tr = *res.translator;
  models::GenerateOptions go;
  go.search = o.beam > 1 ? models::SearchKind::beam : models::SearchKind::greedy;
  go.beam = o.beam;
  go.length_alpha = o.alpha;
  go.max_new_tokens = o.max_new > 0 ? o.max_new : tr.max_tgt_len() - 1;
  res.translations = tr.translate(o.sentences, go, /*with_alignment=*/true);
  char alpha_text[32];
  std::snprintf(alpha_text, sizeof alpha_text, "%g", o.alpha);
  res.search = o.beam > 1 ? "beam " + std::to_string(o.beam) + ", alpha " + alpha_text : "greedy";
  const models::TransformerConfig& cfg = tr.model().config();
  std::vector<Value> objs;
  for (std::size_t n = 0; n < res.translations.size(); ++n) {
    const models::Translation& t = res.translations[n];
    const std::vector<std::string> rows = row_labels(t);
    ATTN_CHECK(t.alignment.size() == rows.size(), "translate: captured ", t.alignment.size(),
               " cross-attention rows for ", rows.size(), " generated tokens");
    models::AttentionCapture cap;
    const bool last = n + 1 == res.translations.size();
    if (o.layers || o.capture) cap = tr.capture(t.src_ids, t.tgt_ids);
    std::vector<std::vector<std::vector<float>>> per_layer;  // [layer][row][src]; the table lists them
    for (const Tensor& w : cap.cross) per_layer.push_back(head_mean(w));
    objs.push_back(translation_json(t, rows, per_layer, res.search, cfg.decoder_layers - 1, o));
    res.text += translation_text(t, rows, per_layer, res.search, cfg, o);
    if (last) res.last_capture = std::move(cap);
  }
  if (objs.size() == 1) {
    res.json = std::move(objs[0]);
  } else {
    res.json = Value::array();
    for (auto& j : objs) res.json.push_back(std::move(j));
  }
  return res;
}

}  // namespace attn::tasks
