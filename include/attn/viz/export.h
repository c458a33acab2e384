// The attention-export format (docs/viewer.md): the one reader and the one
// writer that every model and command uses, and the builders that turn captured
// attention weights into an export.
//
// Layout (JSON): {"model", "text", "layer_names", "tokens", "attention": [per layer
// [1, H, N, N]], "attribution"} for one stack of self-attention, or
// {"encoder_tokens", "decoder_tokens", "encoder_attention", "decoder_attention",
// "cross_attention"} for an encoder-decoder model. Layers, heads and token
// positions are numbered from 0 wherever they are named (errors, layer_names).
#pragma once

#include <attn/core/tensor.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace attn::viz {

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

// ---- the reader and the writer -------------------------------------------------

// Reads and validates an export. Throws attn::Error with the byte offset for
// malformed JSON, and with the layer, head, row and the expected and actual
// values for every other problem.
Export parse_export(std::string_view text);

// The export as compact JSON in the same layout (numbers in shortest form, so
// parse_export(export_json(e)) gives back the same doubles).
std::string export_json(const Export& e);

// Checks `e` with the reader (parse_export(export_json(e))) and writes it, with a
// final newline, to `path` atomically. Throws attn::Error naming the problem
// (prefixed with "<who>: " for a file that cannot be written, when `who` is given).
void save_export(const std::string& path, const Export& e, const std::string& who = "");

// ---- builders: captured weights -> an export -----------------------------------

// One layer from a captured weight tensor w: [1, H, rows, cols] (any dtype and strides).
Layer layer_from_weights(const Tensor& w);
// One layer from H x rows x cols floats, [H, rows, cols] row-major.
Layer layer_from_floats(const std::vector<float>& w, int64_t heads, int64_t rows, int64_t cols);

// One stack of self-attention (per layer [1, H, N, N]) over `tokens`; layer_names
// are "layer 0", "layer 1", ... (The sets' labels follow from their keys, as the
// reader gives them, so what is written reads back the same.)
struct SelfAttentionInput {
  std::string model, text;
  std::vector<std::string> tokens;
  std::vector<Layer> layers;
};
Export self_attention_export(SelfAttentionInput in);

// An encoder-decoder model: encoder self-attention [1, H, Ne, Ne], decoder
// self-attention [1, H, Nd, Nd] and cross-attention [1, H, Nd, Ne] per layer
// (any of the three may be empty, not all).
struct EncoderDecoderInput {
  std::string model, text;
  std::vector<std::string> encoder_tokens, decoder_tokens;
  std::vector<Layer> encoder, decoder, cross;
};
Export encoder_decoder_export(EncoderDecoderInput in);

}  // namespace attn::viz
