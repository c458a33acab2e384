// BERT encoder inference: the forward pass (include/attn/models/bert.h).
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

#include "models/bert_weights.h"

namespace attn::models {

namespace {

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
      const float* pr = pos + l * C;
      const float* type = types + tt * C;
      float* o = xp + t * C;
      if (word != nullptr) {
        const float* wr = word + id * C;
        for (int64_t k = 0; k < C; ++k) o[k] = wr[k] + pr[k] + type[k];
      } else {
        w.word_rows(id, o);  // the same sum, in the same order, as the f32 table's
        for (int64_t k = 0; k < C; ++k) o[k] = o[k] + pr[k] + type[k];
      }
    }
  });
  ops::residual_layer_norm(xp, nullptr, nullptr, w.emb_ln_w.data<float>(), w.emb_ln_b.data<float>(), T, C,
                           static_cast<float>(c.layer_norm_eps));
  return x;
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
  const auto B = static_cast<int64_t>(input.ids.size());
  ATTN_CHECK(options.layers >= -1 && options.layers <= config_.num_layers, "bert: layers must be in [0, ",
             config_.num_layers, "] (or -1 for all); got ", options.layers);
  const int64_t C = config_.hidden_size, F = config_.intermediate_size, H = config_.num_heads;
  const int64_t D = config_.head_dim();
  BertOutput out;
  out.lengths = check_input(config_, input);
  const int64_t L = *std::max_element(out.lengths.begin(), out.lengths.end());
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

  Tensor x = embed(config_, *w_, input, L);  // x: [B, L, C], the residual stream
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

}  // namespace attn::models
