// The attention of a pretrained model on one text, as an export
// (include/attn/viz/export.h), and its summary for the terminal (`attn
// attention`). Every model's captured weights become an export through these
// builders, so one writer (export_json / save_export) serves them all.
// Layers, heads and token positions are numbered from 0.
#pragma once

#include <attn/models/bert.h>
#include <attn/models/gemma3.h>
#include <attn/models/llama.h>
#include <attn/models/text_decoder.h>
#include <attn/models/translation.h>
#include <attn/viz/export.h>

#include <cstdint>
#include <string>

namespace attn::viz {

// A Llama model's per-layer causal attention (LlamaModel::attention_weights):
// self-attention with layer_names "layer 0", "layer 1", ...
Export export_llama_attention(const models::LlamaAttention& a, const std::string& model_name,
                              const std::string& text);

// Gemma 3's (Gemma3Model::attention_weights): as export_llama_attention, with layer_names saying
// which layers slide ("layer 0 (sliding, window 512)": zero left of the window band) and which are
// global.
Export export_gemma3_attention(const models::Gemma3Attention& a, const std::string& model_name,
                               const std::string& text, int64_t window);

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
