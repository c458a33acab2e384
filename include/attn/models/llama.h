// A Llama-architecture decoder read from a GGUF file (llama.cpp's format):
// SmolLM2-135M-Instruct and other models of the same family.
//
//   x = embed[token]
//   per layer:  x += Wo · attention(rope(Wq·n), rope(Wk·n), Wv·n)   n = rms_norm(x)·attn_norm
//               x += Wdown · (silu(Wgate·n) ⊙ Wup·n)                  n = rms_norm(x)·ffn_norm
//   logits = Wout · rms_norm(x)·output_norm      (Wout = embed when the file has no output.weight)
//
// Attention is causal with grouped-query heads (H query heads share Hkv key/value heads) and a
// KV cache: prefill() runs a whole prompt in one pass, then step() one token at a time.
// RoPE follows llama.cpp's convention for GGUF llama weights: the converter permuted the rows of
// Wq and Wk so that each head rotates adjacent pairs (x[2i], x[2i+1]) by pos · base^(−2i/D)
// (Hugging Face's checkpoints rotate the halves (x[i], x[i+D/2]) instead; the permutation maps one
// onto the other).
//
// Weights: the 2-D matrices stay in their stored block format (Q4_1, Q8_0) and are multiplied in
// that form (ops::quant_linear_rows in attn/ops/quantized.h, f32 activations), or, for decode steps, in
// a repacked copy of it against 8-bit activations (ops::Q8Dot, LlamaTuning::q8_activations);
// F32/F16/BF16 matrices are expanded to f32 and go through ops::gemm. LlamaTuning can instead expand
// quantized matrices to f32 on load, per phase (prefill, decode), to compare the two (docs/models.md has
// the measurement).
#pragma once

#include <attn/io/gguf.h>
#include <attn/models/layer_trace.h>
#include <attn/models/runtime/batch.h>
#include <attn/text/bpe_bytes.h>
#include <attn/text/text_piece.h>

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace attn::models {

struct LlamaConfig {
  int64_t vocab = 0;           // V
  int64_t context = 0;         // longest sequence the model was trained for (llama.context_length)
  int64_t dim = 0;             // C (llama.embedding_length)
  int64_t layers = 0;          // llama.block_count
  int64_t ffn = 0;             // llama.feed_forward_length
  int64_t heads = 0;           // H (llama.attention.head_count)
  int64_t kv_heads = 0;        // Hkv (llama.attention.head_count_kv, default H)
  int64_t head_dim = 0;        // D = C / H
  int64_t rope_dim = 0;        // llama.rope.dimension_count (default D); only D is supported
  double rope_base = 10000.0;  // llama.rope.freq_base
  double rms_eps = 1e-5;       // llama.attention.layer_norm_rms_epsilon

  // Reads general.architecture (must be "llama") and the llama.* keys; throws
  // attn::Error naming the file and key on a missing key, an unknown
  // architecture or inconsistent values (see validate()).
  static LlamaConfig from_gguf(const io::GgufFile& file);
  // Positive sizes, C == H·D, H % Hkv == 0, D even, rope_dim == D, finite positive base and eps.
  void validate() const;
};

// What a user chooses. The measurement-only knobs (weight forms per phase, 8-bit
// activations, the f16 decode cache, llama.cpp's roundings) are in
// attn/models/llama_tuning.h, outside the stable API.
struct LlamaOptions {
  // KV cache capacity in tokens; 0 = the model's context. Longer inputs throw.
  int64_t max_context = 0;
};
struct LlamaTuning;

// The tensors a GGUF llama file must hold, checked all at once before any is used.
struct LlamaTensorCheck {
  std::vector<std::string> missing;     // expected, absent
  std::vector<std::string> unexpected;  // present, not used
  std::vector<std::string> misshaped;   // "name: expected [a, b], got [c, d]" (also unsupported types)
  bool ok() const { return missing.empty() && misshaped.empty(); }
  std::string str() const;  // one paragraph listing all three
};
LlamaTensorCheck check_llama_tensors(const io::GgufFile& file, const LlamaConfig& config);

// Per-layer exact causal attention probabilities of one prompt, for `attn view`
// (as an export: viz::export_llama_attention, include/attn/viz/attention.h).
struct LlamaAttention {
  std::vector<int32_t> ids;
  std::vector<std::string> tokens;  // one display string per id (valid UTF-8)
  int64_t heads = 0;
  std::vector<std::vector<float>> layers;  // per layer: [H, N, N]
};

// One model holds one sequence of its own (prefill, step: `attn generate`, the chat) and runs any
// number of sequences in a runtime::PagedKvCache (forward_batch: `attn serve`, batched generation).
// Both share the model's scratch: one call at a time.
class LlamaModel : public runtime::BatchDecoder {
 public:
  // Opens and validates `path` (GGUF): config, tokenizer, tensor names, shapes and types.
  static LlamaModel load(const std::string& path, const LlamaOptions& options = {});
  // The same with measurement-only knobs (attn/models/llama_tuning.h): benchmarks and parity tests.
  static LlamaModel load(const std::string& path, const LlamaOptions& options, const LlamaTuning& tuning);
  // Whether this engine takes the file (architecture llama, a byte-level BPE tokenizer, the tensors it
  // knows, no RoPE scaling); any other decoder file runs on the runtime's decoder (models/text_decoder.h).
  static bool can_load(const io::GgufFile& file);
  LlamaModel(LlamaModel&&) noexcept;
  LlamaModel& operator=(LlamaModel&&) noexcept;
  ~LlamaModel() override;

  const LlamaConfig& config() const;
  const text::ByteBpeTokenizer& tokenizer() const;
  const io::GgufFile& file() const;
  int64_t capacity() const;  // KV cache capacity (tokens)

  // The sequence so far: clear() starts a new one.
  void clear();
  int64_t position() const;  // tokens in the KV cache

  // Appends `ids` to the sequence (one pass over all of them) and returns the
  // logits of the last one: [V]. Throws when the sequence would exceed capacity()
  // or an id is out of range. The returned span stays valid until the next call.
  std::span<const float> prefill(std::span<const int32_t> ids);
  // One token: the same as prefill({id}) on the decode path.
  std::span<const float> step(int32_t id);

  // ---- the runtime's batched step (attn/models/runtime/batch.h) ----
  int64_t batch_vocab() const override;    // config().vocab
  int64_t batch_context() const override;  // capacity()
  runtime::KvCacheConfig kv_layout() const override;
  // The entries' tokens in one pass. Logits agree with prefill/step's to float tolerance (the
  // products may take another form for another row count, and the attention kernel differs); a
  // sequence's logits do not depend on which other sequences share its batch beyond that. Independent
  // of the model's own sequence.
  void forward_batch(runtime::PagedKvCache& cache, std::span<const runtime::BatchEntry> batch) override;

  // Runs `ids` as a fresh sequence (clears the cache) and returns every layer's
  // exact attention probabilities [H, N, N] (the engine's weight capture).
  LlamaAttention attention_weights(std::span<const int32_t> ids);
  // The same pass, with one layer's attention block copied out of the engine's buffers (teaching:
  // teach/stages.h). Throws for a layer out of range.
  AttentionLayerTrace layer_trace(std::span<const int32_t> ids, int64_t layer);

  // The chat template of the file (tokenizer.chat_template) applied to messages
  // (role, content), with the assistant prompt appended when add_generation_prompt, as
  // transformers' apply_chat_template renders it: attn's own Jinja engine
  // (text/chat_template.h, docs/chat_templates.md), with the vocabulary's bos and eos
  // tokens as bos_token / eos_token. Throws when the file has no template, or when the
  // template uses a construct the engine does not support (naming the line and column).
  struct Message {
    std::string role, content;
  };
  // The templated conversation as pieces: the template's markers allow special tokens, roles and
  // contents never do (text::TextPiece), so a user who types "<|im_end|>" cannot end a turn.
  // Encode them with tokenizer().encode(pieces).
  text::TextPieces chat_template_pieces(const std::vector<Message>& messages,
                                        bool add_generation_prompt) const;
  // The same text joined, for display (an attention export's text). Encoding it with parse_special
  // would turn special-token strings in messages into control tokens: encode the pieces instead.
  std::string apply_chat_template(const std::vector<Message>& messages, bool add_generation_prompt) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  explicit LlamaModel(std::unique_ptr<Impl> impl);
};

// A display string for one token: its bytes when they are valid UTF-8, else <0xNN> per byte.
std::string llama_token_display(const text::ByteBpeTokenizer& tok, int32_t id);

}  // namespace attn::models
