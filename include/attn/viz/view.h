// Viewing an attention export (include/attn/viz/export.h): the self-contained
// HTML page, the terminal heatmap and the demo exports of `attn view`
// (docs/viewer.md). Layers, heads and token positions are numbered from 0.
#pragma once

#include <attn/viz/export.h>

#include <cstdint>
#include <string>
#include <vector>

namespace attn::viz {

// ---- the page --------------------------------------------------------------------

// One HTML file (HTML, CSS and JavaScript, no network) with `e` embedded: a head
// view (lines between tokens), a model view (every layer x head), a matrix view
// and, for encoder-decoder exports, a cross-attention view; a legend (what a
// line's thickness and colour and a cell's darkness mean, which layer and head);
// an English / Chinese interface with a switch; CJK font fallbacks, and a notice
// (with CJK characters drawn as code points) when no CJK font is installed.
struct PageOptions {
  std::string lang = "en";  // the interface's first language: "en" | "zh"
};
// Throws attn::Error for a language other than "en" and "zh".
std::string page_html(const Export& e, const PageOptions& options = {});

// ---- the terminal ----------------------------------------------------------------

struct TerminalOptions {
  std::string set;              // key of the attention set; "" = the first one
  int64_t layer = 0, head = 0;  // from 0
};
// A heatmap of one layer and head in Unicode block shading with token labels.
// Throws attn::Error naming the valid range for a layer, head or set not present.
std::string terminal_heatmap(const Export& e, const TerminalOptions& o);

// ---- the demos: exports computed now by attn::attention with weight capture ----------

// The worked example of `attn explain`: N words, their embeddings X [N, d_model]
// and the projections W_Q, W_K, W_V, W_O [d_model, d_model] (row-major). d_model
// must be at least 8 (two heads of d_k = 4 taken from the projections' columns 0..7).
struct DemoExample {
  std::vector<std::string> words;
  std::string gloss;  // the sentence's meaning in English (the export's "text")
  int64_t d_model = 0;
  std::vector<double> x;               // [N, d_model]
  std::vector<double> wq, wk, wv, wo;  // [d_model, d_model] each
};

// --demo: self-attention over the example, 2 layers x 4 heads. Layer 0, heads 0
// and 1 use the example's W_Q, W_K, W_V (columns 0..3 and 4..7); heads 2 and 3 are
// seeded. Layer 1 reads X1 = X + concat(head 0, head 1) · W_O through 4 seeded heads.
Export demo_self_attention(const DemoExample& ex);

// --demo-translation: the example as encoder input and its translation as decoder
// input. Encoder: the two layers above; decoder: 2 causal layers of 4 seeded heads;
// cross-attention: 2 layers of 4 seeded heads with +3 attention bias on the source
// word each target word translates (align).
struct DemoTranslation {
  DemoExample source;
  std::vector<std::string> target = {"<s>", "it",     "rained", "today", ",",
                                     "I",   "didn't", "bring",  "an",    "umbrella"};
  std::vector<int64_t> align = {0, 1, 1, 0, 2, 3, 4, 5, 6, 6};  // per target word: a source index
  std::vector<double> target_x;  // the decoder's embeddings [target.size(), d_model]
};
Export demo_translation(const DemoTranslation& in);

}  // namespace attn::viz
