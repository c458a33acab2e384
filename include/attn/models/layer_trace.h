// One decoder layer's attention block as the engine computed it, for teaching (`attn explain
// --stages`, teach/stages.h): the engine's own buffers copied out of one prompt pass, read-only.
// Sizes: N tokens, C = model width, H query heads, Hkv key/value heads, D = head size.
#pragma once

#include <cstdint>
#include <vector>

namespace attn::models {

struct AttentionLayerTrace {
  int64_t layer = 0;
  std::vector<float> x;             // [N, C] the layer's input (the residual stream)
  std::vector<float> normed;        // [N, C] its RMS norm · attn_norm (what W_Q, W_K, W_V multiply)
  std::vector<float> q;             // [N, H, D] queries as attention reads them (QK norm and RoPE applied)
  std::vector<float> k, v;          // [N, Hkv, D] keys (QK norm and RoPE applied) and values
  std::vector<float> weights;       // [H, N, N] the attention kernel's captured probabilities
  std::vector<float> att;           // [N, H, D] each head's weighted sum of values (heads concatenated)
  std::vector<float> o;             // [N, C] W_O · att
  std::vector<float> x_after;       // [N, C] the residual stream after the attention block
  std::vector<float> normed_after;  // [N, C] the next norm of it (the FFN's input)
};

}  // namespace attn::models
