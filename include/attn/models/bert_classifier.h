// A pretrained BERT encoder as the trainable classifier: the same nn modules the
// from-scratch models use (models::EncoderClassifier over nn::Encoder), built from
// the pretrained weights by their Hugging Face names, so fine-tuning runs through
// the autograd engine. One framework: BertModel (bert.h) is the fast inference path
// over the same weights, and a test checks that both give the same hidden states.
//
// The mapping (HF name -> EncoderClassifier parameter):
//   embeddings.word_embeddings.weight                      -> embed.weight
//   embeddings.position_embeddings.weight[off : off + max_len]
//     + embeddings.token_type_embeddings.weight[0]         -> pos.weight
//   embeddings.LayerNorm.{weight,bias}                     -> embed_norm.*
//   encoder.layer.<i>.attention.self.{query,key,value}.*   -> encoder.layers.<i>.self_attn.w_{q,k,v}.*
//   encoder.layer.<i>.attention.output.dense.*             -> encoder.layers.<i>.self_attn.w_o.*
//   encoder.layer.<i>.attention.output.LayerNorm.*         -> encoder.layers.<i>.norm1.*
//   encoder.layer.<i>.intermediate.dense.*                 -> encoder.layers.<i>.ffn.w1.*
//   encoder.layer.<i>.output.dense.*                       -> encoder.layers.<i>.ffn.w2.*
//   encoder.layer.<i>.output.LayerNorm.*                   -> encoder.layers.<i>.norm2.*
// The classifier head (classifier.*) keeps its fresh initialisation. Token type 0 is
// folded into the positions (the classifier reads one segment). `position_offset` is
// the position id of the first token: 0 for BERT, pad_token_id + 1 = 2 for XLM-R
// (multilingual-e5).
#pragma once

#include <attn/core/tensor.h>
#include <attn/io/safetensors.h>
#include <attn/models/bert.h>
#include <attn/models/transformer.h>

#include <cstdint>
#include <functional>
#include <string>

namespace attn::models {

// The EncoderClassifier config that is this BERT encoder: post-norm, learned positions,
// biases, erf GELU, embedding LayerNorm, unscaled embeddings, the BERT's eps.
// max_len <= max_position_embeddings - position_offset.
TransformerConfig bert_classifier_config(const BertConfig& bert, int64_t num_classes, int64_t max_len,
                                         int64_t position_offset, double dropout, uint64_t seed,
                                         bool mean_pool = false);

// A pretrained tensor by its HF name as a contiguous f32 tensor; throws attn::Error
// naming the file and the tensor when absent.
using TensorLookup = std::function<Tensor(const std::string& name)>;

// The tensors of a safetensors file (names with or without the "bert." prefix).
TensorLookup safetensors_lookup(const io::SafeTensorsFile& file);

// Copies the pretrained weights into `model` (built from bert_classifier_config with the
// same BertConfig and offset). Every shape is checked against the config; all mismatches
// are listed in one attn::Error, and nothing is copied on error. A model with a frozen copy of its
// top layers (TransformerConfig::frozen_top) gets the same pretrained layers there too.
void load_bert_weights(EncoderClassifier& model, const BertConfig& bert, const TensorLookup& get,
                       int64_t position_offset);

// Turns requires_grad off for the embeddings (embed.*, embed_norm.*, pos.*) when `embeddings`, for the
// lowest `layers` encoder layers, and for a frozen copy of the top layers (frozen_top.*); returns the
// parameters left to train, in named_parameters() order. layers in [0, encoder_layers].
NamedParams freeze_bert_classifier(EncoderClassifier& model, bool embeddings, int64_t layers);

}  // namespace attn::models
