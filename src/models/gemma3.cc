// Gemma 3 from GGUF (include/attn/models/gemma3.h).
#include <attn/core/error.h>
#include <attn/core/f16.h>
#include <attn/core/parallel.h>
#include <attn/io/finite.h>
#include <attn/models/gemma3.h>
#include <attn/models/runtime/blocks.h>
#include <attn/models/runtime/decoder.h>
#include <attn/ops/geglu.h>
#include <attn/ops/kv_cache.h>
#include <attn/ops/linear.h>
#include <attn/ops/quantized.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <initializer_list>
#include <set>
#include <sstream>

namespace attn::models {
namespace {

const char* kArch = "gemma3";

std::string key(const char* k) { return std::string(kArch) + "." + k; }

// One weight matrix W [N, K]: stored blocks, or an f32 copy (F32 / F16 / BF16 files).
struct Mat {
  std::string name;
  int64_t N = 0, K = 0;
  bool quant = false;
  ops::QuantMatrix q;
  ops::QuantPanels panels;  // int8 panels for the prompt GEMM, made on the first prompt pass
  std::vector<float> f32;
};

struct Layer {
  std::vector<float> attn_norm, q_norm, k_norm, post_attn_norm, ffn_norm, post_ffw_norm;
  Mat wq, wk, wv, wo, gate, up, down;
};

struct Expected {
  std::string name;
  Shape shape;
  bool matrix;
};

std::vector<Expected> expected(const Gemma3Config& c) {
  const int64_t q = c.heads * c.head_dim, kv = c.kv_heads * c.head_dim;
  std::vector<Expected> e = {{"token_embd.weight", {c.vocab, c.dim}, true},
                             {"output_norm.weight", {c.dim}, false}};
  for (int64_t l = 0; l < c.layers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    e.push_back({p + "attn_norm.weight", {c.dim}, false});
    e.push_back({p + "attn_q.weight", {q, c.dim}, true});
    e.push_back({p + "attn_k.weight", {kv, c.dim}, true});
    e.push_back({p + "attn_v.weight", {kv, c.dim}, true});
    e.push_back({p + "attn_q_norm.weight", {c.head_dim}, false});
    e.push_back({p + "attn_k_norm.weight", {c.head_dim}, false});
    e.push_back({p + "attn_output.weight", {c.dim, q}, true});
    e.push_back({p + "post_attention_norm.weight", {c.dim}, false});
    e.push_back({p + "ffn_norm.weight", {c.dim}, false});
    e.push_back({p + "ffn_gate.weight", {c.ffn, c.dim}, true});
    e.push_back({p + "ffn_up.weight", {c.ffn, c.dim}, true});
    e.push_back({p + "ffn_down.weight", {c.dim, c.ffn}, true});
    e.push_back({p + "post_ffw_norm.weight", {c.dim}, false});
  }
  return e;
}

bool loadable(io::GgmlType t) {
  return t == io::GgmlType::F32 || t == io::GgmlType::F16 || t == io::GgmlType::BF16 ||
         ops::quant_format_of_ggml(static_cast<uint32_t>(t), nullptr);
}

void check_tensors(const io::GgufFile& f, const Gemma3Config& c) {
  std::vector<std::string> problems;
  std::set<std::string> known;
  for (const Expected& e : expected(c)) {
    known.insert(e.name);
    if (!f.has_tensor(e.name)) {
      problems.push_back(e.name + ": missing (expected " + shape_str(e.shape) + ")");
      continue;
    }
    const io::GgufTensorInfo& t = f.tensor(e.name);
    if (t.shape != e.shape)
      problems.push_back(e.name + ": expected shape " + shape_str(e.shape) + " from the metadata, got " +
                         shape_str(t.shape));
    else if (!loadable(t.type) || (!e.matrix && !io::ggml_can_dequantize(t.type)))
      problems.push_back(e.name + ": type " + io::ggml_type_name(t.type) + " (id " +
                         std::to_string(static_cast<uint32_t>(t.type)) +
                         ") is not supported (F32 F16 BF16 Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 Q4_K Q5_K Q6_K)");
  }
  if (f.has_tensor("output.weight")) {
    known.insert("output.weight");
    const io::GgufTensorInfo& t = f.tensor("output.weight");
    if (t.shape != Shape{c.vocab, c.dim})
      problems.push_back("output.weight: expected shape " + shape_str({c.vocab, c.dim}) + ", got " +
                         shape_str(t.shape));
  }
  for (const std::string& n : f.tensor_names())
    if (!known.count(n)) problems.push_back(n + ": unexpected tensor");
  if (problems.empty()) return;
  std::ostringstream os;
  for (std::size_t i = 0; i < problems.size() && i < 12; ++i) os << (i ? "; " : "") << problems[i];
  if (problems.size() > 12) os << "; ... (" << problems.size() - 12 << " more)";
  throw Error(detail::concat("gemma3: ", f.path(), ": tensors do not match the metadata (", c.layers,
                             " layers, dim ", c.dim, ", ffn ", c.ffn, ", heads ", c.heads, "/", c.kv_heads,
                             " of ", c.head_dim, ", vocab ", c.vocab, "): ", os.str()));
}

// The runtime's shared RMSNorm (runtime/blocks.h): the same sums as the decoder's.
using runtime::rms_norm_rows;

// Rows [0, rows) through fn(b, e): split over the pool when there are enough rows to repay a parallel
// region (prompt passes), else on the calling thread (decode steps). Row-wise work only, so the values do
// not depend on the split (g19c: at 2 threads the norms, RoPE, residuals and GeGLU of a 512-token pass
// were serial, ~15% of the pass).
template <class F>
void rows_for(int64_t rows, int64_t grain, F&& fn) {
  if (rows >= 2 * grain && num_threads() > 1)
    parallel_for(rows, grain, [&](int64_t b, int64_t e, int) { fn(b, e); });
  else
    fn(0, rows);
}

// The residual step of a block on rows [b, e): t = norm(t)·wt; x += t; then, when wn is given,
// out = norm(x)·wn (the next norm of the same rows, while they are in cache).
void post_norm_residual(float* x, float* t, const float* wt, const float* wn, int64_t b, int64_t e, int64_t n,
                        double eps, float* out) {
  rms_norm_rows(t + b * n, wt, e - b, n, eps, t + b * n);
  for (int64_t i = b * n; i < e * n; ++i) x[i] += t[i];
  if (wn) rms_norm_rows(x + b * n, wn, e - b, n, eps, out + b * n);
}

}  // namespace

// ---------------------------------------------------------------- config

Gemma3Config Gemma3Config::from_gguf(const io::GgufFile& f) {
  ATTN_CHECK(f.has("general.architecture"), "gemma3: ", f.path(), ": missing 'general.architecture'");
  const std::string arch = f.get_string("general.architecture");
  ATTN_CHECK(arch == kArch, "gemma3: ", f.path(), ": architecture '", arch, "'; expected 'gemma3'");
  Gemma3Config c;
  c.context = f.get_positive(key("context_length"));
  c.dim = f.get_positive(key("embedding_length"));
  c.layers = f.get_positive(key("block_count"));
  const int64_t stored = static_cast<int64_t>(f.tensor_names().size());
  ATTN_CHECK(c.layers <= stored / 13, "gemma3: ", f.path(), ": ", key("block_count"), " is ", c.layers,
             " but the file holds ", stored, " tensors (13 per block)");
  c.ffn = f.get_positive(key("feed_forward_length"));
  c.heads = f.get_positive(key("attention.head_count"));
  c.kv_heads =
      f.has(key("attention.head_count_kv")) ? f.get_positive(key("attention.head_count_kv")) : c.heads;
  c.head_dim =
      f.has(key("attention.key_length")) ? f.get_positive(key("attention.key_length")) : c.dim / c.heads;
  if (f.has(key("attention.value_length"))) {
    const int64_t vl = f.get_positive(key("attention.value_length"));
    ATTN_CHECK(vl == c.head_dim, "gemma3: ", f.path(), ": ", key("attention.value_length"), " ", vl,
               " differs from ", key("attention.key_length"), " ", c.head_dim,
               "; only equal lengths are supported");
  }
  c.rms_eps = f.get_real(key("attention.layer_norm_rms_epsilon"), 1e-6);
  c.rope_global = f.get_real(key("rope.freq_base"), 1e6);
  c.rope_local = f.get_real(key("rope.local.freq_base"), 10000.0);
  c.window = f.has(key("attention.sliding_window")) ? f.get_positive(key("attention.sliding_window")) : 0;
  c.pattern = f.has(key("attention.sliding_window_pattern"))
                  ? f.get_positive(key("attention.sliding_window_pattern"))
                  : 6;
  c.query_scalar = f.get_real(key("attention.query_pre_attn_scalar"), static_cast<double>(c.head_dim));
  c.final_softcap = f.get_real(key("final_logit_softcapping"), 0.0);
  c.attn_softcap = f.get_real(key("attn_logit_softcapping"), 0.0);
  ATTN_CHECK(f.has("tokenizer.ggml.tokens"), "gemma3: ", f.path(), ": no tokenizer.ggml.tokens");
  c.vocab = static_cast<int64_t>(f.array_size("tokenizer.ggml.tokens"));
  ATTN_CHECK(!f.has(key("rope.scaling.type")) || f.get_string(key("rope.scaling.type")) == "none" ||
                 f.get_string(key("rope.scaling.type")) == "linear",
             "gemma3: ", f.path(), ": RoPE scaling '", f.get_string(key("rope.scaling.type")),
             "' is not supported");
  ATTN_CHECK(!f.has(key("rope.scaling.factor")) || f.get_real(key("rope.scaling.factor"), 1.0) == 1.0,
             "gemma3: ", f.path(), ": ", key("rope.scaling.factor"), " ",
             f.get_real(key("rope.scaling.factor"), 1.0), " is not supported (only 1)");
  try {
    c.validate();
  } catch (const Error& e) {
    throw Error(detail::concat(f.path(), ": ", e.what()));
  }
  return c;
}

void Gemma3Config::validate() const {
  ATTN_CHECK(vocab > 0 && context > 0 && dim > 0 && layers > 0 && ffn > 0 && heads > 0 && kv_heads > 0 &&
                 head_dim > 0,
             "gemma3 config: sizes must be > 0 (vocab ", vocab, ", context ", context, ", dim ", dim,
             ", layers ", layers, ", ffn ", ffn, ", heads ", heads, ", kv_heads ", kv_heads, ", head_dim ",
             head_dim, ")");
  ATTN_CHECK(heads % kv_heads == 0, "gemma3 config: gemma3.attention.head_count ", heads,
             " must be a multiple of gemma3.attention.head_count_kv ", kv_heads);
  ATTN_CHECK(head_dim % 2 == 0, "gemma3 config: gemma3.attention.key_length must be even for RoPE, got ",
             head_dim);
  ATTN_CHECK(window <= context, "gemma3 config: gemma3.attention.sliding_window ", window,
             " is larger than gemma3.context_length ", context);
  ATTN_CHECK(pattern >= 1, "gemma3 config: sliding_window_pattern must be >= 1, got ", pattern);
  for (double b : {rope_global, rope_local})
    ATTN_CHECK(std::isfinite(b) && b > 0, "gemma3 config: gemma3.rope.freq_base must be > 0, got ", b);
  ATTN_CHECK(std::isfinite(rms_eps) && rms_eps > 0, "gemma3 config: layer_norm_rms_epsilon must be > 0, got ",
             rms_eps);
  ATTN_CHECK(std::isfinite(query_scalar) && query_scalar > 0,
             "gemma3 config: query_pre_attn_scalar must be > 0, got ", query_scalar);
}

// ---------------------------------------------------------------- model

// Prompt passes of at least this many tokens run a GEMM: the 8-bit one (ops::quant_matmul) or, without
// it, each matrix unpacked to f32 for ops::gemm.
constexpr int64_t kGemmMinRows = 16;
constexpr int64_t kMaxKvCacheBytes = int64_t{16} << 30;

struct Gemma3Model::Impl {
  io::GgufFile file;
  Gemma3Config c;
  text::SpmTokenizer tok;
  int64_t cap = 0;
  AttentionLayerTrace* trace = nullptr;  // layer_trace(): the layer whose buffers forward() copies out
  bool full_cache = false;
  int64_t int8_rows = 0;
  bool int8_gemm = false;
  bool kv_f16 = false;
  bool screen_on = false;  // greedy calls use `screen` (built at the screen_after-th call)
  int64_t screen_after = 0, greedy_calls = 0;
  ops::GreedyScreen screen;
  int64_t last_candidates = 0;
  ops::QuantActivations act;
  Mat embed, output;
  std::vector<float> output_norm;
  std::vector<Layer> layers;
  std::vector<ops::KvCache> caches;
  int64_t pos = 0;

  std::vector<float> x, n, q, k, v, att, tmp, g, u, wtmp, logits, last, scores;

  explicit Impl(io::GgufFile f) : file(std::move(f)) {}
  // The greedy pick after forward(..., logits_out = false): the screen when it applies, else every
  // logit (the product and soft-capping of forward) and the first maximum.
  int32_t greedy();

  Mat& out_mat() { return output.N ? output : embed; }

  void load_mat(Mat& m, const std::string& name) {
    const io::GgufTensorInfo& t = file.tensor(name);
    m.name = name;
    m.N = t.shape[0];
    m.K = t.shape[1];
    ops::QuantFormat qf;
    if (ops::quant_format_of_ggml(static_cast<uint32_t>(t.type), &qf) &&
        m.K % ops::quant_block_elems(qf) == 0) {
      m.quant = true;
      m.q = ops::QuantMatrix(qf, file.view(name).data, m.N, m.K);
    } else {
      Tensor w = file.load(name);
      m.f32.assign(w.data<float>(), w.data<float>() + w.numel());
      io::check_finite(m.f32.data(), static_cast<int64_t>(m.f32.size()),
                       "gemma3: " + file.path() + ": tensor '" + name + "'");
    }
  }

  std::vector<float> load_vec(const std::string& name) {
    Tensor w = file.load(name);
    io::check_finite(w, "gemma3: " + file.path() + ": tensor '" + name + "'");
    return std::vector<float>(w.data<float>(), w.data<float>() + w.numel());
  }

  // Whether a pass of L tokens runs the 8-bit GEMM (ops::quant_matmul) on a quantized matrix.
  bool int8_gemm_for(int64_t L) const { return L >= kGemmMinRows && int8_rows > 0 && int8_gemm; }
  // w's int8 panels for that GEMM, made on its first prompt pass.
  static const ops::QuantPanels& panels_of(Mat& w) {
    if (w.panels.empty()) w.panels = ops::QuantPanels(w.q);
    return w.panels;
  }

  // Y [L, N] (row stride ldy) = X [L, K] · Wᵀ
  void matmul(Mat& w, const float* X, int64_t L, float* Y, int64_t ldy) {
    const int64_t N = w.N, K = w.K;
    if (!w.quant) {
      ops::gemm(false, true, L, N, K, 1.0f, X, K, w.f32.data(), K, 0.0f, Y, ldy);
      return;
    }
    if (L < int8_rows && ops::quant_dot_supported(w.q.format())) {
      act.quantize(w.q.format(), X, L, K, K);
      const int64_t g8 = std::max<int64_t>(8, 65536 / std::max<int64_t>(1, K * L));
      parallel_for(N, g8,
                   [&](int64_t b, int64_t e, int) { ops::quant_dot_rows(w.q, b, e, act, Y, ldy, false); });
      return;
    }
    if (int8_gemm_for(L) && ops::quant_dot_supported(w.q.format())) {
      act.quantize(w.q.format(), X, L, K, K);
      ops::quant_matmul(panels_of(w), act, Y, ldy, false);
      return;
    }
    if (L >= kGemmMinRows) {
      wtmp.resize(static_cast<std::size_t>(N * K));
      parallel_for(
          N, 64, [&](int64_t b, int64_t e, int) { ops::quant_unpack_rows(w.q, b, e, wtmp.data() + b * K); });
      ops::gemm(false, true, L, N, K, 1.0f, X, K, wtmp.data(), K, 0.0f, Y, ldy);
      return;
    }
    const int64_t grain = std::max<int64_t>(8, 65536 / std::max<int64_t>(1, K * L));
    parallel_for(N, grain, [&](int64_t b, int64_t e, int) {
      ops::quant_linear_rows(w.q, b, e, X, L, K, Y, ldy, false);
    });
  }

  // Several products of the same X [L, K] (q, k, v; gate, up): the activations quantized once and, for
  // the 8-bit decode products, the rows of all of them split over one parallel region (a region costs
  // a wake-up of the pool's threads: decode runs ~150 a token).
  struct Out {
    Mat* w;
    float* y;
    int64_t ldy;
  };
  void matmul_same_x(std::initializer_list<Out> outs, const float* X, int64_t L) {
    const Mat& w0 = *outs.begin()->w;
    bool shared = w0.quant && ops::quant_dot_supported(w0.q.format());
    for (const Out& o : outs)
      shared = shared && o.w->quant && ops::quant_dot_supported(o.w->q.format()) && o.w->K == w0.K &&
               ops::quant_dot_same_activations(o.w->q.format(), w0.q.format());
    const bool dot = L < int8_rows, gemm = int8_gemm_for(L);
    if (!shared || !(dot || gemm)) {
      for (const Out& o : outs) matmul(*o.w, X, L, o.y, o.ldy);
      return;
    }
    const int64_t K = w0.K;
    act.quantize(w0.q.format(), X, L, K, K);
    if (gemm) {
      for (const Out& o : outs) ops::quant_matmul(panels_of(*o.w), act, o.y, o.ldy, false);
      return;
    }
    int64_t total = 0;
    for (const Out& o : outs) total += o.w->N;
    const int64_t g8 = std::max<int64_t>(8, 65536 / std::max<int64_t>(1, K * L));
    parallel_for(total, g8, [&](int64_t b, int64_t e, int) {
      int64_t base = 0;
      for (const Out& o : outs) {
        const int64_t lo = std::max(b, base), hi = std::min(e, base + o.w->N);
        if (lo < hi) ops::quant_dot_rows(o.w->q, lo - base, hi - base, act, o.y, o.ldy, false);
        base += o.w->N;
      }
    });
  }

  void embed_rows(std::span<const int32_t> ids, float* out) {
    const int64_t C = c.dim;
    const float s = std::sqrt(static_cast<float>(C));
    for (std::size_t i = 0; i < ids.size(); ++i) {
      float* o = out + i * C;
      if (embed.quant)
        ops::quant_unpack_rows(embed.q, ids[i], ids[i] + 1, o);
      else
        std::memcpy(o, embed.f32.data() + ids[i] * C, C * sizeof(float));
      for (int64_t j = 0; j < C; ++j) o[j] *= s;
    }
  }

  // cos / sin of positions [pos0, pos0 + L) for one RoPE base, [L, D/2] each: made once per forward
  // pass and base (two bases), not per layer and tensor.
  struct RopeTable {
    double base = 0;
    int64_t pos0 = -1, L = 0;
    std::vector<float> cs, sn;
  };
  RopeTable rope_tables[2];

  const RopeTable& rope_table(int64_t L, int64_t pos0, double base) {
    RopeTable& t = rope_tables[base == c.rope_global ? 0 : 1];
    if (t.base == base && t.pos0 == pos0 && t.L == L) return t;
    const int64_t D = c.head_dim, half = D / 2;
    t.base = base, t.pos0 = pos0, t.L = L;
    t.cs.resize(L * half), t.sn.resize(L * half);
    std::vector<double> inv(half);
    for (int64_t j = 0; j < half; ++j) inv[j] = std::pow(base, -2.0 * static_cast<double>(j) / D);
    for (int64_t i = 0; i < L; ++i)
      for (int64_t j = 0; j < half; ++j) {
        const double theta = static_cast<double>(pos0 + i) * inv[j];
        t.cs[i * half + j] = static_cast<float>(std::cos(theta));
        t.sn[i * half + j] = static_cast<float>(std::sin(theta));
      }
    return t;
  }

  // NeoX RoPE on rows [L, heads, D] at positions pos0 + i.
  // Rows [i0, i1) of the L (default all); when rows are split over threads, rope_table(L, pos0, base)
  // is called before (a call here then only reads the cached table).
  void rope(float* t, int64_t L, int64_t heads, int64_t pos0, double base, int64_t i0 = 0, int64_t i1 = -1) {
    const int64_t D = c.head_dim, half = D / 2;
    const RopeTable& tab = rope_table(L, pos0, base);
    for (int64_t i = i0; i < (i1 < 0 ? L : i1); ++i) {
      const float* cs = tab.cs.data() + i * half;
      const float* sn = tab.sn.data() + i * half;
      for (int64_t h = 0; h < heads; ++h) {
        float* r = t + (i * heads + h) * D;
        for (int64_t j = 0; j < half; ++j) {
          const float a = r[j], b = r[j + half];
          r[j] = a * cs[j] - b * sn[j];
          r[j + half] = a * sn[j] + b * cs[j];
        }
      }
    }
  }

  void forward(std::span<const int32_t> ids, std::vector<std::vector<float>>* capture,
               bool logits_out = true) {
    const int64_t L = static_cast<int64_t>(ids.size());
    ATTN_CHECK(L > 0, "gemma3: no tokens to run");
    ATTN_CHECK(pos + L <= cap, "gemma3: sequence of ", pos + L, " tokens (", pos, " cached + ", L,
               " new) exceeds the context of ", cap, " tokens", cap < c.context ? " (--max-context)" : "");
    for (int64_t i = 0; i < L; ++i)
      ATTN_CHECK(ids[i] >= 0 && ids[i] < c.vocab, "gemma3: token id ", ids[i], " at ", i,
                 " is out of range [0, ", c.vocab, ")");
    if (caches.empty()) {
      for (int64_t l = 0; l < c.layers; ++l) {
        const int64_t w = (c.sliding(l) && c.window < cap) ? c.window : 0;
        caches.emplace_back(c.kv_heads, c.head_dim, cap, w, !full_cache);
      }
    }
    const int64_t C = c.dim, F = c.ffn, H = c.heads, Hkv = c.kv_heads, D = c.head_dim;
    const int64_t QD = H * D, KD = Hkv * D, G = H / Hkv;
    x.resize(L * C), n.resize(L * std::max(C, QD)), tmp.resize(L * C), q.resize(L * QD), k.resize(L * KD),
        v.resize(L * KD), att.resize(L * QD), g.resize(L * F), u.resize(L * F);
    embed_rows(ids, x.data());
    const float scale = static_cast<float>(1.0 / std::sqrt(c.query_scalar));
    for (int64_t l = 0; l < c.layers; ++l) {
      Layer& ly = layers[l];
      if (l == 0)
        rows_for(L, 16, [&](int64_t b, int64_t e) {
          rms_norm_rows(x.data() + b * C, ly.attn_norm.data(), e - b, C, c.rms_eps, n.data() + b * C);
        });
      matmul_same_x({{&ly.wq, q.data(), QD}, {&ly.wk, k.data(), KD}, {&ly.wv, v.data(), KD}}, n.data(), L);
      rope_table(L, pos, c.rope_base(l));  // built here: the threads below only read it
      rows_for(L, 16, [&](int64_t b, int64_t e) {
        rms_norm_rows(q.data() + b * QD, ly.q_norm.data(), (e - b) * H, D, c.rms_eps, q.data() + b * QD);
        rms_norm_rows(k.data() + b * KD, ly.k_norm.data(), (e - b) * Hkv, D, c.rms_eps, k.data() + b * KD);
        rope(q.data(), L, H, pos, c.rope_base(l), b, e);
        rope(k.data(), L, Hkv, pos, c.rope_base(l), b, e);
      });
      if (kv_f16) {  // as llama.cpp's f16 cache (rounding q too measured further from it: 5 of 16)
        for (int64_t i = 0; i < L * KD; ++i) k[i] = round_to_f16(k[i]), v[i] = round_to_f16(v[i]);
      }
      const bool traced = trace && trace->layer == l;
      if (traced) {
        trace->x.assign(x.data(), x.data() + L * C);
        trace->normed.assign(n.data(), n.data() + L * C);
        trace->q.assign(q.data(), q.data() + L * QD);
        trace->k.assign(k.data(), k.data() + L * KD);
        trace->v.assign(v.data(), v.data() + L * KD);
      }
      ops::KvCache& kc = caches[l];
      if (L == 1 && !capture) {
        kc.append(k.data(), v.data(), 1);
        scores.resize(static_cast<std::size_t>(kc.slots()) * H);
        parallel_for(H, 1, [&](int64_t b, int64_t e, int) {
          for (int64_t h = b; h < e; ++h)
            ops::cached_decode_attention(kc, h / G, q.data() + h * D, 1, scale,
                                         scores.data() + h * kc.slots(), att.data() + h * D);
        });
      } else {
        std::vector<float> w;
        ops::cached_prompt_attention(kc, q.data(), k.data(), v.data(), L, H, scale, att.data(),
                                     capture ? &w : nullptr);
        if (capture) capture->push_back(std::move(w));
      }
      matmul(ly.wo, att.data(), L, tmp.data(), C);
      if (traced) {
        trace->att.assign(att.data(), att.data() + L * QD);
        trace->o.assign(tmp.data(), tmp.data() + L * C);
        trace->weights = capture->back();
      }
      rows_for(L, 16, [&](int64_t b, int64_t e) {
        post_norm_residual(x.data(), tmp.data(), ly.post_attn_norm.data(), ly.ffn_norm.data(), b, e, C,
                           c.rms_eps, n.data());
      });
      if (traced) {
        trace->x_after.assign(x.data(), x.data() + L * C);
        trace->normed_after.assign(n.data(), n.data() + L * C);
      }
      matmul_same_x({{&ly.gate, g.data(), F}, {&ly.up, u.data(), F}}, n.data(), L);
      rows_for(L, 16, [&](int64_t b, int64_t e) {
        ops::geglu_tanh(g.data() + b * F, u.data() + b * F, (e - b) * F);
      });
      matmul(ly.down, g.data(), L, tmp.data(), C);
      // the residual, then the next layer's attention norm of the same rows
      const float* next_norm = l + 1 < c.layers ? layers[l + 1].attn_norm.data() : nullptr;
      rows_for(L, 16, [&](int64_t b, int64_t e) {
        post_norm_residual(x.data(), tmp.data(), ly.post_ffw_norm.data(), next_norm, b, e, C, c.rms_eps,
                           n.data());
      });
    }
    pos += L;
    last.resize(C);
    rms_norm_rows(x.data() + (L - 1) * C, output_norm.data(), 1, C, c.rms_eps, last.data());
    if (!logits_out) return;
    logits.resize(c.vocab);
    matmul(out_mat(), last.data(), 1, logits.data(), c.vocab);
    if (c.final_softcap > 0) {
      const float cap_v = static_cast<float>(c.final_softcap);
      for (float& z : logits) z = cap_v * std::tanh(z / cap_v);
    }
  }

  // The runtime's batched step runs on the runtime's decoder for this file, made on first use.
  std::unique_ptr<runtime::Decoder> dec;
  runtime::Decoder& decoder() {
    if (!dec) {
      runtime::DecoderOptions o;
      o.max_context = cap;
      o.activations_8bit = int8_rows > 0;  // Gemma3Options::int8_max_rows = 0: f32 activations
      dec = runtime::Decoder::load(file, o);
    }
    return *dec;
  }
};

int64_t Gemma3Model::batch_vocab() const { return impl_->c.vocab; }
int64_t Gemma3Model::batch_context() const { return impl_->cap; }
runtime::KvCacheConfig Gemma3Model::kv_layout() const {
  const Gemma3Config& c = impl_->c;
  runtime::KvCacheConfig k;
  k.layers = c.layers;
  k.kv_heads = c.kv_heads;
  k.head_dim = c.head_dim;
  for (int64_t l = 0; l < c.layers; ++l) k.layer_windows.push_back(c.sliding(l) ? c.window : 0);
  return k;
}
void Gemma3Model::forward_batch(runtime::PagedKvCache& cache, std::span<const runtime::BatchEntry> batch) {
  impl_->decoder().forward_batch(cache, batch);
}

Gemma3Model::Gemma3Model(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Gemma3Model::Gemma3Model(Gemma3Model&&) noexcept = default;
Gemma3Model& Gemma3Model::operator=(Gemma3Model&&) noexcept = default;
Gemma3Model::~Gemma3Model() = default;

Gemma3Model Gemma3Model::load(const std::string& path, const Gemma3Options& options) {
  auto impl = std::make_unique<Impl>(io::GgufFile::open(path));
  Impl& m = *impl;
  m.c = Gemma3Config::from_gguf(m.file);
  ATTN_CHECK(options.max_context >= 0, "gemma3: max_context must be >= 0, got ", options.max_context);
  m.cap = options.max_context ? std::min(options.max_context, m.c.context) : m.c.context;
  m.full_cache = options.full_kv_cache;
  ATTN_CHECK(options.int8_max_rows >= 0, "gemma3: int8_max_rows must be >= 0, got ", options.int8_max_rows);
  m.int8_rows = ops::quant_dot_fast() ? options.int8_max_rows : 0;
  m.int8_gemm = ops::quant_dot_fast() && options.int8_gemm;
  m.kv_f16 = options.kv_f16;
  {
    std::vector<int64_t> windows;
    for (int64_t l = 0; l < m.c.layers; ++l)
      windows.push_back(!m.full_cache && m.c.sliding(l) ? m.c.window : 0);
    const int64_t bytes = ops::kv_cache_bytes(windows, m.c.kv_heads, m.c.head_dim, m.cap);
    ATTN_CHECK(bytes <= kMaxKvCacheBytes, "gemma3: ", path, ": a KV cache of ", m.cap, " tokens would take ",
               static_cast<double>(bytes) / (1 << 30),
               " GiB; at most 16 GiB: give a smaller max_context (--max-context)");
  }
  check_tensors(m.file, m.c);
  m.tok = text::SpmTokenizer::from_gguf(m.file);
  m.load_mat(m.embed, "token_embd.weight");
  if (m.file.has_tensor("output.weight")) m.load_mat(m.output, "output.weight");
  m.output_norm = m.load_vec("output_norm.weight");
  m.layers.resize(m.c.layers);
  for (int64_t l = 0; l < m.c.layers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    Layer& ly = m.layers[l];
    ly.attn_norm = m.load_vec(p + "attn_norm.weight");
    ly.q_norm = m.load_vec(p + "attn_q_norm.weight");
    ly.k_norm = m.load_vec(p + "attn_k_norm.weight");
    ly.post_attn_norm = m.load_vec(p + "post_attention_norm.weight");
    ly.ffn_norm = m.load_vec(p + "ffn_norm.weight");
    ly.post_ffw_norm = m.load_vec(p + "post_ffw_norm.weight");
    m.load_mat(ly.wq, p + "attn_q.weight");
    m.load_mat(ly.wk, p + "attn_k.weight");
    m.load_mat(ly.wv, p + "attn_v.weight");
    m.load_mat(ly.wo, p + "attn_output.weight");
    m.load_mat(ly.gate, p + "ffn_gate.weight");
    m.load_mat(ly.up, p + "ffn_up.weight");
    m.load_mat(ly.down, p + "ffn_down.weight");
  }
  ATTN_CHECK(options.greedy_screen_after >= 0, "gemma3: greedy_screen_after must be >= 0, got ",
             options.greedy_screen_after);
  m.screen_after = options.greedy_screen_after;
  {
    const Mat& o = m.out_mat();
    m.screen_on = options.greedy_screen && ops::greedy_screen_fast() && o.quant &&
                  o.q.format() == ops::QuantFormat::q8_0 && o.K % 64 == 0 && o.K <= 4096 &&
                  m.int8_rows >= 2 && m.c.final_softcap <= 0;
  }
  return Gemma3Model(std::move(impl));
}

const Gemma3Config& Gemma3Model::config() const { return impl_->c; }
const text::SpmTokenizer& Gemma3Model::tokenizer() const { return impl_->tok; }
int64_t Gemma3Model::capacity() const { return impl_->cap; }
int64_t Gemma3Model::kv_cache_bytes() const {
  int64_t b = 0;
  for (const ops::KvCache& c : impl_->caches) b += c.bytes();
  return b;
}
void Gemma3Model::clear() {
  impl_->pos = 0;
  for (ops::KvCache& c : impl_->caches) c.clear();
}
int64_t Gemma3Model::position() const { return impl_->pos; }

std::span<const float> Gemma3Model::prefill(std::span<const int32_t> ids) {
  impl_->forward(ids, nullptr);
  return impl_->logits;
}

std::span<const float> Gemma3Model::step(int32_t id) {
  impl_->forward(std::span<const int32_t>(&id, 1), nullptr);
  return impl_->logits;
}

int32_t Gemma3Model::Impl::greedy() {
  Impl& m = *this;
  ++m.greedy_calls;
  if (m.screen_on && (!m.screen.empty() || m.greedy_calls > m.screen_after)) {
    Mat& o = m.out_mat();
    // the outlier columns of the screen: where this first hidden vector is largest (Gemma's few huge
    // channels stay put from token to token; only the speed depends on the choice)
    if (m.screen.empty()) m.screen = ops::GreedyScreen(o.q, m.last);
    // the activation quantization of the full product (matmul: L = 1 < int8_rows, Q8_0 weights)
    m.act.quantize(o.q.format(), m.last.data(), 1, o.K, o.K);
    const ops::GreedyScreen::Pick p = m.screen.argmax(o.q, m.act);
    m.last_candidates = p.candidates;
    ATTN_CHECK(std::isfinite(p.logit), "gemma3: the largest logit at position ", m.pos - 1,
               " is not finite (", p.logit, ")");
    return static_cast<int32_t>(p.index);
  }
  m.logits.resize(m.c.vocab);
  m.matmul(m.out_mat(), m.last.data(), 1, m.logits.data(), m.c.vocab);
  if (m.c.final_softcap > 0) {
    const float cap_v = static_cast<float>(m.c.final_softcap);
    for (float& z : m.logits) z = cap_v * std::tanh(z / cap_v);
  }
  m.last_candidates = m.c.vocab;
  const auto best = std::max_element(m.logits.begin(), m.logits.end());
  for (float z : m.logits)  // as generate_from: non-finite logits are an error, not a token
    ATTN_CHECK(std::isfinite(z), "gemma3: a logit at position ", m.pos - 1, " is not finite (", z, ")");
  return static_cast<int32_t>(best - m.logits.begin());
}

int32_t Gemma3Model::prefill_greedy(std::span<const int32_t> ids) {
  impl_->forward(ids, nullptr, false);
  return impl_->greedy();
}
int32_t Gemma3Model::step_greedy(int32_t id) {
  impl_->forward(std::span<const int32_t>(&id, 1), nullptr, false);
  return impl_->greedy();
}
int64_t Gemma3Model::greedy_candidates() const { return impl_->last_candidates; }
bool Gemma3Model::greedy_screened() const { return impl_->screen_on; }
void Gemma3Model::prepare_greedy_screen() {
  Impl& m = *impl_;
  if (!m.screen_on || !m.screen.empty()) return;
  // without a hidden vector yet, the outlier columns come from the weights (only the speed differs)
  m.screen = m.pos > 0 ? ops::GreedyScreen(m.out_mat().q, m.last) : ops::GreedyScreen(m.out_mat().q);
}
std::span<const float> Gemma3Model::last_hidden() const { return impl_->last; }

Gemma3Attention Gemma3Model::attention_weights(std::span<const int32_t> ids) {
  Gemma3Attention a;
  a.ids.assign(ids.begin(), ids.end());
  for (int32_t id : ids) {
    std::string s = impl_->tok.piece_text(id, true);
    a.tokens.push_back(s);
  }
  a.heads = impl_->c.heads;
  for (int64_t l = 0; l < impl_->c.layers; ++l) a.sliding.push_back(impl_->c.sliding(l));
  clear();
  impl_->forward(ids, &a.layers);
  return a;
}

AttentionLayerTrace Gemma3Model::layer_trace(std::span<const int32_t> ids, int64_t layer) {
  ATTN_CHECK(layer >= 0 && layer < impl_->c.layers, "layer: expected 0..", impl_->c.layers - 1, "; got ",
             layer);
  AttentionLayerTrace t;
  t.layer = layer;
  std::vector<std::vector<float>> weights;
  clear();
  impl_->trace = &t;
  try {
    impl_->forward(ids, &weights);
  } catch (...) {
    impl_->trace = nullptr;
    throw;
  }
  impl_->trace = nullptr;
  return t;
}

text::TextPieces Gemma3Model::chat_template_pieces(const std::vector<Message>& messages,
                                                   bool add_generation_prompt) const {
  // The template's markers may be special tokens; the messages' contents are text.
  text::TextPieces out;
  const auto markup = [&](std::string s) { out.push_back({std::move(s), true}); };
  const auto data = [&](const std::string& s) {
    if (!s.empty()) out.push_back({s, false});
  };
  std::vector<std::string> system;
  for (const Message& m : messages) {
    if (m.role == "system") {
      system.push_back(m.content);
      continue;
    }
    ATTN_CHECK(m.role == "user" || m.role == "assistant" || m.role == "model", "gemma3 chat: role '", m.role,
               "'; expected system, user or assistant");
    const std::string role = m.role == "user" ? "user" : "model";
    markup("<start_of_turn>" + role + "\n");
    if (role == "user") {
      for (const std::string& s : system) {
        data(s);
        markup("\n\n");
      }
      system.clear();
    }
    data(m.content);
    markup("<end_of_turn>\n");
  }
  if (add_generation_prompt) markup("<start_of_turn>model\n");
  return out;
}

std::string Gemma3Model::apply_chat_template(const std::vector<Message>& messages,
                                             bool add_generation_prompt) const {
  return text::join_pieces(chat_template_pieces(messages, add_generation_prompt));
}

}  // namespace attn::models
