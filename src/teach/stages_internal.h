// Internals of teach/stages.h: what each model gives (StageInputs, stages_models.cc) and the one
// JSON writer of the stages (stages.cc).
#pragma once

#include <attn/io/json.h>
#include <attn/teach/explain.h>

#include <cstdint>
#include <string>
#include <vector>

namespace attn::teach::stages_detail {

// One layer and head of one text, as the engine computed it.
struct StageInputs {
  std::string model, kind;  // the model's name; "encoder" | "decoder"
  std::string text;
  std::vector<std::string> tokens;  // display text of each piece
  std::vector<int32_t> ids;
  std::vector<bool> special;  // start / end / bos pieces
  int64_t layers = 0, heads = 0, kv_heads = 0, d_model = 0, d_k = 0, layer = 0, head = 0;
  double scale = 0;  // what the scores are multiplied by (1/√d_k; Gemma: 1/√query_pre_attn_scalar)
  bool causal = false;
  int64_t window = 0;        // > 0: this layer sees only the last `window` keys (Gemma 3's sliding layers)
  std::string norm;          // "post_layer_norm" | "pre_rms_norm" | "pre_post_rms_norm"
  std::string qk;            // what Q and K are: "linear" | "rope" | "qk_norm_rope"
  Mat x;                     // [N, C] the layer's input
  Mat x_normed;              // [N, C] pre-norm models: what W_Q, W_K, W_V multiply (else empty)
  Mat q, k, v;               // [N, d_k] the head's (k, v: its key/value head's)
  std::vector<Mat> weights;  // per head [N, N]: the kernel's captured probabilities
  Mat att;                   // [N, H·d_k] every head's weights × V, concatenated
  bool att_from_engine = false;
  Mat o, x_after, normed_after;  // [N, C]
};

// The padding-mask view (StagesRequest::pad): the sentence's row of a batch whose other row is `pad`
// tokens longer, one layer and head, as the engine computed it.
struct PaddingInputs {
  int64_t n = 0, pad = 0;           // the sentence's tokens; padded positions after them
  std::vector<std::string> tokens;  // [n + pad]: the sentence's, then the pad token's
  std::vector<std::string> other;   // [n + pad]: the longer row of the batch
  Mat q, k;                         // [n + pad, d_k]: the padded row's (from the engine's traced input)
  Mat weights;                      // [n + pad, n + pad]: the kernel's capture of the padded row
  Mat unpadded;                     // [n, n]: the kernel's capture of the sentence alone
  double scale = 0;
};
json::Value padding_json(const PaddingInputs& p);

// Groups the pieces into the words of `text` (jieba's dictionary where installed, else characters).
json::Value words_json(const StageInputs& in);
// The whole document the page reads.
json::Value stages_json(const StageInputs& in);

}  // namespace attn::teach::stages_detail
