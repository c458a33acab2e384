// `attn explain --cost --model gemma3` (attn/teach/explain.h): windowed against global attention in
// Gemma 3's real shapes.
#include <attn/core/error.h>
#include <attn/io/gguf.h>
#include <attn/models/runtime/decoder.h>

#include <algorithm>
#include <vector>

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
// Bytes of f32 K and V over every layer at a context of N positions: a sliding layer (window W > 0)
// holds its last min(W, N) positions, a global one all N.
int64_t kv_bytes(const std::vector<int64_t>& windows, int64_t kv_heads, int64_t head_dim, int64_t N) {
  int64_t rows = 0;
  for (int64_t w : windows) rows += w > 0 ? std::min(w, N) : N;
  return 2 * rows * kv_heads * head_dim * static_cast<int64_t>(sizeof(float));
}
}  // namespace

Report gemma3_cost(const ModelCostOptions& o) {
  const models::runtime::DecoderConfig c =
      models::runtime::DecoderConfig::from_gguf(io::GgufFile::open(o.gguf));
  ATTN_CHECK(c.arch == "gemma3", "--model gemma3: expected a gemma3 file, got architecture '", c.arch, "' (",
             o.gguf, ")");
  ATTN_CHECK(o.max_n >= 1, "--n must be >= 1, got ", o.max_n);
  const int64_t max_n = std::min(o.max_n, c.context);
  // The sliding layers' window W, and the pattern: every pattern-th layer is global.
  int64_t n_slide = 0, window = 0, pattern = 0;
  const std::vector<int64_t>& windows = c.windows;
  const std::vector<int64_t> full(static_cast<std::size_t>(c.layers), 0);
  for (int64_t l = 0; l < c.layers; ++l) {
    n_slide += c.sliding(l);
    window = std::max(window, windows[static_cast<std::size_t>(l)]);
    if (!c.sliding(l) && pattern == 0) pattern = l + 1;
  }
  const int64_t n_global = c.layers - n_slide;
  const double per_pair = 4.0 * static_cast<double>(c.heads * c.head_dim);  // QKᵀ + PV, 2 FLOPs per MAC
  Page r = page_in(o.lang);
  const std::string layers = std::to_string(c.layers), heads = std::to_string(c.heads),
                    kvh = std::to_string(c.kv_heads), hd = std::to_string(c.head_dim),
                    ns = std::to_string(n_slide), win = std::to_string(window), ng = std::to_string(n_global),
                    pat = std::to_string(pattern), ctx = with_commas(c.context);
  r.title(r.t("The cost of attention in Gemma 3 (" + layers + " layers)",
              "Gemma 3 中注意力的开销（" + layers + " 层）"));
  r.para(r.t(
      "From the file's metadata: " + heads + " query heads and " + kvh + " KV head(s) of " + hd + ", " + ns +
          " sliding-window layers (window W = " + win + ": a query sees its last W keys) and " + ng +
          " global layers (every " + pat + "th), context " + ctx +
          ".\n"
          "A causal pass over N tokens computes N(N+1)/2 query-key pairs in a global layer: O(N²).\n"
          "A sliding layer computes at most N·W: O(N·W), linear in N. Each pair costs 4·H·D FLOPs (QKᵀ and "
          "PV).\n"
          "The KV cache (f32 K and V) of a sliding layer holds its last W positions (the paged cache gives "
          "back the blocks that leave the window), of a global one N.",
      "取自文件的元数据：" + heads + " 个查询头和 " + kvh + " 个 KV 头，每个 " + hd + " 维；" + ns +
          " 个滑动窗口层（窗口 W = " + win + "：每个查询只看最近的 W 个键）和 " + ng + " 个全局层（每 " +
          pat + " 层一个），上下文长度 " + ctx +
          "。\n"
          "对 N 个词元做一次因果前向，全局层要计算 N(N+1)/2 个查询-键对：O(N²)。\n"
          "滑动窗口层至多计算 N·W 个：O(N·W)，对 N 是线性的。每个查询-键对花 4·H·D 次运算（QKᵀ 与 PV）。\n"
          "KV 缓存（f32 的 K 和 V）在滑动窗口层只存最近的 W 个位置（分页缓存会归还移出窗口的块），"
          "在全局层要存 N 个。"));
  text::Table t({{"N"},
                 {r.t("sliding layers", "滑动窗口层")},
                 {r.t("global layers", "全局层")},
                 {r.t("model", "整个模型")},
                 {r.t("all global", "全部为全局层")},
                 {r.t("saved", "节省")},
                 {r.t("KV cache", "KV 缓存")},
                 {r.t("full KV cache", "完整 KV 缓存")}});
  t.group(r.t("attention FLOPs of one pass", "一次前向的注意力 FLOPs"), 1, 5);
  json::Value rows = json::Value::array();
  for (int64_t N = 512;; N *= 2) {
    if (N > max_n) N = max_n;
    const double fs = static_cast<double>(n_slide) * pairs(N, window) * per_pair;
    const double fg = static_cast<double>(n_global) * pairs(N, 0) * per_pair;
    const double fall = static_cast<double>(c.layers) * pairs(N, 0) * per_pair;
    const int64_t kv = kv_bytes(windows, c.kv_heads, c.head_dim, N);
    const int64_t kv_full = kv_bytes(full, c.kv_heads, c.head_dim, N);
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
  r.para(r.t("At long N the " + ng +
                 " global layers dominate both columns: the window removes the O(N²) term from " + ns +
                 " of " + layers +
                 " layers, and their KV cache stops growing.\n"
                 "(Attention only; the projections and the FFN add 2·N·(weights) FLOPs whatever the window.)",
             "N 很长时，" + ng + " 个全局层在两列里都占了大头：窗口从 " + ns + " 层（共 " + layers +
                 " 层）中去掉了 O(N²) 项，\n这些层的 KV 缓存也不再增长。\n"
                 "（这里只算注意力；无论窗口多大，投影和 FFN 都还要 2·N·(权重数) 次运算。）"));
  r.para(
      r.t("This is the tutorial's \"windows make attention O(N)\" in a real model: for a fixed W the sliding "
          "layers\n"
          "cost O(N·W), but the global layers keep the O(N²) term, so the model as a whole is not O(N).",
          "这就是教程说的“窗口让注意力变成 O(N)”在真实模型里的样子：W 固定时，滑动窗口层的开销是 O(N·W)，\n"
          "但全局层仍保留 O(N²) 项，所以整个模型并不是 O(N)。"));
  put(r.json, {{"mode", jv("gemma3-cost")},
               {"layers", jv(c.layers)},
               {"sliding_layers", jv(n_slide)},
               {"window", jv(window)},
               {"heads", jv(c.heads)},
               {"kv_heads", jv(c.kv_heads)},
               {"head_dim", jv(c.head_dim)},
               {"rows", std::move(rows)}});
  return finish(r);
}

}  // namespace attn::teach
