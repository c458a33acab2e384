// A text decoder on the runtime (issue 37/38), from a GGUF file or a Hugging Face folder: the
// runtime's decoder for any architecture it reads (models/runtime/decoder.h), the model's tokenizer
// (text::load_tokenizer: GGUF tokenizer.ggml.*, or tokenizer.json) and its chat template (GGUF
// tokenizer.chat_template, or tokenizer_config.json's chat_template) rendered by attn's Jinja engine. What
// `attn serve` and `attn generate` use for the architectures without a hand-tuned single-sequence engine
// (everything but SmolLM2's llama path and Gemma 3).
#pragma once

#include <attn/io/gguf.h>
#include <attn/models/generate.h>
#include <attn/models/llama_chat.h>
#include <attn/models/runtime/decoder.h>
#include <attn/text/text_piece.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace attn::models {

struct TextDecoderOptions {
  int64_t max_context = 0;  // 0: the file's context
  // Matrices converted to Q8_0 / Q4_0 blocks at load (runtime::DecoderOptions::quantize).
  runtime::LoadQuant quantize = runtime::LoadQuant::none;
};

class TextDecoder {
 public:
  // path: a .gguf file, or a folder with config.json, safetensors and tokenizer.json.
  static TextDecoder load(const std::string& path, const TextDecoderOptions& options = {});
  TextDecoder(TextDecoder&&) noexcept;
  TextDecoder& operator=(TextDecoder&&) noexcept;
  ~TextDecoder();

  runtime::Decoder& decoder();
  const runtime::DecoderConfig& config() const;
  int64_t capacity() const;  // positions of one sequence

  // The file's chat template over (role, content) turns: its markers may be special tokens, the
  // contents never are. attn::Error when the file has no template or it uses an unsupported construct.
  text::TextPieces chat_pieces(const std::vector<std::pair<std::string, std::string>>& turns,
                               bool add_generation_prompt = true) const;
  // Ids of pieces, with the begin-of-sequence token where the tokenizer wants one.
  std::vector<int32_t> encode(const text::TextPieces& pieces) const;
  // Ids of a text (special-token strings become their tokens).
  std::vector<int32_t> encode_text(const std::string& text) const;
  // The bytes of ids (control tokens not rendered).
  std::string decode(const std::vector<int32_t>& ids) const;
  // One display string per id (valid UTF-8; control tokens rendered).
  std::vector<std::string> token_strings(const std::vector<int32_t>& ids) const;
  void set_stop_tokens(GenerateOptions& g) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  explicit TextDecoder(std::unique_ptr<Impl> impl);
};

// Whether path is a Hugging Face folder of a decoder the runtime reads (config.json's model_type llama,
// mistral, qwen2, qwen3, phi3, gemma2 or gemma3_text); false for anything else (an encoder folder, a
// file), without throwing.
bool is_decoder_folder(const std::string& path);

// Generates up to options.max_new_tokens after prompt_ids (non-empty, at most capacity()) on the
// runtime (one request through runtime::Scheduler: chunked prefill, then one token per step), greedy
// or sampled from Rng(seed), streaming the text to options.on_text through models::TextStream; stops
// at a stop token (set_stop_tokens) or when the context is full. prompt_seconds is the time to the
// first token.
LlamaReply decoder_generate_text(TextDecoder& model, const std::vector<int32_t>& prompt_ids,
                                 const LlamaTextOptions& options, uint64_t seed = 0);

}  // namespace attn::models
