// A pretrained model's attention on one text as an export, and the summary of
// `attn attention` (include/attn/viz/attention.h).
#include <attn/core/error.h>
#include <attn/text/table.h>
#include <attn/viz/attention.h>

#include <algorithm>
#include <cstdio>
#include <vector>

namespace attn::viz {
namespace {

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

// One layer and head: each token's `top` keys with their weights.
std::string top_keys(const AttentionSet& s, std::size_t l, int64_t head, int64_t top) {
  const Layer& layer = s.layers[l];
  const auto N = static_cast<int64_t>(s.row_tokens.size());
  std::string out = "\nlayer " + std::to_string(l) + ", head " + std::to_string(head) +
                    ": each token's top " + std::to_string(top) + " keys\n";
  for (int64_t i = 0; i < N; ++i) {
    std::vector<int64_t> idx(static_cast<std::size_t>(N));
    for (int64_t j = 0; j < N; ++j) idx[static_cast<std::size_t>(j)] = j;
    const auto k = static_cast<std::ptrdiff_t>(std::min(top, N));
    std::partial_sort(idx.begin(), idx.begin() + k, idx.end(),
                      [&](int64_t a, int64_t b) { return layer.at(head, i, a) > layer.at(head, i, b); });
    std::string line = "  " + clip(s.row_tokens[static_cast<std::size_t>(i)], 14) + " ->";
    for (std::ptrdiff_t r = 0; r < k; ++r) {
      char w[32];
      std::snprintf(w, sizeof w, " %.2f", layer.at(head, i, idx[static_cast<std::size_t>(r)]));
      line += std::string(r ? "," : "") + " " +
              s.col_tokens[static_cast<std::size_t>(idx[static_cast<std::size_t>(r)])] + w;
    }
    out += line + "\n";
  }
  return out;
}

// One layer: a row per token, a column per head (or only `head`), each cell the
// key with the largest weight and that weight in %.
std::string layer_table(const AttentionSet& s, std::size_t l, int64_t only_head) {
  const Layer& layer = s.layers[l];
  const auto N = static_cast<int64_t>(s.row_tokens.size());
  std::vector<text::Table::Column> cols = {{"token", text::Align::left}};
  for (int64_t h = 0; h < layer.heads; ++h)
    if (only_head < 0 || h == only_head)
      cols.push_back({std::string("h").append(std::to_string(h)), text::Align::left});
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
      std::string cell = clip(s.col_tokens[static_cast<std::size_t>(best)], 6);
      cell += w;
      row.push_back(std::move(cell));
    }
    t.row(std::move(row));
  }
  std::string out = "\nlayer ";
  out += std::to_string(l);
  out += ": where each token attends most (key token, weight in %)\n";
  out += t.render();
  return out;
}

}  // namespace

Export export_decoder_attention(const DecoderAttention& a, const std::string& model_name,
                                const std::string& text) {
  const auto N = static_cast<int64_t>(a.tokens.size());
  ATTN_CHECK(a.windows.empty() || a.windows.size() == a.layers.size(), "attention export: ", a.windows.size(),
             " layer windows for ", a.layers.size(), " layers; expected one per layer");
  SelfAttentionInput in{model_name, text, a.tokens, {}};
  for (const std::vector<float>& layer : a.layers)
    in.layers.push_back(layer_from_floats(layer, a.heads, N, N));
  Export e = self_attention_export(std::move(in));
  bool any = false;
  for (int64_t w : a.windows) any = any || w > 0;
  if (!any) return e;
  e.layer_names.clear();
  for (std::size_t l = 0; l < a.windows.size(); ++l)
    e.layer_names.push_back(
        "layer " + std::to_string(l) +
        (a.windows[l] > 0 ? " (sliding, window " + std::to_string(a.windows[l]) + ")" : " (global)"));
  return e;
}

Export export_decoder_attention(models::TextDecoder& model, const std::vector<int32_t>& ids,
                                const std::string& model_name, const std::string& text) {
  const models::runtime::DecoderConfig& c = model.config();
  const DecoderAttention a{model.token_strings(ids), c.heads, model.decoder().attention_weights(ids),
                           c.windows};
  return export_decoder_attention(a, model_name, text);
}

Export export_translation(const models::Translation& t, const models::AttentionCapture& capture,
                          const std::string& model_name) {
  EncoderDecoderInput in;
  in.model = model_name;
  in.text = t.source + " -> " + t.text;
  in.encoder_tokens = t.src_tokens;
  in.decoder_tokens = {"<s>"};
  in.decoder_tokens.insert(in.decoder_tokens.end(), t.tgt_tokens.begin(), t.tgt_tokens.end());
  for (const Tensor& w : capture.encoder) in.encoder.push_back(layer_from_weights(w));
  for (const Tensor& w : capture.decoder) in.decoder.push_back(layer_from_weights(w));
  for (const Tensor& w : capture.cross) in.cross.push_back(layer_from_weights(w));
  return encoder_decoder_export(std::move(in));
}

Export export_bert_attention(const models::SentenceEncoder& enc, const std::string& model_name,
                             const std::string& text, bool* truncated) {
  models::BertInput in;
  in.ids.push_back(enc.encode(text, truncated));
  const models::BertOutput out = enc.model().forward(in, {.capture_attention = true});
  SelfAttentionInput s{model_name, text, {}, {}};
  for (int32_t id : in.ids[0]) s.tokens.push_back(enc.tokenizer().id_to_token(id));
  for (const Tensor& w : out.attention) s.layers.push_back(layer_from_weights(w));  // w: [1, H, N, N]
  return self_attention_export(std::move(s));
}

std::string attention_summary(const Export& e, const SummaryOptions& o) {
  ATTN_CHECK(!e.sets.empty() && !e.sets.front().layers.empty(),
             "attention summary: the export has no layers");
  const AttentionSet& s = e.sets.front();
  const auto L = static_cast<int64_t>(s.layers.size());
  const int64_t H = s.layers.front().heads;
  ATTN_CHECK(o.layer < L, "--layer: expected a layer in 0..", L - 1, "; got ", o.layer);
  ATTN_CHECK(o.head < H, "--head: expected a head in 0..", H - 1, "; got ", o.head);
  ATTN_CHECK(o.top >= 1, "--top: expected at least 1; got ", o.top);
  char head[256];
  std::snprintf(head, sizeof head,
                ": %lld tokens, %zu layers x %lld heads (exact weights from the fused kernel)\n",
                static_cast<long long>(s.row_tokens.size()), s.layers.size(), static_cast<long long>(H));
  std::string out = e.model + head;
  for (std::size_t l = 0; l < s.layers.size(); ++l) {
    if (o.layer >= 0 && static_cast<int64_t>(l) != o.layer) continue;
    out += o.layer >= 0 && o.head >= 0 ? top_keys(s, l, o.head, o.top) : layer_table(s, l, o.head);
  }
  return out;
}

}  // namespace attn::viz
