// --cost: shapes, FLOPs and memory of every step of multi-head attention for
// given sizes; the O(N²) score matrix of a naive implementation against the
// O(threads × tile) scratch of a fused (tiled, online-softmax) kernel; and the
// backend attn would choose (attn::choose_backend).
#include <attn/core/parallel.h>
#include <attn/ops/attention.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "explain_internal.h"

namespace attn::teach {
namespace {

// The tile the memory model assumes for a fused kernel: Br query rows × Bc keys.
constexpr int64_t kTileRows = 64, kTileCols = 64;
constexpr int64_t kFloat = 4;  // bytes per fp32 value

// a · b, throwing when it does not fit in int64.
int64_t mul(int64_t a, int64_t b) {
  int64_t r = 0;
  ATTN_CHECK(!__builtin_mul_overflow(a, b, &r), "--cost: the sizes are too large: ", a, " x ", b,
             " overflows a 64-bit count; expected smaller --n, --d, --heads or --batch");
  return r;
}
int64_t mul(std::initializer_list<int64_t> xs) {
  int64_t r = 1;
  for (int64_t x : xs) r = mul(r, x);
  return r;
}
int64_t add(int64_t a, int64_t b) {
  int64_t r = 0;
  ATTN_CHECK(!__builtin_add_overflow(a, b, &r), "--cost: the sizes are too large: a total overflows 64 bits");
  return r;
}

// One cost row: a step of multi-head attention.
struct Step {
  std::string name, op, shape;
  int64_t flops, bytes;
};

// The shapes, FLOPs, memory and backend of one set of sizes (compute_cost), and
// the sections of the text and the JSON written from them.
struct Cost {
  const CostOptions& p;
  int64_t B, N, D, H, dk;
  int64_t pairs, bh_pairs;  // query-key pairs per (batch, head); over all of them
  std::string sB, sN, sD, sH, sK;
  std::vector<Step> steps;
  int64_t total, exps;
  int threads;
  int64_t br, bc, tile_floats, fused_scratch, naive_scores, lse_bytes, qkv_bytes;
  BackendChoice choice;
  std::string backend;

  void steps_text(Page& r) const;   // the sizes and every step
  void memory_text(Page& r) const;  // the score matrix, naive against fused; the backend
  void to_json(Page& r) const;
};

Cost compute_cost(const CostOptions& p) {
  ATTN_CHECK(p.heads >= 1 && p.d % p.heads == 0, "--heads must divide --d (d_model = ", p.d,
             "); got --heads ", p.heads, " (", p.d, " / ", p.heads, " is not a whole number)");
  const int64_t B = p.batch, N = p.n, D = p.d, H = p.heads, dk = D / H;
  // Query-key pairs that are computed per (batch, head): all, or the causal triangle.
  const int64_t pairs = p.causal ? mul(N, N + 1) / 2 : mul(N, N);
  const int64_t bh_pairs = mul({B, H, pairs});

  const std::string sB = std::to_string(B), sN = std::to_string(N), sD = std::to_string(D),
                    sH = std::to_string(H), sK = std::to_string(dk);
  const std::vector<Step> steps = {
      {"project", "Q, K, V = X · W_Q, W_K, W_V", "3 x [" + sB + ", " + sN + ", " + sD + "]",
       mul({3, 2, B, N, D, D}), mul({3, kFloat, B, N, D})},
      {"scores", "S = Q · Kᵀ per head", "[" + sB + ", " + sH + ", " + sN + ", " + sN + "]",
       mul({2, dk, bh_pairs}), mul({kFloat, B, H, N, N})},
      {"softmax", "scale, max, subtract, sum, divide (+ exp)",
       "[" + sB + ", " + sH + ", " + sN + ", " + sN + "]", mul(5, bh_pairs), 0},
      {"weighted sum", "O = P · V per head", "[" + sB + ", " + sH + ", " + sN + ", " + sK + "]",
       mul({2, dk, bh_pairs}), mul({kFloat, B, N, D})},
      {"out projection", "concat heads · W_O", "[" + sB + ", " + sN + ", " + sD + "]", mul({2, B, N, D, D}),
       mul({kFloat, B, N, D})},
  };
  int64_t total = 0;
  for (const auto& s : steps) total = add(total, s.flops);
  const int64_t exps = bh_pairs;

  const int threads = num_threads();
  const int64_t br = std::min(kTileRows, N), bc = std::min(kTileCols, N);  // no tile larger than the sequence
  const int64_t tile_floats = br * bc + br * dk + 2 * br;                  // S tile, O accumulator, max & sum
  const int64_t fused_scratch = mul({threads, tile_floats, kFloat});
  const int64_t naive_scores = mul({kFloat, B, H, N, N});
  const int64_t lse_bytes = mul({kFloat, B, H, N});
  const int64_t qkv_bytes = mul({3, kFloat, B, N, D});

  // The backend attn would pick, from stride-0 views (no memory for the real sizes).
  const Tensor one = Tensor::zeros({1, 1, 1, 1});
  const Tensor q = one.expand({B, H, N, dk});  // q: [B, H, N, d_k]
  AttentionOptions o;
  o.causal = p.causal;
  const BackendChoice choice = choose_backend(q, q, q, o);
  const std::string backend = choice.backend == Backend::fused ? "fused" : "reference";
  return Cost{p,
              B,
              N,
              D,
              H,
              dk,
              pairs,
              bh_pairs,
              sB,
              sN,
              sD,
              sH,
              sK,
              steps,
              total,
              exps,
              threads,
              br,
              bc,
              tile_floats,
              fused_scratch,
              naive_scores,
              lse_bytes,
              qkv_bytes,
              choice,
              backend};
}

void Cost::steps_text(Page& r) const {
  r.title("attn explain --cost: what attention costs at these sizes");
  r.line("Sizes: batch B = " + sB + ", sequence length N = " + with_commas(N) + ", d_model = " + sD +
         ", heads h = " + sH + ",\n       d_k = d_model / h = " + sK +
         (p.causal ? ", causal" : ", not causal"));
  r.para("FLOPs count one multiply-add as 2; memory is fp32 (4 bytes per value)." +
         std::string(p.causal ? "\nCausal: each query sees only itself and earlier keys, so N·(N+1)/2 = " +
                                    with_commas(pairs) + " of the\nN² = " + with_commas(mul(N, N)) +
                                    " query-key pairs per head are computed."
                              : ""));
  r.heading("Every step");
  {
    text::Table t({{"step", text::Align::left},
                   {"operation", text::Align::left},
                   {"result shape", text::Align::left},
                   {"FLOPs", text::Align::right},
                   {"", text::Align::right},
                   {"result size", text::Align::right}});
    for (const auto& s : steps)
      t.row({s.name, s.op, s.shape, with_commas(s.flops), human_count(static_cast<double>(s.flops)),
             s.bytes ? human_bytes(static_cast<double>(s.bytes)) : "in place"});
    t.row({"total", "", "", with_commas(total), human_count(static_cast<double>(total)), ""});
    r.table(t);
  }
  r.para(
      "Softmax counts 5 FLOPs per score (scale, max, subtract, sum, divide); the exp evaluations are "
      "counted\n"
      "apart: " +
      with_commas(exps) +
      " (one per computed score).\n"
      "Scores and weighted sum cost 2·B·h·pairs·d_k each, the projections 2·B·N·d_model² each: attention\n"
      "itself grows with N², the projections with N.");
}

void Cost::memory_text(Page& r) const {
  r.heading("Memory: the N x N score matrix");
  {
    text::Table t({{"", text::Align::left},
                   {"formula", text::Align::left},
                   {"bytes", text::Align::right},
                   {"", text::Align::right}});
    t.row({"naive: full score matrix", "B·h·N·N·4", with_commas(naive_scores),
           human_bytes(static_cast<double>(naive_scores))});
    t.row({"fused: per-thread tiles", "threads·(Br·Bc + Br·d_k + 2·Br)·4", with_commas(fused_scratch),
           human_bytes(static_cast<double>(fused_scratch))});
    t.row({"fused: saved log-sum-exp", "B·h·N·4", with_commas(lse_bytes),
           human_bytes(static_cast<double>(lse_bytes))});
    t.row({"both: Q, K, V", "3·B·N·d_model·4", with_commas(qkv_bytes),
           human_bytes(static_cast<double>(qkv_bytes))});
    r.table(t);
  }
  const double ratio = static_cast<double>(naive_scores) / static_cast<double>(fused_scratch);
  r.para("A naive implementation stores all scores S = Q·Kᵀ (" +
         human_bytes(static_cast<double>(naive_scores)) + ") before the softmax" +
         (p.causal ? ",\neven though causal masking hides about half of them." : ".") +
         "\nA fused kernel walks over key tiles with an online softmax (running max and sum per row), so it\n"
         "only ever holds one Br x Bc tile per thread: threads = " +
         std::to_string(threads) +
         " (attn::num_threads(); ATTN_NUM_THREADS\noverrides), tile Br x Bc = " + std::to_string(br) + " x " +
         std::to_string(bc) + " (this model's assumption; the kernel picks its own tiles).\n" +
         (ratio >= 1 ? "Naive scores / fused scratch: " + with_commas(std::llround(ratio)) + " x."
                     : std::string("At this small N the naive matrix is smaller than the tiles.")));
  {
    text::Table t({{"N", text::Align::right},
                   {"naive scores", text::Align::right},
                   {"fused scratch", text::Align::right},
                   {"Q, K, V", text::Align::right}});
    for (int64_t f : {1, 2, 4, 8}) {
      int64_t n2 = 0;
      if (__builtin_mul_overflow(N, f, &n2)) break;
      int64_t nb = 0;
      if (__builtin_mul_overflow(naive_scores, f * f, &nb)) break;
      t.row({with_commas(n2), human_bytes(static_cast<double>(nb)),
             human_bytes(static_cast<double>(fused_scratch)),
             human_bytes(static_cast<double>(qkv_bytes) * static_cast<double>(f))});
    }
    r.para("Doubling N quadruples the naive score matrix; the fused scratch does not grow:");
    r.table(t);
  }

  r.heading("Which kernel attn chooses (attn::choose_backend)");
  r.para("backend: " + backend + "\nreason:  " + choice.reason);
}

void Cost::to_json(Page& r) const {
  json::Value& j = r.json;
  j.set("mode", jv("cost"));
  j.set("batch", jv(B));
  j.set("n", jv(N));
  j.set("d_model", jv(D));
  j.set("heads", jv(H));
  j.set("d_k", jv(dk));
  j.set("causal", jv(p.causal));
  j.set("pairs_per_head", jv(pairs));
  json::Value js = json::Value::array();
  for (const auto& s : steps) {
    json::Value e = json::Value::object();
    e.set("step", jv(s.name));
    e.set("operation", jv(s.op));
    e.set("shape", jv(s.shape));
    e.set("flops", jv(s.flops));
    e.set("bytes", jv(s.bytes));
    js.push_back(std::move(e));
  }
  j.set("steps", jv(std::move(js)));
  j.set("flops_total", jv(total));
  j.set("exp_count", jv(exps));
  json::Value mem = json::Value::object();
  mem.set("naive_scores_bytes", jv(naive_scores));
  mem.set("fused_scratch_bytes", jv(fused_scratch));
  mem.set("threads", jv(static_cast<int64_t>(threads)));
  mem.set("tile", jv(integers({br, bc})));
  mem.set("lse_bytes", jv(lse_bytes));
  mem.set("qkv_bytes", jv(qkv_bytes));
  j.set("memory", jv(std::move(mem)));
  json::Value be = json::Value::object();
  be.set("backend", jv(backend));
  be.set("reason", jv(choice.reason));
  j.set("backend", jv(std::move(be)));
}

}  // namespace

void cost(const CostOptions& p, Page& r) {
  const Cost c = compute_cost(p);
  c.steps_text(r);
  c.memory_text(r);
  c.to_json(r);
}

}  // namespace attn::teach
