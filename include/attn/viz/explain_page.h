// The explainer page (issue 41, docs/explainer.md): one HTML file (HTML, CSS, JavaScript, no network)
// that steps through one layer and head of a real model on a sentence: tokens and words, the layer's
// input, Q, K, V, QKᵀ, ÷√d_k, the mask, softmax, weights × V, the heads, W_O, residual and norm.
// Served by `attn serve` at /explain (the page asks POST /v1/explain for the stages of what the
// learner types) or written with one sentence's stages embedded (`attn explain --stages --html`).
#pragma once

#include <attn/io/json.h>

#include <string>
#include <utility>
#include <vector>

namespace attn::viz {

struct ExplainPageOptions {
  std::string lang = "zh";  // the interface's first language: "zh" | "en"
  // The models the page offers (key, full name); empty for an offline file.
  std::vector<std::pair<std::string, std::string>> models;
};
// `stages`: the document of teach::StagesModel::stages (embedded: the page shows it and asks nothing),
// or null (the served page: it asks the server). Throws attn::Error for another language.
std::string explain_page_html(const json::Value& stages, const ExplainPageOptions& options = {});

// ---- the stages drawn without a browser (`attn explain --stages --export DIR`) ----------------

// The page's stages, in order: tokens x qkv scores scaled mask softmax wv heads concat residual.
extern const std::vector<std::string> kExplainStages;

// A drawing: filled rectangles and text runs (baseline at y), in pixels.
struct DrawItem {
  bool text = false;
  double x = 0, y = 0, w = 0, h = 0;  // rectangles: the box; text: the baseline's start
  std::string fill = "#000";          // "#rrggbb"
  std::string s;                      // text (UTF-8)
  double size = 12;                   // text: pixels
  bool bold = false, mono = false;
};
struct Drawing {
  int64_t width = 0, height = 0;
  std::vector<DrawItem> items;
};
// kExplainStages, then "padding" when the document has the padded batch (StagesRequest::pad) and
// "causality" when it has the causality panel: what `attn explain --stages --export` draws.
std::vector<std::string> drawing_stages(const json::Value& stages);
// One stage of the stages document as the page draws it for its SVG / PNG export: the title, then
// each matrix of the stage as a grid of coloured cells with its numbers, row and column labels.
// "padding": the sentence's real queries over its padded row's keys (who may see whom, the masked
// scores, the batch's weights with row sums, the weights of the sentence alone); "causality": per token
// the [CLS] attention and the integrated gradients as bars with their numbers, ρ, the completeness
// check and the note. Throws attn::Error for an unknown stage or language, or padding / causality
// asked of a document without them.
Drawing stage_drawing(const json::Value& stages, const std::string& stage, const std::string& lang = "zh");
// The drawing as an SVG document (CJK font fallbacks in font-family; text escaped).
std::string drawing_svg(const Drawing& d);

}  // namespace attn::viz
