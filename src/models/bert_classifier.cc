// models::load_bert_weights (include/attn/models/bert_classifier.h): a pretrained BERT
// encoder copied, tensor by tensor, into the nn modules of an EncoderClassifier.
#include <attn/core/error.h>
#include <attn/models/bert_classifier.h>
#include <attn/ops/basic.h>

#include <map>
#include <set>
#include <string>
#include <vector>

namespace attn::models {

namespace {

std::string shape_text(const Shape& s) {
  std::string t = "[";
  for (std::size_t i = 0; i < s.size(); ++i) t += (i ? ", " : "") + std::to_string(s[i]);
  return t + "]";
}

}  // namespace

TransformerConfig bert_classifier_config(const BertConfig& bert, int64_t num_classes, int64_t max_len,
                                         int64_t position_offset, double dropout, uint64_t seed,
                                         bool mean_pool) {
  bert.validate();
  ATTN_CHECK(
      position_offset >= 0 && max_len >= 2 && max_len + position_offset <= bert.max_position_embeddings,
      "bert_classifier_config: max_len (", max_len, ") + position offset (", position_offset,
      ") must be at most max_position_embeddings (", bert.max_position_embeddings, ")");
  TransformerConfig c;
  c.src_vocab = bert.vocab_size;
  c.d_model = bert.hidden_size;
  c.heads = bert.num_heads;
  c.d_ff = bert.intermediate_size;
  c.encoder_layers = bert.num_layers;
  c.decoder_layers = 0;
  c.dropout = dropout;
  c.attention_dropout = 0.0;
  c.max_len = max_len;
  c.pre_norm = false;
  c.norm = nn::NormKind::layer_norm;
  c.norm_eps = bert.layer_norm_eps;
  c.activation = nn::Activation::gelu;
  c.positions = Positions::learned;
  c.bias = true;
  c.share_embeddings = false;
  c.tie_output = false;
  c.scale_embeddings = false;
  c.embed_norm = true;
  c.pad_id = bert.pad_token_id;
  c.num_classes = num_classes;
  c.seed = seed;
  c.mean_pool = mean_pool;
  c.validate("classifier");
  return c;
}

TensorLookup safetensors_lookup(const io::SafeTensorsFile& file) {
  return [file](const std::string& name) {
    if (file.contains(name)) return file.load(name, DType::f32);
    ATTN_CHECK(file.contains("bert." + name), file.path(), ": no tensor '", name, "' (nor 'bert.", name,
               "')");
    return file.load("bert." + name, DType::f32);
  };
}

void load_bert_weights(EncoderClassifier& model, const BertConfig& bert, const TensorLookup& get,
                       int64_t position_offset) {
  const TransformerConfig& c = model.config();
  ATTN_CHECK(c.embed_norm && !c.pre_norm && c.positions == Positions::learned &&
                 c.d_model == bert.hidden_size && c.encoder_layers == bert.num_layers &&
                 c.src_vocab == bert.vocab_size,
             "load_bert_weights: the classifier was not built from this BERT config (d_model ", c.d_model,
             " vs hidden ", bert.hidden_size, ", layers ", c.encoder_layers, " vs ", bert.num_layers,
             ", vocab ", c.src_vocab, " vs ", bert.vocab_size, ")");
  std::map<std::string, Tensor> values;
  std::vector<std::string> errors;
  std::set<std::string> failed;  // parameters whose tensor could not be read (reported once)
  auto take = [&](const std::string& ours, const std::string& theirs) {
    try {
      values[ours] = get(theirs);
    } catch (const Error& e) {
      errors.push_back(e.what());
      failed.insert(ours);
    }
  };
  take("embed.weight", "embeddings.word_embeddings.weight");
  take("embed_norm.weight", "embeddings.LayerNorm.weight");
  take("embed_norm.bias", "embeddings.LayerNorm.bias");
  try {
    const Tensor pos = get("embeddings.position_embeddings.weight");
    const Tensor type = get("embeddings.token_type_embeddings.weight");
    if (pos.rank() != 2 || pos.size(0) < position_offset + c.max_len || pos.size(1) != c.d_model ||
        type.rank() != 2 || type.size(0) < 1 || type.size(1) != c.d_model) {
      errors.push_back("embeddings.position_embeddings.weight " + shape_text(pos.shape()) +
                       " and token_type_embeddings.weight " + shape_text(type.shape()) +
                       ": expected [>= " + std::to_string(position_offset + c.max_len) + ", " +
                       std::to_string(c.d_model) + "] and [>= 1, " + std::to_string(c.d_model) + "]");
    } else {
      // pos.weight[l] = position[offset + l] + token_type[0]
      values["pos.weight"] =
          (slice(pos, 0, position_offset, position_offset + c.max_len) + slice(type, 0, 0, 1)).contiguous();
    }
  } catch (const Error& e) {
    errors.push_back(e.what());
    failed.insert("pos.weight");
  }
  // Layers 0..n-1, then the frozen copy of the top ones (TransformerConfig::frozen_top): its layer j
  // is the pretrained layer n - frozen_top + j.
  for (int64_t t = 0; t < c.encoder_layers + c.frozen_top; ++t) {
    const int64_t i = t < c.encoder_layers ? t : t - c.frozen_top;
    const std::string h = "encoder.layer." + std::to_string(i) + ".";
    const std::string o = t < c.encoder_layers
                              ? "encoder.layers." + std::to_string(i) + "."
                              : "frozen_top.layers." + std::to_string(t - c.encoder_layers) + ".";
    for (const char* wb : {"weight", "bias"}) {
      const std::string s = wb;
      take(o + "self_attn.w_q." + s, h + "attention.self.query." + s);
      take(o + "self_attn.w_k." + s, h + "attention.self.key." + s);
      take(o + "self_attn.w_v." + s, h + "attention.self.value." + s);
      take(o + "self_attn.w_o." + s, h + "attention.output.dense." + s);
      take(o + "norm1." + s, h + "attention.output.LayerNorm." + s);
      take(o + "ffn.w1." + s, h + "intermediate.dense." + s);
      take(o + "ffn.w2." + s, h + "output.dense." + s);
      take(o + "norm2." + s, h + "output.LayerNorm." + s);
    }
  }
  int64_t covered = 0;
  for (const auto& [name, p] : model.named_parameters()) {
    const auto it = values.find(name);
    if (it == values.end()) {
      if (name.rfind("classifier.", 0) != 0 && failed.count(name) == 0)
        errors.push_back("no pretrained tensor for parameter '" + name + "'");
      continue;
    }
    ++covered;
    if (it->second.shape() != p.shape())
      errors.push_back("'" + name + "' is " + shape_text(p.shape()) +
                       " in the model; the pretrained tensor is " + shape_text(it->second.shape()));
  }
  if (errors.empty() && covered != static_cast<int64_t>(values.size()))
    errors.push_back("internal: " + std::to_string(values.size() - covered) +
                     " pretrained tensors match no parameter");
  if (!errors.empty()) {
    std::string msg = "load_bert_weights: " + std::to_string(errors.size()) + " problem(s):";
    for (const auto& e : errors) msg += "\n  " + e;
    throw Error(msg);
  }
  model.load_parameters(values, false);
}

NamedParams freeze_bert_classifier(EncoderClassifier& model, bool embeddings, int64_t layers) {
  ATTN_CHECK(layers >= 0 && layers <= model.config().encoder_layers,
             "freeze_bert_classifier: layers must be in [0, ", model.config().encoder_layers, "]; got ",
             layers);
  NamedParams trainable;
  for (auto& [name, p] : model.named_parameters()) {
    bool frozen = name.rfind("frozen_top.", 0) == 0;
    if (embeddings && (name.rfind("embed", 0) == 0 || name.rfind("pos.", 0) == 0)) frozen = true;
    for (int64_t i = 0; i < layers && !frozen; ++i)
      frozen = name.rfind("encoder.layers." + std::to_string(i) + ".", 0) == 0;
    if (frozen) {
      Tensor q = p;
      q.set_requires_grad(false);
    } else {
      trainable.emplace_back(name, p);
    }
  }
  return trainable;
}

}  // namespace attn::models
