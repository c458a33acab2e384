// Gemma 3 (text) read from a GGUF file (llama.cpp's `gemma3` architecture): Gemma 3 270M and its
// family. Every size comes from the file's metadata; the forward pass is llama.cpp's:
//
//   x = embed[token] · sqrt(C)
//   per layer l:
//     n = rms_norm(x)·attn_norm
//     q, k, v = Wq·n, Wk·n, Wv·n;  q, k per head: rms_norm(·)·attn_{q,k}_norm (QK normalisation)
//     q, k = rope(q), rope(k)      NeoX halves (x[i], x[i+D/2]), base: local (sliding) or global
//     a = attention(q, k, v)       causal, GQA (H query heads over Hkv kv heads), scale 1/sqrt(s)
//                                  with s = query_pre_attn_scalar (default the key length);
//                                  sliding layers see the last W keys (i − W < j ≤ i)
//     x += rms_norm(Wo·a)·post_attention_norm
//     n = rms_norm(x)·ffn_norm
//     x += rms_norm(Wdown·(gelu_tanh(Wgate·n) ⊙ Wup·n))·post_ffw_norm
//   logits = Wout · rms_norm(x)·output_norm    (Wout = embed unless the file has output.weight),
//   then c·tanh(logits / c) when final_logit_softcapping c is in the metadata.
// RMSNorm multiplies by the stored weight: llama.cpp's converter already stored Gemma's (1 + w).
// Layer l is a sliding-window layer unless (l + 1) % pattern == 0 (pattern 6: layers 5, 11, 17 are
// global). Where the metadata has no key for the pattern, the local RoPE base or the attention
// scalar, llama.cpp's values for gemma3 are used (6, 10000, the key length).
//
// Weights stay in their stored block format (Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 Q4_K Q5_K Q6_K) and go through
// ops::quant_linear_rows; a prompt pass of many tokens unpacks each matrix to f32 once and calls
// ops::gemm. Sliding layers keep only the window in their KV cache (ops::KvCache ring buffer).
#pragma once

#include <attn/io/gguf.h>
#include <attn/models/layer_trace.h>
#include <attn/models/runtime/batch.h>
#include <attn/text/spm.h>

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace attn::models {

struct Gemma3Config {
  int64_t vocab = 0;            // V (tokenizer.ggml.tokens)
  int64_t context = 0;          // gemma3.context_length
  int64_t dim = 0;              // C  gemma3.embedding_length
  int64_t layers = 0;           // gemma3.block_count
  int64_t ffn = 0;              // F  gemma3.feed_forward_length
  int64_t heads = 0;            // H  gemma3.attention.head_count
  int64_t kv_heads = 0;         // Hkv gemma3.attention.head_count_kv
  int64_t head_dim = 0;         // D  gemma3.attention.key_length (== value_length)
  double rms_eps = 1e-6;        // gemma3.attention.layer_norm_rms_epsilon
  double rope_global = 1e6;     // gemma3.rope.freq_base
  double rope_local = 10000.0;  // gemma3.rope.local.freq_base (llama.cpp: 10000)
  int64_t window = 0;           // gemma3.attention.sliding_window (0: no sliding layers)
  int64_t pattern = 6;          // gemma3.attention.sliding_window_pattern (llama.cpp: 6)
  double query_scalar = 0;      // gemma3.attention.query_pre_attn_scalar (default D)
  double final_softcap = 0;     // gemma3.final_logit_softcapping (0: none)
  double attn_softcap = 0;      // gemma3.attn_logit_softcapping (0: none)

  static Gemma3Config from_gguf(const io::GgufFile& file);
  void validate() const;  // throws naming the metadata key
  bool sliding(int64_t layer) const { return window > 0 && (layer + 1) % pattern != 0; }
  double rope_base(int64_t layer) const { return sliding(layer) ? rope_local : rope_global; }
};

struct Gemma3Options {
  int64_t max_context = 0;     // KV cache capacity in tokens; 0 = the model's context
  bool full_kv_cache = false;  // sliding layers keep every position too (for the memory comparison)
  // Products over fewer than this many tokens quantize the activations to 8 bits and run integer dot
  // products on the stored blocks, as llama.cpp does (ops::quant_dot_rows; Q5_0 Q8_0 Q4_K Q5_K Q6_K
  // weights, AVX2 or AVX-512 VNNI); longer prompts unpack the weights to f32 for ops::gemm. 0: f32
  // activations everywhere (each weight row unpacked to f32, ops::quant_linear_rows).
  int64_t int8_max_rows = 16;
  // Prompt passes of 16 tokens or more (and int8_max_rows > 0): true runs the 8-bit-activation GEMM
  // (ops::quant_matmul; each weight repacked into int8 panels on its first such pass, about 1.25 bytes per
  // weight kept), false unpacks each weight to f32 for ops::gemm.
  bool int8_gemm = true;
  // Round K and V to f16 before they enter the cache (llama.cpp's default f16 KV cache; the cache
  // still stores f32).
  bool kv_f16 = false;
  // issue 19 (g19b): prefill_greedy / step_greedy find the argmax through ops::GreedyScreen (a 5-bit
  // screening copy of the Q8_0 output matrix, built on the first greedy call, 115 MB for Gemma 3 270M)
  // when the CPU runs its AVX-512 VNNI kernel (on AVX2 the screen is slower than the full product),
  // the output matrix is Q8_0 (width a multiple of 64, at most 4096), the decode products are 8-bit
  // (int8_max_rows >= 2) and there is no final soft-capping; false (or any of those missing) computes all
  // logits and takes their argmax. Either way the token is the one std::max_element picks over step()'s
  // logits. On by default since g19c: the screen's panels of 16 rows (one lane per row) made its pass 3x
  // cheaper in compute, so it reads 120 instead of 178 MB per token at memory speed; measured 1.11-1.31x
  // the full product's tokens/s at 1 and 2 threads (interleaved, `gemma3_bench decode_ab`, loaded
  // machine; docs/benchmarks.md, g19c). g19b's row-major screen was compute-bound and slower (0.80-0.89x).
  bool greedy_screen = true;
  // The screen is built (~0.3-0.6 s of CPU for Gemma 3 270M) at this many greedy calls after load, and
  // used from then on; the calls before it compute every logit. A step saves ~2-3 ms, so a short
  // generation would not repay the build. 0: from the first call (prepare_greedy_screen builds it now).
  int64_t greedy_screen_after = 128;
};

// Per-layer exact attention probabilities of one prompt (`attn attention --model gemma3`).
struct Gemma3Attention {
  std::vector<int32_t> ids;
  std::vector<std::string> tokens;
  int64_t heads = 0;
  std::vector<bool> sliding;               // per layer
  std::vector<std::vector<float>> layers;  // per layer: [H, N, N]
};

// One model holds one sequence of its own (prefill, step) and runs any number of sequences in a
// runtime::PagedKvCache (forward_batch). Both share the model's scratch: one call at a time.
class Gemma3Model : public runtime::BatchDecoder {
 public:
  // Opens and validates `path`: config, tokenizer, every tensor's name, shape and type (all reported
  // at once), before anything is allocated from the metadata.
  static Gemma3Model load(const std::string& path, const Gemma3Options& options = {});
  Gemma3Model(Gemma3Model&&) noexcept;
  Gemma3Model& operator=(Gemma3Model&&) noexcept;
  ~Gemma3Model() override;

  // ---- the runtime's batched step (attn/models/runtime/batch.h) ----
  int64_t batch_vocab() const override;    // config().vocab
  int64_t batch_context() const override;  // capacity()
  // Sliding layers carry their window: their blocks before it go back to the pool.
  runtime::KvCacheConfig kv_layout() const override;
  // The entries' tokens in one pass; logits agree with prefill/step's to float tolerance.
  void forward_batch(runtime::PagedKvCache& cache, std::span<const runtime::BatchEntry> batch) override;

  const Gemma3Config& config() const;
  const text::SpmTokenizer& tokenizer() const;
  int64_t capacity() const;
  int64_t kv_cache_bytes() const;  // what the caches hold now (allocated)

  void clear();
  int64_t position() const;
  std::span<const float> prefill(std::span<const int32_t> ids);  // logits of the last one [V]
  std::span<const float> step(int32_t id);
  // issue 19 (g19b): the same forward passes for greedy decoding: the id of the largest logit (the
  // first of equal maxima), without computing every logit when the screen applies (Gemma3Options::
  // greedy_screen). The logits of prefill / step are not updated by these.
  int32_t prefill_greedy(std::span<const int32_t> ids);
  int32_t step_greedy(int32_t id);
  // Rows whose exact logit the last greedy call computed (the vocabulary when the screen did not apply).
  int64_t greedy_candidates() const;
  bool greedy_screened() const;  // whether greedy calls use the screen (once it is built)
  void prepare_greedy_screen();  // builds the screen now (when greedy_screened())
  // The normalised hidden vector [C] of the last position that the output matrix multiplies (after
  // prefill / step / their greedy forms).
  std::span<const float> last_hidden() const;

  Gemma3Attention attention_weights(std::span<const int32_t> ids);
  // The same pass, with one layer's attention block copied out of the engine's buffers (teaching:
  // teach/stages.h; Gemma's o is W_O · att before its post-attention norm). Throws for a layer out of range.
  AttentionLayerTrace layer_trace(std::span<const int32_t> ids, int64_t layer);

  // Gemma's chat format: <start_of_turn>user\n...<end_of_turn>\n ... <start_of_turn>model\n (a
  // system message is put before the first user message, as Gemma's template does). No <bos>: encode
  // with add_bos.
  struct Message {
    std::string role, content;
  };
  // The same as pieces: the markers allow special tokens, the messages' contents never do
  // (text::TextPiece). Encode them with tokenizer().encode(pieces, add_bos).
  text::TextPieces chat_template_pieces(const std::vector<Message>& messages,
                                        bool add_generation_prompt) const;
  // The pieces joined, for display: encode the pieces, not this text.
  std::string apply_chat_template(const std::vector<Message>& messages, bool add_generation_prompt) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  explicit Gemma3Model(std::unique_ptr<Impl> impl);
};

}  // namespace attn::models
