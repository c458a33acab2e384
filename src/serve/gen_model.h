// The generation model of `attn serve`: what the handlers and the engine need of it, for every
// architecture the runtime runs (a Llama-family GGUF, Gemma 3). One instance serves every request:
// the engine batches them (serve/engine.h); the attention export runs on the model's own sequence
// under the server's compute gate. Private to the serve floor.
#pragma once

#include <attn/models/generate.h>
#include <attn/models/runtime/batch.h>
#include <attn/text/text_piece.h>
#include <attn/viz/export.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace attn::serve::detail {

class GenModel {
 public:
  virtual ~GenModel() = default;
  virtual models::runtime::BatchDecoder& decoder() = 0;
  virtual std::string architecture() const = 0;  // "llama", "gemma3"
  virtual int64_t capacity() const = 0;          // positions of one sequence
  virtual int64_t layers() const = 0;
  virtual int64_t heads() const = 0;
  // The file's chat template over (role, content) turns with the assistant prompt: markers may be
  // special tokens, contents never are (text::TextPiece).
  virtual text::TextPieces chat_pieces(
      const std::vector<std::pair<std::string, std::string>>& turns) const = 0;
  // Token ids of pieces, with the tokenizer's begin-of-sequence token where the model wants one.
  virtual std::vector<int32_t> encode(const text::TextPieces& pieces) const = 0;
  // Ids of a text for the attention endpoint (special-token strings become their tokens).
  virtual std::vector<int32_t> encode_text(const std::string& text) const = 0;
  // The bytes of generated ids (control tokens not rendered).
  virtual std::string decode(const std::vector<int32_t>& ids) const = 0;
  virtual void set_stop_tokens(models::GenerateOptions& g) const = 0;
  // Every layer's exact attention over ids, as an export (the model's own sequence: hold the gate).
  virtual viz::Export attention(const std::vector<int32_t>& ids, const std::string& model_id,
                                const std::string& text) = 0;
};

// --generate NAME: "smollm2" (SmolLM2-135M-Instruct), "gemma3" (Gemma 3 270M), or a .gguf path of
// either architecture (general.architecture "llama" or "gemma3"). *id receives the served model id.
// quantize: "" or "none", else "q8_0" / "q4_0" (runtime::parse_load_quant; other values refused):
// the model then runs on the runtime's decoder (models::TextDecoder) whatever its architecture, its
// f32 / f16 / bf16 matrices converted at load.
std::unique_ptr<GenModel> load_gen_model(const std::string& name, int64_t context,
                                         const std::string& quantize, std::string* id);

}  // namespace attn::serve::detail
