#include <attn/core/autograd.h>
#include <attn/core/error.h>
#include <attn/core/parallel.h>
#include <attn/core/random.h>
#include <attn/io/finite.h>
#include <attn/models/generate.h>
#include <attn/ops/inference.h>
#include <attn/ops/linear.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <numeric>
#include <optional>
#include <string>

namespace attn::models {

double length_penalty(int64_t n, double alpha, LengthPenalty kind) {
  if (alpha == 0.0) return 1.0;
  const double len = static_cast<double>(n);
  return kind == LengthPenalty::gnmt ? std::pow((5.0 + len) / 6.0, alpha) : std::pow(len, alpha);
}

std::vector<double> sampling_distribution(const float* logits, int64_t V, double temperature, int64_t top_k,
                                          double top_p) {
  ATTN_CHECK(V > 0, "sampling_distribution: vocabulary must be non-empty; got ", V);
  ATTN_CHECK(temperature > 0 && std::isfinite(temperature), "sampling: temperature must be > 0; got ",
             temperature);
  ATTN_CHECK(top_k >= 0, "sampling: top_k must be >= 0 (0 = all); got ", top_k);
  ATTN_CHECK(top_p > 0 && top_p <= 1, "sampling: top_p must be in (0, 1]; got ", top_p);
  // Tokens by logit, descending (ties: lower id first), so top-k and top-p cut a prefix.
  std::vector<int64_t> order(static_cast<std::size_t>(V));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return logits[a] > logits[b]; });
  int64_t keep = (top_k > 0 && top_k < V) ? top_k : V;
  const double max_logit = static_cast<double>(logits[order[0]]) / temperature;
  std::vector<double> p(static_cast<std::size_t>(V), 0.0);
  double total = 0.0;
  for (int64_t i = 0; i < keep; ++i) {
    const int64_t t = order[i];
    const double e = std::exp(static_cast<double>(logits[t]) / temperature - max_logit);
    p[t] = e;
    total += e;
  }
  if (top_p < 1.0) {
    double cum = 0.0;
    int64_t n = 0;
    while (n < keep) {
      cum += p[order[n]] / total;
      ++n;
      if (cum >= top_p) break;
    }
    for (int64_t i = n; i < keep; ++i) p[order[i]] = 0.0;
    keep = n;
    total = 0.0;
    for (int64_t i = 0; i < keep; ++i) total += p[order[i]];
  }
  for (double& x : p) x /= total;
  return p;
}

int64_t sample_token(const float* logits, int64_t V, double temperature, int64_t top_k, double top_p,
                     Rng& rng) {
  const std::vector<double> dist = sampling_distribution(logits, V, temperature, top_k, top_p);
  const double u = rng.uniform();
  double cum = 0.0;
  int64_t token = -1;
  for (int64_t t = 0; t < V; ++t) {
    if (dist[t] == 0.0) continue;
    cum += dist[t];
    token = t;
    if (u < cum) break;
  }
  return token;
}

namespace {

// The logits of a step: row r of V floats at data + r · stride, valid until the next step.
struct LogitRows {
  const float* data = nullptr;
  int64_t stride = 0;
};

LogitRows rows_of(const Tensor& logits) { return {logits.data<float>(), logits.stride(0)}; }

// The model side of the search, the one interface the trained decoders (EncoderDecoder and DecoderLM)
// are driven through: N rows, each fed one token per step, the KV cache behind it. The search loops below
// (greedy and sampling, beam) are shared by all of them.
class Stepper {
 public:
  virtual ~Stepper() = default;
  // Feeds one token per row; returns logits [N, V] and, when asked, the last decoder layer's
  // head-averaged cross-attention [N, Ls].
  virtual LogitRows step(const std::vector<int64_t>& tokens, Tensor* cross) = 0;
  // Keeps rows `rows` (old indices, repeats allowed) of the model's state.
  virtual void select_rows(const std::vector<int64_t>& rows) = 0;
};

Tensor head_average(const Tensor& w) {  // w: [N, H, 1, Ls] -> [N, Ls]
  const int64_t N = w.size(0), H = w.size(1), Ls = w.size(3);
  Tensor out = Tensor::zeros({N, Ls});
  float* o = out.data<float>();
  const Tensor c = w.contiguous();
  const int64_t R = w.size(2);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t h = 0; h < H; ++h) {
      const float* r = c.data<float>() + ((n * H + h) * R + R - 1) * Ls;  // the last query row
      for (int64_t j = 0; j < Ls; ++j) o[n * Ls + j] += r[j] / static_cast<float>(H);
    }
  return out;
}

Tensor ids_tensor(const std::vector<int64_t>& tokens) {
  return Tensor::from(tokens, {static_cast<int64_t>(tokens.size()), 1});
}

class EncDecStepper : public Stepper {
 public:
  EncDecStepper(EncoderDecoder& m, const std::vector<std::vector<int64_t>>& sources) : m_(m) {
    const int64_t B = static_cast<int64_t>(sources.size());
    int64_t Ls = 0;
    for (const auto& s : sources) Ls = std::max<int64_t>(Ls, static_cast<int64_t>(s.size()));
    std::vector<int64_t> padded(static_cast<std::size_t>(B * Ls), m.config().pad_id);
    for (int64_t b = 0; b < B; ++b) {
      std::copy(sources[b].begin(), sources[b].end(), padded.begin() + b * Ls);
      lengths_.push_back(static_cast<int64_t>(sources[b].size()));
    }
    const bool all_full = std::all_of(lengths_.begin(), lengths_.end(), [&](int64_t l) { return l == Ls; });
    if (all_full) lengths_.clear();  // no padding: the unmasked (faster) attention path
    memory_ = m_.encode(Tensor::from(padded, {B, Ls}), lengths_);
  }
  LogitRows step(const std::vector<int64_t>& tokens, Tensor* cross) override {
    Tensor w;
    logits_ = m_.step(ids_tensor(tokens), memory_, lengths_, cache_, cross != nullptr ? &w : nullptr);
    memory_ = Tensor();  // the cross-attention caches hold what is needed from now on
    if (cross != nullptr) *cross = head_average(w);
    return rows_of(logits_);
  }
  void select_rows(const std::vector<int64_t>& rows) override {
    cache_.select_rows(rows);
    if (!lengths_.empty()) {
      std::vector<int64_t> l;
      for (int64_t r : rows) l.push_back(lengths_[r]);
      lengths_ = std::move(l);
    }
  }

 private:
  EncoderDecoder& m_;
  Tensor memory_, logits_;
  std::vector<int64_t> lengths_;
  nn::DecoderCache cache_;
};

class LmStepper : public Stepper {
 public:
  explicit LmStepper(DecoderLM& m) : m_(m) {}
  // prefix: [N, P] the common prompt prefix; logits of its last position [N, V].
  LogitRows prefill(const Tensor& prefix) {
    logits_ = m_.step(prefix, cache_);
    return rows_of(logits_);
  }
  LogitRows step(const std::vector<int64_t>& tokens, Tensor*) override {
    logits_ = m_.step(ids_tensor(tokens), cache_);
    return rows_of(logits_);
  }
  void select_rows(const std::vector<int64_t>& rows) override { cache_.select_rows(rows); }

 private:
  DecoderLM& m_;
  nn::DecoderCache cache_;
  Tensor logits_;  // the last step's [N, V]
};

// One live sequence (a row of the model's batch).
struct Hyp {
  int64_t source = 0;
  std::vector<int64_t> ids;
  double log_prob = 0.0;
  std::vector<float> cross;    // [steps, Ls] flattened
  std::size_t prompt_pos = 0;  // DecoderLM: next prompt token to feed (== prompt size: generating)
};

struct Problem {
  const GenerateOptions& o;
  int64_t V;
  std::vector<std::vector<int64_t>> prompts;  // DecoderLM: the prompts; empty for EncoderDecoder
  std::vector<int64_t> caps;                  // per source: the most tokens it may generate
  std::vector<int64_t> src_len;               // per source: Ls (cross-attention rows)
  bool capture = false;
};

const std::vector<int64_t>& prompt_of(const Problem& p, int64_t source) {
  static const std::vector<int64_t> kNone;
  return p.prompts.empty() ? kNone : p.prompts[source];
}

bool is_stop(const GenerateOptions& o, int64_t token) {
  if (token == o.eos_id) return true;
  return std::find(o.stop_ids.begin(), o.stop_ids.end(), token) != o.stop_ids.end();
}

const float* row_ptr(const LogitRows& logits, int64_t r) { return logits.data + r * logits.stride; }

void append_cross(Hyp& h, const Tensor& cross, int64_t r, int64_t Ls) {
  const float* c = cross.data<float>() + r * cross.size(1);
  h.cross.insert(h.cross.end(), c, c + Ls);
}

Generated finish(Hyp&& h, int64_t stop_token, double score, const Problem& p) {
  Generated g;
  g.source = h.source;
  g.ids = std::move(h.ids);
  g.stop_token = stop_token;
  g.log_prob = h.log_prob;
  g.score = score;
  if (p.capture) {
    const int64_t Ls = p.src_len[h.source];
    const int64_t steps = Ls > 0 ? static_cast<int64_t>(h.cross.size()) / Ls : 0;
    g.cross_attention = Tensor::from(h.cross, {steps, Ls});
  }
  return g;
}

// Per source b its own generator Rng(mix_seed(seed, b)).
std::vector<Rng> source_rngs(const GenerateOptions& o, int64_t B) {
  std::vector<Rng> rngs;
  for (int64_t b = 0; b < B; ++b) rngs.emplace_back(mix_seed(o.seed, static_cast<uint64_t>(b)));
  return rngs;
}

// Greedy and sampling: every row is one sequence; rngs: one generator per source.
// A NaN or inf logit would pick a token silently (or none): an error naming the row and the step.
void check_logits_row(const LogitRows& logits, int64_t r, int64_t V, int64_t step) {
  io::check_finite(logits.data + r * logits.stride, V,
                   "generate: the logits of row " + std::to_string(r) + " at step " + std::to_string(step) +
                       " (the model's weights or its input produced them)");
}

// Every row, rows over the threads (a step's logits are rows x V floats).
void check_logits(const LogitRows& logits, std::size_t rows, int64_t V, int64_t step) {
  parallel_for(static_cast<int64_t>(rows), 4, [&](int64_t r0, int64_t r1, int) {
    for (int64_t r = r0; r < r1; ++r) check_logits_row(logits, r, V, step);
  });
}

std::vector<Generated> run_simple(Stepper& model, LogitRows logits, Tensor cross, std::vector<Hyp> rows,
                                  const Problem& p, const TokenCallback& on_token, std::vector<Rng>& rngs) {
  const GenerateOptions& o = p.o;
  const int64_t B = static_cast<int64_t>(p.caps.size());
  std::vector<std::optional<Generated>> done(static_cast<std::size_t>(B));
  std::vector<int64_t> feed;
  std::vector<ops::ArgmaxLse> best;  // greedy: per row the argmax and log-sum-exp of its logits
  for (int64_t step = 0; !rows.empty(); ++step) {
    std::vector<int64_t> keep;
    feed.clear();
    std::vector<Hyp> next;
    if (o.search == SearchKind::greedy) {  // the check and one fused pass per row, rows over the threads
      best.resize(rows.size());
      parallel_for(static_cast<int64_t>(rows.size()), 4, [&](int64_t r0, int64_t r1, int) {
        for (int64_t r = r0; r < r1; ++r) {
          check_logits_row(logits, r, p.V, step);
          best[r] = ops::row_argmax_logsumexp(row_ptr(logits, r), p.V);
        }
      });
    } else {
      check_logits(logits, rows.size(), p.V, step);
    }
    for (std::size_t r = 0; r < rows.size(); ++r) {
      Hyp& h = rows[r];
      int64_t token;
      const std::vector<int64_t>& prompt = prompt_of(p, h.source);
      if (h.prompt_pos < prompt.size()) {
        token = prompt[h.prompt_pos++];
        keep.push_back(static_cast<int64_t>(r));
        feed.push_back(token);
        next.push_back(std::move(h));
        continue;
      }
      const float* x = row_ptr(logits, static_cast<int64_t>(r));
      if (o.search == SearchKind::greedy) {
        token = best[r].token;  // first maximum: ties go to the lower id
        h.log_prob += static_cast<double>(x[token]) - best[r].lse;
      } else {
        token = sample_token(x, p.V, o.temperature, o.top_k, o.top_p, rngs[h.source]);
        h.log_prob += static_cast<double>(x[token]) - ops::row_logsumexp(x, p.V);
      }
      if (p.capture) append_cross(h, cross, static_cast<int64_t>(r), p.src_len[h.source]);
      if (is_stop(o, token)) {
        const double lp = h.log_prob;
        done[h.source] = finish(std::move(h), token, lp, p);
        continue;
      }
      h.ids.push_back(token);
      if (on_token) on_token(h.source, token);
      if (static_cast<int64_t>(h.ids.size()) >= p.caps[h.source]) {
        const double lp = h.log_prob;
        done[h.source] = finish(std::move(h), -1, lp, p);
        continue;
      }
      keep.push_back(static_cast<int64_t>(r));
      feed.push_back(token);
      next.push_back(std::move(h));
    }
    if (next.empty()) break;
    if (keep.size() != rows.size()) model.select_rows(keep);
    rows = std::move(next);
    logits = model.step(feed, p.capture ? &cross : nullptr);
  }
  std::vector<Generated> out;
  for (auto& g : done) out.push_back(std::move(*g));
  return out;
}

// Beam search: per source up to `beam` live rows.
std::vector<Generated> run_beam(Stepper& model, LogitRows logits, Tensor cross, std::vector<Hyp> rows,
                                const Problem& p) {
  const GenerateOptions& o = p.o;
  const int64_t B = static_cast<int64_t>(p.caps.size());
  const int64_t K = o.beam;
  auto score_of = [&](double lp, int64_t n) {
    return lp / length_penalty(n, o.length_alpha, o.length_penalty);
  };
  std::vector<std::vector<Generated>> finished(static_cast<std::size_t>(B));  // best first, at most K
  auto add_finished = [&](Hyp&& h, int64_t stop, int64_t n) {
    const double s = score_of(h.log_prob, n);
    auto& f = finished[h.source];
    if (static_cast<int64_t>(f.size()) >= K && s <= f.back().score) return;
    Generated g = finish(std::move(h), stop, s, p);
    auto it = std::find_if(f.begin(), f.end(), [&](const Generated& x) { return x.score < s; });
    f.insert(it, std::move(g));
    if (static_cast<int64_t>(f.size()) > K) f.pop_back();
  };
  std::vector<int64_t> feed;
  for (int64_t step = 0; !rows.empty(); ++step) {
    check_logits(logits, rows.size(), p.V, step);
    std::vector<int64_t> keep;
    std::vector<Hyp> next;
    feed.clear();
    std::size_t r0 = 0;
    while (r0 < rows.size()) {  // rows of one source are adjacent
      std::size_t r1 = r0;
      while (r1 < rows.size() && rows[r1].source == rows[r0].source) ++r1;
      const int64_t b = rows[r0].source;
      const std::vector<int64_t>& prompt = prompt_of(p, b);
      if (rows[r0].prompt_pos < prompt.size()) {  // still in the prompt: one row, forced
        Hyp& h = rows[r0];
        feed.push_back(prompt[h.prompt_pos++]);
        keep.push_back(static_cast<int64_t>(r0));
        next.push_back(std::move(h));
        r0 = r1;
        continue;
      }
      // Candidates: the 2K best tokens of each row, ranked by total log-prob.
      struct Cand {
        double lp;
        int64_t row, token;
      };
      std::vector<Cand> cands;
      std::vector<int64_t> idx;  // token ids of one row, reused across rows
      const int64_t per_row = std::min<int64_t>(2 * K, p.V);
      for (std::size_t r = r0; r < r1; ++r) {
        const float* x = row_ptr(logits, static_cast<int64_t>(r));
        const double lse = ops::row_logsumexp(x, p.V);
        idx.resize(static_cast<std::size_t>(p.V));
        std::iota(idx.begin(), idx.end(), 0);
        std::partial_sort(idx.begin(), idx.begin() + per_row, idx.end(),
                          [&](int64_t a, int64_t c) { return x[a] > x[c] || (x[a] == x[c] && a < c); });
        for (int64_t i = 0; i < per_row; ++i)
          cands.push_back(
              {rows[r].log_prob + (static_cast<double>(x[idx[i]]) - lse), static_cast<int64_t>(r), idx[i]});
      }
      std::stable_sort(cands.begin(), cands.end(), [](const Cand& a, const Cand& c) { return a.lp > c.lp; });
      int64_t live = 0;
      std::vector<Hyp> grown;
      std::vector<int64_t> grown_rows;
      for (const Cand& c : cands) {
        if (live >= K) break;
        Hyp h;
        h.source = b;
        h.ids = rows[c.row].ids;
        h.log_prob = c.lp;
        h.prompt_pos = rows[c.row].prompt_pos;
        if (p.capture) {
          h.cross = rows[c.row].cross;
          append_cross(h, cross, c.row, p.src_len[b]);
        }
        const int64_t n = static_cast<int64_t>(h.ids.size()) + 1;
        if (is_stop(o, c.token)) {
          add_finished(std::move(h), c.token, n);
          continue;
        }
        h.ids.push_back(c.token);
        ++live;
        if (n >= p.caps[b]) {
          add_finished(std::move(h), -1, n);
          continue;
        }
        grown.push_back(std::move(h));
        grown_rows.push_back(c.row);
      }
      // Stop this source when no live hypothesis can beat the worst kept finished one:
      // log_prob can only fall, and lp(n) is monotone in n, so the bound is at n or cap.
      bool source_done = grown.empty();
      auto& f = finished[b];
      if (!source_done && static_cast<int64_t>(f.size()) >= K) {
        double best = -std::numeric_limits<double>::infinity();
        for (const Hyp& h : grown) {
          const int64_t n = static_cast<int64_t>(h.ids.size()) + 1;
          best = std::max({best, score_of(h.log_prob, n), score_of(h.log_prob, p.caps[b])});
        }
        source_done = best <= f.back().score;
      }
      if (!source_done) {
        for (std::size_t i = 0; i < grown.size(); ++i) {
          feed.push_back(grown[i].ids.back());
          keep.push_back(grown_rows[i]);
          next.push_back(std::move(grown[i]));
        }
      }
      r0 = r1;
    }
    if (next.empty()) break;
    bool identity = keep.size() == rows.size();
    for (std::size_t i = 0; identity && i < keep.size(); ++i) identity = keep[i] == static_cast<int64_t>(i);
    if (!identity) model.select_rows(keep);
    rows = std::move(next);
    logits = model.step(feed, p.capture ? &cross : nullptr);
  }
  std::vector<Generated> out;
  for (int64_t b = 0; b < B; ++b) {
    const int64_t n = std::min<int64_t>(o.num_return, static_cast<int64_t>(finished[b].size()));
    for (int64_t i = 0; i < n; ++i) out.push_back(std::move(finished[b][i]));
  }
  return out;
}

void check_options(const GenerateOptions& o, int64_t V, const TokenCallback& on_token) {
  ATTN_CHECK(o.max_new_tokens >= 0, "generate: max_new_tokens must be >= 0; got ", o.max_new_tokens);
  ATTN_CHECK(o.eos_id == -1 || (o.eos_id >= 0 && o.eos_id < V), "generate: eos_id must be -1 or in [0, ", V,
             "); got ", o.eos_id);
  for (int64_t s : o.stop_ids)
    ATTN_CHECK(s >= 0 && s < V, "generate: stop id must be in [0, ", V, "); got ", s);
  if (o.search == SearchKind::beam) {
    ATTN_CHECK(o.beam >= 1, "generate: beam must be >= 1; got ", o.beam);
    ATTN_CHECK(o.num_return >= 1 && o.num_return <= o.beam,
               "generate: num_return must be in [1, beam = ", o.beam, "]; got ", o.num_return);
    ATTN_CHECK(std::isfinite(o.length_alpha), "generate: length_alpha must be finite; got ", o.length_alpha);
    ATTN_CHECK(!on_token, "generate: a token callback needs greedy or sampling (beam search cannot stream)");
  } else {
    ATTN_CHECK(o.num_return == 1, "generate: num_return must be 1 without beam search; got ", o.num_return);
  }
  if (o.search == SearchKind::sample) {
    ATTN_CHECK(o.temperature > 0 && std::isfinite(o.temperature), "generate: temperature must be > 0; got ",
               o.temperature);
    ATTN_CHECK(o.top_k >= 0, "generate: top_k must be >= 0 (0 = all); got ", o.top_k);
    ATTN_CHECK(o.top_p > 0 && o.top_p <= 1, "generate: top_p must be in (0, 1]; got ", o.top_p);
  }
}

void check_ids(const std::vector<int64_t>& ids, int64_t V, const char* what, std::size_t b) {
  for (std::size_t i = 0; i < ids.size(); ++i)
    ATTN_CHECK(ids[i] >= 0 && ids[i] < V, "generate: ", what, " ", b, " token ", i, " is ", ids[i],
               "; expected an id in [0, ", V, ")");
}

// Eval mode + no autograd for the duration of a call; restores the mode.
class InferenceScope {
 public:
  explicit InferenceScope(nn::Module& m) : m_(m), was_training_(m.is_training()) { m_.eval(); }
  ~InferenceScope() { m_.train(was_training_); }
  InferenceScope(const InferenceScope&) = delete;
  InferenceScope& operator=(const InferenceScope&) = delete;

 private:
  nn::Module& m_;
  bool was_training_;
  NoGradGuard no_grad_;
  ops::PackedWeightScope packed_;  // weights packed once per call (include/attn/ops/linear.h)
};

std::vector<Generated> dispatch(Stepper& model, LogitRows logits, Tensor cross, std::vector<Hyp> rows,
                                const Problem& p, const TokenCallback& on_token) {
  if (p.o.search == SearchKind::beam) return run_beam(model, logits, cross, std::move(rows), p);
  std::vector<Rng> rngs = source_rngs(p.o, static_cast<int64_t>(p.caps.size()));
  return run_simple(model, logits, cross, std::move(rows), p, on_token, rngs);
}

// Results for sources that may not generate at all (cap 0), merged back in order.
std::vector<Generated> merge(std::vector<Generated> ran, const std::vector<int64_t>& ran_sources, int64_t B,
                             const Problem& p) {
  for (Generated& g : ran) g.source = ran_sources[g.source];
  std::vector<Generated> out;
  std::size_t i = 0;
  for (int64_t b = 0; b < B; ++b) {
    if (p.caps[b] == 0) {
      Generated g;
      g.source = b;
      if (p.capture) g.cross_attention = Tensor::zeros({0, p.src_len[b]});
      out.push_back(std::move(g));
      continue;
    }
    while (i < ran.size() && ran[i].source == b) out.push_back(std::move(ran[i++]));
  }
  return out;
}

}  // namespace

std::vector<Generated> generate(EncoderDecoder& model, const std::vector<std::vector<int64_t>>& sources,
                                const GenerateOptions& options, const TokenCallback& on_token) {
  const TransformerConfig& c = model.config();
  const int64_t V = c.tgt_vocab;
  check_options(options, V, on_token);
  ATTN_CHECK(options.bos_id >= 0 && options.bos_id < V, "generate: bos_id must be in [0, ", V, "); got ",
             options.bos_id);
  for (std::size_t b = 0; b < sources.size(); ++b) {
    ATTN_CHECK(!sources[b].empty() && static_cast<int64_t>(sources[b].size()) <= c.max_len,
               "generate: source ", b, " has ", sources[b].size(),
               " tokens; expected 1 to max_len = ", c.max_len);
    check_ids(sources[b], c.src_vocab, "source", b);
  }
  Problem p{options, V, {}, {}, {}, options.capture_cross_attention};
  const int64_t B = static_cast<int64_t>(sources.size());
  std::vector<std::vector<int64_t>> run_sources;
  std::vector<int64_t> ran;
  for (int64_t b = 0; b < B; ++b) {
    p.caps.push_back(std::min<int64_t>(options.max_new_tokens, c.max_len - 1));
    p.src_len.push_back(static_cast<int64_t>(sources[b].size()));
    if (p.caps.back() > 0) run_sources.push_back(sources[b]), ran.push_back(b);
  }
  if (run_sources.empty()) return merge({}, ran, B, p);
  InferenceScope scope(model);
  Problem q = p;  // indexed by the running sources
  q.caps.clear(), q.src_len.clear();
  for (int64_t b : ran) q.caps.push_back(p.caps[b]), q.src_len.push_back(p.src_len[b]);
  EncDecStepper stepper(model, run_sources);
  std::vector<Hyp> rows(run_sources.size());
  for (std::size_t i = 0; i < rows.size(); ++i) rows[i].source = static_cast<int64_t>(i);
  Tensor cross;
  const LogitRows logits =
      stepper.step(std::vector<int64_t>(rows.size(), options.bos_id), q.capture ? &cross : nullptr);
  TokenCallback cb;
  if (on_token) cb = [&](int64_t s, int64_t t) { on_token(ran[s], t); };
  return merge(dispatch(stepper, logits, cross, std::move(rows), q, cb), ran, B, p);
}

std::vector<Generated> generate(DecoderLM& model, const std::vector<std::vector<int64_t>>& prompts,
                                const GenerateOptions& options, const TokenCallback& on_token) {
  const TransformerConfig& c = model.config();
  const int64_t V = c.tgt_vocab;
  check_options(options, V, on_token);
  ATTN_CHECK(
      !options.capture_cross_attention,
      "generate: capture_cross_attention needs an EncoderDecoder (a DecoderLM has no cross-attention)");
  for (std::size_t b = 0; b < prompts.size(); ++b) {
    ATTN_CHECK(!prompts[b].empty() && static_cast<int64_t>(prompts[b].size()) < c.max_len,
               "generate: prompt ", b, " has ", prompts[b].size(),
               " tokens; expected 1 to max_len - 1 = ", c.max_len - 1);
    check_ids(prompts[b], V, "prompt", b);
  }
  Problem p{options, V, {}, {}, {}, false};
  const int64_t B = static_cast<int64_t>(prompts.size());
  std::vector<int64_t> ran;
  Problem q = p;
  for (int64_t b = 0; b < B; ++b) {
    const int64_t P = static_cast<int64_t>(prompts[b].size());
    p.caps.push_back(std::min<int64_t>(options.max_new_tokens, c.max_len - P));
    p.src_len.push_back(0);
    if (p.caps.back() > 0) {
      ran.push_back(b);
      q.prompts.push_back(prompts[b]);
      q.caps.push_back(p.caps.back());
      q.src_len.push_back(0);
    }
  }
  if (ran.empty()) return merge({}, ran, B, p);
  InferenceScope scope(model);
  const int64_t N = static_cast<int64_t>(ran.size());
  int64_t common = std::numeric_limits<int64_t>::max();
  for (const auto& pr : q.prompts) common = std::min<int64_t>(common, static_cast<int64_t>(pr.size()));
  std::vector<int64_t> prefix;
  std::vector<Hyp> rows(static_cast<std::size_t>(N));
  for (int64_t i = 0; i < N; ++i) {
    prefix.insert(prefix.end(), q.prompts[i].begin(), q.prompts[i].begin() + common);
    rows[i].source = i;
    rows[i].prompt_pos = static_cast<std::size_t>(common);
  }
  LmStepper stepper(model);
  const LogitRows logits = stepper.prefill(Tensor::from(prefix, {N, common}));
  TokenCallback cb;
  if (on_token) cb = [&](int64_t s, int64_t t) { on_token(ran[s], t); };
  return merge(dispatch(stepper, logits, Tensor(), std::move(rows), q, cb), ran, B, p);
}

}  // namespace attn::models
