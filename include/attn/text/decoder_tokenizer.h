// The tokenizer of a decoder (causal language model), whichever algorithm its file names, behind
// one interface; and the one entry point that builds it from a Hugging Face tokenizer.json or from a
// GGUF file's tokenizer.ggml.* metadata (docs/tokenizers.md).
//
//   tokenizer.json, model BPE        ByteBpeTokenizer::from_tokenizer_json: byte-level (GPT-2,
//                                     SmolLM, Llama 3, Qwen2) or SentencePiece-style with byte
//                                     fallback (Llama 2, Mistral, Phi-3); ids as Hugging Face
//                                     `tokenizers` gives them
//   GGUF tokenizer.ggml.model gpt2   ByteBpeTokenizer::from_gguf (pre gpt2, smollm, llama-bpe, qwen2)
//   GGUF tokenizer.ggml.model llama  SpmTokenizer::from_gguf (Gemma, Llama 2, Mistral, Phi-3)
//   anything else                    attn::Error naming the field and what is supported
//
// The ids match llama.cpp on the GGUF path and `tokenizers` on the tokenizer.json path; the two
// differ only where those two libraries differ (overlapping added tokens, lstrip/rstrip flags that
// GGUF does not carry).
#pragma once

#include <attn/io/gguf.h>
#include <attn/text/text_piece.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace attn::text {

class ByteBpeTokenizer;
class SpmTokenizer;

class DecoderTokenizer {
 public:
  virtual ~DecoderTokenizer() = default;
  // "byte-level BPE (llama-bpe)", "SentencePiece BPE", ...: for messages.
  virtual std::string kind() const = 0;
  virtual int64_t vocab_size() const = 0;
  virtual int32_t bos_id() const = 0;  // -1 when none
  virtual int32_t eos_id() const = 0;  // -1 when none
  // Whether the model's own encoding starts with bos_id (GGUF add_bos_token; tokenizer.json's
  // post-processor template "<bos> $A").
  virtual bool add_bos() const = 0;
  virtual int32_t token_to_id(std::string_view token) const = 0;  // -1 when absent
  virtual const std::string& id_to_token(int32_t id) const = 0;   // throws when out of range
  // Control (and unknown) tokens: never produced from text a user typed, rendered only on request.
  virtual bool is_control(int32_t id) const = 0;

  // Text to ids: special-token strings become their ids when parse_special (control tokens) and
  // always for user-defined tokens; add_bos prepends bos_id. Invalid UTF-8 throws.
  virtual std::vector<int32_t> encode(std::string_view text, bool add_bos, bool parse_special) const = 0;
  // A chat template's pieces: control-token strings become ids only inside pieces that allow_special.
  virtual std::vector<int32_t> encode(const TextPieces& pieces, bool add_bos) const = 0;
  // Ids to bytes (control tokens as their text only when render_special). decode of a growing id
  // list only ever grows at its end, so models::TextStream can stream it; a character cut between
  // byte tokens is left as its bytes so far (TextStream holds them back).
  virtual std::string decode(const std::vector<int32_t>& ids, bool render_special) const = 0;

  // The implementation underneath, when it is that one (nullptr otherwise).
  virtual const ByteBpeTokenizer* byte_bpe() const { return nullptr; }
  virtual const SpmTokenizer* spm() const { return nullptr; }
};

// A Hugging Face tokenizer.json (tokenizer_config.json beside it is read for bos/eos/pad/unk).
std::unique_ptr<DecoderTokenizer> load_tokenizer(const std::string& tokenizer_json_path);
// A GGUF file's tokenizer.ggml.* metadata.
std::unique_ptr<DecoderTokenizer> load_tokenizer(const io::GgufFile& file);

}  // namespace attn::text
