// BERT encoder inference: the forward pass (include/attn/models/bert.h), composed of the runtime's shared
// blocks (models/runtime/blocks.h) and the ops entries that choose the kernels: ops::dense_linear for the
// products (ops/weight_matrix.h) and ops::encoder_self_attention (ops/inference.h).
#include <attn/core/autograd.h>
#include <attn/core/error.h>
#include <attn/core/parallel.h>
#include <attn/models/bert.h>
#include <attn/models/runtime/blocks.h>
#include <attn/ops/inference.h>
#include <attn/ops/weight_matrix.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstring>
#include <mutex>

#include "models/bert_weights.h"

namespace attn::models {

namespace {

// Largest activation block (floats) the model keeps between calls: 128 MiB, e.g. 9,700 tokens of
// MiniLM (3456 floats per token); larger batches allocate theirs per call.
constexpr int64_t kMaxCachedScratch = int64_t{1} << 25;

// Rows per group of sequences in the fused layers (BertRunOptions::fuse_layers): about one row block
// of the GEMM (12 panels of 12 rows), so each product of a group still reads each weight panel once
// per ~128 rows, as the unfused products over the whole batch do. The layers are fused only where a
// group is one row block (ops::encoder_row_groups_pay), which is where fusing measured faster (AVX-512).
// With AVX2's 72-row blocks it measured slower: MiniLM batch 32 × 128 under ATTN_ISA=avx2, fused /
// unfused alternated (minilm_bench --ab), 1 thread best 28.4 / 29.9 sentences/s in one run and
// 22.0-24.8 / 26.1-28.9 in four more, 2 threads 48.4-55.2 / 55.5-58.5 in two. It stayed slower with 144-row
// AVX2 blocks and with the weight panels copied into the block's own. What loses is the group's 128-row
// product: alone (sgemm_f32_packed_b over MiniLM's six weights, 1 thread, Zen 4) AVX2 ran 91.6-96.5 GFLOP/s
// at 128 rows against 100.5-103.1 at 4,096, AVX-512 98.7-111.1 at 128 (docs/benchmarks.md, issue 15's
// closing run); the fused products were 11% slower in perf, the attention and row kernels the same.
constexpr int64_t kFusedRows = 128;

// The sequence lengths of a batch, each checked (ids in the vocabulary, lengths within the positions,
// type ids matching the ids and within type_vocab_size); throws attn::Error naming the first bad one.
std::vector<int64_t> check_input(const BertConfig& c, const BertInput& input) {
  const auto B = static_cast<int64_t>(input.ids.size());
  ATTN_CHECK(B > 0, "bert: empty batch; expected at least one sequence");
  ATTN_CHECK(input.type_ids.empty() || input.type_ids.size() == input.ids.size(),
             "bert: ", input.type_ids.size(), " type-id lists for ", B,
             " sequences; expected none or one per sequence");
  const int64_t P = c.max_tokens(), V = c.vocab_size;
  std::vector<int64_t> lengths;
  int64_t L = 0;
  for (int64_t b = 0; b < B; ++b) {
    const auto& s = input.ids[static_cast<std::size_t>(b)];
    const auto n = static_cast<int64_t>(s.size());
    ATTN_CHECK(n > 0, "bert: sequence ", b, " is empty; expected at least one token");
    ATTN_CHECK(n <= P, "bert: sequence ", b, " has ", n, " tokens; the model takes at most ", P,
               " (max_position_embeddings ", c.max_position_embeddings,
               c.position_offset > 0 ? " less the position offset" : "", "): truncate it first");
    for (std::size_t l = 0; l < s.size(); ++l)
      ATTN_CHECK(s[l] >= 0 && s[l] < V, "bert: token id ", s[l], " at position [", b, ", ", l,
                 "] is outside the vocabulary [0, ", V, ")");
    if (!input.type_ids.empty()) {
      const auto& t = input.type_ids[static_cast<std::size_t>(b)];
      ATTN_CHECK(t.size() == s.size(), "bert: sequence ", b, " has ", n, " tokens and ", t.size(),
                 " type ids; expected one type id per token");
      for (std::size_t l = 0; l < t.size(); ++l)
        ATTN_CHECK(t[l] >= 0 && t[l] < c.type_vocab_size, "bert: type id ", t[l], " at position [", b, ", ",
                   l, "] is outside [0, type_vocab_size = ", c.type_vocab_size, ")");
    }
    lengths.push_back(n);
    L = std::max(L, n);
  }
  ATTN_CHECK(B * L <= BertModel::kMaxTokensPerCall, "bert: batch too large: ", B, " sequences x ", L,
             " tokens = ", B * L, " padded tokens; at most ", BertModel::kMaxTokensPerCall,
             " per call (split it into smaller batches)");
  return lengths;
}

// Embeddings: word + position + token type (0 when the input gives none; padding rows use the pad token
// and type 0), then LayerNorm: [B, L, C].
Tensor embed(const BertConfig& c, const BertModel::Weights& w, const BertInput& input, int64_t L) {
  const auto B = static_cast<int64_t>(input.ids.size());
  const int64_t C = c.hidden_size, T = B * L;
  Tensor x = Tensor::empty({B, L, C});
  float* xp = x.data<float>();
  const float* word = w.word.defined() ? w.word.data<float>() : nullptr;
  const float* pos = w.pos.data<float>() + c.position_offset * C;
  const float* types = w.type.data<float>();
  parallel_for(T, 16, [&](int64_t t0, int64_t t1, int) {
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t b = t / L, l = t % L;
      const auto& s = input.ids[static_cast<std::size_t>(b)];
      const bool real = l < static_cast<int64_t>(s.size());
      const int64_t id = real ? s[static_cast<std::size_t>(l)] : c.pad_token_id;
      const int64_t tt = real && !input.type_ids.empty()
                             ? input.type_ids[static_cast<std::size_t>(b)][static_cast<std::size_t>(l)]
                             : 0;
      float* o = xp + t * C;
      const float* wr = word != nullptr ? word + id * C : o;
      if (word == nullptr) w.word_rows(id, o);  // the same sum, in the same order, as the f32 table's
      const std::array<const float*, 3> parts = {wr, pos + l * C, types + tt * C};
      runtime::sum_rows(parts, C, o);
    }
  });
  runtime::layer_norm_rows(xp, nullptr, nullptr, w.emb_ln_w.data<float>(), w.emb_ln_b.data<float>(), T, C,
                           c.layer_norm_eps);
  return x;
}

using Clock = std::chrono::steady_clock;

// One forward call's state: sizes, options, the product scratch and the stage timer.
struct Pass {
  const BertConfig& config;
  const BertModel::Weights& w;
  const BertRunOptions& options;
  const std::vector<int64_t>& lengths;
  BertProfile* profile;
  int64_t B, L, T, C, F, H, D;
  double eps, scale;
  ops::DenseLinearOptions lin;
  ops::DenseScratch scratch;
  Clock::time_point last = Clock::now();

  // Charges the time since the previous mark to `stage` (forward_profiled).
  void mark(const char* stage) {
    if (profile == nullptr) return;
    const Clock::time_point now = Clock::now();
    profile->add(stage, std::chrono::duration<double>(now - last).count());
    last = now;
  }
};

// The activation block of a call: the model's cached one when it is free and large enough to keep, else
// the call's own. `lock` holds the cached block while the call uses it.
Tensor activation_block(BertModel::Weights& w, int64_t n, std::unique_lock<std::mutex>& lock) {
  lock = std::unique_lock<std::mutex>(w.scratch_mu, std::try_to_lock);
  if (!lock.owns_lock() || n > kMaxCachedScratch) return Tensor::empty({n});
  if (!w.scratch.defined() || w.scratch.numel() < n) {
    w.scratch = Tensor();  // free the old block first
    w.scratch = Tensor::empty({n});
  }
  return w.scratch;
}

// Activation buffers of the unfused layers, views of one block.
struct Buffers {
  Tensor qkv;  // [B, L, 3, H, D] = [T, 3C]
  Tensor ctx;  // [B, L, H, D] = [T, C]
  Tensor ff;   // [T, F]
};

// One layer over the whole batch (post-norm):
//   x = LayerNorm(x + Wo · Attention(Wq x, Wk x, Wv x) + bo);  x = LayerNorm(x + W2 · gelu(W1 x + b1) + b2).
// The residual stream x [T, C] takes the output products' sums (DenseOutput::accumulate).
void layer(Pass& p, const BertModel::Weights::Layer& w, float* x, const Buffers& buf, BertOutput& out) {
  const int64_t T = p.T, C = p.C, F = p.F;
  float* qkv = buf.qkv.data<float>();
  float* ctx = buf.ctx.data<float>();
  float* ff = buf.ff.data<float>();
  ops::dense_linear(w.qkv, x, T, C, qkv, 3 * C, w.bqkv.data<float>(), ops::DenseOutput::write, p.lin,
                    p.scratch);
  p.mark("qkv_gemm");
  Tensor probs =
      ops::encoder_self_attention(buf.qkv, p.lengths, buf.ctx, p.scale, p.options.capture_attention);
  if (p.options.capture_attention) out.attention.push_back(probs);
  p.mark("attention");
  ops::dense_linear(w.o, ctx, T, C, x, C, w.bo.data<float>(), ops::DenseOutput::accumulate, p.lin, p.scratch);
  p.mark("o_gemm");
  runtime::layer_norm_rows(x, nullptr, nullptr, w.ln1_w.data<float>(), w.ln1_b.data<float>(), T, C, p.eps);
  p.mark("ln1");
  ops::dense_linear(w.up, x, T, C, ff, F, w.b1.data<float>(), ops::DenseOutput::write_gelu, p.lin, p.scratch);
  p.mark("ffn_up_gemm");  // bias and GELU included
  ops::dense_linear(w.down, ff, T, F, x, C, w.b2.data<float>(), ops::DenseOutput::accumulate, p.lin,
                    p.scratch);
  p.mark("ffn_down_gemm");
  runtime::layer_norm_rows(x, nullptr, nullptr, w.ln2_w.data<float>(), w.ln2_b.data<float>(), T, C, p.eps);
  p.mark("ln2");
}

// The last layer for the first token of each sequence only (BertRunOptions::first_token_only): the
// QKV product over every token (the keys and values), the attention of query row 0, then the output
// projection, LN1, FFN and LN2 over the B first rows, gathered. The products are told the whole batch's
// rows, so they take the kernel the full layer takes and give its first rows. Returns [B, 1, C].
Tensor first_token_layer(Pass& p, const BertModel::Weights::Layer& w, const float* x, const Buffers& buf) {
  const int64_t B = p.B, L = p.L, C = p.C, F = p.F;
  float* qkv = buf.qkv.data<float>();
  ops::dense_linear(w.qkv, x, p.T, C, qkv, 3 * C, w.bqkv.data<float>(), ops::DenseOutput::write, p.lin,
                    p.scratch);
  ops::encoder_self_attention(buf.qkv, p.lengths, buf.ctx, p.scale, false, 1);
  Tensor out = Tensor::empty({B, 1, C});
  float* h = out.data<float>();
  float* ctx0 = buf.ff.data<float>();  // [B, C], then the FFN's [B, F] after it: (L - 1) · F >= C (run())
  float* ff = ctx0 + B * C;
  const float* ctx = buf.ctx.data<float>();
  for (int64_t b = 0; b < B; ++b) {
    std::memcpy(h + b * C, x + b * L * C, static_cast<std::size_t>(C) * sizeof(float));
    std::memcpy(ctx0 + b * C, ctx + b * L * C, static_cast<std::size_t>(C) * sizeof(float));
  }
  ops::dense_linear(w.o, ctx0, B, C, h, C, w.bo.data<float>(), ops::DenseOutput::accumulate, p.lin,
                    p.scratch);
  runtime::layer_norm_rows(h, nullptr, nullptr, w.ln1_w.data<float>(), w.ln1_b.data<float>(), B, C, p.eps);
  ops::dense_linear(w.up, h, B, C, ff, F, w.b1.data<float>(), ops::DenseOutput::write_gelu, p.lin, p.scratch);
  ops::dense_linear(w.down, ff, B, F, h, C, w.b2.data<float>(), ops::DenseOutput::accumulate, p.lin,
                    p.scratch);
  runtime::layer_norm_rows(h, nullptr, nullptr, w.ln2_w.data<float>(), w.ln2_b.data<float>(), B, C, p.eps);
  p.mark("first_token_layer");
  return out;
}

// The fused layers (BertRunOptions::fuse_layers): groups of G whole sequences (at least ~128 rows, what
// the GEMM's row blocks hold), each taken through the steps of a layer by one thread in its own buffers.
struct Groups {
  int64_t G = 1, n = 0, per_thread = 0;
  Tensor block;  // nt · per_thread floats: per thread qkv [G·L, 3C], ctx [G·L, C], ff [G·L, F]
};

// The groups of a batch, or n = 0 where the layers are not fused: only where the groups share out evenly
// over the threads (or are many), so no thread waits long at the layer's end, and where the products of a
// group read their weights as the whole batch's would (ops::encoder_row_groups_pay).
Groups plan_groups(const Pass& p) {
  Groups g;
  const BertModel::Weights::Layer& l0 = p.w.layers.front();
  const int64_t nt = num_threads();
  g.G = std::max<int64_t>(1, (kFusedRows + p.L - 1) / p.L);
  const int64_t n_groups = (p.B + g.G - 1) / g.G;
  const int64_t min_rows = (p.B - (n_groups - 1) * g.G) * p.L;  // the last group's
  const std::array<const ops::DenseMatrix*, 4> ws = {&l0.qkv, &l0.o, &l0.up, &l0.down};
  if (!p.options.fuse_layers || p.options.capture_attention || n_groups < 2 * nt ||
      !(n_groups % nt == 0 || n_groups >= 8 * nt) ||
      !ops::encoder_row_groups_pay(ws, p.D, p.T, kFusedRows, min_rows, p.lin))
    return g;
  g.n = n_groups;
  g.per_thread = (g.G * p.L * (4 * p.C + p.F) + 15) / 16 * 16;
  return g;
}

// One fused layer in two regions over the groups: the attention block (QKV, attention, output projection,
// LN1), then the FFN block (up with bias + GELU, down, LN2). One region for both measured 1-2% slower per
// CPU second on the shared host than two (each group then cycles all four weight matrices, 7 MiB at
// MiniLM, through L3 instead of two at a time). The products are told the batch's rows (lin.batch_rows),
// so every group's rows come out as the unfused layer's: the same bits either way.
void fused_layer(const Pass& p, const BertModel::Weights::Layer& w, float* xp, const Groups& g) {
  const int64_t C = p.C, F = p.F, L = p.L, G = g.G;
  parallel_for(g.n, 1, [&](int64_t g0, int64_t g1, int tid) {
    ops::DenseScratch s;
    const int64_t base = tid * g.per_thread;
    for (int64_t gi = g0; gi < g1; ++gi) {
      const int64_t b0 = gi * G, nb = std::min(G, p.B - b0), rows = nb * L;
      const Tensor tq = g.block.slice(0, base, base + rows * 3 * C).view({nb, L, 3, p.H, p.D});
      const Tensor tc =
          g.block.slice(0, base + G * L * 3 * C, base + G * L * 3 * C + rows * C).view({nb, L, p.H, p.D});
      float* xg = xp + b0 * L * C;
      const std::vector<int64_t> lengths(p.lengths.begin() + b0, p.lengths.begin() + b0 + nb);
      ops::dense_linear(w.qkv, xg, rows, C, tq.data<float>(), 3 * C, w.bqkv.data<float>(),
                        ops::DenseOutput::write, p.lin, s);
      ops::encoder_self_attention(tq, lengths, tc, p.scale, false);
      ops::dense_linear(w.o, tc.data<float>(), rows, C, xg, C, w.bo.data<float>(),
                        ops::DenseOutput::accumulate, p.lin, s);
      runtime::layer_norm_rows(xg, nullptr, nullptr, w.ln1_w.data<float>(), w.ln1_b.data<float>(), rows, C,
                               p.eps);
    }
  });
  parallel_for(g.n, 1, [&](int64_t g0, int64_t g1, int tid) {
    ops::DenseScratch s;
    float* fg = g.block.data<float>() + tid * g.per_thread + G * L * 4 * C;
    for (int64_t gi = g0; gi < g1; ++gi) {
      const int64_t rows = std::min(G, p.B - gi * G) * L;
      float* xg = xp + gi * G * L * C;
      ops::dense_linear(w.up, xg, rows, C, fg, F, w.b1.data<float>(), ops::DenseOutput::write_gelu, p.lin, s);
      ops::dense_linear(w.down, fg, rows, F, xg, C, w.b2.data<float>(), ops::DenseOutput::accumulate, p.lin,
                        s);
      runtime::layer_norm_rows(xg, nullptr, nullptr, w.ln2_w.data<float>(), w.ln2_b.data<float>(), rows, C,
                               p.eps);
    }
  });
}

}  // namespace

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
  ATTN_CHECK(options.layers >= -1 && options.layers <= config_.num_layers, "bert: layers must be in [0, ",
             config_.num_layers, "] (or -1 for all); got ", options.layers);
  BertOutput out;
  out.lengths = check_input(config_, input);
  NoGradGuard no_grad;
  const auto B = static_cast<int64_t>(input.ids.size());
  const int64_t L = *std::max_element(out.lengths.begin(), out.lengths.end());
  const int64_t C = config_.hidden_size, D = config_.head_dim();
  Pass p{config_,
         *w_,
         options,
         out.lengths,
         profile,
         B,
         L,
         B * L,
         C,
         config_.intermediate_size,
         config_.num_heads,
         D,
         config_.layer_norm_eps,
         1.0 / std::sqrt(static_cast<double>(D)),
         {},
         {}};
  // Products of this batch: the quantized twins (8-bit activations) for small batches of a quantized model.
  p.lin.quantized_max_rows = w_->quantized ? options.quantized_max_tokens : 0;
  p.lin.batch_rows = p.T;
  if (profile != nullptr) ++profile->calls;

  Tensor x = embed(config_, *w_, input, L);  // x: [B, L, C], the residual stream
  p.mark("embeddings");
  if (options.trace) out.hidden_states.push_back(x.clone());

  // Scratch: qkv [T, 3C], ctx [T, C], ff [T, F] (and room to spare for the fused layers' groups).
  const int64_t T = p.T, F = p.F;
  std::unique_lock<std::mutex> scratch_lock;
  const Tensor block = activation_block(*w_, T * (3 * C + C + F + C), scratch_lock);
  const Buffers buf{block.slice(0, 0, T * 3 * C).view({B, L, 3, p.H, D}),
                    block.slice(0, T * 3 * C, T * 4 * C).view({B, L, p.H, D}),
                    block.slice(0, T * 4 * C, T * (4 * C + F)).view({T, F})};
  // Per thread: qkv [G·L, 3C], ctx [G·L, C], ff [G·L, F], from the model's block when it has room
  // (it holds T · (6C + F) floats, more than nt · G · L · (4C + F) when there are >= 2 nt groups).
  Groups groups = config_.num_layers > 0 ? plan_groups(p) : Groups{};
  if (groups.n > 0) {
    const int64_t need = num_threads() * groups.per_thread;
    groups.block = need <= block.numel() ? block : Tensor::empty({need});
  }
  const auto n_run = static_cast<std::size_t>(options.layers < 0 ? config_.num_layers : options.layers);
  const bool first_only = options.first_token_only && !options.capture_attention && !options.trace &&
                          n_run > 0 && n_run == static_cast<std::size_t>(config_.num_layers) &&
                          (L - 1) * F >= C;  // first_token_layer's [B, C + F] fits the FFN buffer [B · L, F]
  for (std::size_t li = 0; li < n_run; ++li) {
    if (first_only && li + 1 == n_run) {
      out.hidden = first_token_layer(p, w_->layers[li], x.data<float>(), buf);
      return out;
    }
    if (groups.n > 0) {
      fused_layer(p, w_->layers[li], x.data<float>(), groups);
      p.mark("fused_layer");
    } else {
      layer(p, w_->layers[li], x.data<float>(), buf, out);
    }
    if (options.trace) out.hidden_states.push_back(x.clone());
  }
  out.hidden = x;
  return out;
}

}  // namespace attn::models
