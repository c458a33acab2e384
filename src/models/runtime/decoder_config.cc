// DecoderConfig from a GGUF file's metadata: one table of what each architecture sets
// (include/attn/models/runtime/decoder.h).
#include <attn/core/error.h>
#include <attn/models/runtime/decoder.h>

#include <cctype>
#include <cmath>

namespace attn::models::runtime {

const std::vector<std::string>& decoder_architectures() {
  static const std::vector<std::string> archs = {"llama", "qwen2", "qwen3", "phi3", "gemma2", "gemma3"};
  return archs;
}

const char* load_quant_name(LoadQuant q) {
  switch (q) {
    case LoadQuant::q8_0:
      return "q8_0";
    case LoadQuant::q4_0:
      return "q4_0";
    default:
      return "none";
  }
}

LoadQuant parse_load_quant(const std::string& s) {
  for (LoadQuant q : {LoadQuant::none, LoadQuant::q8_0, LoadQuant::q4_0}) {
    std::string upper = load_quant_name(q);
    for (char& ch : upper) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
    if (s == load_quant_name(q) || (q != LoadQuant::none && s == upper)) return q;
  }
  throw Error(::attn::detail::concat("quantize: expected one of none, q8_0, q4_0; got '", s, "'"));
}

namespace {

std::string supported_list() {
  std::string s;
  for (const std::string& a : decoder_architectures()) s += (s.empty() ? "" : ", ") + a;
  return s;
}

// Windows of the sliding layers: gemma2 every other layer from 0, gemma3 all but every pattern-th,
// phi3 (and any other) every layer when the file sets a window.
std::vector<int64_t> layer_windows(const io::GgufFile& f, const std::string& arch, int64_t layers) {
  const std::string k = arch + ".attention.sliding_window";
  const int64_t w = f.has(k) ? f.get_int(k) : 0;
  ATTN_CHECK(w >= 0, f.path(), ": ", k, " is ", w, "; expected >= 0");
  std::vector<int64_t> out(static_cast<std::size_t>(layers), 0);
  if (w == 0) return out;
  int64_t pattern = 1;  // every layer
  if (arch == "gemma2") pattern = 2;
  if (arch == "gemma3") {
    const std::string pk = arch + ".attention.sliding_window_pattern";
    pattern = f.has(pk) ? f.get_positive(pk) : 6;
  }
  for (int64_t l = 0; l < layers; ++l)
    out[static_cast<std::size_t>(l)] = (pattern == 1 || (l + 1) % pattern != 0) ? w : 0;
  return out;
}

void read_rope_scaling(const io::GgufFile& f, const std::string& arch, DecoderConfig& c) {
  const std::string tk = arch + ".rope.scaling.type";
  const std::string type = f.has(tk) ? f.get_string(tk) : "none";
  const double factor = f.get_real(arch + ".rope.scaling.factor", 1.0);
  ATTN_CHECK(type == "none" || type == "linear" || (type == "yarn" && factor == 1.0), f.path(), ": ", tk,
             " '", type, "' is not supported (none, linear; Llama 3's scaling comes as rope_freqs.weight)");
  if (type == "linear") {
    ATTN_CHECK(std::isfinite(factor) && factor > 0, f.path(), ": ", arch, ".rope.scaling.factor is ", factor,
               "; expected > 0");
    c.rope_linear_factor = factor;
  }
}

}  // namespace

DecoderConfig DecoderConfig::from_gguf(const io::GgufFile& f) {
  ATTN_CHECK(f.has("general.architecture"), f.path(), ": missing 'general.architecture'");
  DecoderConfig c;
  c.arch = f.get_string("general.architecture");
  bool known = false;
  for (const std::string& a : decoder_architectures()) known = known || a == c.arch;
  ATTN_CHECK(known, f.path(), ": general.architecture '", c.arch,
             "' is not supported (supported: ", supported_list(), ")");
  const std::string& a = c.arch;
  const auto key = [&](const char* k) { return a + "." + k; };
  c.context = f.get_positive(key("context_length"));
  c.dim = f.get_positive(key("embedding_length"));
  c.layers = f.get_positive(key("block_count"));
  // Every layer has at least its norm and four attention and two FFN matrices (fused: qkv, gate-up).
  const auto tensors = static_cast<int64_t>(f.tensor_names().size());
  ATTN_CHECK(c.layers <= tensors / 4, f.path(), ": ", key("block_count"), " is ", c.layers,
             ", but the file holds ", tensors, " tensors (each layer needs at least 4)");
  c.ffn = f.get_positive(key("feed_forward_length"));
  c.heads = f.get_positive(key("attention.head_count"));
  c.kv_heads =
      f.has(key("attention.head_count_kv")) ? f.get_positive(key("attention.head_count_kv")) : c.heads;
  if (!f.has(key("attention.key_length")))
    ATTN_CHECK(c.dim % c.heads == 0, f.path(), ": ", key("embedding_length"), " ", c.dim,
               " is not a multiple of ", key("attention.head_count"), " ", c.heads, " (and no ",
               key("attention.key_length"), " gives the head size)");
  c.head_dim =
      f.has(key("attention.key_length")) ? f.get_positive(key("attention.key_length")) : c.dim / c.heads;
  if (f.has(key("attention.value_length")))
    ATTN_CHECK(f.get_positive(key("attention.value_length")) == c.head_dim, f.path(), ": ",
               key("attention.value_length"), " differs from the key length ", c.head_dim,
               "; only equal lengths are supported");
  const bool gemma = a == "gemma2" || a == "gemma3";
  c.norm_eps = f.get_real(key("attention.layer_norm_rms_epsilon"), gemma ? 1e-6 : 1e-5);
  c.rope_style = a == "llama" ? RopeStyle::pairs : RopeStyle::halves;
  c.rope_dims = f.has(key("rope.dimension_count")) ? f.get_positive(key("rope.dimension_count")) : c.head_dim;
  c.rope_base = f.get_real(key("rope.freq_base"), a == "gemma3" ? 1e6 : 10000.0);
  if (a == "gemma3") c.rope_base_local = f.get_real(key("rope.local.freq_base"), 10000.0);
  read_rope_scaling(f, a, c);
  c.windows = layer_windows(f, a, c.layers);
  c.attn_softcap = static_cast<float>(f.get_real(key("attn_logit_softcapping"), 0.0));
  c.final_softcap = static_cast<float>(f.get_real(key("final_logit_softcapping"), 0.0));
  if (gemma) {
    c.embed_scale = static_cast<float>(std::sqrt(static_cast<double>(c.dim)));
    c.activation = Activation::gelu_tanh;
    c.post_norms = true;
    const double qs = f.get_real(key("attention.query_pre_attn_scalar"), static_cast<double>(c.head_dim));
    ATTN_CHECK(std::isfinite(qs) && qs > 0, f.path(), ": ", key("attention.query_pre_attn_scalar"), " is ",
               qs, "; expected > 0");
    c.attn_scale = static_cast<float>(1.0 / std::sqrt(qs));
  }
  c.qk_norm = a == "qwen3" || a == "gemma3";
  c.qkv_bias = a == "qwen2";
  c.fused_qkv = c.fused_gate_up = a == "phi3";
  ATTN_CHECK(f.has("tokenizer.ggml.tokens"), f.path(), ": no tokenizer.ggml.tokens (the vocabulary)");
  c.vocab = static_cast<int64_t>(f.array_size("tokenizer.ggml.tokens"));
  try {
    c.validate();
  } catch (const Error& e) {
    throw Error(detail::concat(f.path(), ": ", e.what()));
  }
  return c;
}

void DecoderConfig::validate() const {
  ATTN_CHECK(vocab > 0 && context > 0 && dim > 0 && layers > 0 && ffn > 0 && heads > 0 && kv_heads > 0 &&
                 head_dim > 0,
             arch, " config: sizes must be > 0 (vocab ", vocab, ", context ", context, ", dim ", dim,
             ", layers ", layers, ", ffn ", ffn, ", heads ", heads, ", kv_heads ", kv_heads, ", head_dim ",
             head_dim, ")");
  ATTN_CHECK(heads % kv_heads == 0, arch, " config: ", arch, ".attention.head_count ", heads,
             " must be a multiple of head_count_kv ", kv_heads);
  ATTN_CHECK(rope_dims > 0 && rope_dims % 2 == 0 && rope_dims <= head_dim, arch,
             " config: rope.dimension_count ", rope_dims, " must be even and in [2, ", head_dim, "]");
  ATTN_CHECK(static_cast<int64_t>(windows.size()) == layers, arch, " config: ", windows.size(),
             " layer windows for ", layers, " layers");
  for (int64_t w : windows)
    ATTN_CHECK(w >= 0 && w <= context, arch, " config: ", arch, ".attention.sliding_window ", w,
               " must be in [0, context_length ", context, "]");
  for (double b : {rope_base, rope_base_local == 0 ? rope_base : rope_base_local})
    ATTN_CHECK(std::isfinite(b) && b > 0, arch, " config: rope.freq_base must be > 0, got ", b);
  ATTN_CHECK(std::isfinite(norm_eps) && norm_eps > 0, arch,
             " config: layer_norm_rms_epsilon must be > 0, got ", norm_eps);
  for (float s : {attn_softcap, final_softcap})
    ATTN_CHECK(std::isfinite(s) && s >= 0, arch, " config: a logit soft cap must be >= 0, got ", s);
  ATTN_CHECK(std::isfinite(attn_scale) && attn_scale >= 0, arch, " config: attention scale ", attn_scale);
}

}  // namespace attn::models::runtime
