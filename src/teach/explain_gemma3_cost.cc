// `attn explain --cost --model gemma3` (attn/teach/explain.h): windowed against global attention in
// Gemma 3's real shapes.
#include <attn/core/error.h>
#include <attn/io/gguf.h>
#include <attn/models/gemma3.h>
#include <attn/ops/kv_cache.h>

#include "teach/explain_internal.h"

namespace attn::teach {
namespace {
// Visible query-key pairs of one causal pass over N positions with a window W (0: none).
double pairs(int64_t N, int64_t W) {
  const double n = static_cast<double>(N);
  if (W <= 0 || W >= N) return n * (n + 1) / 2;
  const double w = static_cast<double>(W);
  return w * (w + 1) / 2 + (n - w) * w;  // the first W rows fill a triangle, the rest W keys each
}
}  // namespace

Report gemma3_cost(const ModelCostOptions& o) {
  const models::Gemma3Config c = models::Gemma3Config::from_gguf(io::GgufFile::open(o.gguf));
  ATTN_CHECK(o.max_n >= 1, "--n must be >= 1, got ", o.max_n);
  const int64_t max_n = std::min(o.max_n, c.context);
  int64_t n_slide = 0;
  std::vector<int64_t> windows, full(c.layers, 0);
  for (int64_t l = 0; l < c.layers; ++l) {
    windows.push_back(c.sliding(l) ? c.window : 0);
    n_slide += c.sliding(l);
  }
  const int64_t n_global = c.layers - n_slide;
  const double per_pair = 4.0 * static_cast<double>(c.heads * c.head_dim);  // QKᵀ + PV, 2 FLOPs per MAC
  Page r;
  r.title("The cost of attention in Gemma 3 (" + std::to_string(c.layers) + " layers)");
  r.para(
      "From the file's metadata: " + std::to_string(c.heads) + " query heads and " +
      std::to_string(c.kv_heads) + " KV head(s) of " + std::to_string(c.head_dim) + ", " +
      std::to_string(n_slide) + " sliding-window layers (window W = " + std::to_string(c.window) +
      ": a query sees its last W keys) and " + std::to_string(n_global) + " global layers (every " +
      std::to_string(c.pattern) + "th), context " + with_commas(c.context) +
      ".\n"
      "A causal pass over N tokens computes N(N+1)/2 query-key pairs in a global layer: O(N²).\n"
      "A sliding layer computes at most N·W: O(N·W), linear in N. Each pair costs 4·H·D FLOPs (QKᵀ and PV).\n"
      "The KV cache (f32 K and V) of a sliding layer holds W positions (a ring buffer), of a global one N.");
  text::Table t({{"N"},
                 {"sliding layers"},
                 {"global layers"},
                 {"model"},
                 {"all global"},
                 {"saved"},
                 {"KV cache"},
                 {"full KV cache"}});
  t.group("attention FLOPs of one pass", 1, 5);
  json::Value rows = json::Value::array();
  for (int64_t N = 512;; N *= 2) {
    if (N > max_n) N = max_n;
    const double fs = static_cast<double>(n_slide) * pairs(N, c.window) * per_pair;
    const double fg = static_cast<double>(n_global) * pairs(N, 0) * per_pair;
    const double fall = static_cast<double>(c.layers) * pairs(N, 0) * per_pair;
    const int64_t kv = ops::kv_cache_bytes(windows, c.kv_heads, c.head_dim, N);
    const int64_t kv_full = ops::kv_cache_bytes(full, c.kv_heads, c.head_dim, N);
    t.row({with_commas(N), human_count(fs), human_count(fg), human_count(fs + fg), human_count(fall),
           fmt(100.0 * (1.0 - (fs + fg) / fall), 1) + "%", human_bytes(static_cast<double>(kv)),
           human_bytes(static_cast<double>(kv_full))});
    json::Value row = json::Value::object();
    put(row, {{"n", jv(N)},
              {"sliding_flops", jv(fs)},
              {"global_flops", jv(fg)},
              {"model_flops", jv(fs + fg)},
              {"all_global_flops", jv(fall)},
              {"kv_cache_bytes", jv(kv)},
              {"full_kv_cache_bytes", jv(kv_full)}});
    rows.push_back(std::move(row));
    if (N == max_n) break;
  }
  r.table(t);
  r.para("At long N the " + std::to_string(n_global) +
         " global layers dominate both columns: the window removes the O(N²) term from " +
         std::to_string(n_slide) + " of " + std::to_string(c.layers) +
         " layers, and their KV cache stops growing.\n"
         "(Attention only; the projections and the FFN add 2·N·(weights) FLOPs whatever the window.)");
  put(r.json, {{"mode", jv("gemma3-cost")},
               {"layers", jv(c.layers)},
               {"sliding_layers", jv(n_slide)},
               {"window", jv(c.window)},
               {"heads", jv(c.heads)},
               {"kv_heads", jv(c.kv_heads)},
               {"head_dim", jv(c.head_dim)},
               {"rows", std::move(rows)}});
  return r;
}

}  // namespace attn::teach
