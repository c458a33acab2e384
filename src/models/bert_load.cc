// BERT encoders: the config and the weights, read and packed (include/attn/models/bert.h).
#include <attn/core/autograd.h>
#include <attn/core/error.h>
#include <attn/core/f16.h>
#include <attn/core/parallel.h>
#include <attn/io/files.h>
#include <attn/io/finite.h>
#include <attn/io/model_files.h>
#include <attn/io/safetensors.h>
#include <attn/models/bert.h>
#include <attn/ops/weight_matrix.h>
#include <attn/text/unigram.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <numeric>
#include <sstream>

#include "models/bert_weights.h"

namespace attn::models {

namespace bert_detail {

bool file_exists(const std::string& p) {
  struct stat sb {};
  return ::stat(p.c_str(), &sb) == 0 && S_ISREG(sb.st_mode);
}

std::string join(const std::vector<std::string>& v, std::size_t max_items) {
  std::string s;
  for (std::size_t i = 0; i < v.size() && i < max_items; ++i) s += (i ? ", " : "") + v[i];
  if (v.size() > max_items) s += ", ... (" + std::to_string(v.size() - max_items) + " more)";
  return s;
}

}  // namespace bert_detail

using bert_detail::join;

// ============================================================================
// config
// ============================================================================
namespace {

int64_t int_field(const json::Value& cfg, const char* key, const std::string& what) {
  const json::Value* v = cfg.find(key);
  ATTN_CHECK(v != nullptr, what, ": missing \"", key, "\" (a positive integer)");
  ATTN_CHECK(v->is_integer(), what, ": \"", key, "\" must be an integer; got ",
             v->is_number() ? "a non-integer number" : json::type_name(v->type()));
  return v->as_int64();
}

}  // namespace

void BertConfig::validate(const std::string& what) const {
  auto positive = [&](const char* name, int64_t v, int64_t hi) {
    ATTN_CHECK(v > 0 && v <= hi, what, ": ", name, " must be in [1, ", hi, "]; got ", v);
  };
  positive("vocab_size", vocab_size, int64_t{1} << 24);
  positive("hidden_size", hidden_size, 1 << 16);
  positive("num_hidden_layers", num_layers, 1024);
  positive("num_attention_heads", num_heads, 1024);
  positive("intermediate_size", intermediate_size, 1 << 18);
  positive("max_position_embeddings", max_position_embeddings, 1 << 20);
  positive("type_vocab_size", type_vocab_size, 1 << 16);
  ATTN_CHECK(hidden_size % num_heads == 0, what, ": hidden_size (", hidden_size,
             ") must be divisible by num_attention_heads (", num_heads, ")");
  ATTN_CHECK(std::isfinite(layer_norm_eps) && layer_norm_eps > 0 && layer_norm_eps < 1, what,
             ": layer_norm_eps must be in (0, 1); got ", layer_norm_eps);
  ATTN_CHECK(pad_token_id >= 0 && pad_token_id < vocab_size, what, ": pad_token_id must be in [0, ",
             vocab_size, "); got ", pad_token_id);
  ATTN_CHECK(hidden_act == "gelu", what, ": hidden_act \"", hidden_act,
             "\" is not supported; expected \"gelu\" (the exact erf form)");
  ATTN_CHECK(position_offset >= 0 && position_offset < max_position_embeddings, what,
             ": position_offset must be in [0, max_position_embeddings = ", max_position_embeddings,
             "); got ", position_offset);
}

BertConfig BertConfig::from_e5(const io::E5HfConfig& e) {
  BertConfig c;
  c.vocab_size = e.vocab_size;
  c.hidden_size = e.hidden_size;
  c.num_layers = e.num_hidden_layers;
  c.num_heads = e.num_attention_heads;
  c.intermediate_size = e.intermediate_size;
  c.max_position_embeddings = e.max_position_embeddings;
  c.type_vocab_size = e.type_vocab_size;
  c.layer_norm_eps = e.layer_norm_eps;
  c.pad_token_id = e.pad_token_id;
  c.hidden_act = e.hidden_act;
  c.position_offset = e.position_offset;
  c.model_type = "xlm-roberta";
  c.validate("e5 container config");
  return c;
}

BertConfig BertConfig::from_json(const json::Value& cfg, const std::string& what) {
  ATTN_CHECK(cfg.is_object(), what, ": expected a JSON object; got ", json::type_name(cfg.type()));
  bool is_bert = false, is_xlmr = false;
  std::string arch_names;
  if (const json::Value* a = cfg.find("architectures"); a != nullptr && a->is_array()) {
    for (const json::Value& x : a->items()) {
      if (!x.is_string()) continue;
      arch_names += (arch_names.empty() ? "" : ", ") + x.as_string();
      if (x.as_string().rfind("Bert", 0) == 0) is_bert = true;
      if (x.as_string().rfind("XLMRoberta", 0) == 0) is_xlmr = true;
    }
  }
  std::string model_type;
  if (const json::Value* m = cfg.find("model_type"); m != nullptr && m->is_string())
    model_type = m->as_string();
  if (!model_type.empty()) {
    ATTN_CHECK(model_type == "bert" || model_type == "xlm-roberta", what, ": model_type \"", model_type,
               "\" is not supported; expected \"bert\" or \"xlm-roberta\" (architectures: ",
               arch_names.empty() ? "none" : arch_names, ")");
  } else {
    ATTN_CHECK(is_bert || is_xlmr, what, ": unknown architecture (",
               arch_names.empty() ? "none given" : arch_names,
               "); expected model_type \"bert\" or a Bert* architecture such as BertModel");
    model_type = is_xlmr ? "xlm-roberta" : "bert";
  }
  ATTN_CHECK(arch_names.empty() || (model_type == "bert" ? is_bert : is_xlmr), what, ": architecture ",
             arch_names, " is not supported for model_type \"", model_type,
             "\"; expected a Bert* architecture such as BertModel (or XLMRoberta* for xlm-roberta)");
  BertConfig c;
  c.model_type = model_type;
  c.vocab_size = int_field(cfg, "vocab_size", what);
  c.hidden_size = int_field(cfg, "hidden_size", what);
  c.num_layers = int_field(cfg, "num_hidden_layers", what);
  c.num_heads = int_field(cfg, "num_attention_heads", what);
  c.intermediate_size = int_field(cfg, "intermediate_size", what);
  c.max_position_embeddings = int_field(cfg, "max_position_embeddings", what);
  c.type_vocab_size = cfg.find("type_vocab_size") ? int_field(cfg, "type_vocab_size", what) : 2;
  if (const json::Value* v = cfg.find("layer_norm_eps")) {
    ATTN_CHECK(v->is_number(), what, ": \"layer_norm_eps\" must be a number; got ",
               json::type_name(v->type()));
    c.layer_norm_eps = v->as_double();
  }
  if (const json::Value* v = cfg.find("pad_token_id"); v != nullptr && !v->is_null())
    c.pad_token_id = int_field(cfg, "pad_token_id", what);
  else if (c.model_type == "xlm-roberta")
    c.pad_token_id = 1;
  // XLM-R numbers positions from padding_idx + 1 (fairseq's make_positions).
  if (c.model_type == "xlm-roberta") c.position_offset = c.pad_token_id + 1;
  if (const json::Value* v = cfg.find("hidden_act")) {
    ATTN_CHECK(v->is_string(), what, ": \"hidden_act\" must be a string; got ", json::type_name(v->type()));
    c.hidden_act = v->as_string();
  }
  if (const json::Value* v = cfg.find("position_embedding_type"); v != nullptr && !v->is_null()) {
    ATTN_CHECK(v->is_string() && v->as_string() == "absolute", what, ": position_embedding_type ",
               v->is_string() ? "\"" + v->as_string() + "\"" : std::string(json::type_name(v->type())),
               " is not supported; expected \"absolute\"");
  }
  c.validate(what);
  return c;
}

BertConfig BertConfig::from_file(const std::string& path) {
  const std::string text = io::read_file(path, "bert config");
  json::Value v;
  try {
    v = json::parse(text);
  } catch (const Error& e) {
    throw Error(detail::concat(path, ": malformed JSON: ", e.what()));
  }
  return from_json(v, path);
}

namespace {

// [out, in] -> a contiguous [in, out] copy.
Tensor transposed(const Tensor& w) { return w.transpose(0, 1).contiguous(); }

}  // namespace

namespace {

// Every tensor the model needs (HF names, no prefix), with its shape.
std::vector<std::pair<std::string, Shape>> expected_tensors(const BertConfig& config) {
  const int64_t C = config.hidden_size, F = config.intermediate_size;
  std::vector<std::pair<std::string, Shape>> expected = {
      {"embeddings.word_embeddings.weight", {config.vocab_size, C}},
      {"embeddings.position_embeddings.weight", {config.max_position_embeddings, C}},
      {"embeddings.token_type_embeddings.weight", {config.type_vocab_size, C}},
      {"embeddings.LayerNorm.weight", {C}},
      {"embeddings.LayerNorm.bias", {C}},
  };
  for (int64_t i = 0; i < config.num_layers; ++i) {
    const std::string p = "encoder.layer." + std::to_string(i) + ".";
    for (const char* n :
         {"attention.self.query", "attention.self.key", "attention.self.value", "attention.output.dense"}) {
      expected.push_back({p + n + ".weight", {C, C}});
      expected.push_back({p + n + ".bias", {C}});
    }
    expected.push_back({p + "attention.output.LayerNorm.weight", {C}});
    expected.push_back({p + "attention.output.LayerNorm.bias", {C}});
    expected.push_back({p + "intermediate.dense.weight", {F, C}});
    expected.push_back({p + "intermediate.dense.bias", {F}});
    expected.push_back({p + "output.dense.weight", {C, F}});
    expected.push_back({p + "output.dense.bias", {C}});
    expected.push_back({p + "output.LayerNorm.weight", {C}});
    expected.push_back({p + "output.LayerNorm.bias", {C}});
  }
  return expected;
}

// What inference reads past: the pooler (CLS head), the position-id buffer
// and the task heads (a cross-encoder's classifier.*, a masked LM's lm_head.* / cls.*: bert_rerank.cc
// reads the classifier's).
bool ignored_tensor(const std::string& n) {
  for (const char* head : {"pooler.", "classifier.", "lm_head.", "cls."})
    if (n.rfind(head, 0) == 0) return true;
  return n == "embeddings.position_ids";
}

[[noreturn]] void mismatch(const std::string& what, const BertConfig& c,
                           const std::vector<std::string>& missing,
                           const std::vector<std::string>& unexpected,
                           const std::vector<std::string>& misshaped) {
  std::string msg = "bert: " + what + " does not match the config (" + std::to_string(c.num_layers) +
                    " layers, hidden " + std::to_string(c.hidden_size) + ", intermediate " +
                    std::to_string(c.intermediate_size) + ")";
  if (!missing.empty()) msg += "; missing " + std::to_string(missing.size()) + ": " + join(missing);
  if (!unexpected.empty())
    msg += "; unexpected " + std::to_string(unexpected.size()) + ": " + join(unexpected);
  if (!misshaped.empty()) msg += "; mis-shaped " + std::to_string(misshaped.size()) + ": " + join(misshaped);
  throw Error(msg);
}

}  // namespace

BertWeights BertModel::weights_from_safetensors(const BertConfig& config, const std::string& path) {
  return weights_from_set(config, io::SafeTensorsSet::open_file(path));
}

BertWeights BertModel::weights_from_set(const BertConfig& config, const io::SafeTensorsSet& file) {
  config.validate();
  const std::string& path = file.source();
  std::string prefix;
  for (const char* p : {"bert.", "roberta."})
    if (file.contains(std::string(p) + "embeddings.word_embeddings.weight")) prefix = p;
  const std::vector<std::pair<std::string, Shape>> expected = expected_tensors(config);
  std::map<std::string, Shape> want(expected.begin(), expected.end());
  std::vector<std::string> missing, unexpected, misshaped;
  for (const std::string& name : file.names()) {
    const std::string n = name.rfind(prefix, 0) == 0 ? name.substr(prefix.size()) : name;
    const auto it = want.find(n);
    if (it == want.end()) {
      if (!ignored_tensor(n)) unexpected.push_back(name);
      continue;
    }
    const io::TensorInfo& info = file.info(name);
    if (info.shape != it->second)
      misshaped.push_back(name + " (expected " + shape_str(it->second) + ", got " + shape_str(info.shape) +
                          ")");
    else if (!(info.dtype == io::StDType::F32 || info.dtype == io::StDType::F16 ||
               info.dtype == io::StDType::BF16 || info.dtype == io::StDType::F64))
      misshaped.push_back(name + " (expected a float dtype: F32, F16, BF16 or F64; got " +
                          io::st_dtype_name(info.dtype) + ")");
  }
  for (const auto& [n, s] : expected)
    if (!file.contains(prefix + n)) missing.push_back(prefix + n);
  if (!missing.empty() || !unexpected.empty() || !misshaped.empty())
    mismatch(path, config, missing, unexpected, misshaped);
  BertWeights w;
  for (const auto& [n, s] : expected) {
    Tensor t = file.load(prefix + n);
    io::check_finite(t, "bert: " + path + ": tensor '" + prefix + n + "'");
    w.tensors.emplace(n, std::move(t));
  }
  return w;
}

// Q4_0 (f16 d, 16 bytes of nibbles: w = d·(q − 8)) rewritten as Q4_1 (f16 d, f16 m, the same nibbles:
// w = d·q + m) with m = −8·d, which is exact in f16 (a power-of-two multiple of d) and gives the same
// f32 weights: d·q − 8·d = d·(q − 8) exactly (both products are exact in f32).
std::vector<std::byte> q4_0_to_q4_1(std::span<const std::byte> q40, const std::string& what) {
  constexpr std::size_t kIn = 18, kOut = 20;
  ATTN_CHECK(q40.size() % kIn == 0, "bert: the Q4_0 blocks of ", what, " are ", q40.size(),
             " bytes; expected a multiple of 18 (one f16 scale and 16 bytes of nibbles per 32 weights)");
  const std::size_t nb = q40.size() / kIn;
  std::vector<std::byte> out(nb * kOut);
  for (std::size_t b = 0; b < nb; ++b) {
    const std::byte* src = q40.data() + b * kIn;
    std::byte* dst = out.data() + b * kOut;
    uint16_t d;
    std::memcpy(&d, src, 2);
    const float df = f16_to_f32(d);
    ATTN_CHECK(std::isfinite(df) && std::abs(df) <= 4096.0f, "bert: ", what, ": quantized block ", b,
               " has scale ", df, "; expected a finite scale of at most 4096 in magnitude");
    const uint16_t m = f32_to_f16(-8.0f * df);
    std::memcpy(dst, &d, 2);
    std::memcpy(dst + 2, &m, 2);
    std::memcpy(dst + 4, src + 2, 16);
  }
  return out;
}

BertWeights BertModel::weights_from_e5(const io::E5Container& container) {
  BertWeights w;
  for (const std::string& n : container.hf_names())
    if (n != "embeddings.word_embeddings.weight") w.tensors.emplace(n, container.load_hf(n));
  // Scales are checked finite here once (a row read later never sees a non-finite scale).
  container.check_finite("emb.word");
  w.word_rows = [container](int64_t id, float* out) { container.word_embedding_row(id, out); };
  w.q4_0_blocks = [container](const std::string& hf_name) -> std::span<const std::byte> {
    const std::string n = io::e5_name_of_hf(hf_name);
    if (n.empty() || !container.contains(n) || container.info(n).dtype != io::E5DType::q4_0) return {};
    return container.bytes(n);
  };
  return w;
}

BertModel BertModel::from_e5(const io::E5Container& container) {
  return BertModel(BertConfig::from_e5(container.hf_config()), weights_from_e5(container), container.path());
}

BertModel::BertModel(const BertConfig& config, const std::string& path)
    : BertModel(config, weights_from_safetensors(config, path), path) {}

namespace {

// Onto every matrix of every layer, its Q4_0 blocks (weights.q4_0_blocks) rewritten as Q4_1, the query,
// key and value rows stacked as in qkv; true when all have them (else none is kept).
bool add_quantized_twins(BertModel::Weights& w, const BertWeights& weights, const std::string& what) {
  for (std::size_t i = 0; i < w.layers.size(); ++i) {
    const std::string p = "encoder.layer." + std::to_string(i) + ".";
    BertModel::Weights::Layer& l = w.layers[i];
    // The Q4_1 blocks of the named linears' weights, their rows stacked, onto m (false when one is absent).
    auto build = [&](ops::DenseMatrix& m, std::initializer_list<const char*> names) {
      const int64_t N = m.rows() / static_cast<int64_t>(names.size()), K = m.cols();
      std::vector<std::byte> blocks;
      for (const char* n : names) {
        const std::span<const std::byte> b = weights.q4_0_blocks(p + n + ".weight");
        if (b.empty()) return false;
        ATTN_CHECK(static_cast<int64_t>(b.size()) == N * K / 32 * 18, "bert: ", what, ": the Q4_0 blocks of ",
                   p, n, ".weight are ", b.size(), " bytes; expected ", N * K / 32 * 18);
        const std::vector<std::byte> q41 = q4_0_to_q4_1(b, what + ": " + p + n + ".weight");
        blocks.insert(blocks.end(), q41.begin(), q41.end());
      }
      return m.add_quantized(std::move(blocks));
    };
    if (!(build(l.qkv, {"attention.self.query", "attention.self.key", "attention.self.value"}) &&
          build(l.o, {"attention.output.dense"}) && build(l.up, {"intermediate.dense"}) &&
          build(l.down, {"output.dense"}))) {
      for (BertModel::Weights::Layer& x : w.layers)
        for (ops::DenseMatrix* m : {&x.qkv, &x.o, &x.up, &x.down}) m->drop_quantized();
      return false;
    }
  }
  return true;
}

}  // namespace

BertModel::BertModel(const BertConfig& config, BertWeights weights, const std::string& what)
    : config_(config) {
  config_.validate();
  const int64_t C = config_.hidden_size;
  const std::vector<std::pair<std::string, Shape>> expected = expected_tensors(config_);
  std::map<std::string, Shape> want(expected.begin(), expected.end());
  const bool rows = static_cast<bool>(weights.word_rows);
  if (rows) want.erase("embeddings.word_embeddings.weight");
  std::vector<std::string> missing, unexpected, misshaped;
  for (const auto& [n, t] : weights.tensors) {
    const auto it = want.find(n);
    if (it == want.end()) {
      if (!ignored_tensor(n)) unexpected.push_back(n);
      continue;
    }
    if (!t.defined() || t.shape() != it->second || t.dtype() != DType::f32)
      misshaped.push_back(n + " (expected f32 " + shape_str(it->second) + ", got " +
                          (t.defined() ? std::string(dtype_name(t.dtype())) + " " + shape_str(t.shape())
                                       : std::string("an undefined tensor")) +
                          ")");
  }
  for (const auto& [n, s] : want)
    if (!weights.tensors.count(n)) missing.push_back(n);
  if (!missing.empty() || !unexpected.empty() || !misshaped.empty())
    mismatch(what, config_, missing, unexpected, misshaped);
  const auto get = [&](const std::string& name) {
    Tensor t = weights.tensors.at(name).contiguous();
    io::check_finite(t, "bert: " + what + ": tensor '" + name + "'");
    return t;
  };
  w_ = std::make_unique<Weights>();
  if (rows)
    w_->word_rows = std::move(weights.word_rows);
  else
    w_->word = get("embeddings.word_embeddings.weight");
  w_->pos = get("embeddings.position_embeddings.weight");
  w_->type = get("embeddings.token_type_embeddings.weight");
  w_->emb_ln_w = get("embeddings.LayerNorm.weight");
  w_->emb_ln_b = get("embeddings.LayerNorm.bias");
  for (int64_t i = 0; i < config_.num_layers; ++i) {
    const std::string p = "encoder.layer." + std::to_string(i) + ".";
    Weights::Layer l;
    Tensor wqkv = Tensor::empty({C, 3 * C});  // [in, out]: the query, key and value columns side by side
    l.bqkv = Tensor::empty({3 * C});
    const char* qkv[] = {"attention.self.query", "attention.self.key", "attention.self.value"};
    for (int64_t j = 0; j < 3; ++j) {
      wqkv.slice(1, j * C, (j + 1) * C).copy_from(get(p + qkv[j] + ".weight").transpose(0, 1));
      l.bqkv.slice(0, j * C, (j + 1) * C).copy_from(get(p + qkv[j] + ".bias"));
    }
    l.qkv = ops::DenseMatrix::from_transposed(wqkv);
    l.o = ops::DenseMatrix::from_transposed(transposed(get(p + "attention.output.dense.weight")));
    l.bo = get(p + "attention.output.dense.bias");
    l.ln1_w = get(p + "attention.output.LayerNorm.weight");
    l.ln1_b = get(p + "attention.output.LayerNorm.bias");
    l.up = ops::DenseMatrix::from_transposed(transposed(get(p + "intermediate.dense.weight")));
    l.b1 = get(p + "intermediate.dense.bias");
    l.down = ops::DenseMatrix::from_transposed(transposed(get(p + "output.dense.weight")));
    l.b2 = get(p + "output.dense.bias");
    l.ln2_w = get(p + "output.LayerNorm.weight");
    l.ln2_b = get(p + "output.LayerNorm.bias");
    w_->layers.push_back(std::move(l));
    // The per-layer tensors are copied (transposed) now; drop the originals as we go.
    for (const auto& [n, s] : expected)
      if (n.rfind(p, 0) == 0) weights.tensors.erase(n);
  }
  // The quantized twins, when every matrix of every layer has its Q4_0 blocks (and the CPU runs the
  // 8-bit kernel: ops::DenseMatrix::add_quantized keeps none otherwise, those products being slower there
  // than f32's).
  if (weights.q4_0_blocks && C % ops::kQuantBlock == 0 && config_.intermediate_size % ops::kQuantBlock == 0)
    w_->quantized = add_quantized_twins(*w_, weights, what);
}

bool BertModel::has_quantized() const { return w_->quantized; }

BertModel::~BertModel() = default;
BertModel::BertModel(BertModel&&) noexcept = default;
BertModel& BertModel::operator=(BertModel&&) noexcept = default;

}  // namespace attn::models
