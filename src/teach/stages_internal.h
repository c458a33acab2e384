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
  int64_t window = 0;         // > 0: this layer sees only the last `window` keys (Gemma 3's sliding layers)
  std::string norm;           // "post_layer_norm" | "pre_rms_norm" | "pre_post_rms_norm"
  std::string qk;             // what Q and K are: "linear" | "rope" | "qk_norm_rope"
  Mat x;                      // [N, C] the layer's input
  Mat x_normed;               // [N, C] pre-norm models: what W_Q, W_K, W_V multiply (else empty)
  Mat q, k, v;                // [N, d_k] the head's (k, v: its key/value head's)
  std::vector<Mat> weights;   // per head [N, N]: the kernel's captured probabilities
  Mat att;                    // [N, H·d_k] every head's weights × V, concatenated
  bool att_from_engine = false;
  Mat o, x_after, normed_after;  // [N, C]
};

// Groups the pieces into the words of `text` (jieba's dictionary where installed, else characters).
json::Value words_json(const StageInputs& in);
// The whole document the page reads.
json::Value stages_json(const StageInputs& in);

}  // namespace attn::teach::stages_detail
