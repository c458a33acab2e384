// Internals of `attn view`, shared by its files:
//   view.cc           options, --help, dispatch (page, --terminal, --demo)
//   view_export.cc    the export format: strict reading and validation, writing
//   view_demo.cc      --demo / --demo-translation: exports computed by the engine
//   view_terminal.cc  --terminal: a Unicode-shaded heatmap
//   view_page.cc      (generated at build time from viewer/page.html) the page template
// The export format is described in docs/viewer.md.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace attn::cli::view {

// Row sums of the weights must be 1 within this (or exactly 0: a fully masked row).
inline constexpr double kRowSumTolerance = 1e-3;

// One layer of one attention kind: H heads of [rows, cols] probabilities.
struct Layer {
  int64_t heads = 0, rows = 0, cols = 0;
  std::vector<double> w;  // w: [heads, rows, cols]
  double at(int64_t h, int64_t i, int64_t j) const {
    return w[static_cast<std::size_t>((h * rows + i) * cols + j)];
  }
};

// One kind of attention: self-attention of a single stack, or the encoder's,
// the decoder's or the cross-attention of an encoder-decoder model.
struct AttentionSet {
  std::string key;                      // the export's key: "attention", "encoder_attention", ...
  std::string label;                    // for people: "self-attention", "cross-attention", ...
  std::vector<std::string> row_tokens;  // queries
  std::vector<std::string> col_tokens;  // keys
  std::vector<Layer> layers;
};

// Optional: an attribution of a classifier's prediction to the tokens, shown next
// to the attention ("attribution" in the export; self-attention layout only).
struct Attribution {
  std::vector<std::string> tokens;  // as many as the export's tokens
  std::string target;               // the explained class ("" when absent)
  std::string baseline;             // integrated gradients' baseline ("" when absent)
  int64_t steps = 0;                // integrated gradients' steps (0 when absent)
  bool has_completeness = false;
  double completeness_error = 0;  // Σ IG − (f(x) − f(baseline))
  // name -> one score per token ("ig", "input_x_grad", ...), in the export's order.
  std::vector<std::pair<std::string, std::vector<double>>> methods;
};

struct Export {
  bool encoder_decoder = false;
  std::string model, text;                                  // optional ("" when absent)
  std::vector<std::string> layer_names;                     // optional (empty when absent)
  std::vector<std::string> tokens;                          // self-attention layout
  std::vector<std::string> encoder_tokens, decoder_tokens;  // encoder-decoder layout
  std::vector<AttentionSet> sets;  // "attention", or encoder, decoder, cross (those present)
  std::optional<Attribution> attribution;

  const AttentionSet& set(const std::string& key) const;  // throws naming the keys present
};

// Reads and validates an export (see docs/viewer.md). Throws attn::Error with
// the byte offset for malformed JSON, and with the layer, head, row and the
// expected and actual values for every other problem.
Export parse_export(std::string_view text);

// The export as compact JSON in the same layout (numbers in shortest form, so
// parse_export(export_json(e)) gives back the same doubles).
std::string export_json(const Export& e);

// Demo exports computed by attn::attention with weight capture (view_demo.cc).
Export demo_self_attention();
Export demo_translation();

// The self-contained HTML page with `e` embedded.
std::string page_html(const Export& e);
// The page template with its data placeholder (generated from viewer/page.html).
extern const char* const kPageTemplate;
inline constexpr std::string_view kDataPlaceholder = "/*ATTN_DATA*/null";

struct TerminalOptions {
  std::string set;  // key of the attention set; "" = the first one
  int64_t layer = 0, head = 0;
};
// A heatmap of one layer and head in Unicode block shading with token labels.
std::string terminal_heatmap(const Export& e, const TerminalOptions& o);

}  // namespace attn::cli::view
