// A runtime::Decoder from a Hugging Face folder (decoder_weights.h: read_hf_decoder): config.json and
// safetensors with transformers' tensor names.
#include <attn/core/error.h>
#include <attn/io/files.h>
#include <attn/io/finite.h>
#include <attn/io/json.h>
#include <attn/io/safetensors.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <numbers>
#include <set>

#include "decoder_weights.h"

namespace attn::models::runtime::detail {
namespace {

namespace fs = std::filesystem;

struct Cfg {
  const json::Value& v;
  std::string where;
  const json::Value* find(const char* k) const { return v.find(k); }
  bool has(const char* k) const {
    const json::Value* x = v.find(k);
    return x && !x->is_null();
  }
  int64_t positive(const char* k) const {
    ATTN_CHECK(has(k) && find(k)->is_integer() && find(k)->as_int64() > 0, where, ": \"", k,
               "\" must be a positive integer");
    return find(k)->as_int64();
  }
  int64_t positive_or(const char* k, int64_t fallback) const { return has(k) ? positive(k) : fallback; }
  double real_or(const char* k, double fallback) const {
    if (!has(k)) return fallback;
    ATTN_CHECK(find(k)->is_number(), where, ": \"", k, "\" must be a number");
    return find(k)->as_double();
  }
  bool flag_or(const char* k, bool fallback) const { return has(k) ? find(k)->as_bool() : fallback; }
};

// transformers 5 writes rope_parameters (for Gemma 3 per attention type); earlier versions rope_theta
// and rope_scaling.
const json::Value* rope_params(const Cfg& c, const char* kind) {
  const json::Value* p = c.find("rope_parameters");
  if (p && p->is_object() && kind) {
    if (const json::Value* k = p->find(kind); k && k->is_object()) return k;
  }
  if (p && p->is_object() && !p->find("full_attention")) return p;
  const json::Value* s = c.find("rope_scaling");
  return s && s->is_object() ? s : nullptr;
}

double num(const json::Value& o, const char* k, double fallback) {
  const json::Value* x = o.find(k);
  return x && x->is_number() ? x->as_double() : fallback;
}

// Llama 3's per-frequency divisors (transformers' _compute_llama3_parameters), as llama.cpp stores
// them in rope_freqs.weight.
std::vector<float> llama3_factors(const json::Value& p, double base, int64_t dims) {
  const double factor = num(p, "factor", 8), low = num(p, "low_freq_factor", 1),
               high = num(p, "high_freq_factor", 4);
  const double orig = num(p, "original_max_position_embeddings", 8192);
  const double low_wl = orig / low, high_wl = orig / high;
  std::vector<float> out;
  for (int64_t i = 0; i < dims / 2; ++i) {
    const double f = std::pow(base, -2.0 * static_cast<double>(i) / static_cast<double>(dims));
    const double wl = 2 * std::numbers::pi / f;
    if (wl < high_wl) {
      out.push_back(1.0f);
    } else if (wl > low_wl) {
      out.push_back(static_cast<float>(factor));
    } else {
      const double smooth = (orig / wl - low) / (high - low);
      out.push_back(static_cast<float>(f / ((1 - smooth) * f / factor + smooth * f)));
    }
  }
  return out;
}

DecoderConfig hf_config(const Cfg& j, std::vector<float>* rope_freqs) {
  ATTN_CHECK(j.has("model_type") && j.find("model_type")->is_string(), j.where, ": no \"model_type\"");
  const std::string type = j.find("model_type")->as_string();
  DecoderConfig c;
  if (type == "llama" || type == "mistral")
    c.arch = "llama";
  else if (type == "qwen2" || type == "qwen3" || type == "phi3" || type == "gemma2")
    c.arch = type;
  else if (type == "gemma3_text")
    c.arch = "gemma3";
  else
    throw Error(::attn::detail::concat(
        j.where, ": model_type \"", type,
        "\" is not supported (llama, mistral, qwen2, qwen3, phi3, gemma2, gemma3_text)"));
  c.vocab = j.positive("vocab_size");
  c.context = j.positive("max_position_embeddings");
  c.dim = j.positive("hidden_size");
  c.layers = j.positive("num_hidden_layers");
  c.ffn = j.positive("intermediate_size");
  c.heads = j.positive("num_attention_heads");
  c.kv_heads = j.positive_or("num_key_value_heads", c.heads);
  c.head_dim = j.positive_or("head_dim", c.dim / c.heads);
  const bool gemma = c.arch == "gemma2" || c.arch == "gemma3";
  c.norm_eps = j.real_or("rms_norm_eps", 1e-6);
  c.rope_style = RopeStyle::halves;  // transformers' rotate_half for every family
  c.rope_dims = c.head_dim;
  if (c.arch == "phi3")
    c.rope_dims = static_cast<int64_t>(std::lround(c.head_dim * j.real_or("partial_rotary_factor", 1.0)));
  const json::Value* rp = rope_params(j, gemma ? "full_attention" : nullptr);
  c.rope_base =
      rp ? num(*rp, "rope_theta", j.real_or("rope_theta", 10000.0)) : j.real_or("rope_theta", 10000.0);
  const std::string rtype =
      rp && rp->find("rope_type") && rp->find("rope_type")->is_string()
          ? rp->find("rope_type")->as_string()
          : (rp && rp->find("type") && rp->find("type")->is_string() ? rp->find("type")->as_string()
                                                                     : "default");
  if (rtype == "llama3")
    *rope_freqs = llama3_factors(*rp, c.rope_base, c.rope_dims);
  else if (rtype == "linear")
    c.rope_linear_factor = num(*rp, "factor", 1.0);
  else
    ATTN_CHECK(rtype == "default", j.where, ": rope type \"", rtype,
               "\" is not supported (default, linear, llama3)");
  if (c.arch == "gemma3") {
    const json::Value* lp = rope_params(j, "sliding_attention");
    c.rope_base_local =
        lp && lp != rp ? num(*lp, "rope_theta", 10000.0) : j.real_or("rope_local_base_freq", 10000.0);
  }
  // Sliding layers: layer_types when given (transformers 5), else each family's rule.
  c.windows.assign(static_cast<std::size_t>(c.layers), 0);
  const int64_t w = j.has("sliding_window") ? j.positive("sliding_window") : 0;
  const bool qwen_off = (c.arch == "qwen2" || c.arch == "qwen3") && !j.flag_or("use_sliding_window", false);
  if (w > 0 && !qwen_off && c.arch != "llama") {
    const json::Value* lt = j.find("layer_types");
    for (int64_t l = 0; l < c.layers; ++l) {
      bool sliding = true;
      if (lt && lt->is_array() && static_cast<int64_t>(lt->size()) == c.layers)
        sliding = lt->at(static_cast<std::size_t>(l)).as_string() == "sliding_attention";
      else if (c.arch == "gemma2")
        sliding = l % 2 == 0;
      else if (c.arch == "gemma3")
        sliding = (l + 1) % j.positive_or("sliding_window_pattern", 6) != 0;
      c.windows[static_cast<std::size_t>(l)] = sliding ? std::min(w, c.context) : 0;
    }
  }
  c.attn_softcap = static_cast<float>(j.real_or("attn_logit_softcapping", 0.0));
  c.final_softcap = static_cast<float>(j.real_or("final_logit_softcapping", 0.0));
  if (gemma) {
    c.embed_scale = static_cast<float>(std::sqrt(static_cast<double>(c.dim)));
    c.activation = Activation::gelu_tanh;
    c.post_norms = true;
    c.attn_scale = static_cast<float>(
        1.0 / std::sqrt(j.real_or("query_pre_attn_scalar", static_cast<double>(c.head_dim))));
  }
  c.qk_norm = c.arch == "qwen3" || c.arch == "gemma3";
  c.qkv_bias = c.arch == "qwen2" || j.flag_or("attention_bias", false);
  c.fused_qkv = c.fused_gate_up = c.arch == "phi3";
  try {
    c.validate();
  } catch (const Error& e) {
    throw Error(::attn::detail::concat(j.where, ": ", e.what()));
  }
  return c;
}

// Every tensor of the folder's safetensors files by name.
struct Shards {
  std::vector<io::SafeTensorsFile> files;
  std::map<std::string, std::size_t> where;

  explicit Shards(const std::string& folder) {
    const fs::path dir(folder);
    const fs::path index = dir / "model.safetensors.index.json";
    std::vector<std::string> names;
    if (fs::exists(index)) {
      const json::Value v = json::parse(io::read_file(index.string(), "safetensors index"));
      const json::Value* map = v.find("weight_map");
      ATTN_CHECK(map && map->is_object(), index.string(), ": no \"weight_map\" object");
      std::set<std::string> seen;
      for (const auto& [tensor, file] : map->members()) {
        ATTN_CHECK(file.is_string(), index.string(), ": weight_map[\"", tensor, "\"] must be a file name");
        const std::string f = file.as_string();
        ATTN_CHECK(f.find('/') == std::string::npos && f.find("..") == std::string::npos, index.string(),
                   ": shard name \"", f, "\" must be a file in the folder");
        if (seen.insert(f).second) names.push_back(f);
      }
    } else {
      ATTN_CHECK(fs::exists(dir / "model.safetensors"), folder,
                 ": neither model.safetensors nor model.safetensors.index.json");
      names.push_back("model.safetensors");
    }
    for (const std::string& n : names) {
      files.push_back(io::SafeTensorsFile::open((dir / n).string()));
      for (const std::string& t : files.back().names()) where[t] = files.size() - 1;
    }
  }
  bool has(const std::string& n) const { return where.count(n) != 0; }
  Tensor load(const std::string& n) const { return files[where.at(n)].load(n); }
  Shape shape(const std::string& n) const { return files[where.at(n)].info(n).shape; }
};

struct HfLoader {
  const Shards& st;
  const DecoderConfig& c;
  std::set<std::string> used;
  std::vector<std::string> problems;

  Tensor get(const std::string& name, const Shape& shape) {
    used.insert(name);
    if (!st.has(name)) {
      problems.push_back(name + ": missing (expected " + shape_str(shape) + ")");
      return Tensor();
    }
    if (st.shape(name) != shape) {
      problems.push_back(name + ": expected shape " + shape_str(shape) + ", got " +
                         shape_str(st.shape(name)));
      return Tensor();
    }
    Tensor t = st.load(name);
    io::check_finite(t, c.arch + ": tensor '" + name + "'");
    return t;
  }
  std::vector<float> vec(const std::string& name, int64_t n, float add = 0) {
    Tensor t = get(name, {n});
    if (!t.defined()) return {};
    std::vector<float> v(t.data<float>(), t.data<float>() + n);
    for (float& x : v) x += add;
    return v;
  }
  // Rows [row0, row0 + rows) of a [N, K] matrix; multiplied false: an embedding table read by rows only.
  ops::WeightMatrix mat(const std::string& name, int64_t N, int64_t K, int64_t row0 = 0, int64_t rows = 0,
                        bool multiplied = true) {
    Tensor t = get(name, {N, K});
    if (!t.defined()) return {};
    if (rows == 0) rows = N;
    const float* p = t.data<float>() + row0 * K;
    return ops::WeightMatrix::dense({p, static_cast<std::size_t>(rows * K)}, rows, K, multiplied);
  }
};

}  // namespace

HfDecoder read_hf_decoder(const std::string& folder) {
  const std::string cfg_path = (fs::path(folder) / "config.json").string();
  const json::Value v = json::parse(io::read_file(cfg_path, "model config"));
  ATTN_CHECK(v.is_object(), cfg_path, ": expected a JSON object");
  HfDecoder out;
  out.config = hf_config(Cfg{v, cfg_path}, &out.weights.rope_freqs);
  const DecoderConfig& c = out.config;
  const Shards st(folder);
  HfLoader ld{st, c, {}, {}};
  const bool gemma = c.arch == "gemma2" || c.arch == "gemma3";
  const float norm_add = gemma ? 1.0f : 0.0f;  // Gemma's RMSNorm multiplies by 1 + w
  const int64_t C = c.dim, F = c.ffn, QD = c.heads * c.head_dim, KD = c.kv_heads * c.head_dim, D = c.head_dim;
  DecoderWeights& w = out.weights;
  const json::Value* tie = v.find("tie_word_embeddings");
  const bool tied = tie && tie->is_bool() ? tie->as_bool() : !st.has("lm_head.weight");
  w.embed = ld.mat("model.embed_tokens.weight", c.vocab, C, 0, 0, tied);
  if (!tied) w.output = ld.mat("lm_head.weight", c.vocab, C);
  w.output_norm = ld.vec("model.norm.weight", C, norm_add);
  w.layers.resize(static_cast<std::size_t>(c.layers));
  for (int64_t l = 0; l < c.layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    DecoderLayer& y = w.layers[static_cast<std::size_t>(l)];
    y.attn_norm = ld.vec(p + "input_layernorm.weight", C, norm_add);
    if (c.fused_qkv) {
      y.wq = ld.mat(p + "self_attn.qkv_proj.weight", QD + 2 * KD, C, 0, QD);
      y.wk = ld.mat(p + "self_attn.qkv_proj.weight", QD + 2 * KD, C, QD, KD);
      y.wv = ld.mat(p + "self_attn.qkv_proj.weight", QD + 2 * KD, C, QD + KD, KD);
      y.gate = ld.mat(p + "mlp.gate_up_proj.weight", 2 * F, C, 0, F);
      y.up = ld.mat(p + "mlp.gate_up_proj.weight", 2 * F, C, F, F);
    } else {
      y.wq = ld.mat(p + "self_attn.q_proj.weight", QD, C);
      y.wk = ld.mat(p + "self_attn.k_proj.weight", KD, C);
      y.wv = ld.mat(p + "self_attn.v_proj.weight", KD, C);
      y.gate = ld.mat(p + "mlp.gate_proj.weight", F, C);
      y.up = ld.mat(p + "mlp.up_proj.weight", F, C);
    }
    if (c.qkv_bias) {
      y.bq = ld.vec(p + "self_attn.q_proj.bias", QD);
      y.bk = ld.vec(p + "self_attn.k_proj.bias", KD);
      y.bv = ld.vec(p + "self_attn.v_proj.bias", KD);
    }
    if (c.qk_norm) {
      y.q_norm = ld.vec(p + "self_attn.q_norm.weight", D, norm_add);
      y.k_norm = ld.vec(p + "self_attn.k_norm.weight", D, norm_add);
    }
    y.wo = ld.mat(p + "self_attn.o_proj.weight", C, QD);
    y.down = ld.mat(p + "mlp.down_proj.weight", C, F);
    if (gemma) {
      y.post_attn_norm = ld.vec(p + "post_attention_layernorm.weight", C, norm_add);
      y.ffn_norm = ld.vec(p + "pre_feedforward_layernorm.weight", C, norm_add);
      y.post_ffw_norm = ld.vec(p + "post_feedforward_layernorm.weight", C, norm_add);
    } else {
      y.ffn_norm = ld.vec(p + "post_attention_layernorm.weight", C);
    }
  }
  for (const auto& [name, file] : st.where)
    if (!ld.used.count(name)) ld.problems.push_back(name + ": unexpected tensor");
  if (!ld.problems.empty()) {
    std::string list;
    for (std::size_t i = 0; i < ld.problems.size() && i < 12; ++i) list += (i ? "; " : "") + ld.problems[i];
    if (ld.problems.size() > 12) list += "; ... (" + std::to_string(ld.problems.size() - 12) + " more)";
    throw Error(::attn::detail::concat(c.arch, ": ", folder, ": tensors do not match config.json: ", list));
  }
  return out;
}

}  // namespace attn::models::runtime::detail
