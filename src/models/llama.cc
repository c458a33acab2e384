// The Llama decoder from GGUF (include/attn/models/llama.h).
#include <attn/core/error.h>
#include <attn/core/f16.h>
#include <attn/core/parallel.h>
#include <attn/io/finite.h>
#include <attn/io/json.h>
#include <attn/models/llama.h>
#include <attn/models/llama_tuning.h>
#include <attn/models/runtime/decoder.h>
#include <attn/ops/attention.h>
#include <attn/ops/inference.h>
#include <attn/ops/linear.h>
#include <attn/ops/quantized.h>
#include <attn/text/chat_template.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <cstring>
#include <set>
#include <sstream>

namespace attn::models {
namespace {

using io::GgmlType;
using ops::QuantFormat;

// ggml's 8-bit activation quantization of one row, dequantized again: per block of 32,
// d = max|x| / 127, q = round(x / d), x ≈ q · f16(d).
void fake_quantize_q8(const float* x, int64_t K, float* out) {
  for (int64_t b = 0; b < K; b += 32) {
    float amax = 0;
    for (int64_t i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[b + i]));
    const float d = amax / 127.0f, id = amax != 0.0f ? 127.0f / amax : 0.0f;
    const float dh = round_to_f16(d);
    for (int64_t i = 0; i < 32; ++i) out[b + i] = std::nearbyint(x[b + i] * id) * dh;
  }
}

// One weight matrix W [N, K]: the stored blocks (Q4_1, Q8_0) and/or an f32 copy.
struct Mat {
  std::string name;
  int64_t N = 0, K = 0;
  bool quant = false;      // blocks usable by the quantized products
  ops::QuantMatrix q;      // w: [N, K / 32 blocks], and its 8-bit repacked copy with q8_activations
  std::vector<float> f32;  // w: [N, K] (when expanded)
};

// One phase of a decode step's parallel region: chunks claimed from `next`, counted in `done` when
// finished. Waiting for a phase spins briefly (phases are balanced to a few microseconds on an idle
// machine), then sleeps on `done` (futex) until the last chunk's finisher wakes it: when other
// processes share the cores a sleeping thread is woken at once, a yielding one waits a time slice.
struct PhaseSync {
  std::atomic<int> next{0}, done{0};
  void finish_one(int n) {
    if (done.fetch_add(1, std::memory_order_acq_rel) + 1 == n)
      done.notify_all();  // no syscall if nobody sleeps
  }
  void wait_done(int n) {
    for (int spins = 0; spins < 2048; ++spins) {  // ~30-60 µs of PAUSE
      if (done.load(std::memory_order_acquire) >= n) return;
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#endif
    }
    for (int d; (d = done.load(std::memory_order_acquire)) < n;) done.wait(d, std::memory_order_acquire);
  }
};

struct Layer {
  std::vector<float> attn_norm, ffn_norm;  // [C]
  Mat wq, wk, wv, wo, gate, up, down;
};

// Y[M, N] = X[M, K] · Wᵀ for the weights in `form` (quantized falls back to f32 when W has no blocks).
struct MatJob {
  const Mat* w;
  float* y;  // [M, N] with row stride ldy
  int64_t ldy;
};

}  // namespace

// ---------------------------------------------------------------- config

LlamaConfig LlamaConfig::from_gguf(const io::GgufFile& f) {
  ATTN_CHECK(f.has("general.architecture"), "llama: ", f.path(), ": missing 'general.architecture'");
  const std::string arch = f.get_string("general.architecture");
  ATTN_CHECK(arch == "llama", "llama: ", f.path(), ": unsupported architecture '", arch,
             "'; expected 'llama' (Llama-family decoders such as SmolLM2)");
  LlamaConfig c;
  c.context = f.get_positive("llama.context_length");
  c.dim = f.get_positive("llama.embedding_length");
  c.layers = f.get_positive("llama.block_count");
  // Each block holds 9 tensors: a block count the tensors cannot back fails before anything is
  // allocated from it (0xFFFFFFFF would otherwise build a 3.5 GB list of expected names).
  const int64_t stored = static_cast<int64_t>(f.tensor_names().size());
  ATTN_CHECK(c.layers <= stored / 9, "llama: ", f.path(), ": llama.block_count is ", c.layers,
             " but the file holds ", stored, " tensors; expected at most ", stored / 9,
             " blocks (9 tensors each)");
  c.ffn = f.get_positive("llama.feed_forward_length");
  c.heads = f.get_positive("llama.attention.head_count");
  c.kv_heads =
      f.has("llama.attention.head_count_kv") ? f.get_positive("llama.attention.head_count_kv") : c.heads;
  c.head_dim = c.dim / c.heads;
  c.rope_dim =
      f.has("llama.rope.dimension_count") ? f.get_positive("llama.rope.dimension_count") : c.head_dim;
  c.rope_base = f.get_real("llama.rope.freq_base", 10000.0);
  c.rms_eps = f.get_real("llama.attention.layer_norm_rms_epsilon", 1e-5);
  if (f.has("llama.vocab_size")) {
    c.vocab = f.get_positive("llama.vocab_size");
  } else {
    ATTN_CHECK(f.has("tokenizer.ggml.tokens"), "llama: ", f.path(),
               ": no llama.vocab_size and no tokenizer.ggml.tokens");
    c.vocab = static_cast<int64_t>(f.array_size("tokenizer.ggml.tokens"));
  }
  ATTN_CHECK(!f.has("llama.rope.scaling.type") || f.get_string("llama.rope.scaling.type") == "none",
             "llama: ", f.path(), ": RoPE scaling '", f.get_string("llama.rope.scaling.type"),
             "' is not supported");
  try {
    c.validate();
  } catch (const Error& e) {
    throw Error(detail::concat(f.path(), ": ", e.what()));
  }
  return c;
}

void LlamaConfig::validate() const {
  ATTN_CHECK(vocab > 0 && context > 0 && dim > 0 && layers > 0 && ffn > 0 && heads > 0 && kv_heads > 0,
             "llama config: sizes must be > 0 (vocab ", vocab, ", context ", context, ", dim ", dim,
             ", layers ", layers, ", ffn ", ffn, ", heads ", heads, ", kv_heads ", kv_heads, ")");
  ATTN_CHECK(dim % heads == 0 && head_dim * heads == dim, "llama config: embedding length ", dim,
             " must be head_count ", heads, " x head_dim; got head_dim ", head_dim);
  ATTN_CHECK(heads % kv_heads == 0, "llama config: head_count ", heads,
             " must be a multiple of head_count_kv ", kv_heads);
  ATTN_CHECK(head_dim % 2 == 0, "llama config: head_dim must be even for RoPE, got ", head_dim);
  ATTN_CHECK(rope_dim == head_dim, "llama config: rope.dimension_count ", rope_dim, " must equal head_dim ",
             head_dim, " (partial RoPE is not supported)");
  ATTN_CHECK(std::isfinite(rope_base) && rope_base > 0, "llama config: rope.freq_base must be > 0, got ",
             rope_base);
  ATTN_CHECK(std::isfinite(rms_eps) && rms_eps > 0, "llama config: rms epsilon must be > 0, got ", rms_eps);
}

// ---------------------------------------------------------------- tensor check

std::string LlamaTensorCheck::str() const {
  std::ostringstream os;
  auto list = [&](const char* what, const std::vector<std::string>& v) {
    if (v.empty()) return;
    os << v.size() << " " << what << ":";
    for (std::size_t i = 0; i < v.size() && i < 12; ++i) os << (i ? ", " : " ") << v[i];
    if (v.size() > 12) os << ", ... (" << v.size() - 12 << " more)";
    os << "; ";
  };
  list("missing", missing);
  list("unexpected", unexpected);
  list("mis-shaped", misshaped);
  std::string s = os.str();
  if (s.size() >= 2) s.resize(s.size() - 2);
  return s;
}

namespace {
struct Expected {
  std::string name;
  Shape shape;
  bool matrix;
  bool optional;
};

std::vector<Expected> expected_tensors(const LlamaConfig& c) {
  const int64_t kv = c.kv_heads * c.head_dim;
  std::vector<Expected> e = {{"token_embd.weight", {c.vocab, c.dim}, true, false},
                             {"output_norm.weight", {c.dim}, false, false},
                             {"output.weight", {c.vocab, c.dim}, true, true}};
  for (int64_t l = 0; l < c.layers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    e.push_back({p + "attn_norm.weight", {c.dim}, false, false});
    e.push_back({p + "attn_q.weight", {c.dim, c.dim}, true, false});
    e.push_back({p + "attn_k.weight", {kv, c.dim}, true, false});
    e.push_back({p + "attn_v.weight", {kv, c.dim}, true, false});
    e.push_back({p + "attn_output.weight", {c.dim, c.dim}, true, false});
    e.push_back({p + "ffn_norm.weight", {c.dim}, false, false});
    e.push_back({p + "ffn_gate.weight", {c.ffn, c.dim}, true, false});
    e.push_back({p + "ffn_up.weight", {c.ffn, c.dim}, true, false});
    e.push_back({p + "ffn_down.weight", {c.dim, c.ffn}, true, false});
  }
  return e;
}
}  // namespace

LlamaTensorCheck check_llama_tensors(const io::GgufFile& f, const LlamaConfig& c) {
  LlamaTensorCheck r;
  std::set<std::string> known;
  for (const Expected& e : expected_tensors(c)) {
    known.insert(e.name);
    if (!f.has_tensor(e.name)) {
      if (!e.optional) r.missing.push_back(e.name);
      continue;
    }
    const io::GgufTensorInfo& t = f.tensor(e.name);
    if (t.shape != e.shape) {
      r.misshaped.push_back(e.name + ": expected " + shape_str(e.shape) + ", got " + shape_str(t.shape));
    } else if (!io::ggml_can_dequantize(t.type)) {
      r.misshaped.push_back(e.name + ": type " + io::ggml_type_name(t.type) +
                            " is not supported (F32 F16 BF16 Q8_0 Q4_0 Q4_1)");
    }
  }
  for (const std::string& n : f.tensor_names())
    if (!known.count(n)) r.unexpected.push_back(n);
  return r;
}

// ---------------------------------------------------------------- model

// Quantized products over at most this many rows use 8-bit activations (LlamaTuning::q8_activations).
constexpr int64_t kQ8MaxRows = 16;

// The most bytes load() allocates for the KV caches (f32 + f16 copies, all layers).
constexpr int64_t kMaxKvCacheBytes = int64_t{16} << 30;

struct LlamaModel::Impl {
  io::GgufFile file;
  LlamaConfig c;
  text::ByteBpeTokenizer tok;
  LlamaTuning opt;  // the measurement-only knobs (models/llama_tuning.h)
  int64_t cap = 0;
  AttentionLayerTrace* trace = nullptr;  // layer_trace(): the layer whose buffers forward() copies out

  Mat embed, output;  // output is empty (N == 0) when tied to embed
  GgmlType embed_type = GgmlType::F32;
  int64_t embed_row_bytes = 0;
  const std::byte* embed_data = nullptr;  // token_embd as stored: [V rows of embed_row_bytes]
  std::vector<float> output_norm;
  std::vector<Layer> layers;

  // KV cache per layer: [Hkv, cap, D]
  std::vector<Tensor> kcache, vcache;
  // With the 8-bit decode path also an f16 copy (llama.cpp's cache type; what decode steps read: half
  // the bytes of the f32 cache, which prompt passes keep using): per layer [Hkv, cap, D] half bits.
  std::vector<std::unique_ptr<uint16_t[]>> kcache16, vcache16;
  int64_t pos = 0;

  // Scratch, grown to the longest pass so far (no allocation per decode step).
  int64_t rows = 0;
  std::vector<float> x, n, g, u, tmp;     // [L, C] / [L, F]
  Tensor q, att;                          // q: [L, H, D], att: [L, H, D]
  std::vector<float> kbuf, vbuf;          // [L, Hkv·D]
  std::vector<float> rope_cos, rope_sin;  // [L, D/2]
  std::vector<float> logits;              // [V]
  std::vector<float> last;                // [C]
  std::vector<float> xq;                  // [L, K] (llama_cpp_rounding)
  std::vector<float> wtmp;                // [N, K] one matrix expanded to f32 for a prompt pass
  // 8-bit activations (LlamaOptions::q8_activations)
  bool q8 = false;         // quantized matrices have their repacked copy
  bool q8_decode = false;  // ... all of them (every layer and the output): steps take decode_step_q8
  ops::Q8Activations xq8;  // [M, K] rows of X for matmul()
  std::vector<ops::Q8Activations> rank_q8;      // per rank of the decode region: [1, max(C, F)]
  std::vector<std::vector<float>> rank_n;       // per rank: [C] normed row
  std::vector<std::vector<float>> rank_scores;  // per rank: [H / Hkv, cap] attention scores
  std::unique_ptr<PhaseSync[]> phases;          // the decode step's phases
  int64_t nphase_alloc = 0;

  Impl(io::GgufFile f) : file(std::move(f)) {}

  const Mat& out_mat() const { return output.N ? output : embed; }

  void load_mat(Mat& m, const std::string& name) {
    const io::GgufTensorInfo& t = file.tensor(name);
    m.name = name;
    m.N = t.shape[0];
    m.K = t.shape[1];
    if ((t.type == GgmlType::Q4_1 || t.type == GgmlType::Q8_0) && m.K % ops::kQuantBlock == 0) {
      m.quant = true;
      m.q = ops::QuantMatrix(t.type == GgmlType::Q4_1 ? QuantFormat::q4_1 : QuantFormat::q8_0,
                             file.view(name).data, m.N, m.K);
      if (q8) m.q.pack_q8();
    }
    if (!m.quant || opt.expand_on_load) {
      Tensor w = file.load(name);
      m.f32.assign(w.data<float>(), w.data<float>() + w.numel());
      io::check_finite(m.f32.data(), static_cast<int64_t>(m.f32.size()),
                       "llama: " + file.path() + ": tensor '" + name + "'");
    } else {
      check_quant_scales(file.view(name), name);
    }
  }

  // The f16 scales (and Q4_1 minima) of the quantized blocks: a NaN or inf there is a NaN weight.
  void check_quant_scales(const io::GgufTensorView& v, const std::string& name) const {
    const int64_t fields = v.type == GgmlType::Q4_1 ? 2 : 1;
    uint16_t any = 0;
    for (int64_t b = 0; b < v.n_blocks; ++b)
      for (int64_t k = 0; k < fields; ++k) {
        uint16_t h;
        std::memcpy(&h, v.data + b * v.block_bytes + 2 * k, 2);
        any |= static_cast<uint16_t>((h & 0x7c00) == 0x7c00);
      }
    if (!any) return;
    for (int64_t b = 0; b < v.n_blocks; ++b)
      for (int64_t k = 0; k < fields; ++k) {
        uint16_t h;
        std::memcpy(&h, v.data + b * v.block_bytes + 2 * k, 2);
        ATTN_CHECK((h & 0x7c00) != 0x7c00, "llama: ", file.path(), ": tensor '", name,
                   "' holds a non-finite value: the ", k ? "minimum" : "scale", " of quantized block ", b,
                   " (flat indices ", b * v.block_elems, "..", (b + 1) * v.block_elems - 1, ") is ",
                   (h & 0x3ff) ? "nan" : "inf", "; expected every value finite");
      }
  }

  std::vector<float> load_vec(const std::string& name) {
    Tensor w = file.load(name);
    io::check_finite(w, "llama: " + file.path() + ": tensor '" + name + "'");
    return std::vector<float>(w.data<float>(), w.data<float>() + w.numel());
  }

  void grow(int64_t L) {
    if (L <= rows) return;
    rows = L;
    const int64_t C = c.dim, F = c.ffn, kv = c.kv_heads * c.head_dim;
    x.resize(L * C);
    n.resize(L * C);
    tmp.resize(L * C);
    g.resize(L * F);
    u.resize(L * F);
    kbuf.resize(L * kv);
    vbuf.resize(L * kv);
    q = Tensor::empty({L, c.heads, c.head_dim});
    att = Tensor::empty({L, c.heads, c.head_dim});
    rope_cos.resize(L * c.head_dim / 2);
    rope_sin.resize(L * c.head_dim / 2);
  }

  // Runs every job on the weights of one phase; quantized jobs share one pass over the thread pool.
  // any_rows: the 8-bit products for any number of rows (the batched step), not only up to kQ8MaxRows.
  void matmul(std::initializer_list<MatJob> jobs, const float* X, int64_t M, int64_t ldx, WeightForm form,
              bool any_rows = false) {
    std::array<MatJob, 4> qbuf;  // no allocation per call
    std::size_t nq = 0;
    ATTN_CHECK(jobs.size() <= qbuf.size(), "llama: at most 4 products per pass, got ", jobs.size());
    for (const MatJob& j : jobs) {
      if (j.w->quant && form == WeightForm::quantized) {
        qbuf[nq++] = j;
        continue;
      }
      const float* w = j.w->f32.data();
      if (j.w->f32.empty()) {  // expand the blocks now, rows split over the pool
        wtmp.resize(j.w->N * j.w->K);
        const int64_t K = j.w->K, rb = j.w->q.row_bytes();
        const GgmlType t = j.w->q.format() == QuantFormat::q4_1 ? GgmlType::Q4_1 : GgmlType::Q8_0;
        parallel_for(j.w->N, 64, [&](int64_t b, int64_t e, int) {
          io::dequantize(t, j.w->q.blocks() + b * rb, (e - b) * K, wtmp.data() + b * K);
        });
        w = wtmp.data();
      }
      ops::gemm(false, true, M, j.w->N, j.w->K, 1.0f, X, ldx, w, j.w->K, 0.0f, j.y, j.ldy);
    }
    if (nq == 0) return;
    const std::span<const MatJob> qjobs(qbuf.data(), nq);
    bool packed = q8 && (any_rows || M <= kQ8MaxRows);
    for (const MatJob& j : qjobs) packed = packed && j.w->q.has_q8();
    if (packed) {
      const int64_t K = qjobs[0].w->K;
      xq8.quantize(X, M, K, ldx);
      const ops::Q8Dot dot = ops::q8_dot();
      int64_t total = 0;
      for (const MatJob& j : qjobs) total += j.w->N;
      const int64_t grain = std::max<int64_t>(16, 32768 / std::max<int64_t>(1, K * M)) / 16 * 16;
      parallel_for(total, grain, [&](int64_t b, int64_t e, int) {
        int64_t base = 0;
        for (const MatJob& j : qjobs) {
          const int64_t lo = std::max(b, base), hi = std::min(e, base + j.w->N);
          if (lo < hi) dot(j.w->q, lo - base, hi - base, xq8, j.y, j.ldy, false);
          base += j.w->N;
        }
      });
      return;
    }
    if (opt.llama_cpp_rounding) {
      xq.resize(M * qjobs[0].w->K);
      for (int64_t i = 0; i < M; ++i)
        fake_quantize_q8(X + i * ldx, qjobs[0].w->K, xq.data() + i * qjobs[0].w->K);
      X = xq.data();
      ldx = qjobs[0].w->K;
    }
    int64_t total = 0;
    for (const MatJob& j : qjobs) total += j.w->N;
    const int64_t K = qjobs[0].w->K;
    const int64_t grain = std::max<int64_t>(8, 16384 / std::max<int64_t>(1, K * M)) / 8 * 8;
    parallel_for(total, std::max<int64_t>(8, grain), [&](int64_t b, int64_t e, int) {
      int64_t base = 0;
      for (const MatJob& j : qjobs) {
        const int64_t lo = std::max(b, base), hi = std::min(e, base + j.w->N);
        if (lo < hi) ops::quant_linear_rows(j.w->q, lo - base, hi - base, X, M, ldx, j.y, j.ldy);
        base += j.w->N;
      }
    });
  }

  void rms_norm(const float* in, const std::vector<float>& w, float* out, int64_t L) const {
    const int64_t C = c.dim;
    for (int64_t i = 0; i < L; ++i) {
      const float* xi = in + i * C;
      double ss = 0;
      for (int64_t k = 0; k < C; ++k) ss += static_cast<double>(xi[k]) * xi[k];
      const float scale = 1.0f / std::sqrt(static_cast<float>(ss / C) + static_cast<float>(c.rms_eps));
      float* o = out + i * C;
      for (int64_t k = 0; k < C; ++k) o[k] = (xi[k] * scale) * w[k];
    }
  }

  // cos/sin of pos·base^(−2i/D) for positions pos0 .. pos0+L−1 into table rows row0 .. row0+L−1, as
  // llama.cpp computes them (theta multiplied by base^(−2/D) in float, pair by pair).
  void rope_tables(int64_t pos0, int64_t L, int64_t row0 = 0) {
    const int64_t half = c.head_dim / 2;
    const float scale = std::pow(static_cast<float>(c.rope_base), -2.0f / static_cast<float>(c.head_dim));
    for (int64_t i = 0; i < L; ++i) {
      float theta = static_cast<float>(pos0 + i);
      for (int64_t p = 0; p < half; ++p) {
        rope_cos[(row0 + i) * half + p] = std::cos(theta);
        rope_sin[(row0 + i) * half + p] = std::sin(theta);
        theta *= scale;
      }
    }
  }

  // v: [L, heads, D] rotated in place, adjacent pairs.
  void rope(float* v, int64_t L, int64_t heads) const {
    const int64_t D = c.head_dim, half = D / 2;
    for (int64_t i = 0; i < L; ++i) {
      const float* cs = rope_cos.data() + i * half;
      const float* sn = rope_sin.data() + i * half;
      for (int64_t h = 0; h < heads; ++h) {
        float* r = v + (i * heads + h) * D;
        for (int64_t p = 0; p < half; ++p) {
          const float a = r[2 * p], b = r[2 * p + 1];
          r[2 * p] = a * cs[p] - b * sn[p];
          r[2 * p + 1] = a * sn[p] + b * cs[p];
        }
      }
    }
  }

  void ensure_cache() {
    if (!kcache.empty()) return;
    for (int64_t l = 0; l < c.layers; ++l) {
      kcache.push_back(Tensor::empty({c.kv_heads, cap, c.head_dim}));
      vcache.push_back(Tensor::empty({c.kv_heads, cap, c.head_dim}));
      if (q8_decode && opt.decode_kv_f16) {  // not value-initialized: pages are touched as the sequence grows
        kcache16.emplace_back(new uint16_t[c.kv_heads * cap * c.head_dim]);
        vcache16.emplace_back(new uint16_t[c.kv_heads * cap * c.head_dim]);
      }
    }
  }

  // x[0, :] = the embedding row of `id`.
  void embed_row(int32_t id, float* out) const {
    const int64_t C = c.dim;
    if (!embed.f32.empty() && embed_type != GgmlType::Q8_0 && embed_type != GgmlType::Q4_1)
      std::copy_n(embed.f32.data() + id * C, C, out);
    else
      io::dequantize(embed_type, embed_data + id * embed_row_bytes, C, out);
  }

  // One decode step with 8-bit activations, the whole token in ONE parallel region: each rank runs
  // every phase on its share (rows of a matrix, heads of the attention) and meets the others at a
  // barrier where the next phase needs their results (5 per layer). The norms and the activation
  // quantizations are computed by every rank for itself (a few hundred ns), which saves barriers.
  // Residual adds are fused into the products (y += W·a). No allocation once the scratch exists.
  void decode_step_q8(int32_t id) {
    const int64_t C = c.dim, F = c.ffn, H = c.heads, Hkv = c.kv_heads, D = c.head_dim, kv = Hkv * D;
    const int64_t group = H / Hkv, Lk = pos + 1;
    embed_row(id, x.data());
    rope_tables(pos, 1);
    logits.resize(c.vocab);
    // The ranks must run concurrently (they meet at barriers): inside another parallel_for, where a
    // parallel_for runs its chunks one after another on one thread, the step runs as a single rank.
    const int T = in_parallel_for() ? 1 : num_threads();
    if (static_cast<int>(rank_q8.size()) < T) {
      rank_q8.resize(T);
      rank_n.resize(T);
      rank_scores.resize(T);
    }
    for (int r = 0; r < T; ++r) {
      rank_q8[r].reserve(1, std::max(C, F));
      rank_n[r].resize(C);
      rank_scores[r].resize(group * cap);
    }
    const ops::Q8Dot q8dot = ops::q8_dot();  // the kernel chosen once per step
    auto dot = [q8dot](const Mat& w, int64_t n0, int64_t n1, const ops::Q8Activations& a, float* y,
                       bool acc) {
      if (n0 < n1) q8dot(w.q, n0, n1, a, y, w.N, acc);
    };
    auto quantize = [](const float* v, int64_t K, ops::Q8Activations& a) { a.quantize(v, 1, K, K); };
    float* qp = q.data<float>();
    float* ap = att.data<float>();
    const float scale = 1.0f / std::sqrt(static_cast<float>(D));
    // Phases (5 per layer + the output product), each a list of chunks that the ranks claim from an
    // atomic counter; a phase starts once every chunk of the one before is done. A rank that the OS
    // has descheduled (other processes on the cores) therefore holds up at most the chunk it holds, and
    // the others do its share: the step degrades to fewer threads instead of waiting for it.
    const int64_t nphases = 5 * c.layers + 1;
    if (!phases || nphase_alloc < nphases) {
      phases.reset(new PhaseSync[nphases]);
      nphase_alloc = nphases;
    }
    for (int64_t p = 0; p < nphases; ++p) {
      phases[p].next.store(0, std::memory_order_relaxed);
      phases[p].done.store(0, std::memory_order_relaxed);
    }
    constexpr int64_t kRows = 64;  // rows per chunk (a multiple of the kernel's 4-row step)
    const auto chunks = [](int64_t n, int64_t per) { return static_cast<int>((n + per - 1) / per); };
    parallel_for(T, 1, [&](int64_t rank, int64_t, int) {
      const int r = static_cast<int>(rank);
      ops::Q8Activations& a = rank_q8[r];
      float* nr = rank_n[r].data();
      int64_t ph = 0;
      int prev_n = 0;  // chunks of the previous phase
      // Runs phase `ph`: waits for the previous one, then claims chunks; prepare() (this rank's own
      // copy of the phase's input) runs before its first chunk only.
      const auto phase = [&](int n, const auto& prepare, const auto& body) {
        if (ph > 0) phases[ph - 1].wait_done(prev_n);
        PhaseSync& ps = phases[ph++];
        prev_n = n;
        bool prepared = false;
        for (int ch; (ch = ps.next.fetch_add(1, std::memory_order_relaxed)) < n;) {
          if (!prepared) prepare();
          prepared = true;
          body(ch);
          ps.finish_one(n);
        }
      };
      const auto norm_quant = [&](const std::vector<float>& w) {
        return [&, wp = &w] {
          rms_norm(x.data(), *wp, nr, 1);
          quantize(nr, C, a);
        };
      };
      for (int64_t l = 0; l < c.layers; ++l) {
        const Layer& ly = layers[l];
        // q, k, v: the rows of the three matrices as one range
        phase(chunks(C + 2 * kv, kRows), norm_quant(ly.attn_norm), [&](int ch) {
          const int64_t b = ch * kRows, e = std::min(C + 2 * kv, b + kRows);
          dot(ly.wq, std::min(b, C), std::min(e, C), a, qp, false);
          dot(ly.wk, std::clamp(b - C, int64_t{0}, kv), std::clamp(e - C, int64_t{0}, kv), a, kbuf.data(),
              false);
          dot(ly.wv, std::clamp(b - C - kv, int64_t{0}, kv), std::clamp(e - C - kv, int64_t{0}, kv), a,
              vbuf.data(), false);
        });
        // Per KV head: RoPE, the KV caches (f32 and f16) appended in place, then the group's query heads
        // over the f16 cache (no barrier between the append and its readers).
        phase(
            static_cast<int>(Hkv), [] {},
            [&](int kh) {
              float* kc = kcache[l].data<float>();
              float* vc = vcache[l].data<float>();
              rope(kbuf.data() + kh * D, 1, 1);
              std::memcpy(kc + (kh * cap + pos) * D, kbuf.data() + kh * D, D * sizeof(float));
              std::memcpy(vc + (kh * cap + pos) * D, vbuf.data() + kh * D, D * sizeof(float));
              rope(qp + kh * group * D, 1, group);
              if (kcache16.empty()) {
                ops::group_decode_attention(qp + kh * group * D, group, kc + kh * cap * D, vc + kh * cap * D,
                                            D, Lk, D, scale, rank_scores[r].data(), ap + kh * group * D);
                return;
              }
              uint16_t* kc16 = kcache16[l].get();
              uint16_t* vc16 = vcache16[l].get();
              ops::store_f16(kbuf.data() + kh * D, D, kc16 + (kh * cap + pos) * D);
              ops::store_f16(vbuf.data() + kh * D, D, vc16 + (kh * cap + pos) * D);
              ops::group_decode_attention_f16(qp + kh * group * D, group, kc16 + kh * cap * D,
                                              vc16 + kh * cap * D, D, Lk, D, scale, rank_scores[r].data(),
                                              ap + kh * group * D);
            });
        phase(
            chunks(C, kRows), [&] { quantize(ap, C, a); },
            [&](int ch) {
              dot(ly.wo, ch * kRows, std::min(C, (ch + 1) * kRows), a, x.data(), true);  // x += Wo · att
            });
        phase(chunks(F, kRows), norm_quant(ly.ffn_norm), [&](int ch) {
          const int64_t b = ch * kRows, e = std::min(F, b + kRows);
          dot(ly.gate, b, e, a, g.data(), false);
          dot(ly.up, b, e, a, u.data(), false);
          for (int64_t k = b; k < e; ++k) g[k] = g[k] / (1.0f + std::exp(-g[k])) * u[k];
        });
        phase(
            chunks(C, kRows), [&] { quantize(g.data(), F, a); },
            [&](int ch) {
              dot(ly.down, ch * kRows, std::min(C, (ch + 1) * kRows), a, x.data(), true);  // x += Wdown · h
            });
      }
      constexpr int64_t kOutRows = 1024;
      phase(chunks(c.vocab, kOutRows), norm_quant(output_norm), [&](int ch) {
        dot(out_mat(), ch * kOutRows, std::min(c.vocab, (ch + 1) * kOutRows), a, logits.data(), false);
      });
    });
    pos += 1;
  }

  // The forward pass over ids at positions pos .. pos+L−1; leaves logits of the last one.
  // capture: when non-null, receives each layer's probabilities [H, L, L] (needs pos == 0).
  void forward(std::span<const int32_t> ids, std::vector<std::vector<float>>* capture) {
    const int64_t L = static_cast<int64_t>(ids.size());
    ATTN_CHECK(L > 0, "llama: no tokens to run");
    ATTN_CHECK(pos + L <= cap, "llama: sequence of ", pos + L, " tokens (", pos, " cached + ", L,
               " new) exceeds the context of ", cap, " tokens", cap < c.context ? " (--max-context)" : "");
    for (int64_t i = 0; i < L; ++i)
      ATTN_CHECK(ids[i] >= 0 && ids[i] < c.vocab, "llama: token id ", ids[i], " at ", i,
                 " is out of range [0, ", c.vocab, ")");
    ensure_cache();
    grow(L);
    const WeightForm form =
        L == 1 ? opt.decode : (L >= opt.prefill_f32_min_tokens ? opt.prefill : WeightForm::quantized);
    if (L == 1 && !capture && q8_decode && form == WeightForm::quantized) {
      decode_step_q8(ids[0]);
      return;
    }
    const int64_t C = c.dim, F = c.ffn, H = c.heads, Hkv = c.kv_heads, D = c.head_dim, kv = Hkv * D;

    for (int64_t i = 0; i < L; ++i) embed_row(ids[i], x.data() + i * C);
    rope_tables(pos, L);
    float* qp = q.data<float>();
    float* ap = att.data<float>();
    for (int64_t l = 0; l < c.layers; ++l) {
      Layer& ly = layers[l];
      rms_norm(x.data(), ly.attn_norm, n.data(), L);
      matmul({{&ly.wq, qp, C}, {&ly.wk, kbuf.data(), kv}, {&ly.wv, vbuf.data(), kv}}, n.data(), L, C, form);
      rope(qp, L, H);
      rope(kbuf.data(), L, Hkv);
      if (opt.llama_cpp_rounding) {
        for (int64_t k = 0; k < L * C; ++k) qp[k] = round_to_f16(qp[k]);
        for (int64_t k = 0; k < L * kv; ++k) kbuf[k] = round_to_f16(kbuf[k]);
        for (int64_t k = 0; k < L * kv; ++k) vbuf[k] = round_to_f16(vbuf[k]);
      }
      float* kc = kcache[l].data<float>();
      float* vc = vcache[l].data<float>();
      for (int64_t i = 0; i < L; ++i)
        for (int64_t h = 0; h < Hkv; ++h) {
          std::memcpy(kc + (h * cap + pos + i) * D, kbuf.data() + (i * Hkv + h) * D, D * sizeof(float));
          std::memcpy(vc + (h * cap + pos + i) * D, vbuf.data() + (i * Hkv + h) * D, D * sizeof(float));
          if (!kcache16.empty()) {
            ops::store_f16(kbuf.data() + (i * Hkv + h) * D, D, kcache16[l].get() + (h * cap + pos + i) * D);
            ops::store_f16(vbuf.data() + (i * Hkv + h) * D, D, vcache16[l].get() + (h * cap + pos + i) * D);
          }
        }
      const bool traced = trace && trace->layer == l;
      if (traced) {
        trace->x.assign(x.data(), x.data() + L * C);
        trace->normed.assign(n.data(), n.data() + L * C);
        trace->q.assign(qp, qp + L * C);
        trace->k.assign(kbuf.data(), kbuf.data() + L * kv);
        trace->v.assign(vbuf.data(), vbuf.data() + L * kv);
      }
      const int64_t Lk = pos + L;
      Tensor qv = q.slice(0, 0, L).unsqueeze(0).permute({0, 2, 1, 3});  // [1, H, L, D]
      Tensor kv4 = kcache[l].slice(1, 0, Lk).unsqueeze(0);              // [1, Hkv, Lk, D]
      Tensor vv4 = vcache[l].slice(1, 0, Lk).unsqueeze(0);              // [1, Hkv, Lk, D]
      AttentionOptions ao;
      ao.causal = true;
      ao.align = Align::bottom_right;
      if (capture) ao.capture.enabled = true;
      AttentionResult r = attention(qv, kv4, vv4, ao);
      // r.out: [1, H, L, D] → att [L, H, D]
      att.slice(0, 0, L).copy_from(r.out.select(0, 0).permute({1, 0, 2}));
      if (capture) {
        const Tensor w = r.weights.contiguous();  // [1, H, L, Lk]
        capture->emplace_back(w.data<float>(), w.data<float>() + w.numel());
      }
      matmul({{&ly.wo, tmp.data(), C}}, ap, L, C, form);
      for (int64_t k = 0; k < L * C; ++k) x[k] += tmp[k];
      rms_norm(x.data(), ly.ffn_norm, n.data(), L);
      if (traced) {
        trace->att.assign(ap, ap + L * C);
        trace->o.assign(tmp.data(), tmp.data() + L * C);
        trace->x_after.assign(x.data(), x.data() + L * C);
        trace->normed_after.assign(n.data(), n.data() + L * C);
        trace->weights = capture->back();
      }
      matmul({{&ly.gate, g.data(), F}, {&ly.up, u.data(), F}}, n.data(), L, C, form);
      for (int64_t k = 0; k < L * F; ++k) {
        const float a = g[k];
        g[k] = a / (1.0f + std::exp(-a)) * u[k];
      }
      matmul({{&ly.down, tmp.data(), C}}, g.data(), L, F, form);
      for (int64_t k = 0; k < L * C; ++k) x[k] += tmp[k];
    }
    pos += L;
    last.resize(C);
    rms_norm(x.data() + (L - 1) * C, output_norm, last.data(), 1);
    logits.resize(c.vocab);
    matmul({{&out_mat(), logits.data(), c.vocab}}, last.data(), 1, C, opt.decode);
  }

  // The runtime's batched step (models/runtime/batch.h) runs on the runtime's decoder for this file,
  // made on first use.
  std::unique_ptr<runtime::Decoder> dec;
  runtime::Decoder& decoder() {
    if (!dec) {
      runtime::DecoderOptions o;
      o.max_context = cap;
      o.activations_8bit = opt.batch_q8_activations;
      dec = runtime::Decoder::load(file, o);
    }
    return *dec;
  }
};

LlamaModel::LlamaModel(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
LlamaModel::LlamaModel(LlamaModel&&) noexcept = default;
LlamaModel& LlamaModel::operator=(LlamaModel&&) noexcept = default;
LlamaModel::~LlamaModel() = default;

LlamaModel LlamaModel::load(const std::string& path, const LlamaOptions& options) {
  return load(path, options, LlamaTuning{});
}

LlamaModel LlamaModel::load(const std::string& path, const LlamaOptions& options, const LlamaTuning& tuning) {
  auto impl = std::make_unique<Impl>(io::GgufFile::open(path));
  Impl& m = *impl;
  m.c = LlamaConfig::from_gguf(m.file);
  m.opt = tuning;
  ATTN_CHECK(options.max_context >= 0, "llama: max_context must be >= 0, got ", options.max_context);
  m.cap = options.max_context ? std::min(options.max_context, m.c.context) : m.c.context;
  {
    // The KV caches (f32, and f16 for decode steps) are allocated from cap: bound them before
    // anything is allocated, so a hostile llama.context_length cannot drive the allocation.
    const double bytes = static_cast<double>(m.cap) * static_cast<double>(m.c.layers) *
                         static_cast<double>(m.c.kv_heads) * static_cast<double>(m.c.head_dim) * (8.0 + 4.0);
    ATTN_CHECK(bytes <= static_cast<double>(kMaxKvCacheBytes), "llama: ", path, ": a KV cache of ", m.cap,
               " tokens (llama.context_length ", m.c.context, ") would take ", bytes / (1 << 30), " GiB for ",
               m.c.layers, " layers x ", m.c.kv_heads, " KV heads x ", m.c.head_dim,
               " dims; at most 16 GiB: give a smaller LlamaOptions::max_context (attn --max-context)");
  }
  // The portable int8 loops are a fallback for tests, slower than the f32-activation kernels: without
  // AVX512-VNNI (or with ATTN_ISA below avx512) decoding keeps f32 activations.
  m.q8 = tuning.q8_activations && !tuning.llama_cpp_rounding && ops::q8_dot_fast();
  const LlamaTensorCheck chk = check_llama_tensors(m.file, m.c);
  ATTN_CHECK(chk.ok() && chk.unexpected.empty(), "llama: ", path, ": tensors do not match the config (",
             m.c.layers, " layers, dim ", m.c.dim, ", ffn ", m.c.ffn, ", heads ", m.c.heads, "/",
             m.c.kv_heads, ", vocab ", m.c.vocab, "): ", chk.str());
  m.tok = text::ByteBpeTokenizer::from_gguf(m.file);
  ATTN_CHECK(m.tok.vocab_size() == m.c.vocab, "llama: ", path, ": tokenizer has ", m.tok.vocab_size(),
             " tokens; expected llama.vocab_size ", m.c.vocab);
  const io::GgufTensorInfo& et = m.file.tensor("token_embd.weight");
  m.embed_type = et.type;
  m.embed_row_bytes = static_cast<int64_t>(et.bytes) / m.c.vocab;
  m.embed_data = m.file.view("token_embd.weight").data;
  m.load_mat(m.embed, "token_embd.weight");
  if (m.file.has_tensor("output.weight")) m.load_mat(m.output, "output.weight");
  m.output_norm = m.load_vec("output_norm.weight");
  m.layers.resize(m.c.layers);
  for (int64_t l = 0; l < m.c.layers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    Layer& ly = m.layers[l];
    ly.attn_norm = m.load_vec(p + "attn_norm.weight");
    ly.ffn_norm = m.load_vec(p + "ffn_norm.weight");
    m.load_mat(ly.wq, p + "attn_q.weight");
    m.load_mat(ly.wk, p + "attn_k.weight");
    m.load_mat(ly.wv, p + "attn_v.weight");
    m.load_mat(ly.wo, p + "attn_output.weight");
    m.load_mat(ly.gate, p + "ffn_gate.weight");
    m.load_mat(ly.up, p + "ffn_up.weight");
    m.load_mat(ly.down, p + "ffn_down.weight");
  }
  m.q8_decode = m.q8 && m.out_mat().q.has_q8();
  for (const Layer& ly : m.layers)
    for (const Mat* w : {&ly.wq, &ly.wk, &ly.wv, &ly.wo, &ly.gate, &ly.up, &ly.down})
      m.q8_decode = m.q8_decode && w->q.has_q8();
  return LlamaModel(std::move(impl));
}

bool LlamaModel::can_load(const io::GgufFile& f) {
  try {
    if (!f.has("tokenizer.ggml.model") || f.get_string("tokenizer.ggml.model") != "gpt2") return false;
    const LlamaConfig c = LlamaConfig::from_gguf(f);
    const LlamaTensorCheck chk = check_llama_tensors(f, c);
    return chk.ok() && chk.unexpected.empty();
  } catch (const Error&) {
    return false;
  }
}

const LlamaConfig& LlamaModel::config() const { return impl_->c; }
const text::ByteBpeTokenizer& LlamaModel::tokenizer() const { return impl_->tok; }
const io::GgufFile& LlamaModel::file() const { return impl_->file; }
int64_t LlamaModel::capacity() const { return impl_->cap; }
void LlamaModel::clear() { impl_->pos = 0; }
int64_t LlamaModel::position() const { return impl_->pos; }

std::span<const float> LlamaModel::prefill(std::span<const int32_t> ids) {
  impl_->forward(ids, nullptr);
  return impl_->logits;
}

int64_t LlamaModel::batch_vocab() const { return impl_->c.vocab; }
int64_t LlamaModel::batch_context() const { return impl_->cap; }
runtime::KvCacheConfig LlamaModel::kv_layout() const {
  runtime::KvCacheConfig k;
  k.layers = impl_->c.layers;
  k.kv_heads = impl_->c.kv_heads;
  k.head_dim = impl_->c.head_dim;
  k.layer_windows.assign(static_cast<std::size_t>(k.layers), 0);
  return k;
}
void LlamaModel::forward_batch(runtime::PagedKvCache& cache, std::span<const runtime::BatchEntry> batch) {
  impl_->decoder().forward_batch(cache, batch);
}

std::span<const float> LlamaModel::step(int32_t id) {
  impl_->forward(std::span<const int32_t>(&id, 1), nullptr);
  return impl_->logits;
}

LlamaAttention LlamaModel::attention_weights(std::span<const int32_t> ids) {
  LlamaAttention a;
  a.ids.assign(ids.begin(), ids.end());
  for (int32_t id : ids) a.tokens.push_back(llama_token_display(impl_->tok, id));
  a.heads = impl_->c.heads;
  impl_->pos = 0;
  impl_->forward(ids, &a.layers);
  return a;
}

AttentionLayerTrace LlamaModel::layer_trace(std::span<const int32_t> ids, int64_t layer) {
  ATTN_CHECK(layer >= 0 && layer < impl_->c.layers, "layer: expected 0..", impl_->c.layers - 1, "; got ",
             layer);
  AttentionLayerTrace t;
  t.layer = layer;
  std::vector<std::vector<float>> weights;
  impl_->pos = 0;
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

// ---------------------------------------------------------------- chat template

text::TextPieces LlamaModel::chat_template_pieces(const std::vector<Message>& messages,
                                                  bool add_generation_prompt) const {
  const io::GgufFile& f = impl_->file;
  const std::optional<std::string> source = f.chat_template();
  ATTN_CHECK(source, "llama: ", f.path(), ": no tokenizer.chat_template in the file");
  // The special tokens as transformers passes them: the vocabulary's bos / eos text (when it has them).
  const text::ByteBpeTokenizer& tok = impl_->tok;
  const auto special = [&](int32_t id) -> std::optional<std::string> {
    if (id < 0) return std::nullopt;
    return tok.decode({id}, true);
  };
  const text::ChatTemplate chat(*source, f.path() + ": tokenizer.chat_template", special(tok.bos_id()),
                                special(tok.eos_id()));
  std::vector<text::ChatMessage> msgs;
  msgs.reserve(messages.size());
  for (const Message& m : messages) msgs.push_back({m.role, m.content});
  text::ChatRenderOptions o;
  o.add_generation_prompt = add_generation_prompt;
  return chat.render(msgs, o);
}

std::string LlamaModel::apply_chat_template(const std::vector<Message>& messages,
                                            bool add_generation_prompt) const {
  return text::join_pieces(chat_template_pieces(messages, add_generation_prompt));
}

// ---------------------------------------------------------------- attention export

std::string llama_token_display(const text::ByteBpeTokenizer& tok, int32_t id) {
  const std::string s = tok.decode({id}, true);
  if (json::find_invalid_utf8(s) == std::string::npos) return s;
  std::string out;
  char buf[8];
  for (unsigned char ch : s) {
    std::snprintf(buf, sizeof buf, "<0x%02X>", ch);
    out += buf;
  }
  return out;
}

}  // namespace attn::models
