// Reading a runtime::Decoder's weights from GGUF (decoder_weights.h).
#include "decoder_weights.h"

#include <attn/core/error.h>
#include <attn/io/finite.h>

#include <cstring>
#include <set>
#include <sstream>

namespace attn::models::runtime::detail {
namespace {

using io::GgmlType;

struct Expected {
  std::string name;
  Shape shape;
  bool matrix;
};

std::vector<Expected> expected_tensors(const io::GgufFile& f, const DecoderConfig& c) {
  const int64_t C = c.dim, F = c.ffn, QD = c.heads * c.head_dim, KD = c.kv_heads * c.head_dim, D = c.head_dim;
  std::vector<Expected> e = {{"token_embd.weight", {c.vocab, C}, true}, {"output_norm.weight", {C}, false}};
  if (f.has_tensor("output.weight")) e.push_back({"output.weight", {c.vocab, C}, true});
  if (f.has_tensor("rope_freqs.weight")) e.push_back({"rope_freqs.weight", {c.rope_dims / 2}, false});
  for (int64_t l = 0; l < c.layers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    e.push_back({p + "attn_norm.weight", {C}, false});
    if (c.fused_qkv) {
      e.push_back({p + "attn_qkv.weight", {QD + 2 * KD, C}, true});
    } else {
      e.push_back({p + "attn_q.weight", {QD, C}, true});
      e.push_back({p + "attn_k.weight", {KD, C}, true});
      e.push_back({p + "attn_v.weight", {KD, C}, true});
    }
    if (c.qkv_bias) {
      e.push_back({p + "attn_q.bias", {QD}, false});
      e.push_back({p + "attn_k.bias", {KD}, false});
      e.push_back({p + "attn_v.bias", {KD}, false});
    }
    if (c.qk_norm) {
      e.push_back({p + "attn_q_norm.weight", {D}, false});
      e.push_back({p + "attn_k_norm.weight", {D}, false});
    }
    e.push_back({p + "attn_output.weight", {C, QD}, true});
    e.push_back({p + "ffn_norm.weight", {C}, false});
    if (c.fused_gate_up) {
      e.push_back({p + "ffn_up.weight", {2 * F, C}, true});
    } else {
      e.push_back({p + "ffn_gate.weight", {F, C}, true});
      e.push_back({p + "ffn_up.weight", {F, C}, true});
    }
    e.push_back({p + "ffn_down.weight", {C, F}, true});
    if (c.post_norms) {
      e.push_back({p + "post_attention_norm.weight", {C}, false});
      e.push_back({p + "post_ffw_norm.weight", {C}, false});
    }
  }
  return e;
}

bool dense_type(GgmlType t) { return t == GgmlType::F32 || t == GgmlType::F16 || t == GgmlType::BF16; }

bool matrix_type(GgmlType t, int64_t K) {
  ops::QuantFormat qf;
  if (ops::quant_format_of_ggml(static_cast<uint32_t>(t), &qf)) return K % ops::quant_block_elems(qf) == 0;
  return dense_type(t);
}

void check_tensors(const io::GgufFile& f, const DecoderConfig& c) {
  std::vector<std::string> problems;
  std::set<std::string> known;
  for (const Expected& e : expected_tensors(f, c)) {
    known.insert(e.name);
    if (!f.has_tensor(e.name)) {
      problems.push_back(e.name + ": missing (expected " + shape_str(e.shape) + ")");
      continue;
    }
    const io::GgufTensorInfo& t = f.tensor(e.name);
    if (t.shape != e.shape)
      problems.push_back(e.name + ": expected shape " + shape_str(e.shape) + " from the metadata, got " +
                         shape_str(t.shape));
    else if (e.matrix ? !matrix_type(t.type, e.shape[1]) : !dense_type(t.type))
      problems.push_back(
          e.name + ": type " + io::ggml_type_name(t.type) + " is not supported (" +
          (e.matrix ? "F32 F16 BF16 Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 Q4_K Q5_K Q6_K" : "F32 F16 BF16") + ")");
  }
  for (const std::string& n : f.tensor_names())
    if (!known.count(n)) problems.push_back(n + ": unexpected tensor");
  if (problems.empty()) return;
  std::ostringstream os;
  for (std::size_t i = 0; i < problems.size() && i < 12; ++i) os << (i ? "; " : "") << problems[i];
  if (problems.size() > 12) os << "; ... (" << problems.size() - 12 << " more)";
  throw Error(::attn::detail::concat(c.arch, ": ", f.path(), ": tensors do not match the metadata (",
                                     c.layers, " layers, dim ", c.dim, ", ffn ", c.ffn, ", heads ", c.heads,
                                     "/", c.kv_heads, " of ", c.head_dim, ", vocab ", c.vocab,
                                     "): ", os.str()));
}

// Byte offsets of the f16 scale fields in one block of a quantized type (a NaN or inf there is a
// non-finite weight).
std::vector<int64_t> scale_offsets(GgmlType t) {
  switch (t) {
    case GgmlType::Q4_1:
    case GgmlType::Q5_1:
    case GgmlType::Q4_K:
    case GgmlType::Q5_K:
      return {0, 2};
    case GgmlType::Q6_K:
      return {208};
    default:
      return {0};
  }
}

void check_block_scales(const io::GgufFile& f, const std::string& arch, const std::string& name) {
  const io::GgufTensorView v = f.view(name);
  const std::vector<int64_t> offs = scale_offsets(v.type);
  for (int64_t b = 0; b < v.n_blocks; ++b)
    for (int64_t o : offs) {
      uint16_t h;
      std::memcpy(&h, v.data + b * v.block_bytes + o, 2);
      ATTN_CHECK((h & 0x7c00) != 0x7c00, arch, ": ", f.path(), ": tensor '", name,
                 "' holds a non-finite value: a scale of quantized block ", b, " (flat indices ",
                 b * v.block_elems, "..", (b + 1) * v.block_elems - 1, ") is ", (h & 0x3ff) ? "nan" : "inf",
                 "; expected every value finite");
    }
}

struct Loader {
  const io::GgufFile& f;
  const DecoderConfig& c;

  std::vector<float> vec(const std::string& name) const {
    Tensor w = f.load(name);
    io::check_finite(w, c.arch + ": " + f.path() + ": tensor '" + name + "'");
    return std::vector<float>(w.data<float>(), w.data<float>() + w.numel());
  }

  // Rows [row0, row0 + rows) of a stored matrix (rows = 0: all): quantized blocks in place, else f32.
  // vocab: the matrix greedy picks read (kept in place where the picker screens it).
  ops::WeightMatrix mat(const std::string& name, int64_t row0 = 0, int64_t rows = 0,
                        const ops::GreedyPickOptions* vocab = nullptr) const {
    const io::GgufTensorInfo& t = f.tensor(name);
    const int64_t N = t.shape[0], K = t.shape[1];
    if (rows == 0) rows = N;
    ops::QuantFormat qf;
    if (ops::quant_format_of_ggml(static_cast<uint32_t>(t.type), &qf)) {
      if (row0 == 0) check_block_scales(f, c.arch, name);
      const io::GgufTensorView v = f.view(name);
      const int64_t row_bytes = K / ops::quant_block_elems(qf) * ops::quant_block_bytes(qf);
      const bool may_copy = !vocab || !ops::GreedyPicker::keeps_stored_blocks(qf, K, *vocab);
      ops::WeightMatrix m = ops::WeightMatrix::quantized(qf, v.data + row0 * row_bytes, rows, K, may_copy);
      // The products read the panels: the stored blocks' pages (read by the scale check and the
      // packing) go back to the file until a lookup reads a row again.
      if (m.has_panels()) f.release_pages(v.data + row0 * row_bytes, static_cast<uint64_t>(rows * row_bytes));
      return m;
    }
    Tensor w = f.load(name);
    io::check_finite(w, c.arch + ": " + f.path() + ": tensor '" + name + "'");
    const float* p = w.data<float>() + row0 * K;
    // The embedding table is multiplied only when it is also the output (tied); else row() reads it.
    const bool multiplied = name != "token_embd.weight" || vocab != nullptr;
    return ops::WeightMatrix::dense({p, static_cast<std::size_t>(rows * K)}, rows, K, multiplied);
  }
};

}  // namespace

DecoderWeights load_decoder_weights(const io::GgufFile& f, const DecoderConfig& c,
                                    const ops::GreedyPickOptions& greedy) {
  check_tensors(f, c);
  const Loader ld{f, c};
  DecoderWeights w;
  const bool tied = !f.has_tensor("output.weight");
  w.embed = ld.mat("token_embd.weight", 0, 0, tied ? &greedy : nullptr);
  if (!tied) w.output = ld.mat("output.weight", 0, 0, &greedy);
  w.output_norm = ld.vec("output_norm.weight");
  if (f.has_tensor("rope_freqs.weight")) w.rope_freqs = ld.vec("rope_freqs.weight");
  const int64_t QD = c.heads * c.head_dim, KD = c.kv_heads * c.head_dim;
  w.layers.resize(static_cast<std::size_t>(c.layers));
  for (int64_t l = 0; l < c.layers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    DecoderLayer& y = w.layers[static_cast<std::size_t>(l)];
    y.attn_norm = ld.vec(p + "attn_norm.weight");
    y.ffn_norm = ld.vec(p + "ffn_norm.weight");
    if (c.fused_qkv) {
      y.wq = ld.mat(p + "attn_qkv.weight", 0, QD);
      y.wk = ld.mat(p + "attn_qkv.weight", QD, KD);
      y.wv = ld.mat(p + "attn_qkv.weight", QD + KD, KD);
    } else {
      y.wq = ld.mat(p + "attn_q.weight");
      y.wk = ld.mat(p + "attn_k.weight");
      y.wv = ld.mat(p + "attn_v.weight");
    }
    if (c.qkv_bias) {
      y.bq = ld.vec(p + "attn_q.bias");
      y.bk = ld.vec(p + "attn_k.bias");
      y.bv = ld.vec(p + "attn_v.bias");
    }
    if (c.qk_norm) {
      y.q_norm = ld.vec(p + "attn_q_norm.weight");
      y.k_norm = ld.vec(p + "attn_k_norm.weight");
    }
    y.wo = ld.mat(p + "attn_output.weight");
    if (c.fused_gate_up) {
      y.gate = ld.mat(p + "ffn_up.weight", 0, c.ffn);
      y.up = ld.mat(p + "ffn_up.weight", c.ffn, c.ffn);
    } else {
      y.gate = ld.mat(p + "ffn_gate.weight");
      y.up = ld.mat(p + "ffn_up.weight");
    }
    y.down = ld.mat(p + "ffn_down.weight");
    if (c.post_norms) {
      y.post_attn_norm = ld.vec(p + "post_attention_norm.weight");
      y.post_ffw_norm = ld.vec(p + "post_ffw_norm.weight");
    }
  }
  return w;
}

void quantize_weights(DecoderWeights& w, LoadQuant quant) {
  if (quant == LoadQuant::none) return;
  const ops::QuantFormat f = quant == LoadQuant::q8_0 ? ops::QuantFormat::q8_0 : ops::QuantFormat::q4_0;
  const auto q = [f](ops::WeightMatrix& m) {
    if (m.empty() || m.is_quantized() || m.cols() % ops::kQuantBlock != 0) return;
    std::vector<float> values(static_cast<std::size_t>(m.rows() * m.cols()));
    m.rows_f32(0, m.rows(), values.data());
    m = ops::WeightMatrix::quantize(f, values.data(), m.rows(), m.cols());
  };
  q(w.output);  // empty when tied to the embeddings, which stay f32
  for (DecoderLayer& y : w.layers)
    for (ops::WeightMatrix* m : {&y.wq, &y.wk, &y.wv, &y.wo, &y.gate, &y.up, &y.down}) q(*m);
}

int64_t weight_bytes(const DecoderWeights& w) {
  const auto v = [](const std::vector<float>& x) { return static_cast<int64_t>(x.size() * sizeof(float)); };
  int64_t b = w.embed.weight_bytes() + w.output.weight_bytes() + v(w.output_norm) + v(w.rope_freqs);
  for (const DecoderLayer& y : w.layers) {
    for (const ops::WeightMatrix* m : {&y.wq, &y.wk, &y.wv, &y.wo, &y.gate, &y.up, &y.down})
      b += m->weight_bytes();
    for (const std::vector<float>* x : {&y.attn_norm, &y.q_norm, &y.k_norm, &y.post_attn_norm, &y.ffn_norm,
                                        &y.post_ffw_norm, &y.bq, &y.bk, &y.bv})
      b += v(*x);
  }
  return b;
}

}  // namespace attn::models::runtime::detail
