// The runtime's decoder: one forward over a ragged batch for every architecture
// (include/attn/models/runtime/decoder.h).
#include <attn/core/error.h>
#include <attn/models/runtime/decoder.h>
#include <attn/ops/paged_attention.h>
#include <attn/ops/weight_matrix.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "decoder_weights.h"

namespace attn::models::runtime {

namespace {
constexpr double kMaxKvCacheBytes = 16.0 * (int64_t{1} << 30);
}

struct Decoder::Impl {
  DecoderConfig c;
  detail::DecoderWeights w;
  int64_t cap = 0;
  bool q8 = true;
  Rope rope_full, rope_local;
  ops::LinearScratch lin;
  ops::GreedyPicker picker;
  int64_t candidates = 0;  // of the last greedy pick
  // Scratch, grown to the largest step so far.
  std::vector<float> x, n, q, k, v, att, tmp, g, u, logits_rows, pick_x;
  std::vector<ops::GreedyPicker::Pick> picks;
  std::vector<int64_t> positions;
  std::vector<float> cs_full, sn_full, cs_local, sn_local;
  std::vector<ops::PagedSequence> seqs;
  AttentionLayerTrace* trace = nullptr;  // layer_trace(): the layer whose buffers layer() copies out

  const Rope& rope_of(int64_t l) const {
    return c.sliding(l) && c.rope_base_local > 0 ? rope_local : rope_full;
  }

  void grow(int64_t M) {
    const int64_t C = c.dim, F = c.ffn, QD = c.heads * c.head_dim, KD = c.kv_heads * c.head_dim;
    const auto sz = [](int64_t a) { return static_cast<std::size_t>(a); };
    x.resize(sz(M * C)), n.resize(sz(M * std::max(C, QD))), tmp.resize(sz(M * C)), q.resize(sz(M * QD)),
        k.resize(sz(M * KD)), v.resize(sz(M * KD)), att.resize(sz(M * QD)), g.resize(sz(M * F)),
        u.resize(sz(M * F));
  }

  void linear(std::initializer_list<ops::LinearJob> jobs, const float* X, int64_t M) {
    ops::linear_rows(std::span<const ops::LinearJob>(jobs.begin(), jobs.size()), X, M,
                     jobs.begin()->w->cols(), lin, q8);
  }

  // One layer over the batch's M rows. capture: the first entry's rows' weights [Lq, H, Lk], or null.
  // With a trace for layer l, its buffers are copied out (one entry: layer_trace()).
  void layer(int64_t l, PagedKvCache& cache, std::span<const BatchEntry> batch, const BatchRows& br,
             float* capture);
  // Every entry's rows through every layer; logits of the rows in `logit_rows` into logits_rows, the
  // greedy picks of the rows in `pick_rows` into picks (ops::GreedyPicker; index -1: a non-finite logit).
  // capture: per layer, the first entry's weights (each [Lq, H, Lk], sized by the caller; an empty
  // vector: that layer is not captured), or null.
  void run(PagedKvCache& cache, std::span<const BatchEntry> batch, const BatchRows& br,
           std::vector<std::vector<float>>* capture, const std::vector<int64_t>& logit_rows,
           const std::vector<int64_t>& pick_rows = {});
};

void Decoder::Impl::layer(int64_t l, PagedKvCache& cache, std::span<const BatchEntry> batch,
                          const BatchRows& br, float* capture) {
  const detail::DecoderLayer& y = w.layers[static_cast<std::size_t>(l)];
  const int64_t M = br.rows, C = c.dim, F = c.ffn, H = c.heads, Hkv = c.kv_heads, D = c.head_dim;
  const int64_t QD = H * D, KD = Hkv * D;
  const double eps = c.norm_eps;
  if (l == 0)  // later layers get their norm from the previous layer's residual step
    for_rows(M, [&](int64_t b, int64_t e) {
      rms_norm_rows(x.data() + b * C, y.attn_norm.data(), e - b, C, eps, n.data() + b * C);
    });
  AttentionLayerTrace* t = trace && trace->layer == l ? trace : nullptr;
  const auto copy = [M](std::vector<float>& to, const std::vector<float>& from, int64_t width) {
    to.assign(from.begin(), from.begin() + M * width);
  };
  if (t) copy(t->x, x, C), copy(t->normed, n, C);
  linear({{&y.wq, q.data(), QD, y.bq.empty() ? nullptr : y.bq.data()},
          {&y.wk, k.data(), KD, y.bk.empty() ? nullptr : y.bk.data()},
          {&y.wv, v.data(), KD, y.bv.empty() ? nullptr : y.bv.data()}},
         n.data(), M);
  const Rope& rope = rope_of(l);
  const bool local = &rope == &rope_local;
  const float* cs = local ? cs_local.data() : cs_full.data();
  const float* sn = local ? sn_local.data() : sn_full.data();
  for_rows(M, [&](int64_t b, int64_t e) {
    if (c.qk_norm) {
      rms_norm_rows(q.data() + b * QD, y.q_norm.data(), (e - b) * H, D, eps, q.data() + b * QD);
      rms_norm_rows(k.data() + b * KD, y.k_norm.data(), (e - b) * Hkv, D, eps, k.data() + b * KD);
    }
    rope.apply(q.data(), b, e, H, D, cs, sn);
    rope.apply(k.data(), b, e, Hkv, D, cs, sn);
  });
  if (t) copy(t->q, q, QD), copy(t->k, k, KD), copy(t->v, v, KD);
  const auto B = static_cast<int64_t>(batch.size());
  seqs.resize(static_cast<std::size_t>(B));
  for (int64_t b = 0; b < B; ++b) {
    const BatchEntry& e = batch[b];
    cache.write(e.seq, l, br.pos0[b], k.data() + br.row0[b] * KD, v.data() + br.row0[b] * KD, e.n);
    seqs[b] = cache.attention_sequence(e.seq, l, e.n);
    if (capture && b == 0) seqs[b].weights = capture;
  }
  ops::PagedAttentionOptions ao;
  ao.scale = c.attn_scale;
  ao.window = c.windows[static_cast<std::size_t>(l)];
  ao.softcap = c.attn_softcap;
  ops::paged_attention(q.data(), H, cache.view(), seqs, ao, att.data());
  capture_last_rows(cache, batch, br.row0.data(), l, q.data(), H, ao);
  if (t) copy(t->att, att, QD);
  const float* next_norm =
      l + 1 < c.layers ? w.layers[static_cast<std::size_t>(l + 1)].attn_norm.data() : nullptr;
  if (c.post_norms) {
    linear({{&y.wo, tmp.data(), C}}, att.data(), M);
    if (t) copy(t->o, tmp, C);
    for_rows(M, [&](int64_t b, int64_t e) {
      rms_norm_rows(tmp.data() + b * C, y.post_attn_norm.data(), e - b, C, eps, tmp.data() + b * C);
      for (int64_t i = b * C; i < e * C; ++i) x[i] += tmp[i];
      rms_norm_rows(x.data() + b * C, y.ffn_norm.data(), e - b, C, eps, n.data() + b * C);
    });
  } else if (t) {  // W_O · att apart, for the trace
    linear({{&y.wo, tmp.data(), C}}, att.data(), M);
    copy(t->o, tmp, C);
    for (int64_t i = 0; i < M * C; ++i) x[static_cast<std::size_t>(i)] += tmp[static_cast<std::size_t>(i)];
    for_rows(M, [&](int64_t b, int64_t e) {
      rms_norm_rows(x.data() + b * C, y.ffn_norm.data(), e - b, C, eps, n.data() + b * C);
    });
  } else {
    linear({{&y.wo, x.data(), C, nullptr, true}}, att.data(), M);  // x += Wo · att
    for_rows(M, [&](int64_t b, int64_t e) {
      rms_norm_rows(x.data() + b * C, y.ffn_norm.data(), e - b, C, eps, n.data() + b * C);
    });
  }
  if (t) copy(t->x_after, x, C), copy(t->normed_after, n, C);
  linear({{&y.gate, g.data(), F}, {&y.up, u.data(), F}}, n.data(), M);
  for_rows(M, [&](int64_t b, int64_t e) {
    gated_activation(c.activation, g.data() + b * F, u.data() + b * F, (e - b) * F);
  });
  if (c.post_norms) {
    linear({{&y.down, tmp.data(), C}}, g.data(), M);
    for_rows(M, [&](int64_t b, int64_t e) {
      rms_norm_rows(tmp.data() + b * C, y.post_ffw_norm.data(), e - b, C, eps, tmp.data() + b * C);
      for (int64_t i = b * C; i < e * C; ++i) x[i] += tmp[i];
      if (next_norm) rms_norm_rows(x.data() + b * C, next_norm, e - b, C, eps, n.data() + b * C);
    });
  } else {
    linear({{&y.down, x.data(), C, nullptr, true}}, g.data(), M);  // x += Wdown · h
    if (next_norm)
      for_rows(M, [&](int64_t b, int64_t e) {
        rms_norm_rows(x.data() + b * C, next_norm, e - b, C, eps, n.data() + b * C);
      });
  }
}

void Decoder::Impl::run(PagedKvCache& cache, std::span<const BatchEntry> batch, const BatchRows& br,
                        std::vector<std::vector<float>>* capture, const std::vector<int64_t>& logit_rows,
                        const std::vector<int64_t>& pick_rows) {
  const int64_t M = br.rows, C = c.dim;
  grow(std::max<int64_t>(M, static_cast<int64_t>(logit_rows.size())));
  positions.resize(static_cast<std::size_t>(M));
  for (std::size_t b = 0; b < batch.size(); ++b)
    for (int64_t i = 0; i < batch[b].n; ++i) {
      const int64_t r = br.row0[b] + i;
      positions[static_cast<std::size_t>(r)] = br.pos0[b] + i;
      w.embed.row(batch[b].tokens[i], x.data() + r * C);
    }
  if (c.embed_scale != 1.0f)
    for (int64_t i = 0; i < M * C; ++i) x[static_cast<std::size_t>(i)] *= c.embed_scale;
  rope_full.tables(positions.data(), M, cs_full, sn_full);
  if (c.rope_base_local > 0) rope_local.tables(positions.data(), M, cs_local, sn_local);
  for (int64_t l = 0; l < c.layers; ++l)
    layer(l, cache, batch, br,
          capture && !(*capture)[static_cast<std::size_t>(l)].empty()
              ? (*capture)[static_cast<std::size_t>(l)].data()
              : nullptr);
  for (const BatchEntry& e : batch) cache.commit(e.seq);
  const auto P = static_cast<int64_t>(pick_rows.size());
  pick_x.resize(static_cast<std::size_t>(P * C));
  for (int64_t r = 0; r < P; ++r)
    rms_norm_rows(x.data() + pick_rows[static_cast<std::size_t>(r)] * C, w.output_norm.data(), 1, C,
                  c.norm_eps, pick_x.data() + r * C);
  picks.resize(static_cast<std::size_t>(P));
  picker.pick_rows(w.out(), pick_x.data(), P, C, lin, q8, picks.data());
  if (P > 0) candidates = picks.back().candidates;
  const auto R = static_cast<int64_t>(logit_rows.size());
  if (R == 0) return;
  for (int64_t r = 0; r < R; ++r)
    rms_norm_rows(x.data() + logit_rows[static_cast<std::size_t>(r)] * C, w.output_norm.data(), 1, C,
                  c.norm_eps, n.data() + r * C);
  logits_rows.resize(static_cast<std::size_t>(R * c.vocab));
  linear({{&w.out(), logits_rows.data(), c.vocab}}, n.data(), R);
  if (c.final_softcap > 0) soft_cap(logits_rows.data(), R * c.vocab, c.final_softcap);
}

Decoder::Decoder(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Decoder::~Decoder() = default;

namespace {
// The checks and tables every decoder needs once its config and weights are read.
void finish(Decoder::Impl& m, const DecoderOptions& options, const std::string& where) {
  ATTN_CHECK(options.max_context >= 0, m.c.arch, ": max_context must be >= 0, got ", options.max_context);
  m.cap = options.max_context ? std::min(options.max_context, m.c.context) : m.c.context;
  m.q8 = options.activations_8bit;
  m.picker = ops::GreedyPicker({options.greedy_screen_after, options.greedy_screen_only_where_fast});
  detail::quantize_weights(m.w, options.quantize);
  const double kv_bytes = static_cast<double>(m.c.layers) * static_cast<double>(m.c.kv_heads) *
                          static_cast<double>(m.c.head_dim) * 8.0;  // f32 K and V per position
  ATTN_CHECK(kv_bytes > 0 && kv_bytes <= kMaxKvCacheBytes, m.c.arch, ": ", where,
             ": one position of the KV cache would take ", kv_bytes, " bytes");
  m.rope_full =
      Rope::make(m.c.rope_style, m.c.rope_dims, m.c.rope_base, m.w.rope_freqs, m.c.rope_linear_factor);
  if (m.c.rope_base_local > 0) m.rope_local = Rope::make(m.c.rope_style, m.c.rope_dims, m.c.rope_base_local);
}
}  // namespace

std::unique_ptr<Decoder> Decoder::load(const io::GgufFile& file, const DecoderOptions& options) {
  auto impl = std::make_unique<Impl>();
  impl->c = DecoderConfig::from_gguf(file);
  impl->w = detail::load_decoder_weights(
      file, impl->c, {options.greedy_screen_after, options.greedy_screen_only_where_fast});
  finish(*impl, options, file.path());
  return std::unique_ptr<Decoder>(new Decoder(std::move(impl)));
}

std::unique_ptr<Decoder> Decoder::load_hf(const std::string& folder, const DecoderOptions& options) {
  detail::HfDecoder hf = detail::read_hf_decoder(folder);
  auto impl = std::make_unique<Impl>();
  impl->c = std::move(hf.config);
  impl->w = std::move(hf.weights);
  finish(*impl, options, folder);
  return std::unique_ptr<Decoder>(new Decoder(std::move(impl)));
}

const DecoderConfig& Decoder::config() const { return impl_->c; }
int64_t Decoder::weight_bytes() const { return detail::weight_bytes(impl_->w); }
int64_t Decoder::batch_vocab() const { return impl_->c.vocab; }
int64_t Decoder::batch_context() const { return impl_->cap; }

KvCacheConfig Decoder::kv_layout() const {
  KvCacheConfig k;
  k.layers = impl_->c.layers;
  k.kv_heads = impl_->c.kv_heads;
  k.head_dim = impl_->c.head_dim;
  k.layer_windows = impl_->c.windows;
  return k;
}

namespace {
void check_layout(const PagedKvCache& cache, const DecoderConfig& c) {
  const KvCacheConfig& kc = cache.config();
  ATTN_CHECK(kc.layers == c.layers && kc.kv_heads == c.kv_heads && kc.head_dim == c.head_dim, c.arch,
             ": the KV cache holds ", kc.layers, " layers of ", kc.kv_heads, " heads of size ", kc.head_dim,
             "; this model needs ", c.layers, ", ", c.kv_heads, " and ", c.head_dim, " (Decoder::kv_layout)");
  for (int64_t l = 0; l < c.layers; ++l) {
    const int64_t have =
        l < static_cast<int64_t>(kc.layer_windows.size()) ? kc.layer_windows[static_cast<std::size_t>(l)] : 0;
    ATTN_CHECK(have == c.windows[static_cast<std::size_t>(l)], c.arch, ": layer ", l,
               " of the KV cache has window ", have, "; this model needs ",
               c.windows[static_cast<std::size_t>(l)], " (Decoder::kv_layout)");
  }
}
}  // namespace

void Decoder::forward_batch(PagedKvCache& cache, std::span<const BatchEntry> batch) {
  Impl& m = *impl_;
  check_layout(cache, m.c);
  const BatchRows br = batch_rows(cache, batch, m.c.vocab, m.cap, m.cap < m.c.context, m.c.arch.c_str());
  // A final soft cap can make distinct logits equal: with one, a greedy pick is the argmax of the capped
  // logits, computed whole.
  const bool capped = m.c.final_softcap > 0;
  std::vector<int64_t> rows, picks;
  for (std::size_t b = 0; b < batch.size(); ++b) {
    const int64_t last = br.row0[b] + batch[b].n - 1;
    if (batch[b].logits || (batch[b].greedy && capped))
      rows.push_back(last);
    else if (batch[b].greedy)
      picks.push_back(last);
  }
  m.run(cache, batch, br, nullptr, rows, picks);
  std::size_t r = 0, k = 0;
  const auto V = static_cast<std::size_t>(m.c.vocab);
  for (const BatchEntry& e : batch) {
    if (e.logits) {
      std::memcpy(e.logits, m.logits_rows.data() + r++ * V, V * sizeof(float));
    } else if (e.greedy && capped) {
      const float* l = m.logits_rows.data() + r++ * V;
      const bool finite = std::all_of(l, l + V, [](float z) { return std::isfinite(z); });
      *e.greedy = finite ? std::max_element(l, l + V) - l : -1;
      m.candidates = m.c.vocab;
    } else if (e.greedy) {
      *e.greedy = m.picks[k++].index;
    }
  }
}

int64_t Decoder::greedy_candidates() const { return impl_->candidates; }

namespace {
// ids from position 0 as the one sequence of a private cache, appended, as a batch of one entry.
struct OneSequence {
  PagedKvCache cache;
  BatchEntry entry;
  BatchRows rows;
  static int64_t checked(std::span<const int32_t> ids, const DecoderConfig& c, int64_t cap,
                         const char* what) {
    const auto n = static_cast<int64_t>(ids.size());
    ATTN_CHECK(n >= 1 && n <= cap, c.arch, ": ", what, " over ", n, " tokens; expected 1 to ", cap);
    return n;
  }
  // what: the call's name for the range error.
  OneSequence(const KvCacheConfig& layout, std::span<const int32_t> ids, const DecoderConfig& c, int64_t cap,
              const char* what)
      : cache(one_sequence_pool(layout, checked(ids, c, cap, what))) {
    const auto n = static_cast<int64_t>(ids.size());
    const PagedKvCache::SeqId s = cache.create();
    ATTN_CHECK(cache.append(s, ids.data(), n), c.arch, ": the cache of one sequence is too small");
    entry = BatchEntry{s, ids.data(), n, nullptr, nullptr};
    rows = batch_rows(cache, {&entry, 1}, c.vocab, cap, cap < c.context, c.arch.c_str());
  }
};

// [Lq, H, Lk] (what the kernel writes) as [H, N, N] (what the exports want), N = Lq = Lk.
std::vector<float> heads_first(const std::vector<float>& raw, int64_t H, int64_t N) {
  std::vector<float> out(static_cast<std::size_t>(H * N * N));
  for (int64_t i = 0; i < N; ++i)
    for (int64_t h = 0; h < H; ++h)
      std::memcpy(out.data() + (h * N + i) * N, raw.data() + (i * H + h) * N,
                  static_cast<std::size_t>(N) * sizeof(float));
  return out;
}
}  // namespace

std::vector<std::vector<float>> Decoder::attention_weights(std::span<const int32_t> ids,
                                                           std::vector<float>* logits) {
  Impl& m = *impl_;
  const auto N = static_cast<int64_t>(ids.size());
  OneSequence one(kv_layout(), ids, m.c, m.cap, "attention");
  PagedKvCache& cache = one.cache;
  const BatchEntry& e = one.entry;
  const BatchRows& br = one.rows;
  const int64_t H = m.c.heads;
  // The kernel writes [Lq, H, Lk] per layer; the export wants [H, N, N].
  std::vector<std::vector<float>> raw(static_cast<std::size_t>(m.c.layers),
                                      std::vector<float>(static_cast<std::size_t>(N * H * N)));
  std::vector<int64_t> rows;
  if (logits) rows.push_back(N - 1);
  m.run(cache, {&e, 1}, br, &raw, rows);
  if (logits) *logits = m.logits_rows;
  std::vector<std::vector<float>> out;
  for (const std::vector<float>& r : raw) out.push_back(heads_first(r, H, N));
  return out;
}

std::vector<float> Decoder::logits_all(std::span<const int32_t> ids) {
  Impl& m = *impl_;
  const auto N = static_cast<int64_t>(ids.size());
  OneSequence one(kv_layout(), ids, m.c, m.cap, "logits");
  PagedKvCache& cache = one.cache;
  const BatchEntry& e = one.entry;
  const BatchRows& br = one.rows;
  std::vector<int64_t> rows(static_cast<std::size_t>(N));
  for (int64_t i = 0; i < N; ++i) rows[static_cast<std::size_t>(i)] = i;
  m.run(cache, {&e, 1}, br, nullptr, rows);
  return m.logits_rows;
}

bool Decoder::prepare_greedy_picks(std::span<const int32_t> ids) {
  Impl& m = *impl_;
  if (m.c.final_softcap > 0 || !m.picker.screens(m.w.out(), m.q8)) return false;  // picks read every logit
  if (m.picker.screen_built()) return true;
  OneSequence one(kv_layout(), ids, m.c, m.cap, "prepare_greedy_picks");
  ops::GreedyPickOptions o = m.picker.options();
  o.screen_after = 0;  // the next pick builds it (the option counts full picks only until then)
  m.picker = ops::GreedyPicker(o);
  m.run(one.cache, {&one.entry, 1}, one.rows, nullptr, {}, {one.entry.n - 1});
  return m.picker.screen_built();
}

AttentionLayerTrace Decoder::layer_trace(std::span<const int32_t> ids, int64_t layer) {
  Impl& m = *impl_;
  ATTN_CHECK(layer >= 0 && layer < m.c.layers, m.c.arch, ": layer: expected 0..", m.c.layers - 1, "; got ",
             layer);
  OneSequence one(kv_layout(), ids, m.c, m.cap, "a layer trace");
  const auto N = static_cast<int64_t>(ids.size());
  AttentionLayerTrace t;
  t.layer = layer;
  std::vector<std::vector<float>> raw(static_cast<std::size_t>(m.c.layers));
  raw[static_cast<std::size_t>(layer)].resize(static_cast<std::size_t>(N * m.c.heads * N));
  m.trace = &t;
  try {
    m.run(one.cache, {&one.entry, 1}, one.rows, &raw, {});
  } catch (...) {
    m.trace = nullptr;
    throw;
  }
  m.trace = nullptr;
  t.weights = heads_first(raw[static_cast<std::size_t>(layer)], m.c.heads, N);
  return t;
}

}  // namespace attn::models::runtime
