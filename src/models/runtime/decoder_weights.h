// The weights of a runtime::Decoder by their GGUF names (private to src/models/runtime).
#pragma once

#include <attn/io/gguf.h>
#include <attn/models/runtime/decoder.h>
#include <attn/ops/weight_matrix.h>

#include <string>
#include <vector>

namespace attn::models::runtime::detail {

struct DecoderLayer {
  std::vector<float> attn_norm, q_norm, k_norm, post_attn_norm, ffn_norm, post_ffw_norm;  // RMSNorm weights
  std::vector<float> bq, bk, bv;                                                          // qwen2's biases
  ops::WeightMatrix wq, wk, wv, wo, gate, up, down;
};

struct DecoderWeights {
  ops::WeightMatrix embed, output;  // output empty: tied to embed
  std::vector<float> output_norm;
  std::vector<float> rope_freqs;  // Llama 3's frequency factors [rope_dims / 2], or empty
  std::vector<DecoderLayer> layers;
  const ops::WeightMatrix& out() const { return output.empty() ? embed : output; }
};

// Every tensor the config names, checked (present, shape, type, finite values and block scales); a
// tensor the config does not use is an error too. Throws attn::Error listing the problems. The
// vocabulary matrix (output, or the tied embeddings) keeps multiplying its stored blocks where a
// picker with `greedy` screens it (ops::GreedyPicker::keeps_stored_blocks).
DecoderWeights load_decoder_weights(const io::GgufFile& file, const DecoderConfig& config,
                                    const ops::GreedyPickOptions& greedy = {});

// DecoderOptions::quantize applied to weights read from a file (decoder.h: LoadQuant).
void quantize_weights(DecoderWeights& weights, LoadQuant quant);
// Decoder::weight_bytes of these weights.
int64_t weight_bytes(const DecoderWeights& weights);

// A Hugging Face folder: config.json and model.safetensors (or the shards model.safetensors.index.json
// names), f32 / f16 / bf16 weights read as f32, transformers' tensor names (decoder_hf.cc).
struct HfDecoder {
  DecoderConfig config;
  DecoderWeights weights;
};
HfDecoder read_hf_decoder(const std::string& folder);

}  // namespace attn::models::runtime::detail
