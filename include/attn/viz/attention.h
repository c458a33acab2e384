// The attention of a pretrained model on one text, as an export
// (include/attn/viz/export.h), and its summary for the terminal (`attn
// attention`). Every model's captured weights become an export through these
// builders, so one writer (export_json / save_export) serves them all.
// Layers, heads and token positions are numbered from 0.
#pragma once

#include <attn/models/bert.h>
#include <attn/models/text_decoder.h>
#include <attn/models/translation.h>
#include <attn/viz/export.h>

#include <cstdint>
#include <string>

namespace attn::viz {

// A decoder's per-layer causal attention over one text: self-attention with layer_names "layer 0",
// "layer 1", ..., or "layer 0 (sliding, window 512)" (zero left of the window band) and "layer 5
// (global)" when any layer slides.
struct DecoderAttention {
  std::vector<std::string> tokens;         // one display string per position (valid UTF-8)
  int64_t heads = 0;                       // H
  std::vector<std::vector<float>> layers;  // per layer: [H, N, N]
  std::vector<int64_t> windows;            // per layer: 0 = global, W = sees W positions; empty: all global
};
Export export_decoder_attention(const DecoderAttention& a, const std::string& model_name,
                                const std::string& text);

// Any decoder on the runtime (models::TextDecoder): every layer's exact attention over ids
// (runtime::Decoder::attention_weights), layer names saying which layers slide and their window.
Export export_decoder_attention(models::TextDecoder& model, const std::vector<int32_t>& ids,
                                const std::string& model_name, const std::string& text);

// A translation and the attention captured while it was generated (encoder
// self-attention, decoder self-attention, cross-attention): the encoder-decoder
// layout with the source tokens and "<s>" + the generated tokens; "text" is
// "<source> -> <translation>".
Export export_translation(const models::Translation& t, const models::AttentionCapture& capture,
                          const std::string& model_name);

// A BERT sentence encoder's attention on one sequence, [CLS] text [SEP]
// (truncated to the encoder's max_seq_length; `truncated`, when given, says so).
Export export_bert_attention(const models::SentenceEncoder& enc, const std::string& model_name,
                             const std::string& text, bool* truncated = nullptr);

struct SummaryOptions {
  int64_t layer = -1;  // -1: every layer
  int64_t head = -1;   // -1: every head
  int64_t top = 3;     // with layer and head: keys listed per token
};
// For each layer a table with a row per token and a column per head, each cell
// the key token with the largest weight and that weight in %; with both layer
// and head, each token's top keys. Of the export's first attention set.
std::string attention_summary(const Export& e, const SummaryOptions& o);

}  // namespace attn::viz
